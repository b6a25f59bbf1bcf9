"""GPU programs without a GPU: tuning a GEMM on ``opencl`` on PoCL, and nvcc's compile
throughput for the CUDA versions of sampled programs.

Part 1 tunes ``matmul`` on the OpenCL device (PoCL: OpenCL on this machine's CPU, so its
figures are a CPU emulating a grid of thread blocks, not a GPU's) with the GPU sketches,
prints the best-so-far curve at a few trial counts, and re-times in one process, on the same
device: the untuned fallback (one thread per output element), the tuned best, and numpy on
the CPU (for scale only: a different device). Part 2 samples programs of the GEMM's GPU
sketch for ``cuda -arch=sm_80``, generates their CUDA source and compiles each with nvcc to
a cubin (as a builder would, one candidate per nvcc call) and all of them in one call:
candidates per second.

    .venv/bin/python bench/gpu_opencl.py [--size 256] [--trials 64] [--programs 32]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db import Database
from schedule import (
    Steps,
    Target,
    Workload,
    build,
    compile_cuda,
    fallback_gpu_schedule,
    gpu_source,
    make_schedule,
)
from search import SearchTask, make_policy
from tests.gpu_support import cuda_translation_unit
from tuner import tune

POCL = "opencl -device=pocl"
MARKS = (8, 16, 32, 64, 128, 256, 512, 1000)


def retime(wl: Workload, steps: Steps, rounds: int = 5) -> float:
    s, args = make_schedule(wl, steps)
    mod = build(s, args, POCL)
    inputs = wl.random_inputs(0)
    (expected,) = wl.reference(inputs)
    out = np.zeros_like(expected)
    mod(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
    return min(min(mod.time(*inputs, out, repeat=3, min_repeat_ms=50)) for _ in range(rounds))


def tuning(size: int, trials: int) -> None:
    wl = Workload.op("matmul", M=size, N=size, K=size)
    gflop = wl.flops / 1e9
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{tmp}/gpu.db")
        start = time.perf_counter()
        result = tune(wl, POCL, trials, db=db, batch_size=16, reconfirm=1)
        wall = time.perf_counter() - start
        curve, best, best_steps = [], float("inf"), None
        for record in db.iter_records(job_id=result.job_id):
            if record.measure.get("origin", {}).get("reconfirm"):
                continue
            if record.median_cost is not None and record.median_cost < best:
                best, best_steps = record.median_cost, record.steps
            curve.append(best)
        db.close()
    print(f"matmul {size}^3 on {POCL} (PoCL on CPU), {trials} trials in {wall:.0f} s "
          f"({wall / trials:.2f} s/trial), errors {result.errors() or 'none'}")
    marks = ", ".join(f"{m}: {gflop / curve[m - 1]:.1f}" for m in MARKS if m <= len(curve))
    print(f"  best-so-far GFLOP/s at trial {marks}")
    _, args = make_schedule(wl)
    fallback = Steps(fallback_gpu_schedule(args[-1]).steps)
    a, b = wl.random_inputs(0)
    numpy_s = min(min(_time(lambda: a @ b) for _ in range(20)) for _ in range(5))
    untuned, tuned = retime(wl, fallback), retime(wl, Steps.of(best_steps))
    print(f"  re-timed on PoCL: untuned (one thread per element) {untuned * 1e3:.3f} ms = "
          f"{gflop / untuned:.1f} GFLOP/s; tuned {tuned * 1e3:.3f} ms = {gflop / tuned:.1f} "
          f"GFLOP/s: {untuned / tuned:.1f}x the untuned")
    print(f"  numpy on the CPU (another device, for scale): {numpy_s * 1e3:.3f} ms = "
          f"{gflop / numpy_s:.1f} GFLOP/s")


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compile_throughput(size: int, programs: int) -> None:
    wl = Workload.op("matmul", M=size, N=size, K=size)
    target = Target.parse("cuda -arch=sm_80")
    start = time.perf_counter()
    cands = make_policy(SearchTask(wl, target), "random", seed=0).propose(programs)
    sources = []
    for i, cand in enumerate(cands):
        s, args = make_schedule(wl, cand.steps)
        sources.append(gpu_source(s, args, target, name=f"p{i}").source)
    generate = time.perf_counter() - start
    one_by_one = []
    registers = []
    for src in sources:
        binary = compile_cuda(src, target.arch)
        one_by_one.append(binary.build_seconds)
        registers += [r.registers for r in binary.resources.values()]
    batched = compile_cuda(cuda_translation_unit(sources), target.arch)
    print(f"nvcc ({target}): {len(sources)} sampled programs of the GEMM {size}^3 sketch; "
          f"sampling + CUDA source {generate / len(sources) * 1e3:.0f} ms per program")
    print(f"  one nvcc call per candidate: median {statistics.median(one_by_one):.2f} s, "
          f"{len(sources) / sum(one_by_one):.2f} candidates/s on one core")
    print(f"  all in one call: {batched.build_seconds:.1f} s, "
          f"{len(sources) / batched.build_seconds:.2f} candidates/s")
    print(f"  registers per thread (ptxas): median {statistics.median(registers):.0f}, "
          f"max {max(registers)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--programs", type=int, default=32)
    args = parser.parse_args()
    tuning(args.size, args.trials)
    compile_throughput(args.size, args.programs)


if __name__ == "__main__":
    main()
