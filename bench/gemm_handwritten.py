"""GEMM with the hand-written schedule against numpy (and onnxruntime / PyTorch if installed),
all measured in the same run, interleaved so that machine noise hits every contender alike.

    .venv/bin/python bench/gemm_handwritten.py [--size 1024] [--rounds 7] [--variants]

Prints GFLOP/s per contender and the ratio of the hand-written schedule to numpy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from schedule import build
from schedule.examples import matmul_schedule
from schedule.target import host_cpu_target

VARIANTS = [  # (rows, cols, k_block): register-tile shapes worth comparing
    (8, 32, None), (12, 32, None), (6, 64, None), (4, 64, None), (8, 48, None), (6, 32, 256),
]


def _timer(fn, number: int):
    def once() -> float:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number

    return once


def _optional_contenders(a: np.ndarray, b: np.ndarray) -> dict:
    out = {}
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            [helper.make_node("MatMul", ["A", "B"], ["C"])], "gemm",
            [helper.make_tensor_value_info("A", TensorProto.FLOAT, list(a.shape)),
             helper.make_tensor_value_info("B", TensorProto.FLOAT, list(b.shape))],
            [helper.make_tensor_value_info("C", TensorProto.FLOAT, [a.shape[0], b.shape[1]])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  ir_version=8)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        out["onnxruntime"] = lambda: sess.run(None, {"A": a, "B": b})
    except ImportError:
        pass
    try:
        import torch

        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        out["pytorch"] = lambda: torch.matmul(ta, tb)
    except ImportError:
        pass
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--variants", action="store_true", help="also time other tile shapes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    n = args.size
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    expected = a @ b

    contenders = {"numpy": lambda: np.matmul(a, b)}
    configs = [(None, None, None)] + (VARIANTS if args.variants else [])
    build_seconds = {}
    for rows, cols, k_block in configs:
        kwargs = {k: v for k, v in (("rows", rows), ("cols", cols), ("k_block", k_block))
                  if v is not None}
        s, tensors = matmul_schedule(n, n, n, **kwargs)
        mod = build(s, tensors)
        c = np.zeros((n, n), dtype=np.float32)
        mod(a, b, c)
        err = float(np.abs(c - expected).max())
        if not np.allclose(c, expected, rtol=1e-3, atol=1e-2):
            raise SystemExit(f"wrong answer for {kwargs or 'default'}: max error {err}")
        label = "handwritten" if not kwargs else f"tile {rows}x{cols}" + (
            f" kb{k_block}" if k_block else "")
        contenders[label] = lambda mod=mod, c=c: mod(a, b, c)
        build_seconds[label] = mod.build_seconds
    contenders.update(_optional_contenders(a, b))

    number = max(1, int(0.2 / (2 * n**3 / 100e9)))  # about 0.2 s per timing at 100 GFLOP/s
    timers = {k: _timer(fn, number) for k, fn in contenders.items()}
    for fn in contenders.values():
        fn()  # warm up
    samples: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(args.rounds):
        for name, timer in timers.items():
            # Let the previous contender's worker threads (OpenMP, OpenBLAS) stop spinning,
            # so that no contender pays for another's idle threads.
            time.sleep(0.25)
            contenders[name]()
            samples[name].append(timer())
    flops = 2.0 * n**3
    gflops = {k: flops / statistics.median(v) / 1e9 for k, v in samples.items()}
    result = {
        "size": n, "target": str(host_cpu_target()), "rounds": args.rounds,
        "gflops": {k: round(v, 1) for k, v in gflops.items()},
        "ratio_vs_numpy": {k: round(v / gflops["numpy"], 3) for k, v in gflops.items()},
        "build_seconds": {k: round(v, 3) for k, v in build_seconds.items()},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"GEMM {n}x{n}x{n} float32 on {result['target']}, median of {args.rounds} rounds")
    for name, value in gflops.items():
        print(f"  {name:16s} {value:8.1f} GFLOP/s  {value / gflops['numpy']:6.3f}x numpy")
    print(f"handwritten / numpy = {result['ratio_vs_numpy']['handwritten']:.3f}")


if __name__ == "__main__":
    main()
