"""A GEMM register tile alone: its speed on one core with every operand in L1 (issue 15).

``C[MR, NR] = A[MR, K] @ B[K, NR]`` with the accumulators in a local buffer that the C
compiler keeps in registers, the reduction outermost (optionally unrolled by 4), the rows
unrolled and the columns vectorized: the inner loop of a tuned GEMM with no cache misses,
no packing and no threads. Its GFLOP/s against ``bench/fma_peak.py``'s one-thread figure
separate the core's issue rate from the memory hierarchy when a whole GEMM is slow.
Run it pinned to one core:

    OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python bench/gemm_microkernel.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedule import Module, build, te
from schedule.buffers import placed
from schedule.examples import matmul

#: register tiles (rows, columns) worth comparing on AVX2: 8 and 12 accumulators
TILES = ((4, 16), (6, 16), (4, 24), (3, 32))


def register_tile(rows: int, cols: int, depth: int, k_unroll: int) -> Module:
    """The tile's kernel, built for this machine."""
    A, B, C = matmul(rows, cols, depth)
    s = te.create_schedule(C)
    local = s.cache_write(C, "local")
    i, j = s[local].op.axis
    (ck,) = s[local].op.reduce_axis
    if k_unroll > 1:
        ko, ki = s[local].split(ck, factor=k_unroll)
        s[local].reorder(ko, ki, i, j)
        s[local].unroll(ki)
    else:
        s[local].reorder(ck, i, j)
    s[local].unroll(i)
    s[local].vectorize(j)
    s[C].vectorize(s[C].op.axis[1])
    return build(s, [A, B, C])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, nargs="+", default=[256, 1024],
                        help="reduction lengths (K) to try")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for rows, cols in TILES:
        for depth in args.depth:
            for k_unroll in (1, 4):
                mod = register_tile(rows, cols, depth, k_unroll)
                a = placed(rng.standard_normal((rows, depth), dtype=np.float32))
                b = placed(rng.standard_normal((depth, cols), dtype=np.float32))
                c = placed(np.zeros((rows, cols), np.float32))
                mod(a, b, c)
                np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
                seconds = statistics.median(mod.time(a, b, c, number=1, repeat=7,
                                                     min_repeat_ms=100))
                print(f"{rows}x{cols} tile ({rows * cols // 8} accumulators), K={depth}, "
                      f"k unrolled by {k_unroll}: {seconds * 1e9:6.0f} ns, "
                      f"{2 * rows * cols * depth / seconds / 1e9:5.1f} GFLOP/s")


if __name__ == "__main__":
    main()
