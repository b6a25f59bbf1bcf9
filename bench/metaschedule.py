"""TVM MetaSchedule and tensortune side by side (issue 15): GEMM 1024 and the ResNet-18 conv
tuned from scratch by each at the same trial budgets, every best program re-timed in this
one process beside numpy, PyTorch and onnxruntime in interleaved rounds.

TVM is a benchmark contender, not a dependency; it runs from its own virtualenv beside ours:

    python3 -m venv /tmp/tvmvenv
    /tmp/tvmvenv/bin/pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post0 \\
        psutil torch==2.13.0 -e '.[bench]'
    /tmp/tvmvenv/bin/python bench/metaschedule.py [--trials 64,256] [--rounds 5]

(``apache-tvm-ffi`` newer than 0.1.14.post0 segfaults in ``save_json``.) TVM's runtime
runs as many threads as ``TVM_NUM_THREADS`` says, and without it half the hardware threads
on x86 (it assumes two per core): one on a 2-vCPU machine. The script sets it to the cores
every contender gets, so MetaSchedule's programs run, and are tuned, on both cores as ours
and the libraries' do (before 2026-11-29 they ran on one). MetaSchedule runs
with its defaults (``tune_tir``: evolutionary search, XGBoost cost model, 64 trials per
iteration, its local builder and runner) on an LLVM target for the host CPU with 2 cores;
ours with ``tuner.tune``'s defaults. Each budget is a separate tune from an empty
database. Per tune: the tuning wall time, the best in-tuning figure, and the trial (and
wall time) at which it first came within 5% of its final best. MetaSchedule reports its
measurements per batch of candidates, so its wall time to a trial is the end of that
trial's batch. Every program is checked against numpy before it is timed. Run it with
nothing else on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tune_curves import WORKLOADS, built_best, compare, library_contenders  # noqa: E402

BENCH_WORKLOADS = ("gemm1024", "resnet_conv")


@dataclass
class TuneRun:
    """One tuner's run at one budget: what it found and when."""

    tuner: str
    trials: int
    wall_s: float
    costs: list[float]  # in-tuning seconds per trial, in order (inf for a failure)
    seconds_at: list[float]  # wall seconds from the start when each trial was reported
    call: Callable[[], object]

    def within(self, fraction: float) -> tuple[int, float]:
        """The first trial (1-based) within ``fraction`` of the final best, and its time."""
        best = min(self.costs)
        for i, cost in enumerate(self.costs):
            if cost <= best * (1 + fraction):
                return i + 1, self.seconds_at[i]
        raise AssertionError("the best is within any fraction of itself")


def te_definition(name: str):
    """The workload as a TVM tensor expression (the same computation as ours)."""
    from tvm import te, topi

    wl = WORKLOADS[name]
    if name == "gemm1024":
        p = wl.params
        a = te.placeholder((p["M"], p["K"]), name="A")
        b = te.placeholder((p["K"], p["N"]), name="B")
        k = te.reduce_axis((0, p["K"]), name="k")
        c = te.compute((p["M"], p["N"]), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k),
                       name="C")
        return te.create_prim_func([a, b, c])
    data = te.placeholder(wl.tensors()[0].shape, name="data")
    kernel = te.placeholder(wl.tensors()[1].shape, name="kernel")
    p = wl.params
    out = topi.nn.conv2d_nchw(data, kernel, stride=p["stride"], padding=p["padding"],
                              dilation=p["dilation"])
    return te.create_prim_func([data, kernel, out])


def tvm_target(mattr: str = ""):
    import tvm
    from tvm.target import codegen

    from schedule import host_cpu_target

    spec = {"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(),
            "num-cores": host_cpu_target().cores}
    if mattr:
        spec["mattr"] = mattr.split(",")
    return tvm.target.Target(spec)


