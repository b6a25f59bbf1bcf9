"""Derived estimates of how the C code of a store site runs: the SIMD lanes it gets, the
independent accumulation chains of a reduction, and cycle estimates (compute, FMA latency,
memory, loop overhead). They encode the code generator's and the C compiler's behaviour that
the raw counts leave implicit, so both the analytic rule and the learned models use them.
"""

from __future__ import annotations

from schedule import loop_ir as L

from .expr_analysis import FLOAT_SLOTS
from .footprint import AccessLevels
from .store_sites import Loop, StoreSite

_LOADS_PER_CYCLE = 2.0
_CONFLICT_MISS_CYCLES = 3.0
_BYTES_PER_CYCLE = (64.0, 32.0, 8.0)  # into the 32 KiB, 1 MiB and 16 MiB capacities
_FMA_LATENCY = 4.0
_FLOAT_PIPES = 2.0
_UNROLLED_BY_COMPILER = 8
_VECTOR_REGISTERS = 28  # of 32, a few kept for operands
_SPILL_LATENCY = 6.0  # store-to-load forwarding plus the FMA


def estimates(site: StoreSite, levels: list[AccessLevels], loops: list[Loop], outer: float,
              traffic: list[float], vec_var: int | None, gather: float, misses: float,
              vector_bytes: int) -> list[float]:
    """The ``ESTIMATE_FEATURES`` of a site: SIMD lanes (explicit vectorization, or the C
    compiler's), the kind of vectorization, accumulation chains, conflict misses, and cycle
    estimates. ``traffic`` holds the bytes fetched at each ``TRAFFIC_CAPACITIES`` level,
    ``outer`` the store's executions, ``gather`` the strided accesses of a vectorized loop,
    ``misses`` the accesses that miss L1 through cache-set conflicts."""
    depth = len(loops)
    store_flat = levels[0].flat
    buf = site.buffer
    max_lanes = max(1, vector_bytes // max(1, buf.nbytes // max(1, buf.size)))

    # The C compiler vectorizes loops whose accesses are contiguous (possibly over several
    # nested loops) or invariant, and packs consecutive unrolled copies (SLP) -- but not
    # stores to an argument inside an OpenMP parallel loop (the outlined body loses
    # ``restrict``, so the compiler must assume aliasing).
    blocked = site.alloc is None and any(lp.kind == L.For.PARALLEL for lp in loops)
    # A local buffer indexed only by constants (and the vectorized variable) becomes
    # register variables: no memory for SLP to pack.
    promoted = buf.scope != "global" and all(
        c == 0 or v == vec_var for v, c in store_flat.items())
    kind = [0.0, 0.0, 0.0, 0.0]
    lanes = 1.0
    if vec_var is not None:
        kind[0] = 1.0
        if gather == 0:
            ext = next(lp.extent for lp in reversed(loops) if lp.var_id == vec_var)
            lanes = float(min(ext, max_lanes))
    elif not blocked:
        # the innermost loop, or an outer loop with one loop inside it (loops of at most
        # _UNROLLED_BY_COMPILER iterations do not count: the compiler unrolls them)
        for start in range(depth - 1, max(depth - 4, -1), -1):
            if sum(lp.extent > _UNROLLED_BY_COMPILER for lp in loops[start + 1:]) > 1:
                break
            run = _contiguous_run(levels, loops, start)
            if run > 1:
                kind[1 if start == depth - 1 else 2] = 1.0
                lanes = float(min(run, max_lanes))
                break
        slp = _slp_lanes(site) if not promoted else 1
        if lanes == 1.0 and slp > 1:
            kind[3], lanes = 1.0, float(min(slp, max_lanes))
    copies = site.copies
    ops = site.ops
    float_instr = sum(ops[s] for s in FLOAT_SLOTS) * outer / lanes
    compute = float_instr / _FLOAT_PIPES
    reduction = depth > 0 and store_flat.get(loops[-1].var_id, 0.0) == 0 and \
        any(a.read and a.write for a in site.accesses[:1])
    consts = site.accesses[0].consts
    distinct = float(min(copies, len(set(consts)))) if consts else 1.0
    # registers the accumulators of a promoted buffer take: one per distinct copy, a vector
    # each (SLP lanes come from the copies themselves)
    registers = distinct / lanes if kind[3] else distinct
    chains = 0.0
    latency = 0.0
    if reduction:
        chains = distinct if kind[3] else distinct * lanes
        latency = _FMA_LATENCY * outer / chains
    # L1: load/store instructions (a vector access moves ``lanes`` elements); the caches
    # below: the lines each level fetches, over its bandwidth
    accesses = sum(a.count for a in site.accesses) * outer / copies
    memory = accesses / lanes / _LOADS_PER_CYCLE
    for fetched, bw in zip(traffic[1:], _BYTES_PER_CYCLE, strict=True):
        memory = max(memory, fetched / bw)
    # a sweep whose lines overflow their L1 sets misses L1 on every strided access (unless
    # the compiler may interchange the loops: stores to a buffer of the program's own)
    if site.alloc is None:
        memory = max(memory, misses * _CONFLICT_MISS_CYCLES)
    if promoted and registers > _VECTOR_REGISTERS:  # spilled: a load and a store per update
        memory += 2.0 * outer / lanes / _LOADS_PER_CYCLE
        latency = max(latency, _SPILL_LATENCY * outer / max(chains, 1.0))
    overhead = outer / (lanes * copies) + gather * outer / copies / 2.0
    total = max(compute, latency, memory) + overhead
    return [lanes, *kind, chains, registers if promoted else 0.0, misses, compute, latency,
            memory, overhead, total]


def _contiguous_run(levels: list[AccessLevels], loops: list[Loop], start: int) -> int:
    """Elements the store walks contiguously over the loops from ``loops[start]`` outward
    (``j.outer * 2 + j.inner`` is one run of 2 x extent), every other access contiguous or
    invariant along them; 1 when the store is not contiguous along ``loops[start]``."""
    runs = [1.0] * len(levels)
    total = 1
    for d in range(start, -1, -1):
        lp = loops[d]
        strides = [abs(lv.flat.get(lp.var_id, 0.0)) for lv in levels]
        if strides[0] != runs[0] or any(s and s != r for s, r in zip(strides, runs, strict=True)):
            break
        runs = [r * lp.extent if s else r for s, r in zip(strides, runs, strict=True)]
        total *= lp.extent
        if total >= 1024:
            break
    return total if runs[0] > 1 else 1


def _slp_lanes(site: StoreSite) -> int:
    """Unrolled copies the C compiler can pack into one vector statement (SLP): copies whose
    stores are consecutive along the last dimension, with every other access consecutive or
    unchanged along it. 1 when there is no such run."""
    if site.copies < 2 or not site.accesses[0].dims:
        return 1
    run = len({c[-1] for c in site.accesses[0].consts})
    for acc in site.accesses:
        if not acc.dims:
            continue
        vals = sorted({c[-1] for c in acc.consts})
        if len(vals) > 1 and vals[-1] - vals[0] != len(vals) - 1:
            return 1
    store = sorted({c[-1] for c in site.accesses[0].consts})
    return run if run > 1 and store[-1] - store[0] == run - 1 else 1
