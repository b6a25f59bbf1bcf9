"""Search on one GEMM: best-so-far after N measured trials for the sketch search guided by
XGBoost, the same search with a random model, and pure random sampling, against the default
schedule and numpy, all measured in this run.

    .venv/bin/python bench/search_gemm.py [--size 256] [--trials 64] [--batch 16]

Every candidate is built, checked against numpy and timed in-process with the kernel's
native timing loop (the workers' sandboxed pool is not needed for a benchmark of the search).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from schedule import Workload, build, make_schedule
from search import RandomPolicy, SearchTask, SketchPolicy


def measure(task: SearchTask, steps, inputs, out, expected) -> float:
    s, args = make_schedule(task.workload, steps)
    mod = build(s, args)
    costs = mod.time(*inputs, out, number=3, repeat=3)
    if not np.allclose(out, expected, rtol=1e-3, atol=1e-3):
        raise SystemExit(f"wrong answer from steps {steps}")
    return min(costs)


def run(name: str, policy, task, trials, batch, inputs, out, expected) -> dict:
    best, curve, measuring = float("inf"), [], 0.0
    while len(curve) < trials:
        cands = policy.propose(min(batch, trials - len(curve)))
        if not cands:
            break
        start = time.perf_counter()
        costs = [measure(task, c.steps, inputs, out, expected) for c in cands]
        measuring += time.perf_counter() - start
        policy.notify(cands, costs)
        for c in costs:
            best = min(best, c)
            curve.append(best)
    return {"name": name, "best": best, "curve": curve, "search_s": policy.stats.seconds,
            "measure_s": measuring}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n = args.size
    wl = Workload.op("matmul", M=n, N=n, K=n)
    task = SearchTask(wl, "cpu")
    inputs = wl.random_inputs(0)
    (expected,) = wl.reference(inputs)
    out = np.zeros((n, n), "float32")
    s, tensors = make_schedule(wl)
    default = min(build(s, tensors).time(*inputs, out, number=3, repeat=3))
    a, b = inputs
    start = time.perf_counter()
    for _ in range(20):
        np.matmul(a, b)
    numpy_s = (time.perf_counter() - start) / 20
    flops = 2.0 * n**3
    results = [
        run("sketch search + xgb", SketchPolicy(task, "xgb", seed=args.seed), task,
            args.trials, args.batch, inputs, out, expected),
        run("sketch search + random model", SketchPolicy(task, "random", seed=args.seed), task,
            args.trials, args.batch, inputs, out, expected),
        run("pure random sampling", RandomPolicy(task, seed=args.seed), task, args.trials,
            args.batch, inputs, out, expected),
    ]
    print(f"GEMM {n}^3 float32 on {task.target}; default schedule {flops / default / 1e9:.1f} "
          f"GFLOP/s, numpy {flops / numpy_s / 1e9:.1f} GFLOP/s")
    marks = [m for m in (16, 32, 64, 256, 1000) if m <= args.trials]
    for r in results:
        at = ", ".join(f"{m}: {flops / r['curve'][m - 1] / 1e9:.0f}" for m in marks
                       if m <= len(r["curve"]))
        print(f"  {r['name']:30s} best {flops / r['best'] / 1e9:6.1f} GFLOP/s = "
              f"{default / r['best']:5.1f}x default, {numpy_s / r['best']:4.2f}x numpy; "
              f"GFLOP/s at trials {at}; search {r['search_s'] / len(r['curve']):.2f} s/trial, "
              f"measure {r['measure_s'] / len(r['curve']):.2f} s/trial")


if __name__ == "__main__":
    main()
