"""int8 against float32 on the test suite's ResNet-18 and MobileNetV2 (224 x 224, batch 1,
2 threads): accuracy and speed in one run.

Each model (random weights and batch-norm statistics, built in PyTorch and exported to
ONNX) is quantized by ``ir.transform.quantize`` — annotate, calibrate on ``--calibration``
random inputs (``--mode``), realize — and both versions are built for the graph executor.
Accuracy: on ``--inputs`` other random inputs, how often the int8 model's top-1 class is
float32's, and the relative error of its logits (``|int8 - float| / |float|``, mean and
largest). Speed: the median latency of each, with the records in ``--db`` (``--tune N``
first tunes each version's tasks with N trials into it; without records: the default
schedules).

    .venv/bin/python bench/quantize_models.py [--models resnet18,mobilenet_v2]
        [--inputs 500] [--calibration 32] [--tune 0] [--db sqlite:///bench-int8.db]

Run it with nothing else on the machine: timings (and tuning) are spoiled by other work.
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

from bench.models_e2e import median_latency  # noqa: E402

MODELS = ("resnet18", "mobilenet_v2")
SHAPE = (1, 3, 224, 224)


def bench_model(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import onnx

    import ir
    import tuner
    from ir.transform.quantize import QConfig, quantize
    from tests.ir.frontend import models

    rng = np.random.default_rng(0)
    module = ir.from_onnx(onnx.load(str(getattr(models, name)(workdir / f"{name}.onnx"))))
    calibration = [[rng.standard_normal(SHAPE).astype("float32")]
                   for _ in range(args.calibration)]
    start = time.perf_counter()
    quantized = quantize(module, calibration, QConfig(calibrate_mode=args.mode))
    row: dict[str, Any] = {"model": name, "quantize_s": time.perf_counter() - start}
    versions = {"float32": module, "int8": quantized}
    built = {}
    for kind, mod in versions.items():
        if args.tune:
            start = time.perf_counter()
            result = tuner.tune_model(mod, "cpu", args.tune, db=args.db)
            row[f"{kind}_tuning_s"] = time.perf_counter() - start
            row[f"{kind}_trials"] = result.trials
        built[kind] = tuner.compile(mod, "cpu", args.db)
        row[f"{kind}_tuned_share"] = built[kind].tuned_share()
    agree, errors = 0, []
    for _ in range(args.inputs):
        x = rng.standard_normal(SHAPE).astype("float32")
        want, got = built["float32"](x), built["int8"](x)
        agree += int(np.argmax(want) == np.argmax(got))
        errors.append(float(np.linalg.norm(got - want) / np.linalg.norm(want)))
    row.update(inputs=args.inputs, top1_agreement=agree / args.inputs,
               logits_error_mean=float(np.mean(errors)), logits_error_max=float(np.max(errors)))
    x = rng.standard_normal(SHAPE).astype("float32")
    for kind in ("float32", "int8", "float32", "int8"):  # interleaved, the second kept
        row[f"{kind}_s"] = median_latency(lambda m=built[kind]: m(x), args.repeat)
    return row


def report(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'model':13} {'top-1 agreement':>16} {'logits error':>22} {'float32':>10} "
             f"{'int8':>10} {'int8 speed-up':>14}"]
    for r in rows:
        lines.append(
            f"{r['model']:13} {r['top1_agreement']:>15.1%} "
            f"{r['logits_error_mean']:>10.1%} (max {r['logits_error_max']:.1%}) "
            f"{r['float32_s'] * 1e3:>7.2f} ms {r['int8_s'] * 1e3:>7.2f} ms "
            f"{r['float32_s'] / r['int8_s']:>13.2f}x")
        tuned = ", ".join(f"{k} {r[f'{k}_tuned_share']:.0%} of FLOPs tuned"
                          + (f" ({r[f'{k}_trials']} trials, {r[f'{k}_tuning_s'] / 60:.1f} min)"
                             if f"{k}_trials" in r else "") for k in ("float32", "int8"))
        lines.append(f"{'':13} {r['inputs']} inputs; quantized in {r['quantize_s']:.1f} s; "
                     f"{tuned}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--inputs", type=int, default=500)
    parser.add_argument("--calibration", type=int, default=32)
    parser.add_argument("--mode", default="max", help="calibration: max, percentile, "
                                                       "kl_divergence")
    parser.add_argument("--tune", type=int, default=0, metavar="TRIALS")
    parser.add_argument("--db", default="sqlite:///bench-int8.db")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            if name not in MODELS:
                parser.error(f"unknown model {name!r} (one of {', '.join(MODELS)})")
            rows.append(bench_model(name, args, Path(tmp)))
            print(report(rows[-1:]), flush=True)
    print()
    print(report(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
