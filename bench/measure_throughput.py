"""Measurement throughput: candidates measured per minute for a batch of GEMM candidates
(64 distinct tiled schedules of a 512x512x512 float32 matmul), through the local pool and
through the Ray pool (embedded Ray on this machine), each with a cold kernel cache.

    .venv/bin/python bench/measure_throughput.py [--size 512] [--candidates 64] [--no-ray]

Per pool: the wall time of the cold batch (every candidate compiled), then of the same
batch again (every library in the kernel cache: timing only), the candidates per minute,
and the summed build and run seconds the results report. Settings are the defaults of
``MeasureSettings`` (number=1, repeat=3, min_repeat_ms=100, output checked).
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from typing import Any

from schedule import Workload, te
from workers import LocalPool, MeasureInput, MeasureSettings, Pool


def tiled_gemm_steps(workload: Workload, rows: int, cols: int,
                     k_block: int | None) -> list[list[Any]]:
    """The hand-written GEMM schedule's structure (packed B panel, rows x cols register
    tile, parallel panels) with the given tile; returns its steps."""
    _, b, c = workload.tensors()
    s = te.create_schedule(c)
    cl = s.cache_write(c, "local")
    bb = s.cache_read(b, "global", [cl])
    i, j = s[c].op.axis
    jo, ji = s[c].split(j, factor=cols)
    io, ii = s[c].split(i, factor=rows)
    s[c].reorder(jo, io, ii, ji)
    s[c].parallel(jo)
    s[c].unroll(ii)
    s[c].vectorize(ji)
    s[bb].compute_at(s[c], jo)
    s[bb].vectorize(s[bb].op.axis[1])
    s[cl].compute_at(s[c], io)
    ci, cj = s[cl].op.axis
    (ck,) = s[cl].op.reduce_axis
    if k_block:
        ko, ki = s[cl].split(ck, factor=k_block)
        s[cl].reorder(ko, ki, ci, cj)
    else:
        s[cl].reorder(ck, ci, cj)
    s[cl].unroll(ci)
    s[cl].vectorize(cj)
    return s.steps


def candidates(size: int, count: int) -> list[MeasureInput]:
    workload = Workload.op("matmul", M=size, N=size, K=size)
    shapes = itertools.product((2, 4, 8, 16), (16, 32, 64, 128), (None, 64, 128, 256))
    return [MeasureInput(workload.to_json(), "cpu", tiled_gemm_steps(workload, r, c, k))
            for r, c, k in itertools.islice(shapes, count)]


def run(name: str, make_pool: Any, inputs: list[MeasureInput]) -> dict[str, Any]:
    os.environ["TENSORTUNE_HOME"] = tempfile.mkdtemp(prefix="tt-bench-")  # a cold cache
    start = time.perf_counter()
    pool: Pool = make_pool()
    startup = time.perf_counter() - start
    report: dict[str, Any] = {"pool": name, "startup_s": startup}
    try:
        for phase in ("cold", "warm"):
            start = time.perf_counter()
            results = pool.measure(inputs)
            wall = time.perf_counter() - start
            bad = [r for r in results if not r.ok]
            report[phase] = {"wall_s": wall, "per_minute": 60 * len(inputs) / wall,
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
    for name, make_pool in pools:
        report = run(name, make_pool, inputs)
        print(f"{name}: start-up {report['startup_s']:.1f} s")
        for phase in ("cold", "warm"):
            p = report[phase]
            print(f"  {phase:4s} batch {p['wall_s']:6.1f} s wall  {p['per_minute']:6.1f} "
                  f"candidates/min  (builds {p['build_s']:.1f} s, runs {p['run_s']:.1f} s "
                  f"summed; {p['failed']} failed)")


if __name__ == "__main__":
    main()
