"""A parametrised family of GEMM schedules for the cost-model tests: what one search would
measure on one task, from poor programs to good ones.

Each sample draws an Ansor-like multi-level tiling of C = A @ B (i and j in three levels, k in
two), a loop order (the SSRSRS structure, other good orders, or a random permutation), an
optional cache_write accumulator computed at one of the tile loops, an optional packed copy
of B (cache_read), vectorization of an innermost j loop, a parallel outer loop, and an explicit
unroll or an ``auto_unroll_max_step`` pragma. Every sample is a valid program.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from schedule import te

# Loop orders of the split loops (i0 i1 i2 j0 j1 j2 k0 k1); the first is Ansor's SSRSRS.
ORDERS = [
    ("i0", "j0", "i1", "j1", "k0", "k1", "i2", "j2"),
    ("i0", "j0", "k0", "i1", "j1", "k1", "i2", "j2"),
    ("j0", "i0", "k0", "i1", "k1", "j1", "i2", "j2"),
    ("i0", "j0", "i1", "j1", "i2", "k0", "k1", "j2"),
    ("i0", "i1", "i2", "j0", "j1", "j2", "k0", "k1"),  # k innermost: B read with a stride
    ("k0", "k1", "i0", "i1", "i2", "j0", "j1", "j2"),
    ("i0", "k0", "j0", "i1", "k1", "j1", "i2", "j2"),
]
# Loop orders of the accumulator stage (its tile rows i, columns j, the reduction k0 k1).
ACC_ORDERS = [("k0", "k1", "i", "j"), ("k0", "i", "k1", "j"), ("i", "k0", "k1", "j"),
              ("k0", "k1", "j", "i")]
POW2 = [1, 2, 4, 8, 16, 32, 64]


@dataclass(frozen=True)
class GemmConfig:
    i_tiles: tuple[int, int]  # (i1, i2): i = i0 * i1 * i2
    j_tiles: tuple[int, int]
    k_tile: int
    order: tuple[str, ...]
    cache_write: str  # "" (none) or the C loop the accumulator is computed at
    acc_order: tuple[str, ...]
    pack_b: bool
    vectorize: bool
    parallel: bool
    unroll: int  # 0, an auto_unroll_max_step value (> 0), or -1 for an explicit unroll


def matmul(n: int) -> list[te.Tensor]:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def _tiles(rng: random.Random, n: int, inner_max: int) -> tuple[int, int]:
    while True:
        a, b = rng.choice(POW2), rng.choice([t for t in POW2 if t <= inner_max])
        if a * b <= n:
            return a, b


def sample_config(rng: random.Random, n: int) -> GemmConfig:
    order = rng.choice(ORDERS)
    if rng.random() < 0.3:
        order = tuple(rng.sample(order, len(order)))
    spatial = [name for name in order if not name.startswith("k")]
    return GemmConfig(
        i_tiles=_tiles(rng, n, 16),
        j_tiles=_tiles(rng, n, 64),
        k_tile=rng.choice([1, 4, 16, 64]),
        order=order,
        cache_write=rng.choice(["", "", "", *spatial[:4]]),
        acc_order=rng.choice(ACC_ORDERS),
        pack_b=rng.random() < 0.25,
        vectorize=rng.random() < 0.75,
        parallel=rng.random() < 0.6,
        unroll=rng.choice([0, 0, 16, 64, -1]),
    )


def _split3(stage, axis, tiles: tuple[int, int]):
    outer, inner = stage.split(axis, factor=tiles[0] * tiles[1])
    mid, inner = stage.split(inner, factor=tiles[1])
    return outer, mid, inner


def build_schedule(cfg: GemmConfig, n: int) -> tuple[te.Schedule, list[te.Tensor]]:
    """The schedule of ``cfg`` for an n x n x n GEMM."""
    A, B, C = args = matmul(n)
    s = te.create_schedule(C)
    CL = s.cache_write(C, "local") if cfg.cache_write else None
    BB = s.cache_read(B, "global", [CL if CL is not None else C]) if cfg.pack_b else None
    out = s[C]
    i, j = out.op.axis
    loops = dict(zip(("i0", "i1", "i2"), _split3(out, i, cfg.i_tiles), strict=True))
    loops.update(zip(("j0", "j1", "j2"), _split3(out, j, cfg.j_tiles), strict=True))
    if CL is None:
        (k,) = out.op.reduce_axis
        loops["k0"], loops["k1"] = out.split(k, factor=cfg.k_tile)
        names = list(cfg.order)
        out.reorder(*[loops[name] for name in names])
        inner_stage, inner_loops = out, [loops[name] for name in names]
        inner_names = names
    else:
        names = [name for name in cfg.order if not name.startswith("k")]
        out.reorder(*[loops[name] for name in names])
        acc = s[CL]
        ci, cj = acc.op.axis
        (ck,) = acc.op.reduce_axis
        k0, k1 = acc.split(ck, factor=cfg.k_tile)
        cloops = {"k0": k0, "k1": k1, "i": ci, "j": cj}
        acc.compute_at(out, loops[cfg.cache_write])
        acc.reorder(*[cloops[name] for name in cfg.acc_order])
        inner_stage, inner_loops = acc, [cloops[name] for name in cfg.acc_order]
        inner_names = ["j2" if name == "j" else name for name in cfg.acc_order]
        if cfg.vectorize and names[-1] == "j2":
            out.vectorize(loops["j2"])  # the copy-out
    if cfg.vectorize and inner_names[-1] == "j2":
        inner_stage.vectorize(inner_loops[-1])
    outer = loops[names[0]]
    if cfg.parallel and not outer.is_reduce:
        out.parallel(outer)
    if cfg.unroll > 0:
        out.pragma(loops[names[0]], "auto_unroll_max_step", cfg.unroll)
    elif cfg.unroll < 0:
        second = inner_loops[-2]
        if not second.is_reduce and second.extent <= 16:
            inner_stage.unroll(second)
    if BB is not None:
        at = loops[cfg.cache_write] if CL is not None else loops["j0"]
        s[BB].compute_at(out, at)
    return s, args
