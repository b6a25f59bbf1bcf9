"""MetaSchedule's best program for the ResNet-18 conv (issue 15) replayed as our steps, timed
beside PyTorch (oneDNN) and, with ``--tune N``, beside our own search's best after N trials.

    .venv/bin/python bench/replay_conv.py [--tune 256] [--rounds 5]

The conv is 64->64 channels, 56x56, 3x3, padding 1, NCHW, float32. MetaSchedule's program
(issue 15) tiles it "SSRSRS" like our ``cache_write conv, tile conv.local fused@conv:L1``
sketch: batch [1,1,1,1], K [2,4,4,2], H [14,1,2,2], W [7,1,8,1], C [64,1], R [3,1], S [3,1],
the accumulator tile computed at the outermost spatial tile, outer loops fused and parallel,
auto-unroll 64. Our sketch names the three inner levels of each spatial axis (the outer one
is the rest) and the inner level of each reduction, so that program is the decisions below.
Our code generator vectorizes the innermost loop only (LLVM, behind TVM, also vectorizes
across unrolled statements), so the table also shows the program with MetaSchedule's inner
8 output columns moved to the innermost level, and with 16 of them (a zmm register; 56
columns do not divide by 16: the last tile is partial).
Every program is checked against numpy first. Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import median_call_time  # noqa: E402

SKETCH = "cache_write conv, tile conv.local fused@conv:L1"
COMMON = {"tile:conv.local:n": (1, 1, 1), "tile:conv.local:rc": (1,),
          "tile:conv.local:ry": (1,), "tile:conv.local:rx": (1,), "location:pad": "root",
          "parallel:pad": 1, "unroll:conv.local": 64, "parallel:conv": 3, "unroll:conv": 0}
PROGRAMS: dict[str, dict[str, Any]] = {
    "MetaSchedule's, as is": {
        "tile:conv.local:k": (4, 4, 2), "tile:conv.local:oh": (1, 2, 2),
        "tile:conv.local:ow": (1, 8, 1)},
    "its 8 columns innermost": {
        "tile:conv.local:k": (4, 4, 2), "tile:conv.local:oh": (1, 2, 2),
        "tile:conv.local:ow": (1, 1, 8)},
    "16 columns innermost": {
        "tile:conv.local:k": (4, 2, 4), "tile:conv.local:oh": (1, 1, 4),
        "tile:conv.local:ow": (1, 1, 16), "unroll:conv.local": 512},
}


def workload():
    from schedule import Workload

    return Workload.op("conv2d_nchw", N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1)


def replay(decisions: dict[str, Any]):
    """The compiled program of our sketch with these decisions."""
    from schedule import build, host_cpu_target
    from search import SearchTask, generate_sketches
    from search.sketch import instantiate

    task = SearchTask(workload(), host_cpu_target())
    (sketch,) = [s for s in generate_sketches(task) if str(s) == SKETCH]
    chosen = {**COMMON, **decisions}
    s, args = instantiate(task, sketch, lambda name, _: chosen[name])
    return build(s, args, target=task.target)


def tuned(trials: int):
    from tuner import build_best, tune

    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'replay.db'}"
        start = time.perf_counter()
        tune([workload()], "cpu", trials, db=db)
        seconds = time.perf_counter() - start
        return build_best(workload(), "cpu", db), seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tune", type=int, default=0, metavar="TRIALS")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(2)
    wl = workload()
    inputs = wl.random_inputs(seed=0)
    (want,) = wl.reference(inputs)
    modules = {name: replay(d) for name, d in PROGRAMS.items()}
    if args.tune:
        module, seconds = tuned(args.tune)
        modules[f"our search, {args.tune} trials ({seconds:.0f} s)"] = module
    calls = {}
    for name, module in modules.items():
        out = np.zeros(want.shape, "float32")
        module(*inputs, out)
        np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3, err_msg=name)
        calls[name] = lambda m=module, o=out: m(*inputs, o)
    x, w = torch.from_numpy(inputs[0]), torch.from_numpy(inputs[1])
    with torch.no_grad():
        calls["PyTorch (oneDNN)"] = lambda: torch.nn.functional.conv2d(x, w, padding=1)
        rounds = [{k: median_call_time(c, 0.5, 300) for k, c in calls.items()}
                  for _ in range(args.rounds)]
    times = {k: statistics.median(r[k] for r in rounds) for k in calls}
    torch_s = times["PyTorch (oneDNN)"]
    print(f"ResNet-18 conv 64->64 56x56 3x3, median of {args.rounds} interleaved rounds")
    print(f"{'program':42} {'time':>9} {'GFLOP/s':>8}  vs PyTorch")
    for name, seconds in times.items():
        print(f"{name:42} {seconds * 1e3:7.3f}ms {wl.flops / seconds / 1e9:8.0f}  "
              f"{torch_s / seconds:6.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
