"""How a figure from short repeats (``workers.cpu``: single calls that ran alone, the
threads spread one per core) compares with the standard timing of the same program (3
repeats of at least 50 ms, the median) on the machine as it is, in alternating rounds.
The program is a steps file (JSON list of steps) for the ResNet-18 conv 64→64 56² 3x3,
e.g. ``bench/results/r18_conv_64trial_steps_zen4_s38.json``.

    .venv/bin/python bench/short_repeat_bias.py STEPS.json [--rounds 8]

Per round: the standard figure, the short repeats' figure (and how many repeats it took),
their ratio, and the median of 20 back-to-back single calls against the standard figure.
Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("steps", type=Path)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()

    import numpy as np

    from schedule import Workload, build, make_schedule, placed
    from workers import cpu
    from workers.interference import Window

    workload = Workload.op("conv2d_nchw", N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1)
    s, tensors = make_schedule(workload, json.loads(args.steps.read_text()))
    mod = build(s, tensors)
    rng = np.random.default_rng(0)
    arrays = [placed(rng.standard_normal([int(d) for d in t.shape]).astype("float32"))
              for t in tensors]
    mod(*arrays)
    job = {"short_repeats": cpu.SHORT_REPEATS_MAX, "short_seconds": cpu.SHORT_REPEAT_BUDGET_S,
           "flush_bytes": 0}
    for n in range(args.rounds):
        standard = statistics.median(mod.time(*arrays, number=1, repeat=3, min_repeat_ms=50))
        value = cpu.time_short_repeats(mod, arrays, job, Window.start())
        cluster = cpu.unpreempted(value["costs"], value["waits"])
        short = statistics.median(cluster) if cluster else float("nan")
        single = statistics.median(mod.time(*arrays, number=1, repeat=20, min_repeat_ms=0))
        print(f"round {n}: standard {standard * 1e3:.3f} ms, short repeats {short * 1e3:.3f} ms "
              f"({len(value['costs'])} repeats, {len(cluster)} alone near the fastest), "
              f"ratio {short / standard:.3f}; single calls {single * 1e3:.3f} ms, ratio "
              f"{single / standard:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
