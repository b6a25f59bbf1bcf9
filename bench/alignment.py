"""Every contender of the anchor suite on the arrays numpy hands out and on 64-byte aligned
copies of them, re-timed side by side: how much of a row's figure is the arrays' alignment.

    .venv/bin/python bench/alignment.py [--trials 64] [--rounds 7] [--only NAME,...]

The tuner's workers time candidates on 64-byte aligned arrays (``schedule.aligned_empty``);
numpy's large arrays start 16 bytes past a page (glibc's ``mmap`` chunk header), so every
64-byte vector load of them spans two cache lines. Per row: one tune from an empty database
(the anchor suite's), then numpy, PyTorch, onnxruntime and ours each called on both sets of
arrays in interleaved rounds (median of the rounds, each the median of the calls in
0.3 s), and each contender's unaligned/aligned time ratio. Run it with nothing else on the
machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.anchor_suite import ANCHORS, interleaved_times, library_contenders, tune_to  # noqa: E402
from bench.tune_curves import built_best  # noqa: E402
from schedule import host_cpu_target  # noqa: E402
from schedule.buffers import ALIGNMENT, aligned  # noqa: E402

DEFAULT_ROWS = ("GEMM 1024³", "BERT FFN 128x3072x768", "conv R18 64→64 56² 3x3",
                "softmax 128x3072", "layer_norm 128x768")


def row(name: str, trials: int, rounds: int, pool, seed: int) -> list[str]:
    anchor = ANCHORS[name]
    wl, tuned_wl = anchor.op, anchor.workload()
    tuned = tune_to(tuned_wl, [trials], pool, seed)
    inputs = wl.random_inputs(0)
    (expected,) = wl.reference(inputs)
    our_inputs, our_expected = anchor.our_arrays(inputs, expected)
    sets = {"numpy's": (inputs, our_inputs, our_expected),
            "aligned": ([aligned(x) for x in inputs],
                        [aligned(x) for x in our_inputs], aligned(our_expected))}
    contenders = {}
    for label, (lib_inputs, ours_in, ours_expected) in sets.items():
        offsets = sorted({x.ctypes.data % ALIGNMENT for x in [*lib_inputs, *ours_in]})
        print(f"  {name}, {label} arrays: input offsets mod {ALIGNMENT}: {offsets}", flush=True)
        for lib, call in library_contenders(wl, lib_inputs, expected).items():
            contenders[(lib, label)] = call
        contenders[("ours", label)] = built_best(tuned_wl, tuned.best_steps[trials], ours_in,
                                                 ours_expected)
    timed = interleaved_times(contenders, rounds)
    lines = []
    for who in ("numpy", "PyTorch", "onnxruntime", "ours"):
        plain, fast = timed[(who, "numpy's")], timed[(who, "aligned")]
        lines.append(f"| {name} | {who} | {plain * 1e3:.3f} | {fast * 1e3:.3f} | "
                     f"{plain / fast:.2f}x |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(DEFAULT_ROWS))
    args = parser.parse_args()
    chosen = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in ANCHORS]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {list(ANCHORS)}")

    from workers import LocalPool

    target = host_cpu_target()
    print(f"{target.canonical} ({target.model_name}); {args.trials} trials a row; median of "
          f"{args.rounds} interleaved rounds, ms per call", flush=True)
    table = ["| workload | contender | numpy's arrays | aligned arrays | ratio |",
             "|---|---|---|---|---|"]
    with LocalPool() as pool:
        for name in chosen:
            table += row(name, args.trials, args.rounds, pool, args.seed)
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
