"""How many short repeats of a parallel kernel run alone beside a busy loop pinned to core
0, with and without a sleep before each repeat (``workers.cpu``'s ``SHORT_REPEAT_GAP_S``).
The kernel is the program of a steps file (JSON list of steps) for the ResNet-18 conv
64→64 56² 3x3, e.g. one of an ``anchor_suite.py --save`` file's ``best_steps``; without
one, the default schedule.

    .venv/bin/python bench/short_repeats_busy.py [STEPS.json]

Per load (quiet, busy core 0) and sleep (0, 1, 3, 10 ms, then in reverse order): of 40
repeats (``mod.time`` of one call after a warm-up, at least 1 ms), how many had their
threads wait ≤ 1% of the repeat for a core, the fastest and median of those, and the
median of all. The timing runs in a child process in its own session, as in the sandbox.
Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import load_on_core  # noqa: E402

REPEATS, SLEEPS_MS, MAX_WAIT = 40, (0, 1, 3, 10), 0.01


def _workload():
    from schedule import Workload

    return Workload.op("conv2d_nchw", N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1)


def time_repeats(steps: list) -> None:
    """The child: build the program, then time the repeats at every sleep, twice."""
    import numpy as np

    from schedule import build, make_schedule, placed
    from workers.interference import waiting_share

    s, tensors = make_schedule(_workload(), steps)
    mod = build(s, tensors)
    rng = np.random.default_rng(0)
    arrays = [placed(rng.standard_normal([int(d) for d in t.shape]).astype("float32"))
              for t in tensors]
    mod(*arrays)
    for order in (SLEEPS_MS, SLEEPS_MS[::-1]):
        for sleep_ms in order:
            rows = []
            for _ in range(REPEATS):
                time.sleep(sleep_ms / 1e3)
                (cost,), share = waiting_share(
                    lambda: mod.time(*arrays, number=1, repeat=1, min_repeat_ms=1))
                rows.append((cost, share))
            alone = [c for c, w in rows if w <= MAX_WAIT]
            print(f"sleep {sleep_ms:2d} ms: alone {len(alone):2d}/{REPEATS}, fastest "
                  f"{min(alone, default=0) * 1e3:.3f} ms, median alone "
                  f"{statistics.median(alone) * 1e3 if alone else 0:.3f} ms, median all "
                  f"{statistics.median(c for c, _ in rows) * 1e3:.3f} ms", flush=True)


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        time_repeats(json.loads(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("steps", type=Path, nargs="?",
                        help="a JSON list of steps (default: the default schedule)")
    args = parser.parse_args()
    steps = json.loads(args.steps.read_text()) if args.steps else []
    for load in ("quiet", "busy loop on core 0"):
        busy = None
        if load != "quiet":
            busy = load_on_core(0)
            time.sleep(1)
        print(f"== {load}", flush=True)
        try:
            subprocess.run([sys.executable, __file__, "--child", json.dumps(steps)],
                           start_new_session=True, check=True)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
