"""Tuning-database benchmark: bulk insert rate and best-schedule query latency.

    .venv/bin/python bench/db_best_query.py [--records 1000000] [--workloads 1000]
        [--backend sqlite|postgresql|both] [--pg-url postgresql://postgres@127.0.0.1:5432/test]

Inserts ``--records`` records over ``--workloads`` workloads through the public ingest path
(``Database.add_records``: validation, canonical JSON, measurement ids, idempotent insert),
in batches of ``--batch`` records, and prints records per second. Then times
``Database.best`` on random workloads (after a warm-up) and prints the median and p99
latency in milliseconds for: k=1, k=10, k=1 filtered by device model, and a miss that
walks the whole fallback chain (exact -> other_device -> same_isa).

Each record's content is a pure function of its index, so runs are comparable. About 10%
of the records are errors; targets are ``cpu -isa=avx512 -cores=2`` (80%) and
``... -cores=16`` (20%), on three device models. SQLite goes to a file in a temporary
directory (or --sqlite-path), PostgreSQL to a fresh schema that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from db import Database

TARGETS = ["cpu -isa=avx512 -cores=2"] * 4 + ["cpu -isa=avx512 -cores=16"]
DEVICES = ["AMD EPYC 9R45", "Intel Xeon 8480", "AMD EPYC 7763"]
ERRORS = ["compile_error", "run_timeout", "runtime_error", "invalid_schedule"]


def workload_key(w: int) -> str:
    return hashlib.sha256(f"bench-workload-{w}".encode()).hexdigest()[:32]


def make_record(i: int, workloads: int) -> dict[str, Any]:
    """Record number i (deterministic)."""
    rng = random.Random(i)
    w = i % workloads
    size = 64 * (1 + w % 16)
    error = ERRORS[i % 4] if i % 10 == 9 else "none"
    base = rng.uniform(1e-4, 1e-2)
    return {
        "version": 1,
        "workload_key": workload_key(w),
        "workload": {"op": "matmul", "params": {"M": size, "N": size, "K": size + w,
                                                "dtype": "float32"}},
        "flops": 2.0 * size * size * (size + w),
        "target": TARGETS[i % len(TARGETS)],
        "steps": [
            ["split", "C", "i", rng.choice([4, 8, 16, 32])],
            ["split", "C", "j", rng.choice([16, 32, 64])],
            ["reorder", "C", ["i.outer", "j.outer", "k", "i.inner", "j.inner"]],
            ["vectorize", "C", "j.inner"],
            ["parallel", "C", "i.outer"],
            ["unroll", "C", "k", rng.choice([1, 2, 4])],
        ],
        "costs": [] if error != "none" else [base * rng.uniform(0.98, 1.05) for _ in range(3)],
        "error_kind": error,
        "error_msg": "" if error == "none" else f"{error} in candidate {i}",
        "build_s": rng.uniform(0.1, 1.0),
        "run_s": rng.uniform(0.01, 0.2),
        "timestamp": 1_790_000_000.0 + i,
        "host": f"node-{i % 8}",
        "device_model": DEVICES[(i // 7) % len(DEVICES)],
        "toolchain": "gcc 12.2.0",
        "flags": "-O3 -march=native",
        "measure": {"number": 10, "repeat": 3, "min_repeat_ms": 0, "cache_flush": True},
        "job_id": f"job-{i // 50_000}",
    }


def batches(total: int, size: int, workloads: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, total, size):
        yield [make_record(i, workloads) for i in range(start, min(start + size, total))]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def time_queries(fn: Callable[[int], Any], queries: int, workloads: int) -> dict[str, float]:
    rng = random.Random(1234)
    for _ in range(min(200, queries)):  # warm-up: connections, statement cache, page cache
        fn(rng.randrange(workloads))
    samples = []
    for _ in range(queries):
        w = rng.randrange(workloads)
        start = time.perf_counter_ns()
        fn(w)
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return {
        "median_ms": statistics.median(samples),
        "p99_ms": percentile(samples, 0.99),
        "max_ms": max(samples),
    }


def run(url: str, label: str, args: argparse.Namespace) -> dict[str, Any]:
    db = Database(url)
    db.upgrade()
    print(f"[{label}] inserting {args.records:,} records over {args.workloads:,} workloads "
          f"in batches of {args.batch:,} ...", flush=True)
    insert_s = 0.0
    added = 0
    # Only add_records is timed: making the dicts stands in for the tuner and is not counted.
    for number, records in enumerate(batches(args.records, args.batch, args.workloads)):
        start = time.perf_counter()
        added += db.add_records(records)
        insert_s += time.perf_counter() - start
        if number % 10 == 9:
            print(f"[{label}]   {added:,} records, {added / insert_s:,.0f} records/s",
                  flush=True)
    again_t = time.perf_counter()
    re_added = db.add_records(next(batches(args.batch, args.batch, args.workloads)))
    again_s = time.perf_counter() - again_t
    assert added == args.records and re_added == 0, (added, re_added)
    with db.connector.write() as conn:  # fresh planner statistics, as autovacuum/ANALYZE would give
        conn.exec_driver_sql("ANALYZE")

    t_exact = TARGETS[0]
    results: dict[str, Any] = {
        "backend": label,
        "records": args.records,
        "workloads": args.workloads,
        "insert_records_per_s": added / insert_s,
        "reinsert_duplicates_per_s": args.batch / again_s,
    }
    cases: dict[str, Callable[[int], Any]] = {
        "best k=1": lambda w: db.best(workload_key(w), t_exact),
        "best k=10": lambda w: db.best(workload_key(w), t_exact, k=10),
        "best k=1, device_model filter": lambda w: db.best(
            workload_key(w), t_exact, device_model=DEVICES[1]
        ),
        "best k=1, miss -> same_isa fallback": lambda w: db.best(
            workload_key(w), "cpu -isa=avx512 -cores=64", device_model="none", fallback=True
        ),
    }
    checks = {name: fn(0) for name, fn in cases.items()}
    assert checks["best k=1"].match == "exact" and len(checks["best k=10"].records) == 10
    assert checks["best k=1, miss -> same_isa fallback"].match == "same_isa"
    results["queries"] = {}
    for name, fn in cases.items():
        stats = time_queries(fn, args.queries, args.workloads)
        results["queries"][name] = stats
        print(f"[{label}] {name:38s} median {stats['median_ms']:.3f} ms   "
              f"p99 {stats['p99_ms']:.3f} ms   max {stats['max_ms']:.3f} ms", flush=True)
    db.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--workloads", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--sqlite-path", help="SQLite file (default: a temporary directory)")
    parser.add_argument("--json", action="store_true", help="print all figures as JSON")
    args = parser.parse_args()

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {platform.platform()}", flush=True)
    all_results = []
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="tt-bench-") as tmp:
            path = Path(args.sqlite_path or Path(tmp) / "bench.db")
            all_results.append(run(f"sqlite:///{path}", "sqlite", args))
            print(f"[sqlite] file size {path.stat().st_size / 2**20:,.0f} MiB", flush=True)
    if args.backend in ("postgresql", "both"):
        import psycopg

        schema = f"tt_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(args.pg_url, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in args.pg_url else "?"
        url = f"{args.pg_url}{sep}options={quote(f'-csearch_path={schema}')}"
        try:
            with psycopg.connect(args.pg_url) as conn:
                version = conn.execute("SHOW server_version").fetchone()
            print(f"[postgresql] server {version[0] if version else '?'}", flush=True)
            all_results.append(run(url, "postgresql", args))
        finally:
            with psycopg.connect(args.pg_url, autocommit=True) as admin:
                admin.execute(f"DROP SCHEMA {schema} CASCADE")
    print()
    for result in all_results:
        print(f"{result['backend']:10s} insert {result['insert_records_per_s']:10,.0f} records/s  "
              f"re-insert (all duplicates) {result['reinsert_duplicates_per_s']:10,.0f} records/s")
        for name, stats in result["queries"].items():
            print(f"{'':10s} {name:38s} median {stats['median_ms']:.3f} ms  "
                  f"p99 {stats['p99_ms']:.3f} ms")
    if args.json:
        print(json.dumps(all_results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
