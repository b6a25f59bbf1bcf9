"""What the ``prefetch`` hints are worth in tuned programs: every program of an
``anchor_suite.py --save`` file that prefetches is built twice, as tuned and with its
prefetch steps left out (the same program otherwise), checked against numpy, and both are
timed from Python in interleaved rounds beside onnxruntime.

    .venv/bin/python bench/prefetch_ab.py SAVED.json [--rounds 5] [--min-timing-s 20]

Per program: each form's median time per call over the rounds, and the median of the
per-round ratios (without / with, and onnxruntime / each). Run it with nothing else on the
machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.anchor_suite import (  # noqa: E402
    ANCHORS,
    interleaved_times,
    library_contenders,
    load_tunes,
    round_ratio,
)
from bench.tune_curves import built_best  # noqa: E402
from schedule import host_cpu_target  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("saved", type=Path, help="a file anchor_suite.py --save wrote")
    parser.add_argument("--rounds", type=int, default=5, help="the fewest timing rounds")
    parser.add_argument("--min-timing-s", type=float, default=20.0,
                        help="more rounds until each program's timing took this long")
    args = parser.parse_args()
    print(f"{host_cpu_target()}; median of at least {args.rounds} interleaved rounds, "
          "ms per call")
    print("| workload | budget | prefetch steps | with | without | without / with | "
          "onnxruntime / with | onnxruntime / without |")
    print("|---|---|---|---|---|---|---|---|")
    for name, tuned in load_tunes(args.saved).items():
        anchor = ANCHORS[name]
        wl, tuned_wl = anchor.op, anchor.workload()
        inputs = wl.random_inputs(0)
        (expected,) = wl.reference(inputs)
        ours_in, ours_out = anchor.our_arrays(inputs, expected)
        library = library_contenders(wl, inputs, expected)["onnxruntime"]
        for mark, steps in sorted(tuned.best_steps.items()):
            hints = [step for step in steps if step[0] == "prefetch"]
            if not hints:
                continue
            plain = [step for step in steps if step[0] != "prefetch"]
            contenders = {"with": built_best(tuned_wl, steps, ours_in, ours_out),
                          "without": built_best(tuned_wl, plain, ours_in, ours_out),
                          "onnxruntime": library}
            times = interleaved_times(contenders, args.rounds, args.min_timing_s)
            ms = {key: statistics.median(t) * 1e3 for key, t in times.items()}
            print(f"| {name} | {mark} | {', '.join(step[1] for step in hints)} | "
                  f"{ms['with']:.4f} | {ms['without']:.4f} | "
                  f"{round_ratio(times, 'without', 'with'):.3f}x | "
                  f"{round_ratio(times, 'onnxruntime', 'with'):.3f}x | "
                  f"{round_ratio(times, 'onnxruntime', 'without'):.3f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
