"""REST API benchmark: best-schedule lookups (``GET /v1/best``) under load.

    .venv/bin/python bench/best_query_load.py [--records 100000] [--workloads 1000]
        [--clients 100] [--seconds 30] [--db-url postgresql://...]

Fills a fresh SQLite database (or the given one) with ``--records`` synthetic records
(``bench/db_best_query.py``'s deterministic generator, through ``Database.add_records``),
starts ``tensortune serve`` on a free loopback port, and runs ``--clients`` closed-loop
clients for ``--seconds``: each keeps one keep-alive HTTP/1.1 connection and asks for the
best schedule of a random workload, with a reader token. The clients are asyncio streams
in this process (one core's worth at most), the server is one uvicorn process; both share
this machine. Prints throughput, p50/p90/p99/max latency and the status codes, after a
single-client run for reference.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
from db_best_query import TARGETS, batches, percentile, workload_key

from db import Database

REPO = Path(__file__).resolve().parents[1]


def fill(url: str, records: int, workloads: int) -> str:
    """Create the records; return a reader token."""
    db = Database(url)
    db.upgrade()
    start = time.perf_counter()
    for batch in batches(records, 10_000, workloads):
        db.add_records(batch)
    print(f"filled {db.count_records():,} records over {workloads:,} workloads in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    token, _ = db.tokens.create("bench", name="reader")
    db.close()
    return token


def start_server(url: str, home: str) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "TENSORTUNE_HOME": home, "TENSORTUNE_DB_URL": url}
    process = subprocess.Popen([sys.executable, "-m", "tuner", "serve", "--port", str(port),
                                "--log-level", "warning"], env=env, cwd=REPO)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process, port
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server did not start")


async def client(port: int, token: str, paths: list[str], stop: float,
                 latencies: list[float], statuses: dict[int, int]) -> None:
    """One closed-loop client on one keep-alive connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    rng = random.Random(id(latencies) ^ len(latencies) ^ os.getpid())
    try:
        while time.perf_counter() < stop:
            request = (f"GET {rng.choice(paths)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       f"Authorization: Bearer {token}\r\n\r\n").encode()
            start = time.perf_counter()
            writer.write(request)
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
            status = int(status_line.split()[1])
            statuses[status] = statuses.get(status, 0) + 1
    finally:
        writer.close()


async def load(port: int, token: str, paths: list[str], clients: int,
               seconds: float) -> tuple[list[float], dict[int, int], float]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    start = time.perf_counter()
    stop = start + seconds
    await asyncio.gather(*(client(port, token, paths, stop, latencies, statuses)
                           for _ in range(clients)))
    return latencies, statuses, time.perf_counter() - start


def report(label: str, latencies: list[float], statuses: dict[int, int],
           wall: float) -> dict[str, float]:
    ms = [x * 1e3 for x in latencies]
    figures = {"requests": len(ms), "throughput_rps": len(ms) / wall,
               "p50_ms": statistics.median(ms), "p90_ms": percentile(ms, 0.90),
               "p99_ms": percentile(ms, 0.99), "max_ms": max(ms)}
    print(f"{label:22s} {figures['throughput_rps']:8,.0f} req/s   p50 {figures['p50_ms']:7.2f} ms"
          f"   p90 {figures['p90_ms']:7.2f} ms   p99 {figures['p99_ms']:7.2f} ms"
          f"   max {figures['max_ms']:7.1f} ms   statuses {dict(sorted(statuses.items()))}",
          flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--workloads", type=int, default=1_000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--db-url", help="use this (empty) database instead of a temp SQLite")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.2f}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="tt-bench-api-") as home:
        url = args.db_url or f"sqlite:///{Path(home) / 'bench.db'}"
        token = fill(url, args.records, args.workloads)
        # each workload's records are on one target; a tenth of them have only failed
        # records, so about 10% of the lookups are misses (404)
        paths = [f"/v1/best?{urlencode({'workload_key': workload_key(w), 'target': target})}"
                 for w in range(args.workloads) for target in [TARGETS[w % len(TARGETS)]]]
        server, port = start_server(url, home)
        try:
            check = httpx.get(f"http://127.0.0.1:{port}{paths[0]}",
                              headers={"Authorization": f"Bearer {token}"}).json()
            assert check["match"] == "exact" and check["results"][0]["steps"], check
            asyncio.run(load(port, token, paths, 10, 3.0))  # warm-up
            results = {"single client": report("1 client, 5 s",
                                               *asyncio.run(load(port, token, paths, 1, 5.0)))}
            label = f"{args.clients} clients, {args.seconds:.0f} s"
            results["loaded"] = report(label, *asyncio.run(
                load(port, token, paths, args.clients, args.seconds)))
        finally:
            server.terminate()
            server.wait(timeout=30)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
