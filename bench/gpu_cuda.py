"""Tuned CUDA programs against PyTorch (cuBLAS / cuDNN) on the same NVIDIA GPU.

For each workload (GEMM, ResNet-18's 3x3 convolutions in NCHW) it tunes on this machine's
first GPU (``cuda`` target detected with nvidia-smi) with the GPU sketches, then re-times in
one process, interleaved over ``--rounds`` rounds, each with CUDA events after a warm-up
and the L2 cache flushed before each repeat: the untuned fallback (one thread per output
element), the tuned best (rebuilt from the database and checked against numpy first), and
PyTorch's float32 op on the GPU (TF32 off, cuDNN autotuning on). It prints trials, tuning
wall time, milliseconds, TFLOP/s and the ratios. With ``--db URL --trials 0`` it tunes
nothing and re-times the best program a database holds (one ``tensortune tune`` stored).

    python bench/gpu_cuda.py [--trials 256] [--rounds 5] [--only gemm4096,r18_64] [--db URL]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db import Database
from schedule import Workload, build, fallback_gpu_schedule, make_schedule
from schedule.target import host_cuda_target
from tuner import build_best, tune

WORKLOADS = {
    "gemm1024": Workload.op("matmul", M=1024, N=1024, K=1024),
    "gemm4096": Workload.op("matmul", M=4096, N=4096, K=4096),
    **{f"r18_{c}": Workload.op("conv2d_nchw", N=1, C=c, H=h, W=h, K=c, R=3, S=3, padding=1)
       for c, h in ((64, 56), (128, 28), (256, 14), (512, 7))},
}


def torch_op(wl: Workload, inputs: list[np.ndarray]) -> Callable[[], object]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    a, b = (torch.from_numpy(x).cuda() for x in inputs)
    if wl.op_name == "matmul":
        return lambda: torch.matmul(a, b)
    padding = wl.params["padding"]
    return lambda: torch.nn.functional.conv2d(a, b, padding=padding)


def torch_seconds(fn: Callable[[], object], repeat: int = 5, min_ms: float = 50.0) -> float:
    """Seconds per call with CUDA events, the L2 flushed before each repeat."""
    import torch

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    number, best = 1, float("inf")
    for _ in range(repeat):
        while True:
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(number):
                fn()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
            if ms >= min_ms or number >= 1 << 16:
                break
            number = max(number + 1, int(number * 1.2 * min_ms / max(ms, 1e-3)))
        best = min(best, ms * 1e-3 / number)
    return best


def ours_seconds(wl: Workload, module, inputs: list[np.ndarray]) -> Callable[[], float]:
    (expected,) = wl.reference(inputs)
    out = np.zeros_like(expected)
    module(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
    return lambda: min(module.time(*inputs, out, repeat=5, min_repeat_ms=50))


def run(name: str, trials: int, rounds: int, db_url: str) -> None:
    wl = WORKLOADS[name]
    target = host_cuda_target()
    tflop = wl.flops / 1e12
    db = Database(db_url)
    start = time.perf_counter()
    errors = tune(wl, target, trials, db=db, batch_size=32, reconfirm=1).errors() \
        if trials else "(not tuned here: the database's best)"
    wall = time.perf_counter() - start
    tuned = build_best(wl, target, db)
    db.close()
    _, args = make_schedule(wl)
    untuned = build(fallback_gpu_schedule(args[-1]), args, target)
    inputs = wl.random_inputs(0)
    timers = {"untuned": ours_seconds(wl, untuned, inputs),
              "tensortune": ours_seconds(wl, tuned, inputs),
              "torch": lambda: torch_seconds(torch_op(wl, inputs))}
    best = {key: float("inf") for key in timers}
    for _ in range(rounds):
        for key, timer in timers.items():
            best[key] = min(best[key], timer())
    untuned.close()
    tuned.close()
    print(f"{name} {wl} on {target.model_name} ({target}): {trials} trials in {wall:.0f} s, "
          f"errors {errors or 'none'}")
    for key, seconds in best.items():
        print(f"  {key:>10}: {seconds * 1e3:9.4f} ms  {tflop / seconds:7.2f} TFLOP/s")
    print(f"  tensortune / torch: {best['torch'] / best['tensortune']:.2f}x;  "
          f"tuned / untuned: {best['untuned'] / best['tensortune']:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="gemm4096,r18_64,r18_128,r18_256,r18_512",
                        help=f"comma-separated, of: {', '.join(WORKLOADS)}")
    parser.add_argument("--db", default="", help="database URL (default: a temporary one)")
    args = parser.parse_args()
    if args.trials < 0 or (args.trials == 0 and not args.db):
        parser.error("--trials 0 re-times a database's best: give --db")
    for name in args.only.split(","):
        if name not in WORKLOADS:
            parser.error(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            run(name, args.trials, args.rounds, args.db or f"sqlite:///{tmp}/cuda.db")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
