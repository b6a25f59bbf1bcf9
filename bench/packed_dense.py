"""A transformer's dense layer on its weight as stored, ``(K, N)``, against the same layer on
the weight packed in 16-column panels, ``(N/16, K, 16)`` (``PackDenseWeights``, done once
at compile time), each tuned from an empty database with the same budget and the same
cold-cache timing model jobs use (``tuner.spec.MODEL_MEASURE``), then re-timed in this
process beside PyTorch and onnxruntime: cold (a 64 MiB buffer written before each call,
as inside a model where the other layers evicted the weights) and warm (calls repeated).

    .venv/bin/python bench/packed_dense.py [--trials 200] [--rows 128 --k 768 --n 3072]

Every program is checked against numpy first. Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLUSH = np.zeros(16 << 20, np.float32)  # 64 MiB


def workloads(m: int, k: int, n: int, block: int = 16) -> dict:
    from schedule import Workload, ops, te

    x = te.placeholder((m, k), name="X")
    plain = Workload.from_tensors([ops.matmul(x, te.placeholder((k, n), name="B"))])
    panels = te.placeholder((n // block, k, block), name="W")
    return {"as stored (K, N)": plain,
            "packed (N/16, K, 16)": Workload.from_tensors([ops.dense_packed(x, panels)])}


def tuned_call(wl, trials: int) -> tuple[Callable[[], object], float]:
    from bench.tune_curves import built_best
    from tuner import apply_best, tune
    from tuner.spec import MODEL_MEASURE

    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/packed.db"
        start = time.perf_counter()
        tune([wl], "cpu", trials, db=db, measure=MODEL_MEASURE, seed=0)
        seconds = time.perf_counter() - start
        steps = apply_best(wl, "cpu", db)
    return built_best(wl, steps, wl.random_inputs(seed=0)), seconds


def timed(fn: Callable[[], object], cold: bool, calls: int = 20) -> float:
    fn()
    times = []
    for _ in range(calls):
        if cold:
            FLUSH[::16] += 1.0
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def libraries(m: int, k: int, n: int) -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (m, k)).astype("float32")
    w = rng.uniform(-1, 1, (k, n)).astype("float32")
    out: dict[str, Callable[[], object]] = {}
    try:
        import torch

        torch.set_num_threads(2)
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        out["PyTorch"] = lambda: torch.matmul(tx, tw)
    except ImportError:
        pass
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper

        graph = helper.make_graph(
            [helper.make_node("MatMul", ["X", "W"], ["Y"])], "dense",
            [helper.make_tensor_value_info("X", TensorProto.FLOAT, [m, k])],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])],
            [numpy_helper.from_array(w, "W")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  ir_version=8)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        sess = ort.InferenceSession(model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
        out["onnxruntime (weight constant)"] = lambda: sess.run(None, {"X": x})
    except ImportError:
        pass
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--k", type=int, default=768)
    parser.add_argument("--n", type=int, default=3072)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    m, k, n = args.rows, args.k, args.n
    calls, tuning = {}, {}
    for name, wl in workloads(m, k, n).items():
        calls[f"ours, {name}"], tuning[name] = tuned_call(wl, args.trials)
    calls.update(libraries(m, k, n))
    rounds = [{key: (timed(fn, True), timed(fn, False)) for key, fn in calls.items()}
              for _ in range(args.rounds)]
    flops = 2 * m * k * n
    print(f"dense {m}x{k} @ {k}x{n}, {args.trials} trials each "
          f"({', '.join(f'{k}: {v:.0f} s' for k, v in tuning.items())}), "
          f"median of {args.rounds} rounds")
    print(f"{'program':34} {'cold':>10} {'GFLOP/s':>8} {'warm':>10} {'GFLOP/s':>8}")
    for key in calls:
        cold = statistics.median(r[key][0] for r in rounds)
        warm = statistics.median(r[key][1] for r in rounds)
        print(f"{key:34} {cold * 1e6:8.0f}us {flops / cold / 1e9:8.0f} "
              f"{warm * 1e6:8.0f}us {flops / warm / 1e9:8.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
