"""Footprints of buffer accesses per loop level, and the memory traffic they imply.

For an access with affine indices, the elements it touches while the loops from some depth
inward run form (per dimension) a range of ``sum(|coef| * (extent - 1)) + 1`` values, capped
by the number of index combinations, a floormod and the dimension size; unrolled copies add
the spread of their constants. Cache lines follow from the innermost dimension's span and
step. ``traffic`` turns the footprints into the bytes a cache of a given capacity fetches.
"""

from __future__ import annotations

import math

from .feature_spec import L1_SETS
from .store_sites import Access, Loop


class AccessLevels:
    """Footprints of one access per loop level. Level ``l`` is one iteration of the loop at
    depth ``l - 1``: loops at depth >= l vary (and the unrolled copies when the unroll sits
    at depth >= l); level ``depth`` is one execution of the innermost body."""

    __slots__ = ("elems", "flat", "lines", "span")

    def __init__(self, acc: Access, pos: dict[int, int], loops: list[Loop], copy_depth: int,
                 line: int):
        buf = acc.buffer
        shape, strides = buf.shape, buf.strides
        itemsize = max(1, buf.nbytes // max(1, buf.size))
        depth = len(loops)
        nd = len(shape)
        flat: dict[int, float] = {}
        terms: dict[int, list[tuple[int, float]]] = {}
        for d, (coefs, _) in enumerate(acc.dims):
            for v, c in coefs.items():
                if c == 0:
                    continue
                flat[v] = flat.get(v, 0.0) + c * strides[d]
                p = pos.get(v)
                if p is not None:
                    terms.setdefault(p, []).append((d, abs(c)))
        self.flat = flat
        consts = acc.consts
        spread = [0] * nd
        ndistinct = [1] * nd
        if len(consts) > 1:
            for d in range(nd):
                vals = {c[d] for c in consts}
                spread[d] = max(vals) - min(vals)
                ndistinct[d] = len(vals)
        caps = [cap if cap else math.inf for _, cap in acc.dims]
        rng = [0.0] * nd
        prod = [1] * nd
        step_last = math.inf
        last = nd - 1
        elems = [1.0] * (depth + 1)
        lines = [1.0] * (depth + 1)
        for lev in range(depth, -1, -1):
            if lev < depth:
                ext = loops[lev].extent
                for d, a in terms.get(lev, ()):
                    rng[d] += a * (ext - 1)
                    prod[d] *= ext
                    if d == last and ext > 1:
                        step_last = min(step_last, a)
            copies = copy_depth >= lev
            total = 1.0
            dist_last = 1.0
            span_last = 1.0
            for d in range(nd):
                r = rng[d] + (spread[d] if copies else 0)
                p = prod[d] * (ndistinct[d] if copies else 1)
                dist = max(1.0, min(r + 1.0, p, caps[d], shape[d]))
                total *= dist
                if d == last:
                    dist_last = dist
                    span_last = min(r + 1.0, shape[d])
            elems[lev] = total
            if nd == 0 or dist_last <= 1.0:
                lines[lev] = total
                continue
            step = step_last
            if copies and ndistinct[last] > 1:
                step = min(step, spread[last] / (ndistinct[last] - 1))
            if nd > 1 and dist_last >= shape[last]:  # whole rows: contiguous runs of rows
                lines[lev] = math.ceil(total * itemsize / line)
            elif step * itemsize >= line:
                lines[lev] = total
            else:
                lines[lev] = total / dist_last * math.ceil(span_last * itemsize / line)
        self.elems = elems
        self.lines = lines
        self.span = itemsize


def set_pressure(stride_bytes: float, extent: int, line: int) -> float:
    """Lines per cache set that a sweep of ``extent`` accesses ``stride_bytes`` apart puts in
    a ``L1_SETS``-set cache: a power-of-two stride of 4 KiB maps every line to one set."""
    if stride_bytes < line or not float(stride_bytes).is_integer() or int(stride_bytes) % line:
        return extent / L1_SETS if stride_bytes >= line else 0.0
    sets = L1_SETS // math.gcd(int(stride_bytes) // line, L1_SETS)
    return extent / sets


def traffic(cap: float, fp_lines: list[float], buffer_lines: list[list[float]],
             outside: list[float], line: int) -> float:
    """Bytes a cache of ``cap`` bytes fetches: with ``l`` the outermost level whose footprint
    fits, the data one iteration of the loop around it touches stays cached while the next
    iteration runs, so that loop fetches the union of its iterations' lines once per
    execution."""
    depth = len(fp_lines) - 1
    fits = next((lev for lev in range(depth + 1) if fp_lines[lev] <= cap), None)
    if fits is None:
        return fp_lines[depth] * outside[depth]
    lev = max(fits - 1, 0)
    return sum(lines[lev] for lines in buffer_lines) * line * outside[lev]


def lines_total(lns: list[float], inside: list[float], outer: float, depth: int) -> float:
    """Cache lines fetched when every sweep of the innermost loop misses: the lines one
    sweep touches times the sweeps."""
    lev = depth - 1 if depth > 0 else 0
    return lns[lev] * outer / inside[lev]
