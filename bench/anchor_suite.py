"""The anchor suite (issue 15): the operators people compare tuners on, plus shapes that
divide nothing, each tuned from an empty database and re-timed in this one process beside
numpy, PyTorch and onnxruntime in interleaved rounds.

    .venv/bin/python bench/anchor_suite.py [--trials 64,256,1000] [--rounds 5]
        [--min-timing-s 20] [--only NAME,...]

One tune per workload runs to the largest budget; the program at each smaller budget is
the best the same tune had measured after that many trials (so the budgets share one
search, and a budget's figure is what a tune stopped there would have had, up to the
search's own batch plan). Figures taken while the machine was disturbed (the workers say
so) are left out of the best-so-far. Every program is built in this process and checked
against the numpy reference before it is timed. The rows marked "packed" tune the same
convolutions on channels packed in blocks of the vector lanes (the layout compiled models
run them in) and time them on inputs packed beforehand: the libraries' rows are NCHW, so
a packed row leaves out the layout change a model does once at its edges.

Per row: each contender's median time per call from Python (median of at least
``--rounds`` interleaved rounds, more until ``--min-timing-s`` have passed, each the median
of the calls in 0.3 s), ours at every budget as
GFLOP/s, as a fraction of this machine's FMA peak (``bench/fma_peak.py``, measured at the
start) and as the ratio to the fastest library (the median over rounds of the ratio within
a round, so that a round the whole machine ran slow in counts like the others);
memory-bound rows (fewer than 4 FLOPs per byte that must move) give GB/s instead of the
peak fraction; "(in tuning x)" is the figure the tune measured for that program (the one
it ranked it by: far below the re-time, the program was measured in a fast moment; see
``bench/host_drift.py``). The issue's aim: every row at least 1.05x the best library at
1000 trials. Run it with nothing else on the machine.

``--save FILE`` keeps every row's programs (steps per budget, with their in-tuning
figures); ``--retime FILE`` re-times them later without tuning again, which tells a
program's speed apart from the moment it was timed in.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fma_peak import fma_peak  # noqa: E402
from bench.timing import median_call_time  # noqa: E402
from bench.tune_curves import built_best  # noqa: E402
from db import Database  # noqa: E402
from schedule import Workload, host_cpu_target, placed  # noqa: E402
from tuner import tune  # noqa: E402
from tuner.trial import is_disturbed, is_reconfirmation  # noqa: E402

MEMORY_BOUND_FLOPS_PER_BYTE = 4.0


@dataclass(frozen=True)
class Anchor:
    """A row: ``op`` is the operator as the libraries compute it (NCHW for convolutions);
    ``packed`` tunes it instead on channels packed in blocks of the vector lanes
    (NCHW[x]c data, OIHW[x]i[y]o weights: the layout the model pipeline runs convolutions
    in), timed on inputs packed beforehand, as a compiled model's weights are."""

    op: Workload
    packed: bool = False

    def blocks(self) -> tuple[int, int]:
        from bench.packed_conv import block
        from schedule import Target

        lanes = Target.parse("cpu").vector_bits // 32
        p = self.op.params
        out_channels = p["C"] if self.op.op_name == "depthwise_conv2d_nchw" else p["K"]
        return block(p["C"], lanes), block(out_channels, lanes)

    def workload(self) -> Workload:
        """What the tuner tunes for this row."""
        if not self.packed:
            return self.op
        from schedule import ops, te

        p, (ic, oc) = self.op.params, self.blocks()
        N, C, H, W, R, S = (p[k] for k in ("N", "C", "H", "W", "R", "S"))
        data = te.placeholder((N, C // ic, H, W, ic), "float32", name="data")
        if self.op.op_name == "depthwise_conv2d_nchw":
            kernel = te.placeholder((C // oc, 1, R, S, 1, oc), "float32", name="kernel")
            out = ops.depthwise_conv2d_nchwc(data, kernel, p["stride"], p["padding"])
        else:
            kernel = te.placeholder((p["K"] // oc, C // ic, R, S, ic, oc), "float32",
                                    name="kernel")
            out = ops.conv2d_nchwc(data, kernel, p["stride"], p["padding"])
        return Workload.from_tensors([out], name=f"{self.op.op_name}_packed")

    def our_arrays(self, inputs: list[np.ndarray],
                   expected: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """The inputs and the expected output in the layout of ``workload()``."""
        if not self.packed:
            return inputs, expected
        from schedule.ops.reference import layout_transform

        ic, oc = self.blocks()
        kernel_layout = (f"OIHW1i{oc}o" if self.op.op_name == "depthwise_conv2d_nchw"
                         else f"OIHW{ic}i{oc}o")
        return ([placed(layout_transform(inputs[0], "NCHW", f"NCHW{ic}c")),
                 placed(layout_transform(inputs[1], "OIHW", kernel_layout))],
                layout_transform(expected, "NCHW", f"NCHW{oc}c"))


def _conv(C: int, H: int, K: int, R: int, stride: int, padding: int,
          packed: bool = False) -> Anchor:
    return Anchor(Workload.op("conv2d_nchw", N=1, C=C, H=H, W=H, K=K, R=R, S=R, stride=stride,
                              padding=padding), packed)


def _depthwise(C: int, H: int, stride: int, packed: bool = False) -> Anchor:
    return Anchor(Workload.op("depthwise_conv2d_nchw", N=1, C=C, H=H, W=H, R=3, S=3,
                              stride=stride, padding=1), packed)


def _op(name: str, **params) -> Anchor:
    return Anchor(Workload.op(name, **params))


ANCHORS: dict[str, Anchor] = {
    "GEMM 512³": _op("matmul", M=512, N=512, K=512),
    "GEMM 1024³": _op("matmul", M=1024, N=1024, K=1024),
    "BERT FFN 128x3072x768": _op("matmul", M=128, N=3072, K=768),
    "batch_matmul 12x128x128x64": _op("batch_matmul", B=12, M=128, N=128, K=64),
    "conv R18 64→64 56² 3x3": _conv(64, 56, 64, 3, 1, 1),
    "conv 128→256 28² 3x3 s2": _conv(128, 28, 256, 3, 2, 1),
    "depthwise 256ch 28² 3x3": _depthwise(256, 28, 1),
    "softmax 128x3072": _op("softmax", M=128, N=3072),
    "layer_norm 128x768": _op("layer_norm", M=128, N=768),
    "add+relu 1x64x56²": _op("elementwise", shape=[1, 64, 56, 56], ops=["add", "relu"]),
    # shapes that divide nothing
    "matmul 257x383x191": _op("matmul", M=257, N=383, K=191),
    "conv 96→128 27² 3x3 s2": _conv(96, 27, 128, 3, 2, 1),
    "conv AlexNet 3→64 224² 11x11 s4": _conv(3, 224, 64, 11, 4, 2),
    "depthwise 144ch 57² 3x3 s2": _depthwise(144, 57, 2),
    "softmax 100x1000": _op("softmax", M=100, N=1000),
    # the convolutions again on packed channels, as compiled models run them
    "conv R18 64→64 56² 3x3 [packed]": _conv(64, 56, 64, 3, 1, 1, packed=True),
    "conv 128→256 28² 3x3 s2 [packed]": _conv(128, 28, 256, 3, 2, 1, packed=True),
    "depthwise 256ch 28² 3x3 [packed]": _depthwise(256, 28, 1, packed=True),
    "conv 96→128 27² 3x3 s2 [packed]": _conv(96, 27, 128, 3, 2, 1, packed=True),
    "conv AlexNet 3→64 224² 11x11 s4 [packed]": _conv(3, 224, 64, 11, 4, 2, packed=True),
    "depthwise 144ch 57² 3x3 s2 [packed]": _depthwise(144, 57, 2, packed=True),
}


def _onnx_session(nodes: list, inputs: list[np.ndarray], output_shape: tuple[int, ...],
                  threads: int) -> Callable[[], object]:
    """One call of an onnxruntime session running ``nodes`` on inputs named in0, in1, ..."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    names = [f"in{i}" for i in range(len(inputs))]
    graph = helper.make_graph(
        nodes, "anchor",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape))
         for n, x in zip(names, inputs, strict=True)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, list(output_shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feed = dict(zip(names, inputs, strict=True))
    return lambda: session.run(None, feed)


def _library_ops(wl: Workload) -> tuple[Callable, list]:
    """The workload as a PyTorch function of its inputs, and as ONNX nodes (in0.. -> out)."""
    import torch
    from onnx import helper

    p, op = wl.params, wl.op_name
    if op in ("matmul", "batch_matmul"):
        return torch.matmul, [helper.make_node("MatMul", ["in0", "in1"], ["out"])]
    if op in ("conv2d_nchw", "depthwise_conv2d_nchw"):
        groups = p["C"] if op == "depthwise_conv2d_nchw" else 1
        node = helper.make_node("Conv", ["in0", "in1"], ["out"], group=groups,
                                pads=[*p["padding"], *p["padding"]],
                                strides=list(p["stride"]), dilations=list(p["dilation"]))
        return (lambda x, w: torch.nn.functional.conv2d(
            x, w, stride=p["stride"], padding=p["padding"], dilation=p["dilation"],
            groups=groups)), [node]
    if op == "softmax":
        return (lambda x: torch.softmax(x, -1)), [
            helper.make_node("Softmax", ["in0"], ["out"], axis=-1)]
    if op == "layer_norm":
        return (lambda x, g, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b)), [
            helper.make_node("LayerNormalization", ["in0", "in1", "in2"], ["out"], axis=-1,
                             epsilon=1e-5)]
    if op == "elementwise" and p["ops"] == ["add", "relu"]:
        return (lambda x, y: torch.relu(x + y)), [
            helper.make_node("Add", ["in0", "in1"], ["sum"]),
            helper.make_node("Relu", ["sum"], ["out"])]
    raise ValueError(f"no library counterpart for {wl!r}")


def library_contenders(wl: Workload, inputs: list[np.ndarray],
                       expected: np.ndarray) -> dict[str, Callable[[], object]]:
    """numpy, PyTorch and onnxruntime calls of the workload, each checked once."""
    import torch

    threads = host_cpu_target().cores
    torch.set_num_threads(threads)
    torch_fn, nodes = _library_ops(wl)
    tensors = [torch.from_numpy(x) for x in inputs]

    def torch_call():
        with torch.no_grad():
            return torch_fn(*tensors)

    contenders = {"numpy": lambda: wl.numpy_baseline(inputs),
                  "PyTorch": torch_call,
                  "onnxruntime": _onnx_session(nodes, inputs, expected.shape, threads)}
    results = {"numpy": contenders["numpy"]()[0], "PyTorch": torch_call().numpy(),
               "onnxruntime": contenders["onnxruntime"]()[0]}
    for name, got in results.items():
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3,
                                   err_msg=f"{name} disagrees with the reference")
    return contenders


@dataclass
class Tuned:
    """One workload's tune: the best steps after each budget, and what the tune cost."""

    best_steps: dict[int, list] = field(default_factory=dict)
    #: the in-tuning figure (seconds) of each budget's best program
    best_cost: dict[int, float] = field(default_factory=dict)
    wall_s: float = 0.0
    trials: int = 0
    disturbed: int = 0
    #: why the tuner's end-of-job re-measurement did not confirm its best ("" if it did)
    unconfirmed: str = ""
    #: the program the best query answers with after the tune (what a user compiles with;
    #: at the largest budget it is the one re-timed), and its record's figure
    picked_steps: list | None = None
    picked_cost: float | None = None
    #: what the end-of-job side-by-side comparison changed ("" if nothing)
    reranked: str = ""


def tune_to(wl: Workload, marks: list[int], pool, seed: int) -> Tuned:
    """Tune ``wl`` for ``max(marks)`` trials from an empty database; the best program
    after each mark, read back from the records in the order they were measured."""
    tuned = Tuned()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{tmp}/anchor.db")
        start = time.perf_counter()
        result = tune(wl, "cpu", max(marks), db=db, pool=pool, seed=seed)
        tuned.wall_s = time.perf_counter() - start
        tuned.unconfirmed = result.tasks[0].unconfirmed
        tuned.reranked = result.tasks[0].reranked
        picked = db.best(wl.key, result.target).best
        if picked is not None:
            tuned.picked_steps, tuned.picked_cost = picked.steps, picked.median_cost
        best_cost, best_steps, measured = float("inf"), None, 0
        for record in db.iter_records(job_id=result.job_id):
            if is_reconfirmation(record):
                continue
            measured += 1
            if is_disturbed(record):
                tuned.disturbed += 1
            elif record.median_cost is not None and record.median_cost < best_cost:
                best_cost, best_steps = record.median_cost, record.steps
            for mark in marks:
                if measured == mark and best_steps is not None:
                    tuned.best_steps[mark], tuned.best_cost[mark] = best_steps, best_cost
        db.close()
    tuned.trials = measured
    if best_steps is not None:  # a tune that stopped early: its last best for what remains
        for mark in marks:
            tuned.best_steps.setdefault(mark, best_steps)
            tuned.best_cost.setdefault(mark, best_cost)
    return tuned


def save_tunes(path: Path, tunes: dict[str, Tuned]) -> None:
    """Every row's tune as JSON: its programs' steps and in-tuning figures per budget."""
    path.write_text(json.dumps({name: asdict(t) for name, t in tunes.items()}, indent=1))


def load_tunes(path: Path) -> dict[str, Tuned]:
    """The tunes ``save_tunes`` wrote (budgets come back as integers)."""
    tunes = {}
    for name, fields in json.loads(path.read_text()).items():
        for key in ("best_steps", "best_cost"):
            fields[key] = {int(mark): value for mark, value in fields[key].items()}
        tunes[name] = Tuned(**fields)
    return tunes


#: the most rounds ``interleaved_times`` runs to fill its time
MAX_ROUNDS = 200


def interleaved_times(contenders: dict[str, Callable[[], object]], rounds: int,
                      min_seconds: float = 0.0) -> dict[str, list[float]]:
    """Seconds per call of every contender in each of at least ``rounds`` interleaved
    rounds, and more (up to ``MAX_ROUNDS``) until ``min_seconds`` have passed: a kernel of
    microseconds is timed in a few milliseconds per round, and this host's speed shifts
    for seconds at a time (a softmax's ratio to onnxruntime read 0.99x over 5 rounds and
    1.14x over 40), so its rows need many rounds for a stable median."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    deadline = time.perf_counter() + min_seconds
    done = 0
    while done < rounds or (time.perf_counter() < deadline and done < MAX_ROUNDS):
        done += 1
        for name, call in contenders.items():
            times[name].append(median_call_time(call, budget_s=0.3, max_calls=300))
            time.sleep(0.2)  # let a threaded library's spinning threads go to sleep
    return times


def round_ratio(times: dict[str, list[float]], baseline: str, contender: str) -> float:
    """The median over rounds of ``baseline``'s time over ``contender``'s in the same round:
    a machine slower in one round than in another slows both."""
    return statistics.median(b / c for b, c in zip(times[baseline], times[contender],
                                                   strict=True))


def min_bytes(inputs: list[np.ndarray], expected: np.ndarray) -> int:
    """The bytes a kernel must move at the least: each input read once, the output written."""
    return sum(x.nbytes for x in inputs) + expected.nbytes


def run_workload(name: str, anchor: Anchor, marks: list[int], rounds: int, pool, seed: int,
                 peak: float, saved: Tuned | None = None,
                 min_timing_s: float = 0.0) -> tuple[str, Tuned]:
    """Tune (or take the ``saved`` tune's programs), re-time, and return the workload's
    table row (markdown) with the tune."""
    wl, tuned_wl = anchor.op, anchor.workload()
    tuned = saved if saved is not None else tune_to(tuned_wl, marks, pool, seed)
    inputs = wl.random_inputs(0)
    (expected,) = wl.reference(inputs)
    contenders = library_contenders(wl, inputs, expected)
    libraries = list(contenders)
    our_inputs, our_expected = anchor.our_arrays(inputs, expected)
    for mark in marks:
        if mark in tuned.best_steps:
            contenders[f"ours@{mark}"] = built_best(tuned_wl, tuned.best_steps[mark],
                                                    our_inputs, our_expected)
    # the largest budget's program is the one the best query answers with after the
    # tune's end-of-job comparison (its re-measurements count as records, and records it
    # outranked do not); where that is not the lowest record's program, both are timed
    top = max(marks)
    record_leader = tuned.best_steps.get(top)
    reranked = tuned.picked_steps is not None and tuned.picked_steps != record_leader
    if reranked:
        contenders["record leader"] = contenders[f"ours@{top}"]
        contenders[f"ours@{top}"] = built_best(tuned_wl, tuned.picked_steps, our_inputs,
                                               our_expected)
    rounds_timed = interleaved_times(contenders, rounds, min_timing_s)
    timed = {name: statistics.median(t) for name, t in rounds_timed.items()}
    best_library = min(libraries, key=timed.__getitem__)
    moved = min_bytes(inputs, expected)
    memory_bound = wl.flops / moved < MEMORY_BOUND_FLOPS_PER_BYTE
    cells = [name, *(f"{timed[lib] * 1e3:.3f}" for lib in libraries)]
    for mark in marks:
        key = f"ours@{mark}"
        if key not in timed:
            cells.append("no valid program")
            continue
        seconds = timed[key]
        speed = (f"{moved / seconds / 1e9:.1f} GB/s" if memory_bound else
                 f"{wl.flops / seconds / 1e9:.0f} GFLOP/s ({wl.flops / seconds / 1e9 / peak:.2f})")
        ratio = round_ratio(rounds_timed, best_library, key)
        in_tuning = tuned.picked_cost if reranked and mark == top else tuned.best_cost[mark]
        cells.append(f"{seconds * 1e3:.3f} ms, {speed}, **{ratio:.2f}x** "
                     f"(in tuning {in_tuning * 1e3:.3f})")
    cells.append(f"{best_library} ({len(rounds_timed[best_library])} rounds)")
    cells.append(f"{tuned.wall_s:.0f} s ({tuned.wall_s / max(tuned.trials, 1):.2f} s/trial)"
                 + (f", {tuned.disturbed} disturbed" if tuned.disturbed else "")
                 + (f"; best not confirmed: {tuned.unconfirmed}" if tuned.unconfirmed else "")
                 + (f"; ranked side by side: {tuned.reranked}" if tuned.reranked else "")
                 + ("; the best query answers with another program than the lowest "
                    f"record's, which (in tuning {tuned.best_cost[top] * 1e3:.3f}) re-times at "
                    f"{timed['record leader'] * 1e3:.3f} ms, "
                    f"**{round_ratio(rounds_timed, best_library, 'record leader'):.2f}x**"
                    if reranked else "")
                 + (" (saved)" if saved is not None else ""))
    return "| " + " | ".join(cells) + " |", tuned


def _budgets(text: str) -> list[int]:
    marks = sorted({int(t) for t in text.split(",")})
    if not marks or marks[0] < 1:
        raise argparse.ArgumentTypeError(f"budgets must be positive integers, got {text!r}")
    return marks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=_budgets, default=[64, 256, 1000],
                        help="comma-separated budgets; one tune runs to the largest")
    parser.add_argument("--rounds", type=int, default=5, help="the fewest timing rounds")
    parser.add_argument("--min-timing-s", type=float, default=20.0,
                        help=f"more rounds (up to {MAX_ROUNDS}) until each row's timing took "
                        "this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="",
                        help="comma-separated row names (default: every row)")
    parser.add_argument("--save", type=Path,
                        help="write every row's tune (its programs per budget) to this JSON")
    parser.add_argument("--retime", type=Path,
                        help="re-time the programs of a --save file instead of tuning")
    args = parser.parse_args()
    chosen = [n.strip() for n in args.only.split(",") if n.strip()] or list(ANCHORS)
    unknown = [n for n in chosen if n not in ANCHORS]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {list(ANCHORS)}")

    from workers import LocalPool

    target = host_cpu_target()
    peak = fma_peak(target.cores)
    print(f"{target.canonical} ({target.model_name}); FMA peak {peak:.0f} GFLOP/s on "
          f"{target.cores} threads; budgets {args.trials}; median of at least {args.rounds} "
          f"interleaved rounds (more until {args.min_timing_s:g} s), ms per call", flush=True)
    header = ["workload", "numpy", "PyTorch", "onnxruntime",
              *(f"ours, {m} trials: time, speed (of peak), vs best library" for m in args.trials),
              "best library", "tuning wall"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header), flush=True)
    saved = load_tunes(args.retime) if args.retime else {}
    missing = [n for n in chosen if n not in saved] if args.retime else []
    if missing:
        parser.error(f"{args.retime} holds no tune of {missing}")
    tunes: dict[str, Tuned] = {}
    with LocalPool() as pool:
        for name in chosen:
            row, tunes[name] = run_workload(name, ANCHORS[name], args.trials, args.rounds, pool,
                                            args.seed, peak, saved.get(name),
                                            args.min_timing_s)
            print(row, flush=True)
            if args.save:
                save_tunes(args.save, tunes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
