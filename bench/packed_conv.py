"""Convolutions in NCHW against the same convolutions on packed channels (NCHW[x]c, the
layout the model pipeline now uses on CPUs), each tuned from an empty database with the
same number of trials, then re-timed in this process beside PyTorch (oneDNN) on the same
shapes, in interleaved rounds.

    .venv/bin/python bench/packed_conv.py [--trials 64] [--rounds 5]

The shapes are ResNet-18's: the stem (7x7 stride 2 on 3 channels), a stride-2 3x3
downsampling conv, the 3x3 64->64 conv at 56x56, and a 3x3 256->256 conv at 14x14. The
packed kernel layout is OIHW[ic]i[oc]o with the blocks ``pack_layout`` picks (the largest
power of two up to the float32 vector lanes that divides the channels, or all of them when
there are at most that many). GFLOP/s count the convolution's multiply-adds (2 per MAC).
Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import median_call_time  # noqa: E402

SHAPES = {  # name -> C, H (= W), K, R (= S), stride, padding
    "stem 7x7 s2 3->64 224": (3, 224, 64, 7, 2, 3),
    "3x3 s2 64->128 56": (64, 56, 128, 3, 2, 1),
    "3x3 64->64 56": (64, 56, 64, 3, 1, 1),
    "3x3 256->256 14": (256, 14, 256, 3, 1, 1),
}


def block(channels: int, lanes: int) -> int:
    b = lanes
    while b >= 4:
        if channels % b == 0:
            return b
        b //= 2
    return channels


def workloads(C: int, H: int, K: int, R: int, stride: int, pad: int, lanes: int):
    from schedule import Workload, ops, te

    nchw = Workload.op("conv2d_nchw", N=1, C=C, H=H, W=H, K=K, R=R, S=R, stride=stride,
                       padding=pad)
    ic, oc = block(C, lanes), block(K, lanes)
    data = te.placeholder((1, C // ic, H, H, ic), "float32", name="data")
    kernel = te.placeholder((K // oc, C // ic, R, R, ic, oc), "float32", name="kernel")
    packed = Workload.from_tensors([ops.conv2d_nchwc(data, kernel, stride, pad)],
                                   name="conv2d_nchwc")
    return nchw, packed, (ic, oc)


def tune_fresh(workload, trials: int, db: str):
    """Tune ``workload`` on this CPU from the empty database ``db``: (the best program's
    module, tuning seconds per trial, its steps)."""
    from tuner import apply_best, build_best, tune

    start = time.perf_counter()
    tune([workload], "cpu", trials, db=db)
    per_trial = (time.perf_counter() - start) / trials
    return build_best(workload, "cpu", db), per_trial, apply_best(workload, "cpu", db)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import torch

    from schedule import Target
    from schedule.ops import reference as ref
    torch.set_num_threads(2)
    lanes = Target.parse("cpu").vector_bits // 32
    print(f"{args.trials} trials per workload, float32 lanes {lanes}; median of "
          f"{args.rounds} interleaved rounds")
    print(f"{'shape':24} {'blocks':>7} {'NCHW':>9} {'NCHW[x]c':>9} {'PyTorch':>9}   "
          f"packed GFLOP/s  packed/NCHW  packed/PyTorch  tune s/trial (NCHW, packed)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (C, H, K, R, stride, pad) in SHAPES.items():
            nchw, packed, blocks = workloads(C, H, K, R, stride, pad, lanes)
            modules, per_trial, _ = zip(*(
                tune_fresh(wl, args.trials,
                           f"sqlite:///{Path(tmp) / f'{name.split()[0]}-{i}-{H}-{K}.db'}")
                for i, wl in enumerate((nchw, packed))), strict=True)
            # both checked against numpy's NCHW convolution (packed by numpy for the other)
            ic, oc = blocks
            inputs = nchw.random_inputs(seed=0)
            (want,) = nchw.reference(inputs)
            packed_inputs = [ref.layout_transform(inputs[0], "NCHW", f"NCHW{ic}c"),
                             ref.layout_transform(inputs[1], "OIHW", f"OIHW{ic}i{oc}o")]
            calls = []
            for wl, module, a, expected in ((nchw, modules[0], inputs, want),
                                            (packed, modules[1], packed_inputs,
                                             ref.layout_transform(want, "NCHW",
                                                                  f"NCHW{oc}c"))):
                out = np.zeros(wl.tensors()[-1].shape, "float32")
                module(*a, out)
                np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
                calls.append(lambda m=module, a=a, o=out: m(*a, o))
            x = torch.randn(1, C, H, H)
            w = torch.randn(K, C, R, R)
            with torch.no_grad():
                calls.append(lambda x=x, w=w, st=stride, p=pad: torch.nn.functional.conv2d(
                    x, w, stride=st, padding=p))
                rounds = [[median_call_time(c, 1.0, 200) for c in calls]
                          for _ in range(args.rounds)]
            t_nchw, t_packed, t_torch = (statistics.median(r[i] for r in rounds)
                                         for i in range(3))
            gflops = nchw.flops / t_packed / 1e9
            print(f"{name:24} {blocks[0]:>3},{blocks[1]:<3} {t_nchw * 1e3:7.3f}ms "
                  f"{t_packed * 1e3:7.3f}ms {t_torch * 1e3:7.3f}ms   {gflops:10.0f}     "
                  f"{t_nchw / t_packed:8.2f}x    {t_torch / t_packed:8.2f}x        "
                  f"{per_trial[0]:.2f}, {per_trial[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
