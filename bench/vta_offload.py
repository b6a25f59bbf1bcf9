"""A quantized ResNet-18 with its layers offloaded to the ``vta`` accelerator (simulated):
how much of the model the accelerator takes, its simulated time per inference with the
default and the tuned layer schedules, and the accuracy of the offloaded model against
float32, in one run.

The test suite's ResNet-18 (224 x 224, batch 1, random weights and batch-norm statistics,
exported to ONNX) is quantized with ``VTA_QCONFIG`` (int8 activations, power-of-two
scales; the first convolution stays in float, as VTA's own flow keeps it) on
``--calibration`` random inputs, then partitioned for ``vta``: every conv2d (with its bias,
ReLU and requantization) the accelerator computes runs there, the rest (the first conv,
pooling, the residual adds, the classifier) on the host cpu. ``--tune N`` tunes each
offloaded layer's workload N trials on the vta target (simulated cycles) into ``--db``
first. Accuracy: on ``--inputs`` random inputs, the offloaded model's top-1 class against
float32's and the relative error of its logits; its integers equal the quantized model's
on the host exactly (checked on the first input). Times are the simulator's cycles at the
board preset's clock (``pynq``: 100 MHz), labelled simulated: not a measurement of a board.

    .venv/bin/python bench/vta_offload.py [--inputs 20] [--calibration 16] [--tune 0]
        [--db sqlite:///bench-vta.db]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPE = (1, 3, 224, 224)


def model_macs(module: Any) -> int:
    """Multiply-accumulates of the model's convolutions and dense layers."""
    import ir

    total = 0
    for e in ir.dataflow_post_order(ir.infer_type(module)["main"].body):
        if isinstance(e, ir.Call) and isinstance(e.op, ir.Op):
            if e.op.name == "nn.conv2d":
                n, k, oh, ow = e.checked_type.shape
                _, c, r, s = e.args[1].checked_type.shape
                total += n * k * oh * ow * c * r * s
            elif e.op.name == "nn.dense":
                (m, kk), (nn, _) = e.args[0].checked_type.shape, e.args[1].checked_type.shape
                total += m * nn * kk
    return total


def regions(module: Any) -> list[Any]:
    import ir

    return [ir.backend.external.external_function(f) for _, f in module.functions.items()
            if isinstance(f, ir.Function) and f.attrs.get("Compiler") == "vta"]


def simulated_inference(compiled: Any, offloaded: list[Any], x: np.ndarray
                        ) -> tuple[np.ndarray, int]:
    """The model's output on ``x`` and the accelerator cycles that inference took."""
    before = sum(r.stats["cycles"] for r in offloaded)
    out = compiled(x)
    return out, sum(r.stats["cycles"] for r in offloaded) - before


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import onnx

    import ir
    import tuner
    from ir.transform.quantize import VTA_QCONFIG, quantize
    from schedule import vta
    from tests.ir.frontend import models

    rng = np.random.default_rng(0)
    module = ir.from_onnx(onnx.load(str(models.resnet18(workdir / "resnet18.onnx"))))
    calibration = [[rng.standard_normal(SHAPE).astype("float32")]
                   for _ in range(args.calibration)]
    quantized = quantize(module, calibration, VTA_QCONFIG)
    codegen = tuner.use_vta()
    layers = codegen.layer_workloads(quantized)
    macs = {wl.key: vta.VtaCompute(wl, codegen.config).macs for wl in layers}
    row: dict[str, Any] = {"model": "resnet18", "board": codegen.config.name,
                           "clock_mhz": codegen.config.clock_mhz,
                           "layer_workloads": len(layers), "model_macs": model_macs(module)}
    float_model = ir.build(module, "cpu")
    x = rng.standard_normal(SHAPE).astype("float32")
    host_int8 = ir.build(quantized, "cpu")(x)
    schedules = {"default": None}
    if args.tune:
        start = time.perf_counter()
        result = tuner.tune(layers, "vta", trials=args.tune * len(layers), db=args.db)
        row["tuning_s"] = time.perf_counter() - start
        row["tuning_trials"] = result.trials
        schedules["tuned"] = args.db
    for kind, db in schedules.items():
        tuner.use_vta(db=db)
        parted = ir.transform.partition_for(quantized, ["vta"])
        compiled, offloaded = ir.build(parted, "cpu"), regions(parted)
        out, cycles = simulated_inference(compiled, offloaded, x)
        if kind == "default":
            assert np.array_equal(out, host_int8), "the offloaded model differs from the host's"
            row["offloaded_layers"] = sum(len(r.layers) for r in offloaded)
            row["offloaded_macs"] = sum(macs[c.layer.workload.key]
                                        for r in offloaded for c in r.layers)
        row[f"{kind}_cycles"] = cycles
        row[f"{kind}_simulated_ms"] = codegen.config.seconds(cycles) * 1e3
        row[f"{kind}_gemm_utilization"] = row["offloaded_macs"] / (
            cycles * codegen.config.macs_per_cycle)
    agree, errors = 0, []
    for _ in range(args.inputs):
        v = rng.standard_normal(SHAPE).astype("float32")
        want, got = float_model(v), compiled(v)
        agree += int(np.argmax(want) == np.argmax(got))
        errors.append(float(np.linalg.norm(got - want) / np.linalg.norm(want)))
    row.update(inputs=args.inputs, top1_agreement=agree / args.inputs,
               logits_error_mean=float(np.mean(errors)))
    tuner.use_vta()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=20)
    parser.add_argument("--calibration", type=int, default=16)
    parser.add_argument("--tune", type=int, default=0, help="trials per offloaded layer")
    parser.add_argument("--db", default="sqlite:///bench-vta.db")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        row = run(args, Path(tmp))
    print(json.dumps(row, indent=1))
    share = row["offloaded_macs"] / row["model_macs"]
    print(f"\nresnet18 on vta ({row['board']}, {row['clock_mhz']:.0f} MHz, simulated): "
          f"{row['offloaded_layers']} layers, {share:.1%} of the MACs offloaded")
    for kind in ("default", "tuned"):
        if f"{kind}_cycles" in row:
            print(f"  {kind:8} schedules: {row[f'{kind}_simulated_ms']:8.1f} ms simulated per "
                  f"inference, GEMM core {row[f'{kind}_gemm_utilization']:.1%} busy")
    print(f"  top-1 agreement with float32 {row['top1_agreement']:.1%} on {row['inputs']} "
          f"inputs, logits error {row['logits_error_mean']:.1%}")


if __name__ == "__main__":
    main()
