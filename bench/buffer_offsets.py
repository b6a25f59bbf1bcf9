"""Where a buffer starts within its page: one compiled program timed on the same data
placed at different offsets, beside its time with every buffer on a page boundary (what
``schedule.buffers`` allocates from a page's size on).

    .venv/bin/python bench/buffer_offsets.py [--rounds 5]

The programs are ones the tuner found (their steps are below): the softmax of 128 rows of
3072 (64 trials) and the elementwise add+relu of 1x64x56x56. Each buffer gets a page-aligned
block of its own; the output then starts ``offset`` bytes into its block, the inputs at
the start of theirs. Every placement is timed the way a worker times a candidate (the
native loop of ``Module.time``: three repeats of at least 50 ms, their median), in
interleaved rounds; the table gives the median over rounds and the ratio to all-on-a-page.

Why it exists: a core guesses whether a load depends on an earlier store from the low 12
bits of their addresses. When the output starts a few cache lines after the input modulo
4 KiB, every load of the input in a streaming loop looks like it reads the store just made
("4K aliasing") and waits. numpy puts large arrays wherever its heap has room, so in one
process a kernel drew a harmless placement, in the next a bad one; a tuner timing every
candidate in a fresh process kept the luckiest draws, and the best program re-timed
elsewhere was slower than the tuner had said.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from schedule import PAGE, Workload, build, make_schedule

PROGRAMS: dict[str, tuple[Workload, list[list]]] = {
    "softmax 128x3072": (Workload.op("softmax", M=128, N=3072), [
        ["split", "T_softmax_expsum", "k", 32],
        ["rfactor", "T_softmax_expsum", "k.inner", 0],
        ["reorder", "T_softmax_expsum.rf", ["ax0", "k.outer", "k.inner.rf"]],
        ["compute_at", "T_softmax_expsum.rf", "T_softmax_expsum", "ax0"],
        ["compute_at", "T_softmax_expsum", "T_softmax_norm", "ax0"],
        ["compute_at", "T_softmax_exp", "T_softmax_norm", "ax0"],
        ["split", "T_softmax_maxelem", "k", 64],
        ["rfactor", "T_softmax_maxelem", "k.inner", 0],
        ["reorder", "T_softmax_maxelem.rf", ["ax0", "k.outer", "k.inner.rf"]],
        ["compute_at", "T_softmax_maxelem.rf", "T_softmax_maxelem", "ax0"],
        ["compute_at", "T_softmax_maxelem", "T_softmax_exp", "ax0"],
        ["vectorize", "T_softmax_maxelem.rf", "k.inner.rf"],
        ["pragma", "T_softmax_maxelem", "ax0", "auto_unroll_max_step", 512],
        ["split", "T_softmax_exp", "ax1", 64],
        ["vectorize", "T_softmax_exp", "ax1.inner"],
        ["pragma", "T_softmax_exp", "ax0", "auto_unroll_max_step", 64],
        ["vectorize", "T_softmax_expsum.rf", "k.inner.rf"],
        ["pragma", "T_softmax_expsum.rf", "ax0", "auto_unroll_max_step", 64],
        ["pragma", "T_softmax_expsum", "ax0", "auto_unroll_max_step", 512],
        ["parallel", "T_softmax_norm", "ax0"],
        ["split", "T_softmax_norm", "ax1", 16],
        ["vectorize", "T_softmax_norm", "ax1.inner"]]),
    "add+relu 1x64x56²": (
        Workload.op("elementwise", shape=[1, 64, 56, 56], ops=["add", "relu"]), [
            ["compute_inline", "T_add"],
            ["fuse", "T_relu", ["ax0", "ax1", "ax2"]],
            ["parallel", "T_relu", "ax0.ax1.fused.ax2.fused"],
            ["vectorize", "T_relu", "ax3"],
            ["pragma", "T_relu", "ax0.ax1.fused.ax2.fused", "auto_unroll_max_step", 16]]),
}
#: bytes past a page boundary where the output starts
OFFSETS = [0, 16, 64, 128, 256, 1024, 2048]


def at_offset(array: np.ndarray, offset: int) -> np.ndarray:
    """A copy of ``array`` starting ``offset`` bytes past a page boundary."""
    raw = np.empty(array.nbytes + 2 * PAGE, np.uint8)
    start = -raw.ctypes.data % PAGE + offset
    out = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def offset_times(workload: Workload, steps: list[list], rounds: int) -> dict[int, float]:
    """Median seconds per call of the program with its output at each of ``OFFSETS``."""
    mod = build(*make_schedule(workload, steps))
    inputs = [at_offset(x, 0) for x in workload.random_inputs(0)]
    (expected,) = workload.reference(inputs)
    placements = {}
    for offset in OFFSETS:
        out = at_offset(np.zeros_like(expected), offset)
        mod(*inputs, out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
        placements[offset] = [*inputs, out]
    times: dict[int, list[float]] = {offset: [] for offset in OFFSETS}
    for _ in range(rounds):
        for offset, arrays in placements.items():
            repeats = mod.time(*arrays, number=1, repeat=3, min_repeat_ms=50)
            times[offset].append(statistics.median(repeats))
    return {offset: statistics.median(t) for offset, t in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| program | " + " | ".join(f"output at +{o} B" for o in OFFSETS) + " |")
    print("|---|" + "---|" * len(OFFSETS))
    for name, (workload, steps) in PROGRAMS.items():
        times = offset_times(workload, steps, args.rounds)
        cells = [f"{times[o] * 1e3:.4f} ms ({times[o] / times[0]:.2f}x)" for o in OFFSETS]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print(f"(median of {args.rounds} interleaved rounds; in brackets: the time over the time "
          "with every buffer on a page boundary)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
