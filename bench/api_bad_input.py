"""REST API robustness: a bounded set of hostile requests to every endpoint.

    .venv/bin/python bench/api_bad_input.py [--backend sqlite|postgresql] [--json]

Starts ``tensortune serve`` (one real uvicorn process) on a free loopback port with a fresh
database (SQLite in a temporary directory, or a fresh schema of the test PostgreSQL server
at $TENSORTUNE_TEST_PG_URL, dropped afterwards), creates an admin token with the CLI, and
sends every request of ``tests/api/bad_inputs.py`` over HTTP: NaN, Infinity, -Infinity,
integers of 5000 digits and of 2**64, 1e400 and NUL characters in every field of every
JSON and JSON-lines body, every query and path parameter and every header of the OpenAPI
schema. Prints how many were tried, the count per status class, the 5xx count, how many
connections broke (a response cut short, or none), and whether the server still answers.
Exits 1 when any request got a 5xx or a broken connection.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore", message=".*deprecated")  # the test helpers' imports

from tests.api.bad_inputs import bad_requests  # noqa: E402 - after the path is set
from tests.db.backends import fresh_url  # noqa: E402


def start_server(url: str, home: str) -> tuple[subprocess.Popen[bytes], str, str]:
    """``tensortune serve`` on a free port; (the process, its base URL, an admin token)."""
    env = {**os.environ, "TENSORTUNE_HOME": home, "TENSORTUNE_DB_URL": url}
    created = subprocess.run([sys.executable, "-m", "tuner", "token", "create", "--role",
                              "admin", "--owner", "bench", "--json"], env=env, cwd=REPO,
                             capture_output=True, text=True, check=True)
    token = json.loads(created.stdout)["token"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = open(Path(home) / "server.log", "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen([sys.executable, "-m", "tuner", "serve", "--port", str(port),
                                "--log-level", "warning"], env=env, cwd=REPO, stdout=log,
                               stderr=log)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                return process, base, token
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit("server did not start:\n" + (Path(home) / "server.log").read_text())
        time.sleep(0.2)


def run(base: str, token: str) -> dict[str, object]:
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, timeout=30) as http:
        openapi = http.get("/openapi.json", headers=auth).json()
        operations = sum(len(ops) for ops in openapi["paths"].values())
        classes: Counter[str] = Counter()
        server_errors: list[str] = []
        broken: list[str] = []
        start = time.perf_counter()
        for bad in bad_requests(openapi):
            try:
                response = http.request(bad.method, bad.path, params=bad.params,
                                        headers={**auth, **bad.headers}, content=bad.content)
                response.read()
            except httpx.TransportError as err:  # cut short or no answer
                broken.append(f"{bad.label}: {type(err).__name__}: {err}")
                continue
            classes[f"{response.status_code // 100}xx"] += 1
            if response.status_code >= 500:
                server_errors.append(f"{bad.label}: {response.status_code} "
                                     f"{response.text[:200]}")
        elapsed = time.perf_counter() - start
        alive = http.get("/healthz").status_code == 200
    tried = sum(classes.values()) + len(broken)
    return {"operations": operations, "tried": tried, "by_class": dict(sorted(classes.items())),
            "server_errors": len(server_errors), "broken_connections": len(broken),
            "alive_after": alive, "seconds": round(elapsed, 1),
            "examples": (server_errors + broken)[:20]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, fresh_url(args.backend, Path(home)) as url:
        process, base, token = start_server(url, home)
        try:
            result = {"backend": args.backend, **run(base, token)}
        finally:
            process.terminate()
            process.wait(timeout=30)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.backend}: {result['tried']} bad requests to {result['operations']} "
              f"operations in {result['seconds']} s: {result['by_class']}; "
              f"5xx: {result['server_errors']}, broken connections: "
              f"{result['broken_connections']}; server answers afterwards: "
              f"{'yes' if result['alive_after'] else 'NO'}")
        for example in result["examples"]:  # type: ignore[attr-defined]
            print("  " + example)
    failed = result["server_errors"] or result["broken_connections"] or not result["alive_after"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
