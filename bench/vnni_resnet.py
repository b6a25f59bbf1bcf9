"""ResNet-18's convolutions (the layers C1 to C11 of the TVM paper's VTA table) on the CPU in
int8 with the VNNI dot product against float32, each tuned from an empty database with the
same number of trials in this run, then re-timed in this process in interleaved rounds
beside PyTorch's float32 convolution (oneDNN).

    .venv/bin/python bench/vnni_resnet.py [--trials 48] [--rounds 5] [--layers C2,C6]

int8: ``conv2d_nchw4c_int8`` (data NCHW4c uint8, kernel OIHW16o4i int8, int32 out); the
search may tensorize it with ``x86_dot_u8i8_16x4`` (``vpdpbusd`` where the CPU has AVX-512
VNNI) or not, and the table says which program won. float32: the packed NCHW[x]c
convolution the model pipeline uses on CPUs (blocks as ``bench/packed_conv.py`` picks
them), the faster of our float32 layouts. C1 has 3 input channels: int8 pads them to 4
(a zero channel, as the layout needs), float32 keeps 3. GFLOP/s count the layer's own
multiply-adds (2 per MAC) for both. Every output is checked against numpy (int8 exactly).
Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.packed_conv import block, tune_fresh  # noqa: E402
from bench.timing import median_call_time  # noqa: E402
from bench.vta_resnet import LAYERS  # noqa: E402


def workloads(name: str, lanes: int):
    """(int8 blocked workload, float32 packed workload, the layer's FLOPs)."""
    from schedule import Workload, ops, te

    hw, c, k, r, stride, pad = LAYERS[name]
    int8 = Workload.op("conv2d_nchw4c_int8", N=1, C=-(-c // 4) * 4, H=hw, W=hw, K=k, R=r,
                       S=r, stride=stride, padding=pad)
    ic, oc = block(c, lanes), block(k, lanes)
    data = te.placeholder((1, c // ic, hw, hw, ic), "float32", name="data")
    kernel = te.placeholder((k // oc, c // ic, r, r, ic, oc), "float32", name="kernel")
    fp32 = Workload.from_tensors([ops.conv2d_nchwc(data, kernel, stride, pad)],
                                 name="conv2d_nchwc")
    oh = (hw + 2 * pad - r) // stride + 1
    return int8, fp32, 2 * k * oh * oh * c * r * r


def tensorized(steps) -> bool:
    return any(step[0] == "tensorize" for step in steps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", default=",".join(LAYERS))
    args = parser.parse_args()

    import torch

    from schedule import Target
    torch.set_num_threads(2)
    target = Target.parse("cpu")
    lanes = target.vector_bits // 32
    vnni = "avx512_vnni" in Path("/proc/cpuinfo").read_text()
    print(f"{target} ({target.model_name}; AVX-512 VNNI: {'yes' if vnni else 'no'}); "
          f"{args.trials} trials per workload; median of {args.rounds} interleaved rounds")
    print(f"{'layer':6} {'int8':>9} {'float32':>9} {'PyTorch':>9}  {'int8 GFLOP/s':>12} "
          f"{'int8/fp32':>9} {'int8/torch':>10}  {'int8 program':>12}  tune s/trial (i8, f32)")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.layers.split(","):
            int8, fp32, flops = workloads(name, lanes)
            modules, per_trial, kinds = zip(*(
                tune_fresh(wl, args.trials, f"sqlite:///{Path(tmp) / f'{name}-{i}.db'}")
                for i, wl in enumerate((int8, fp32))), strict=True)
            calls = []
            for wl, module, exact in ((int8, modules[0], True), (fp32, modules[1], False)):
                inputs = wl.random_inputs(0)
                (want,) = wl.reference(inputs)
                out = np.zeros_like(want)
                module(*inputs, out)
                if exact:
                    np.testing.assert_array_equal(out, want)
                else:
                    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
                calls.append(lambda m=module, a=inputs, o=out: m(*a, o))
            hw, c, k, r, stride, pad = LAYERS[name]
            x, w = torch.randn(1, c, hw, hw), torch.randn(k, c, r, r)
            with torch.no_grad():
                calls.append(lambda x=x, w=w, st=stride, p=pad: torch.nn.functional.conv2d(
                    x, w, stride=st, padding=p))
                rounds = [[median_call_time(call, 1.0, 200) for call in calls]
                          for _ in range(args.rounds)]
            t8, t32, tt = (statistics.median(r[i] for r in rounds) for i in range(3))
            program = "VNNI dot" if tensorized(kinds[0]) else "plain"
            print(f"{name:6} {t8 * 1e3:7.3f}ms {t32 * 1e3:7.3f}ms {tt * 1e3:7.3f}ms  "
                  f"{flops / t8 / 1e9:12.0f} {t32 / t8:8.2f}x {tt / t8:9.2f}x  {program:>12}  "
                  f"{per_trial[0]:.2f}, {per_trial[1]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
