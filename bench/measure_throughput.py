"""Measurement throughput: candidates measured per minute for a batch of GEMM candidates
(64 distinct tiled schedules of a 512x512x512 float32 matmul), through the local pool and
through the Ray pool (embedded Ray on this machine), each with a cold kernel cache.

    .venv/bin/python bench/measure_throughput.py [--size 512] [--candidates 64] [--no-ray]

Per pool: the wall time of the cold batch (every candidate compiled), then of the same
batch again (every library in the kernel cache: timing only), the candidates per minute,
and the summed build and run seconds the results report; finally how the kernel times
measured through the Ray pool compare with the local pool's, candidate by candidate.
Settings are the defaults of ``MeasureSettings`` (number=1, repeat=3, min_repeat_ms=100,
output checked).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from typing import Any

from schedule import Workload, te
from schedule.examples import schedule_matmul
from workers import LocalPool, MeasureInput, MeasureSettings, Pool


def tiled_gemm_steps(workload: Workload, rows: int, cols: int,
                     k_block: int | None) -> list[list[Any]]:
    """The hand-written GEMM schedule's structure (packed B panel, rows x cols register
    tile, parallel panels) with the given tile, as steps."""
    _, b, c = workload.tensors()
    s = te.create_schedule(c)
    schedule_matmul(s, b, c, rows, cols, k_block)
    return s.steps


def candidates(size: int, count: int) -> list[MeasureInput]:
    workload = Workload.op("matmul", M=size, N=size, K=size)
    shapes = itertools.product((2, 4, 8, 16), (16, 32, 64, 128), (None, 64, 128, 256))
    return [MeasureInput(workload.to_json(), "cpu", tiled_gemm_steps(workload, r, c, k))
            for r, c, k in itertools.islice(shapes, count)]


def run(name: str, make_pool: Any, inputs: list[MeasureInput]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tt-bench-") as home:
        os.environ["TENSORTUNE_HOME"] = home  # a cold kernel cache for this pool
        start = time.perf_counter()
        pool: Pool = make_pool()
        report: dict[str, Any] = {"pool": name, "startup_s": time.perf_counter() - start}
        try:
            for phase in ("cold", "warm"):
                start = time.perf_counter()
                results = pool.measure(inputs)
                wall = time.perf_counter() - start
                bad = [r for r in results if not r.ok]
                report[phase] = {"wall_s": wall, "per_minute": 60 * len(inputs) / wall,
                                 "costs": [statistics.median(r.costs) if r.ok else None
                                           for r in results],
                                 "build_s": sum(r.build_s for r in results),
                                 "run_s": sum(r.run_s for r in results), "failed": len(bad)}
                for r in bad[:3]:
                    print(f"  {name} {phase}: {r.error_kind}: {r.error_msg[:200]}")
        finally:
            pool.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--candidates", type=int, default=64)
    parser.add_argument("--no-ray", action="store_true", help="only the local pool")
    args = parser.parse_args()
    inputs = candidates(args.size, args.candidates)
    settings = MeasureSettings()
    print(f"{len(inputs)} GEMM {args.size} candidates, {os.cpu_count()} cores, "
          f"settings {settings.timing()}")
    pools = [("local", lambda: LocalPool(settings))]
    if not args.no_ray:
        from workers import RayPool

        pools.append(("ray (embedded)", lambda: RayPool(settings)))
    reports = []
    for name, make_pool in pools:
        report = run(name, make_pool, inputs)
        reports.append(report)
        print(f"{name}: start-up {report['startup_s']:.1f} s")
        for phase in ("cold", "warm"):
            p = report[phase]
            print(f"  {phase:4s} batch {p['wall_s']:6.1f} s wall  {p['per_minute']:6.1f} "
                  f"candidates/min  (builds {p['build_s']:.1f} s, runs {p['run_s']:.1f} s "
                  f"summed; {p['failed']} failed)")
    if len(reports) == 2:
        ratios = [b / a for a, b in zip(reports[0]["warm"]["costs"], reports[1]["warm"]["costs"],
                                        strict=True) if a and b]
        print(f"kernel time measured by {reports[1]['pool']} / by {reports[0]['pool']} "
              f"(warm batches, per candidate): median {statistics.median(ratios):.3f}, "
              f"range {min(ratios):.3f}..{max(ratios):.3f}")


if __name__ == "__main__":
    main()
