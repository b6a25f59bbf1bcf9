"""ResNet-18's 3x3 stride-1 convolutions (with their bias and ReLU) compiled direct and by
Winograd's F(4x4, 3x3) (``ConvertWinograd``), each tuned as a model from an empty database
with the same number of trials in all (the direct one is one task, Winograd three: input
transform, batched product, output transform with the bias and ReLU), then re-timed in
this process in interleaved rounds beside PyTorch (oneDNN) doing the same conv + bias +
ReLU.

    .venv/bin/python bench/winograd.py [--trials 256] [--rounds 5] [--layers 56,28,14,7]

Winograd is forced on every layer here (``ConvertWinograd``'s default rule leaves the
small images direct: these figures are what set it). Each layer takes and gives channels
packed in blocks of the float32 vector lanes (the layout the model pipeline runs
convolutions in), so neither variant pays a layout change;
PyTorch runs NCHW. "Effective" GFLOP/s count the direct convolution's multiply-adds (2
per MAC) for every variant, as Winograd does fewer. Outputs are checked against numpy's
direct convolution. Run it with nothing else on the machine.
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

LAYERS = {56: 64, 28: 128, 14: 256, 7: 512}  # image size -> channels (in = out)


def layer_module(C: int, H: int, lanes: int, seed: int = 0):
    """``relu(conv3x3(x, W) + b)`` on packed channels, and (x, W, b) unpacked for numpy."""
    import ir
    from ir.op import nn
    from schedule.ops import reference as ref

    rng = np.random.default_rng(seed)
    w = rng.uniform(-0.1, 0.1, (C, C, 3, 3)).astype("float32")
    b = rng.uniform(-0.1, 0.1, (C,)).astype("float32")
    x = ir.var("x", shape=(1, C // lanes, H, H, lanes))
    conv = nn.conv2d_nchwc(x, ir.const(ref.layout_transform(w, "OIHW",
                                                            f"OIHW{lanes}i{lanes}o")),
                           padding=(1, 1))
    bias = ir.const(ref.layout_transform(b.reshape(1, C, 1, 1), "NCHW", f"NCHW{lanes}c"))
    module = ir.infer_type(ir.Module({"main": ir.Function([x], nn.relu(ir.op.add(conv,
                                                                                bias)))}))
    return module, (w, b)


def tune_and_compile(module, trials: int, db: str, winograd: bool):
    """The layer tuned with ``trials`` in all and compiled; (model, tuning seconds, tasks)."""
    from ir.transform import PassContext
    from ir.transform.winograd import TILE_CONFIG
    from tuner import compile as compile_model
    from tuner import tune_model

    disabled = () if winograd else ("ConvertWinograd",)
    with PassContext(disabled_pass=disabled, config={TILE_CONFIG: 4}):
        start = time.perf_counter()
        result = tune_model(module, "cpu", trials, db=db)
        seconds = time.perf_counter() - start
        compiled = compile_model(module, "cpu", db, strict=True)
    return compiled, seconds, len(result.tasks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", default="56,28,14,7")
    args = parser.parse_args()

    import torch

    from schedule import Target
    from schedule.ops import reference as ref
    torch.set_num_threads(2)
    lanes = Target.parse("cpu").vector_bits // 32
    print(f"{args.trials} trials per variant in all, float32 lanes {lanes}; median of "
          f"{args.rounds} interleaved rounds; GFLOP/s effective (direct conv's FLOPs)")
    print(f"{'layer':18} {'direct':>9} {'winograd':>9} {'PyTorch':>9}  {'GFLOP/s d, w':>13} "
          f"{'w/direct':>9} {'w/PyTorch':>10}  tuning s (direct, winograd)")
    with tempfile.TemporaryDirectory() as tmp:
        for H in (int(h) for h in args.layers.split(",")):
            C = LAYERS[H]
            module, (w, b) = layer_module(C, H, lanes)
            x = np.random.default_rng(1).uniform(-1, 1, (1, C, H, H)).astype("float32")
            want = np.maximum(ref.conv2d_nchw(x, w, 1, 1) + b.reshape(1, C, 1, 1), 0)
            packed_x = ref.layout_transform(x, "NCHW", f"NCHW{lanes}c")
            calls, seconds = [], []
            for winograd in (False, True):
                db = f"sqlite:///{Path(tmp) / f'{H}-{int(winograd)}.db'}"
                compiled, tuned_s, _ = tune_and_compile(module, args.trials, db, winograd)
                got = ref.layout_transform(np.asarray(compiled(packed_x)), f"NCHW{lanes}c",
                                           "NCHW")
                np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
                calls.append(lambda m=compiled, x=packed_x: m(x))
                seconds.append(tuned_s)
            tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
            with torch.no_grad():
                calls.append(lambda x=tx, w=tw, b=tb: torch.relu(
                    torch.nn.functional.conv2d(x, w, b, padding=1)))
                rounds = [[median_call_time(c, 1.0, 200) for c in calls]
                          for _ in range(args.rounds)]
            direct, wino, torch_s = (statistics.median(r[i] for r in rounds) for i in range(3))
            flops = 2 * C * C * 9 * H * H
            print(f"{f'{C}->{C} {H}x{H}':18} {direct * 1e3:7.3f}ms {wino * 1e3:7.3f}ms "
                  f"{torch_s * 1e3:7.3f}ms  {flops / direct / 1e9:5.0f}, "
                  f"{flops / wino / 1e9:5.0f}  {direct / wino:8.2f}x {torch_s / wino:9.2f}x"
                  f"  {seconds[0]:.0f}, {seconds[1]:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
