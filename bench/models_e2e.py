"""End-to-end latency of whole models (batch 1, 2 threads), all contenders in one run:
tensortune's graph executor with default schedules (untuned) and with the database's best
records (tuned), onnxruntime, PyTorch eager and ``torch.compile``.

The models are the test suite's ResNet-18, MobileNetV2 and BERT-base layer (sequence 128),
built in PyTorch and exported to ONNX here. Every tensortune output is checked against
onnxruntime's (the largest error relative to the output's largest magnitude is printed).
``--tune N`` first tunes each model's tasks with N trials as one job (``tuner.tune_model``)
into ``--db`` and reports the tuning wall time; without it, the records already in ``--db``
are used (an empty or missing database: the tuned column equals the untuned one).
Model jobs time candidates with the caches flushed before each call
(``tuner.spec.MODEL_MEASURE``); ``--warm`` tunes with repeated calls on warm caches instead
(``tuner.spec.TUNING_MEASURE``, the default of model jobs before 2026-11-25), to compare.
The tuned model, onnxruntime and PyTorch are timed in ``--rounds`` interleaved rounds (each
latency: the median of the rounds' medians; the ratio to onnxruntime's range over the
rounds is printed too), so a machine whose speed drifts slows them alike.
A model's tasks share one cost model and their best programs while tuned
(``JobSpec.share_across_tasks``); ``--isolated-tasks`` tunes each alone, to compare.

    .venv/bin/python bench/models_e2e.py --db sqlite:///bench-models.db [--tune 2000]
        [--models resnet18,mobilenet_v2,bert_layer] [--json out.json] [--warm] [--rounds 5]
        [--disable-pass ConvertWinograd] [--isolated-tasks]

Run it with nothing else on the machine: timings (and tuning) are spoiled by other work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

THREADS = 2
MODELS = ("resnet18", "mobilenet_v2", "bert_layer")


def median_latency(fn: Callable[[], Any], repeat: int, budget_s: float = 20.0) -> float:
    """The median wall time of ``repeat`` calls after two warm-up calls (fewer calls when
    they exceed ``budget_s``)."""
    fn()
    fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < repeat and (spent < budget_s or len(times) < 3):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return statistics.median(times)


def interleaved(contenders: dict[str, Callable[[], Any]], rounds: int, repeat: int,
                budget_s: float = 4.0) -> dict[str, list[float]]:
    """Each contender's median latency in each of ``rounds`` rounds, the contenders taking
    turns within a round: a machine that drifts (this VM's speed moves 5-30% over minutes)
    slows all of them alike instead of whichever happened to run then."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            times[name].append(median_latency(fn, repeat, budget_s))
    return times


def torch_model(name: str) -> tuple[Any, Any]:
    from tests.ir.frontend import models

    if name == "resnet18":
        return models.resnet18_torch()
    if name == "mobilenet_v2":
        return models.mobilenet_v2_torch()
    return models.bert_layer_torch()


def export(name: str, directory: Path) -> Path:
    """The model exported to ONNX (built again from the same seeds: the same weights)."""
    from tests.ir.frontend import models

    path = directory / f"{name}.onnx"
    if name == "bert_layer":
        return models.bert_layer(path, dynamic_seq=False)
    return getattr(models, name)(path)


LAYOUT_WORDS = ("transpose", "reshape", "layout_transform", "squeeze", "expand_dims",
                "strided_slice", "concatenate", "copy")
COMPUTE_WORDS = ("conv2d", "dense", "matmul", "pool", "softmax", "layer_norm", "mean", "sum",
                 "max", "min", "variance")


def time_split(model: Any, x: np.ndarray, repeat: int) -> dict[str, float]:
    """Shares of one run's time: kernels that compute (conv, dense, matmul, pooling,
    reductions...), other elementwise/injective kernels, layout kernels (transpose, reshape
    ...), and the executor itself (a whole run minus the sum of its nodes' times)."""
    model.runtime.set_inputs(x)
    nodes = model.runtime.profile(repeat)
    whole = median_latency(model.runtime.run, repeat)
    split = {"compute": 0.0, "elementwise": 0.0, "layout": 0.0}
    for name, seconds in nodes:
        if any(w in name for w in COMPUTE_WORDS):
            split["compute"] += seconds
        elif any(w in name for w in LAYOUT_WORDS):
            split["layout"] += seconds
        else:
            split["elementwise"] += seconds
    split["executor"] = max(whole - sum(split.values()), 0.0)
    total = sum(split.values())
    return {k: v / total for k, v in split.items()}


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def bench_model(name: str, db: str, tune_trials: int, repeat: int, workdir: Path,
                warm: bool = False, isolated: bool = False, rounds: int = 5
                ) -> dict[str, Any]:
    import onnxruntime as ort
    import torch

    import tuner

    model, example = torch_model(name)
    path = export(name, workdir)
    x = example.numpy()
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x}
    want = session.run(None, feed)[0]
    row: dict[str, Any] = {"model": name}
    contenders: dict[str, Callable[[], Any]] = {
        "onnxruntime": lambda: session.run(None, feed),
        "torch_eager": lambda: model(example)}
    with torch.no_grad():
        try:
            compiled = torch.compile(model)
            compiled(example)
            contenders["torch_compile"] = lambda: compiled(example)
        except Exception as exc:  # no C++ toolchain for inductor, ...: report, go on
            row["torch_compile_s"] = None
            row["torch_compile_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"

    untuned_db = f"sqlite:///{workdir / f'{name}-empty.db'}"
    start = time.perf_counter()
    untuned = tuner.compile(str(path), "cpu", untuned_db)
    row["untuned_build_s"] = time.perf_counter() - start
    row["untuned_error"] = relative_error(untuned(x), want)
    row["untuned_s"] = median_latency(lambda: untuned(x), repeat)
    row["tasks"] = len([t for t in untuned.tasks if t.key])

    if tune_trials:
        start = time.perf_counter()
        from tuner.spec import TUNING_MEASURE

        options: dict[str, Any] = {"share_across_tasks": not isolated}
        if warm:
            options["measure"] = TUNING_MEASURE
        result = tuner.tune_model(str(path), "cpu", tune_trials, db=db, **options)
        row["tuning_wall_s"] = time.perf_counter() - start
        row["tuning_trials"] = result.trials
        row["estimated_latency_s"] = result.estimated_latency_s
    tuned = tuner.compile(str(path), "cpu", db)
    row["tuned_share"] = tuned.tuned_share()
    row["tuned_error"] = relative_error(tuned(x), want)
    contenders["tuned"] = lambda: tuned(x)
    with torch.no_grad():
        rounds_s = interleaved(contenders, rounds, repeat)
    for contender, times in rounds_s.items():
        row[f"{contender}_s"] = statistics.median(times)
    row["rounds_s"] = rounds_s
    ratios = [o / t for o, t in zip(rounds_s["onnxruntime"], rounds_s["tuned"], strict=True)]
    row["tuned_vs_ort_range"] = (min(ratios), max(ratios))
    row["time_split"] = time_split(tuned, x, repeat)
    row["activation_bytes"] = {"unshared": tuned.memory.bytes_unshared,
                               "planned": tuned.memory.bytes_planned}
    return row


def report(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'model':13} {'ours untuned':>13} {'ours tuned':>11} {'onnxruntime':>12} "
             f"{'torch eager':>12} {'torch.compile':>14}  tuned/ort  tuned/eager  "
             "tuned FLOPs  max rel err"]
    for r in rows:
        def ms(value: float | None) -> str:
            return f"{value * 1e3:.2f} ms" if value else "n/a"
        lines.append(
            f"{r['model']:13} {ms(r['untuned_s']):>13} {ms(r['tuned_s']):>11} "
            f"{ms(r['onnxruntime_s']):>12} {ms(r['torch_eager_s']):>12} "
            f"{ms(r['torch_compile_s']):>14}  {r['onnxruntime_s'] / r['tuned_s']:8.2f}x  "
            f"{r['torch_eager_s'] / r['tuned_s']:10.2f}x  {r['tuned_share']:10.0%}  "
            f"{max(r['untuned_error'], r['tuned_error']):.1e}")
        low, high = r["tuned_vs_ort_range"]
        lines.append(f"{'':13} tuned/ort per round: {low:.2f}x to {high:.2f}x over "
                     f"{len(r['rounds_s']['tuned'])} interleaved rounds")
        if "tuning_wall_s" in r:
            lines.append(f"{'':13} tuned with {r['tuning_trials']} trials over {r['tasks']} "
                         f"tasks in {r['tuning_wall_s'] / 60:.1f} min; estimate "
                         f"{ms(r['estimated_latency_s'])}")
        split = ", ".join(f"{k} {v:.0%}" for k, v in r["time_split"].items())
        memory = r["activation_bytes"]
        lines.append(f"{'':13} time: {split}; activations {memory['unshared'] / 2**20:.1f} MiB "
                     f"-> {memory['planned'] / 2**20:.1f} MiB with the memory plan")
        if r.get("torch_compile_error"):
            lines.append(f"{'':13} torch.compile: {r['torch_compile_error']}")
    lines.append("(x > 1: tensortune tuned is faster; untuned: the median of repeated runs "
                 "after warm-up; the others: the median over interleaved rounds of each "
                 "round's median; batch 1, 2 threads)")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="sqlite:///bench-models.db",
                        help="the tuning records (default: ./bench-models.db)")
    parser.add_argument("--tune", type=int, default=0, metavar="TRIALS",
                        help="tune each model with this many trials first")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--repeat", type=int, default=30,
                        help="calls per contender per round (fewer past 4 s)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved timing rounds of the tuned model, onnxruntime and "
                             "PyTorch")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    parser.add_argument("--warm", action="store_true",
                        help="tune with repeated calls on warm caches (not flushed)")
    parser.add_argument("--isolated-tasks", action="store_true",
                        help="tune each task alone (its own cost model, no programs from the "
                             "others), as before 2026-11-26, to compare")
    parser.add_argument("--disable-pass", action="append", default=[], metavar="NAME",
                        help="compile without this optimisation pass (e.g. ConvertWinograd; "
                             "repeatable), to compare")
    args = parser.parse_args()
    if args.rounds < 1 or args.repeat < 1:
        parser.error("--rounds and --repeat take a whole number of at least 1")
    import torch

    from ir.transform import PassContext

    torch.set_num_threads(THREADS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            if name not in MODELS:
                parser.error(f"unknown model {name!r}; one of {', '.join(MODELS)}")
            with PassContext(disabled_pass=args.disable_pass):
                rows.append(bench_model(name, args.db, args.tune, args.repeat, Path(tmp),
                                        args.warm, args.isolated_tasks, args.rounds))
            print(report(rows[-1:]), flush=True)
    print()
    print(report(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
