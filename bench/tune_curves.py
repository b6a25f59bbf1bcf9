"""Tuning curves: best-so-far against measured trials for the sketch search guided by
XGBoost, the same search with a random cost model, and pure random sampling, each tuning
from an empty database through the real tuner (sandboxed workers, every record committed),
against numpy / PyTorch / onnxruntime measured in the same run.

    .venv/bin/python bench/tune_curves.py gemm1024 --trials 1000 --baseline-trials 256
    .venv/bin/python bench/tune_curves.py resnet_conv --trials 1000 --baseline-trials 256

Prints each method's best GFLOP/s at 16/64/256/1000 trials, its final best re-timed in this
process together with the libraries (every contender timed alike, per call from Python, in
``--rounds`` interleaved rounds; medians) and as a ratio to each library, the split of the
tuning wall time, and writes
``bench/results/<workload>.png`` (the curves) and ``.json`` (the raw figures).
PyTorch, onnxruntime and matplotlib are optional (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from db import Database
from schedule import Workload, build, host_cpu_target, make_schedule, placed
from tuner import tune

WORKLOADS = {
    "gemm1024": Workload.op("matmul", M=1024, N=1024, K=1024),
    "gemm256": Workload.op("matmul", M=256, N=256, K=256),
    "resnet_conv": Workload.op("conv2d_nchw", N=1, C=64, H=56, W=56, K=64, R=3, S=3,
                               padding=1),
}
METHODS = {  # name -> (policy, cost model)
    "sketch + xgb": ("sketch", "xgb"),
    "sketch + random model": ("sketch", "random"),
    "pure random": ("random", "random"),
}
MARKS = (16, 64, 256, 1000)
RESULTS = Path(__file__).resolve().parent / "results"


def best_of(fn, seconds: float = 2.0, rounds: int = 30) -> float:
    """Median seconds per call of ``fn`` over up to ``rounds`` calls (after a warm-up)."""
    fn()
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < rounds and (len(times) < 5 or time.perf_counter() < deadline):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def library_contenders(wl: Workload, inputs: list[np.ndarray]) -> dict[str, Callable[[], object]]:
    """One call of numpy (float32), PyTorch and onnxruntime (where installed) each."""
    out: dict[str, Callable[[], object]] = {"numpy": lambda: wl.numpy_baseline(inputs)}
    try:
        import torch

        torch.set_num_threads(host_cpu_target().cores)
        tensors = [torch.from_numpy(x) for x in inputs]
        if wl.op_name == "matmul":
            fn = lambda: torch.matmul(*tensors)  # noqa: E731
        else:
            p = wl.params
            fn = lambda: torch.nn.functional.conv2d(  # noqa: E731
                *tensors, stride=p["stride"], padding=p["padding"], dilation=p["dilation"])
        out["pytorch"] = fn
    except ImportError:
        pass
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper

        names = ["A", "B"]
        if wl.op_name == "matmul":
            node = helper.make_node("MatMul", names, ["C"])
        else:
            p = wl.params
            node = helper.make_node("Conv", names, ["C"], pads=[*p["padding"], *p["padding"]],
                                    strides=list(p["stride"]), dilations=list(p["dilation"]))
        graph = helper.make_graph(
            [node], "bench",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape))
             for n, x in zip(names, inputs, strict=True)],
            [helper.make_tensor_value_info("C", TensorProto.FLOAT,
                                           list(wl.tensors()[-1].shape))])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  ir_version=8)
        onnx.checker.check_model(model)
        options = ort.SessionOptions()
        options.intra_op_num_threads = host_cpu_target().cores
        sess = ort.InferenceSession(model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
        feed = dict(zip(names, inputs, strict=True))
        out["onnxruntime"] = lambda: sess.run(None, feed)
    except ImportError:
        pass
    return out


def built_best(wl: Workload, steps, inputs: list[np.ndarray],
               expected: np.ndarray | None = None) -> Callable[[], object]:
    """One call of the program of ``steps``, built in this process and checked against
    ``expected`` (default: the workload's numpy reference)."""
    s, tensors = make_schedule(wl, steps)
    mod = build(s, tensors)
    if expected is None:
        (expected,) = wl.reference(inputs)
    out = placed(np.zeros_like(expected))  # laid out as the runtime allocates it
    mod(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
    return lambda: mod(*inputs, out)


def compare(contenders: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of every contender, timed the same way (``best_of``) in ``rounds``
    interleaved rounds, so that a noisy minute hurts all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            times[name].append(best_of(fn))
            time.sleep(0.5)  # let the spinning threads of a threaded library go to sleep
    return times


def run_method(wl: Workload, policy: str, cost_model: str, trials: int, batch: int,
               seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{tmp}/bench.db")
        result = tune(wl, "cpu", trials, db=db, batch_size=batch, policy=policy,
                      cost_model=cost_model, seed=seed, reconfirm=3)
        curve, best = [], float("inf")
        for record in db.iter_records(job_id=result.job_id):
            if record.measure.get("origin", {}).get("reconfirm"):
                continue
            if record.median_cost is not None:
                best = min(best, record.median_cost)
            curve.append(best)
        db.close()
    task = result.task(wl)
    return {"policy": policy, "cost_model": cost_model, "curve": curve,
            "best_steps": task.best_steps, "confirmed_s": task.best_cost,
            "errors": result.errors(), "seconds": result.seconds.to_json(),
            "trials": result.trials}


def plot(name: str, wl: Workload, runs: dict, baselines: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method, run in runs.items():
        gflops = [wl.flops / c / 1e9 if np.isfinite(c) else 0 for c in run["curve"]]
        ax.plot(range(1, len(gflops) + 1), gflops, label=method)
    for lib, seconds in baselines.items():
        ax.axhline(wl.flops / seconds / 1e9, linestyle="--", linewidth=1, color="grey")
        ax.text(1, wl.flops / seconds / 1e9, f" {lib}", va="bottom", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("measured trials")
    ax.set_ylabel("best GFLOP/s so far")
    ax.set_title(f"{name}: best-so-far on {host_cpu_target().canonical}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _known_methods(parser: argparse.ArgumentParser, text: str) -> list[str]:
    methods = text.split(",")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    return methods


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--trials", type=_positive, default=1000, help="for sketch + xgb")
    parser.add_argument("--baseline-trials", type=_positive, default=256,
                        help="for the random model and pure random sampling")
    parser.add_argument("--batch", type=_positive, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default=",".join(METHODS),
                        type=lambda text: _known_methods(parser, text))
    parser.add_argument("--rounds", type=_positive, default=5,
                        help="interleaved timing rounds of every contender at the end")
    args = parser.parse_args()
    wl = WORKLOADS[args.workload]
    inputs = wl.random_inputs(0)
    runs = {}
    for method in args.methods:
        policy, cost_model = METHODS[method]
        trials = args.trials if method == "sketch + xgb" else args.baseline_trials
        start = time.perf_counter()
        runs[method] = run_method(wl, policy, cost_model, trials, args.batch, args.seed)
        runs[method]["wall_s"] = time.perf_counter() - start
        print(f"[{method}] done in {runs[method]['wall_s']:.0f} s", flush=True)
    libraries = library_contenders(wl, inputs)
    contenders = {**libraries,
                  **{method: built_best(wl, run["best_steps"], inputs)
                     for method, run in runs.items()}}
    times = compare(contenders, args.rounds)
    timed = {name: statistics.median(t) for name, t in times.items()}
    baselines = {lib: timed[lib] for lib in libraries}
    for method, run in runs.items():
        run["retimed_s"] = timed[method]
        run["retimed_rounds_s"] = times[method]
    gf = lambda s: wl.flops / s / 1e9  # noqa: E731
    print(f"\n{args.workload}: {wl!r} on {host_cpu_target().canonical} "
          f"({host_cpu_target().model_name})")
    print(f"libraries (this run, median of {args.rounds} interleaved rounds): " + ", ".join(
        f"{lib} {gf(s):.1f} GFLOP/s ({s * 1e3:.3f} ms)" for lib, s in baselines.items()))
    for method, run in runs.items():
        curve = run["curve"]
        marks = ", ".join(f"{m}: {gf(curve[m - 1]):.0f}" for m in MARKS if m <= len(curve))
        ratios = ", ".join(f"{s / run['retimed_s']:.2f}x {lib}" for lib, s in baselines.items())
        sec = run["seconds"]
        print(f"  {method:22s} best-so-far GFLOP/s at trials {marks}")
        print(f"  {'':22s} final {gf(run['retimed_s']):.1f} GFLOP/s re-timed "
              f"({run['retimed_s'] * 1e3:.3f} ms; confirmed by the tuner "
              f"{gf(run['confirmed_s']):.1f}) = {ratios}")
        print(f"  {'':22s} {run['trials']} trials in {sec['total']:.0f} s = "
              f"{sec['total'] / run['trials']:.2f} s/trial: search {sec['search']:.0f} s "
              f"({sec['search'] / run['trials']:.3f} s/trial), measure {sec['measure']:.0f} s "
              f"(build {sec['build']:.0f} s, run {sec['run']:.0f} s summed over workers), "
              f"database {sec['database']:.1f} s; errors {run['errors'] or 'none'}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.workload}.json").write_text(json.dumps(
        {"workload": wl.to_json(), "baselines_s": baselines,
         "library_rounds_s": {lib: times[lib] for lib in libraries}, "runs": runs}, indent=1))
    if plot(args.workload, wl, runs, baselines, RESULTS / f"{args.workload}.png"):
        print(f"plot: {RESULTS / (args.workload + '.png')}")


if __name__ == "__main__":
    main()
