"""How a figure from short repeats (``workers.cpu.short_figure``: single calls that ran
alone, the threads spread one per core) compares with the standard timing of the same
program (3 repeats of at least 50 ms, the median) on a quiet machine, in alternating rounds.
The program is a steps file (JSON list of steps) for the ResNet-18 conv 64→64 56² 3x3,
e.g. ``bench/results/r18_conv_64trial_steps_zen4_s38.json``.

    .venv/bin/python bench/short_repeat_bias.py STEPS.json [--rounds 8] [--busy-core 0]

Per round: the standard figure, the short repeats' figure (and how many repeats it took),
their ratio, the median single call that ran alone against the standard figure, and the
median of 20 back-to-back single calls against the standard figure.
With ``--busy-core C`` the short repeats are timed beside a busy loop pinned to core C,
without an early stop (``--repeats`` of them), and compared with the mean of a quiet
standard timing before and after; the round also gives the median of only those that ran
alone within 10% of the fastest (the figure before session 42). Run it with nothing else
on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import load_on_core  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("steps", type=Path)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--busy-core", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=200)
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

    def standard() -> float:
        return statistics.median(mod.time(*arrays, number=1, repeat=3, min_repeat_ms=50))

    def short_repeats(count: int, early_stop: bool) -> dict:
        job = {"short_repeats": count, "short_seconds": 60.0 if not early_stop
               else cpu.SHORT_REPEAT_BUDGET_S, "flush_bytes": 0}
        needed = cpu.MIN_UNPREEMPTED
        try:
            if not early_stop:
                cpu.MIN_UNPREEMPTED = count + 1
            return cpu.time_short_repeats(mod, arrays, job, Window.start())
        finally:
            cpu.MIN_UNPREEMPTED = needed

    for n in range(args.rounds):
        if args.busy_core is None:
            quiet = standard()
            value = short_repeats(cpu.SHORT_REPEATS_MAX, early_stop=True)
        else:
            before = standard()
            busy = load_on_core(args.busy_core)
            try:
                time.sleep(0.5)
                value = short_repeats(args.repeats, early_stop=False)
            finally:
                busy.kill()
                busy.wait()
            time.sleep(0.3)
            quiet = (before + standard()) / 2
        alone = cpu.unpreempted(value["costs"], value["waits"])
        short = statistics.median(cpu.short_figure(alone)) if alone else float("nan")
        calls = statistics.median(alone) if alone else float("nan")
        line = (f"round {n}: standard {quiet * 1e3:.3f} ms, short repeats {short * 1e3:.3f} ms "
                f"({len(value['costs'])} repeats, {len(alone)} alone), ratio {short / quiet:.3f}"
                f"; their median call {calls / quiet:.3f}")
        if args.busy_core is None:
            single = statistics.median(mod.time(*arrays, number=1, repeat=20, min_repeat_ms=0))
            line += f"; single calls {single * 1e3:.3f} ms, ratio {single / quiet:.3f}"
        elif alone:
            near = [c for c in alone if c <= 1.1 * min(alone)]
            line += (f"; near the fastest only: {statistics.median(near) * 1e3:.3f} ms "
                     f"({len(near)}), ratio {statistics.median(near) / quiet:.3f}")
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