def tune_metaschedule(name: str, trials: int, seed: int, inputs: list[np.ndarray],
                      mattr: str = "") -> TuneRun:
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.measure_callback import MeasureCallback, PyMeasureCallback

    costs: list[float] = []
    seconds_at: list[float] = []
    start = time.perf_counter()

    @derived_object
    class Clock(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, candidates, builds, runs) -> None:
            now = time.perf_counter() - start
            for run in runs:
                secs = [float(s) for s in run.run_secs or []]
                costs.append(statistics.mean(secs) if secs and not run.error_msg
                             else float("inf"))
                seconds_at.append(now)

    func, target = te_definition(name), tvm_target(mattr)
    with tempfile.TemporaryDirectory() as work_dir:
        db = ms.tir_integration.tune_tir(
            func, target, work_dir, max_trials_global=trials, seed=seed,
            measure_callbacks=[*MeasureCallback.create("default"), Clock()])
        wall = time.perf_counter() - start
        sch = ms.tir_integration.compile_tir(db, func, target)
    lib = tvm.compile(sch.mod, target=target)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    (want,) = WORKLOADS[name].reference(inputs)
    out = tvm.runtime.tensor(np.zeros_like(want), dev)
    main = lib["main"]
    main(*args, out)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-3, atol=1e-3)
    return TuneRun("MetaSchedule", trials, wall, costs, seconds_at,
                   lambda: main(*args, out))


def tune_ours(name: str, trials: int, seed: int, inputs: list[np.ndarray]) -> TuneRun:
    from db import Database
    from tuner import tune

    wl = WORKLOADS[name]
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{tmp}/bench.db")
        start_wall, start = time.time(), time.perf_counter()
        result = tune(wl, "cpu", trials, db=db, seed=seed)
        wall = time.perf_counter() - start
        costs, seconds_at = [], []
        for record in db.iter_records(job_id=result.job_id):
            if record.measure.get("origin", {}).get("reconfirm"):
                continue
            costs.append(record.median_cost if record.median_cost is not None
                         else float("inf"))
            seconds_at.append(record.timestamp - start_wall)
        db.close()
    steps = result.task(wl).best_steps
    return TuneRun("tensortune", trials, wall, costs, seconds_at,
                   built_best(wl, steps, inputs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", default="64,256",
                        help="comma-separated budgets, each a separate tune (default 64,256)")
    parser.add_argument("--workloads", default=",".join(BENCH_WORKLOADS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    budgets = [int(t) for t in args.trials.split(",")]

    from schedule import host_cpu_target

    os.environ["TVM_NUM_THREADS"] = str(host_cpu_target().cores)  # before TVM's thread pool
    import tvm

    print(f"TVM {tvm.__version__}, target {tvm_target()}, "
          f"TVM_NUM_THREADS={os.environ['TVM_NUM_THREADS']}")
    for name in args.workloads.split(","):
        wl = WORKLOADS[name]
        inputs = wl.random_inputs(seed=0)
        runs = [tuner(name, trials, args.seed, inputs)
                for trials in budgets for tuner in (tune_metaschedule, tune_ours)]
        contenders = library_contenders(wl, inputs)
        contenders.update({f"{r.tuner} {r.trials}": r.call for r in runs})
        times = {k: statistics.median(v) for k, v in compare(contenders, args.rounds).items()}
        libraries = [k for k in ("numpy", "pytorch", "onnxruntime") if k in times]
        print(f"\n{name}: {wl.flops / 1e9:.2f} GFLOP, median of {args.rounds} interleaved "
              "rounds")
        print(f"{'program':18} {'time':>9} {'GFLOP/s':>8}  "
              + "  ".join(f"vs {k:>11}" for k in libraries))
        for key, seconds in times.items():
            print(f"{key:18} {seconds * 1e3:7.3f}ms {wl.flops / seconds / 1e9:8.0f}  "
                  + "  ".join(f"{times[k] / seconds:14.2f}x" for k in libraries))
        print(f"\n{'tune':18} {'wall':>7} {'best in tuning':>15} {'within 5% at':>22}")
        for r in runs:
            trial, seconds = r.within(0.05)
            print(f"{r.tuner + ' ' + str(r.trials):18} {r.wall_s:6.0f}s "
                  f"{wl.flops / min(r.costs) / 1e9:9.0f} GFLOP/s   "
                  f"trial {trial:4d}, {seconds:5.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
