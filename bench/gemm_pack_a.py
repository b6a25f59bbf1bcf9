"""Does packing A as well as B make a GEMM lose less to a drifting host? (issue 15)

A BLIS-like blocked GEMM written by hand: the output in MC x NC tiles (fused and parallel),
each accumulated in a local buffer over k blocks of KC, B's KC x NC block copied per k
block (as the search's ``pack`` does), and in the "A+B" variants A's MC x KC block copied
too, so that a tile's whole working set stays in its core's L2; register tiles of MR rows
by 16 columns (two AVX2 vectors). Each variant is checked against numpy, then all are
timed with numpy in interleaved rounds for ``--seconds``; the per-round ratio to numpy
shows how much each loses in the host's slow moments.

    .venv/bin/python bench/gemm_pack_a.py --size 1024 --seconds 60
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timing import median_call_time
from schedule import Module, build, te
from schedule.buffers import placed
from schedule.examples import matmul

VECTOR_COLUMNS = 16  # a register tile's columns: two 8-lane vectors
#: a register tile's rows -> the output tile's rows (a multiple of them)
ROW_BLOCKS = {4: 64, 6: 60}


def blocked_gemm(n: int, pack_a: bool, mc: int, nc: int, kc: int, mr: int) -> Module:
    """The blocked GEMM of the module docstring, built for this machine."""
    A, B, C = matmul(n, n, n)
    s = te.create_schedule(C)
    local = s.cache_write(C, "local")
    packed_b = s.cache_read(B, "global", [local])
    packed_a = s.cache_read(A, "global", [local]) if pack_a else None
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=mc)
    jo, ji = s[C].split(j, factor=nc)
    s[C].reorder(jo, io, ii, ji)
    tiles = s[C].fuse(jo, io)
    s[C].parallel(tiles)
    _, lanes = s[C].split(ji, factor=8)
    s[C].vectorize(lanes)
    s[local].compute_at(s[C], tiles)
    ci, cj = s[local].op.axis
    (ck,) = s[local].op.reduce_axis
    ko, ki = s[local].split(ck, factor=kc)
    cio, cii = s[local].split(ci, factor=mr)
    cjo, cji = s[local].split(cj, factor=VECTOR_COLUMNS)
    s[local].reorder(ko, cjo, cio, ki, cii, cji)
    s[local].unroll(cii)
    s[local].vectorize(cji)
    for packed in (packed_b, packed_a):
        if packed is not None:
            s[packed].compute_at(s[local], ko)
            s[packed].vectorize(s[packed].op.axis[1])
    return build(s, [A, B, C])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="how long to keep timing interleaved rounds")
    args = parser.parse_args()
    n = args.size
    rng = np.random.default_rng(0)
    a = placed(rng.standard_normal((n, n), dtype=np.float32))
    b = placed(rng.standard_normal((n, n), dtype=np.float32))
    expected = a @ b
    variants = {f"{'A+B' if pack_a else 'B'} packed {mr}x{VECTOR_COLUMNS}":
                blocked_gemm(n, pack_a, mc=ROW_BLOCKS[mr], nc=128, kc=256, mr=mr)
                for mr in ROW_BLOCKS for pack_a in (False, True)}
    calls = {}
    for name, mod in variants.items():
        out = placed(np.zeros((n, n), np.float32))
        mod(a, b, out)
        np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-2, err_msg=name)
        calls[name] = (lambda m=mod, o=out: m(a, b, o))
    calls["numpy"] = lambda: a @ b
    times: dict[str, list[float]] = {name: [] for name in calls}
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        for name, call in calls.items():
            times[name].append(median_call_time(call, budget_s=0.3, max_calls=50))
            time.sleep(0.2)  # let numpy's threads go to sleep
    print(f"GEMM {n}³ float32, {len(times['numpy'])} interleaved rounds")
    for name, values in times.items():
        p10, p50, p90 = np.percentile(values, [10, 50, 90])
        ratios = [t_np / t for t_np, t in zip(times["numpy"], values, strict=True)]
        print(f"  {name:16s} ms p10 {p10 * 1e3:7.3f} p50 {p50 * 1e3:7.3f} p90 {p90 * 1e3:7.3f}"
              f"  {2 * n ** 3 / p50 / 1e9:4.0f} GFLOP/s  vs numpy per round: median "
              f"{np.median(ratios):.2f}x, min {min(ratios):.2f}x, max {max(ratios):.2f}x")


if __name__ == "__main__":
    main()
