"""Per-store features of a lowered program (Ansor-style), documented in ``FEATURES.md``.

``extract_features(func)`` returns one row per store site (a buffer store of the schedule
with all its unrolled copies, see ``store_sites``) and ``N_FEATURES`` columns named by
``FEATURE_NAMES``: arithmetic counts by kind, loop annotations around the store, the access
pattern of the ``N_BUFFER_SLOTS`` buffers with the most bytes, estimated memory traffic at
several cache capacities, the arithmetic-intensity curve, allocation sizes, outer loop
products and program-level context. Values are log-scaled: ``sign(x) * log2(1 + |x|)``.

``program_features(rows)`` aggregates the rows of one program into a single vector of
``N_PROGRAM_FEATURES`` (for models that score a program from one vector).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from schedule import loop_ir as L

from .estimates import estimates
from .expr_analysis import F_MAD, FLOAT_SLOTS, OPS
from .feature_spec import (
    AI_SAMPLES,
    BUFFER_FIELDS,
    CACHE_LINE_BYTES,
    COLUMN,
    FEATURE_NAMES,
    FEATURE_SET,
    L1_WAYS,
    N_BUFFER_SLOTS,
    N_FEATURES,
    N_PROGRAM_FEATURES,
    N_SITE_FEATURES,
    PROGRAM_FEATURE_NAMES,
    SUM_MASK,
    TRAFFIC_CAPACITIES,
    VECTOR_BYTES,
    inverse_log2p,
    log2p,
)
from .footprint import AccessLevels, lines_total, set_pressure, traffic
from .store_sites import Access, ProgramInfo, StoreSite, collect_sites

#: Loops run as vector instructions: vectorized ones, and a tensorized nest's outer loop
#: (a CPU intrinsic computes its outputs as the lanes of one vector).
_VECTOR_KINDS = (L.For.VECTORIZED, L.For.TENSORIZED)
_GPU_BLOCK = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_GPU_THREAD = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(slots=True)
class _Nest:
    """What every feature group of a site uses: its loops, its copies and where they sit,
    the store's executions, the iterations inside each loop level, the accesses' levels."""

    site: StoreSite
    line: int
    outer: float  # executions of the store, every copy counted
    inside: list[float]  # iterations (copies counted) inside each level 0..depth
    levels: list[AccessLevels]
    vec_var: int | None

    @property
    def depth(self) -> int:
        return len(self.site.loops)


def _nest(site: StoreSite, line: int) -> _Nest:
    loops, copies, cdepth = site.loops, site.copies, site.copy_depth
    depth = len(loops)
    outer = float(copies) * math.prod(lp.extent for lp in loops)
    inside = [1.0] * (depth + 1)
    acc = 1.0
    for lev in range(depth, -1, -1):
        if lev < depth:
            acc *= loops[lev].extent
        inside[lev] = acc * (copies if cdepth >= lev else 1)
    pos = {lp.var_id: d for d, lp in enumerate(loops)}
    levels = [AccessLevels(a, pos, loops, cdepth, line) for a in site.accesses]
    vec = [lp for lp in loops if lp.kind in _VECTOR_KINDS]
    return _Nest(site, line, outer, inside, levels, vec[-1].var_id if vec else None)


def _compute_features(nest: _Nest) -> list[float]:
    ops = nest.site.ops
    body_flops = sum(ops[s] for s in FLOAT_SLOTS) + ops[F_MAD]
    return [*(o * nest.outer for o in ops), body_flops * nest.outer, body_flops]


#: a read in blocks of at least this many lanes is vector loads, one per block
MIN_BLOCK_LANES = 8


def _contiguous_in_blocks(acc: Access, var: int) -> bool:
    """The access walks ``var`` contiguously within blocks of at least ``MIN_BLOCK_LANES``
    (``W[j // 16, k, j % 16]``, a weight packed in panels): its last dimension advances by 1
    and the others by ``1/b`` only (the vectorizer loads it a block at a time)."""
    *outer, (last, _) = acc.dims
    if last.get(var) != 1.0:
        return False
    return all(c == 0 or abs(c) <= 1 / MIN_BLOCK_LANES
               for coefs, _ in outer for c in (coefs.get(var, 0.0),))


def _loop_features(nest: _Nest) -> tuple[list[float], float, float, float]:
    """LOOP_FEATURES, and for the estimates: the gathers of the vectorized loop, the set
    pressure of the innermost sweep and the accesses it strides by a line or more."""
    site, loops, depth = nest.site, nest.site.loops, nest.depth
    accesses = list(zip(site.accesses, nest.levels, strict=True))
    vec = [lp for lp in loops if lp.kind in _VECTOR_KINDS]
    contiguous = broadcast = gather = 0.0
    if nest.vec_var is not None:
        for acc, lv in accesses:
            s = abs(lv.flat.get(nest.vec_var, 0.0))
            if s == 0:
                broadcast += acc.count
            elif s == 1 or _contiguous_in_blocks(acc, nest.vec_var):
                contiguous += acc.count
            else:
                gather += acc.count
    par = [(d, lp) for d, lp in enumerate(loops) if lp.kind == L.For.PARALLEL]
    # a loop nested in another bound to the same index (a cooperative fetch) is that index
    # again, not more threads: the widest extent per tag, multiplied across tags
    bound: dict[str, float] = {}
    for lp in loops:
        if lp.kind in (*_GPU_BLOCK, *_GPU_THREAD) or lp.kind in ("vthread", "cthread"):
            bound[lp.kind] = max(bound.get(lp.kind, 1), lp.extent)
    gpu = [0, 0, 0]
    for tag, extent in bound.items():
        slot = 0 if tag in _GPU_BLOCK else 1 if tag in _GPU_THREAD else 2
        gpu[slot] = (gpu[slot] or 1) * extent
    store_vars = {v for coefs in site.store_dims for v, c in coefs.items() if c}
    inner_ext = [0.0, 0.0, 0.0]
    inner_red = [0.0, 0.0, 0.0]
    inner_stride = [0.0] * 9  # per inner loop: contiguous, invariant, strided accesses
    pressure = [0.0, 0.0]
    conflicting = 0.0
    for n in range(min(3, depth)):
        lp = loops[depth - 1 - n]
        inner_ext[n] = lp.extent
        inner_red[n] = float(lp.var_id not in store_vars)
        for acc, lv in accesses:
            s = abs(lv.flat.get(lp.var_id, 0.0))
            inner_stride[3 * n + (0 if s == 1 else 1 if s == 0 else 2)] += acc.count
            if n < 2 and s:
                pressure[n] += set_pressure(s * lv.span, lp.extent, nest.line)
                if n == 0 and s * lv.span >= nest.line:
                    conflicting += acc.count
    row = [vec[-1].extent if vec else 0, len(vec),
           math.prod(lp.extent for lp in vec) if vec else 0,
           contiguous, broadcast, gather,
           site.copies, max((lp.auto_unroll for lp in loops), default=0),
           math.prod(lp.extent for _, lp in par) if par else 0, len(par),
           par[0][0] if par else 0, nest.inside[par[0][0] + 1] if par else 0.0,
           *gpu, *inner_ext, *inner_red, *inner_stride, *pressure,
           depth, nest.outer, site.guards]
    return row, gather, pressure[0], conflicting


def _reuse(nest: _Nest, accs: list, flats: list[dict[int, float]], fp_bytes: list[float]
           ) -> tuple[float, float, float] | None:
    """(uses, iterations apart, bytes apart) of the innermost loop -- or the unrolled copies
    -- that leaves all of a buffer's addresses unchanged; None when there is none."""
    site, loops = nest.site, nest.site.loops
    copies, cdepth = site.copies, site.copy_depth
    for d in range(nest.depth - 1, -2, -1):
        if d == cdepth - 1 and copies > 1 and all(
                len({c[k] for c in a.consts}) == 1 for a in accs for k in range(len(a.dims))):
            # the copies reuse it, one copy's iterations apart
            return float(copies), nest.inside[cdepth] / copies, fp_bytes[cdepth] / copies
        if d < 0:
            return None
        lp = loops[d]
        if lp.extent > 1 and all(f.get(lp.var_id, 0.0) == 0 for f in flats):
            return float(lp.extent), nest.inside[d + 1], fp_bytes[d + 1]
    return None


def _buffer_features(nest: _Nest, serial: dict[int, int]
                     ) -> tuple[list[float], list[float], list[float], list[list[float]]]:
    """BUFFER_FEATURES (slots by bytes), and per level: the bytes and the lines of all
    buffers, and each buffer's lines."""
    site, loops, depth, line = nest.site, nest.site.loops, nest.depth, nest.line
    by_buffer: dict[int, list[int]] = {}
    for n, acc in enumerate(site.accesses):
        by_buffer.setdefault(id(acc.buffer), []).append(n)
    fp_bytes = [0.0] * (depth + 1)
    fp_lines = [0.0] * (depth + 1)
    merged = []
    for idxs in by_buffer.values():
        buf = site.accesses[idxs[0]].buffer
        itemsize = nest.levels[idxs[0]].span
        max_lines = math.ceil(buf.nbytes / line)
        elems = [min(buf.size, sum(nest.levels[n].elems[lev] for n in idxs))
                 for lev in range(depth + 1)]
        lines = [min(max_lines, sum(nest.levels[n].lines[lev] for n in idxs))
                 for lev in range(depth + 1)]
        for lev in range(depth + 1):
            fp_bytes[lev] += elems[lev] * itemsize
            fp_lines[lev] += lines[lev] * line
        merged.append((buf, idxs, elems, lines, itemsize))
    slots = []
    inner_var = loops[-1].var_id if loops else None
    for buf, idxs, elems, lines, itemsize in merged:
        accs = [site.accesses[n] for n in idxs]
        flats = [nest.levels[n].flat for n in idxs]
        read, write = any(a.read for a in accs), any(a.write for a in accs)
        nbytes = sum(a.count for a in accs) * itemsize * nest.outer / site.copies
        reuse = _reuse(nest, accs, flats, fp_bytes)
        if reuse is not None:
            kind, (count, dis_iter, dis_bytes) = (1.0, 0.0, 0.0), reuse
        elif serial.get(id(buf), 0):
            kind, (count, dis_iter, dis_bytes) = (0.0, 1.0, 0.0), (serial[id(buf)], 0.0, 0.0)
        else:
            kind, (count, dis_iter, dis_bytes) = (0.0, 0.0, 1.0), (0.0, 0.0, 0.0)
        stride_inner = 0.0 if inner_var is None else max(
            abs(f.get(inner_var, 0.0)) for f in flats)
        stride_nonzero = next((s for s in (max(abs(f.get(lp.var_id, 0.0)) for f in flats)
                                           for lp in reversed(loops)) if s), 0.0)
        local = buf.scope != "global"
        register = local and all(v == nest.vec_var or c == 0
                                 for f in flats for v, c in f.items())
        slots.append((nbytes, lines[0], buf.name, [
            float(read and not write), float(write and not read), float(read and write),
            float(local), float(register), float(buf.scope == "shared"), nbytes,
            elems[0] * itemsize,
            lines_total(lines, nest.inside, nest.outer, depth), lines[0], *kind,
            dis_iter, dis_bytes, count, stride_inner, stride_nonzero]))
    slots.sort(key=lambda b: (-b[0], -b[1], b[2]))
    row: list[float] = []
    for k in range(N_BUFFER_SLOTS):
        row += slots[k][3] if k < len(slots) else [0.0] * len(BUFFER_FIELDS)
    return row, fp_bytes, fp_lines, [m[3] for m in merged]


def _site_row(site: StoreSite, line: int, vector_bytes: int, serial: dict[int, int]
              ) -> list[float]:
    """The site-level features of ``site`` (before log-scaling); ``serial`` maps a buffer
    (by id) to the other sites that access it inside a loop shared with this one."""
    nest = _nest(site, line)
    depth, outer, inside = nest.depth, nest.outer, nest.inside
    row = _compute_features(nest)
    loop_row, gather, pressure, conflicting = _loop_features(nest)
    row += loop_row
    buffer_row, fp_bytes, fp_lines, buffer_lines = _buffer_features(nest, serial)
    row += buffer_row
    # memory traffic at cache capacities, footprint, estimates
    outside = [outer / inside[lev] for lev in range(depth + 1)]
    fetched = [traffic(cap, fp_lines, buffer_lines, outside, line)
               for cap in TRAFFIC_CAPACITIES]
    row += [*fetched, fp_bytes[0]]
    misses = conflicting * outer / site.copies if pressure > L1_WAYS else 0.0
    row += estimates(site, nest.levels, site.loops, outer, fetched, nest.vec_var, gather,
                     misses, vector_bytes)
    # arithmetic intensity curve, inner to outer, resampled
    body_flops = row[len(OPS) + 1]
    curve = [body_flops * inside[lev] / max(1.0, fp_bytes[lev]) for lev in range(depth, -1, -1)]
    if depth == 0:
        row += [curve[0]] * AI_SAMPLES
    else:
        row += list(np.interp(np.linspace(0.0, depth, AI_SAMPLES), np.arange(depth + 1), curve))
    # allocation of the stored buffer
    if site.alloc is not None:
        nbytes, times = site.alloc
        row += [nbytes, times, nbytes * times, 1.0]
    else:
        row += [0.0, 0.0, 0.0, 0.0]
    return row


def extract_features(func: L.LoweredFunc, cache_line_bytes: int = CACHE_LINE_BYTES,
                     vector_bytes: int = VECTOR_BYTES) -> np.ndarray:
    """Features of ``func``: a float32 array of shape (store sites, ``N_FEATURES``).
    ``cache_line_bytes`` and ``vector_bytes`` describe the target (64 and 64: AVX-512)."""
    sites, info = collect_sites(func)
    # serial reuse: other sites that access the same buffer inside a common loop
    users: dict[int, list[tuple[int, set[int]]]] = {}
    for n, site in enumerate(sites):
        nodes = {lp.node_id for lp in site.loops}
        for buf_id in {id(a.buffer) for a in site.accesses}:
            users.setdefault(buf_id, []).append((n, nodes))
    rows = []
    for n, site in enumerate(sites):
        nodes = {lp.node_id for lp in site.loops}
        serial = {}
        for buf_id in {id(a.buffer) for a in site.accesses}:
            serial[buf_id] = sum(1 for m, other in users[buf_id] if m != n and nodes & other)
        rows.append(_site_row(site, cache_line_bytes, vector_bytes, serial))
    return _finish(rows, info)


def _finish(rows: list[list[float]], info: ProgramInfo) -> np.ndarray:
    if not rows:
        return np.zeros((0, N_FEATURES), dtype=np.float32)
    site = np.asarray(rows, dtype=np.float64)
    col = COLUMN
    par = site[:, col["par_prod"]]
    context = [len(rows), info.stores, info.loops, info.allocs, info.alloc_bytes,
               site[:, col["float_ops"]].sum(),
               site[:, [col[f"buf{k}_bytes"] for k in range(N_BUFFER_SLOTS)]].sum(),
               par.max(), site[:, col["est_cycles"]].sum(), info.shared_bytes, info.prefetches]
    out = np.empty((len(rows), N_FEATURES), dtype=np.float64)
    out[:, :N_SITE_FEATURES] = site
    out[:, N_SITE_FEATURES:] = context
    return log2p(out).astype(np.float32)


def program_features(rows: np.ndarray) -> np.ndarray:
    """One vector for a program from its ``extract_features`` rows: the row with the most
    float operations, each feature aggregated over the rows (summed in linear space for
    counts, the maximum otherwise), and the number of rows."""
    out = np.zeros(N_PROGRAM_FEATURES, dtype=np.float32)
    if rows.shape[0] == 0:
        return out
    main = int(np.argmax(rows[:, COLUMN["float_ops"]]))
    out[:N_FEATURES] = rows[main]
    summed = log2p(inverse_log2p(rows.astype(np.float64)).sum(axis=0))
    out[N_FEATURES:2 * N_FEATURES] = np.where(SUM_MASK, summed, rows.max(axis=0))
    out[-1] = math.log2(1 + rows.shape[0])
    return out


__all__ = [
    "FEATURE_NAMES",
    "FEATURE_SET",
    "N_FEATURES",
    "N_PROGRAM_FEATURES",
    "PROGRAM_FEATURE_NAMES",
    "extract_features",
    "inverse_log2p",
    "log2p",
    "program_features",
]
