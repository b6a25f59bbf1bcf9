"""Collect the store sites of a lowered program: each buffer store with its loop context.

Lowering expands unrolled loops into copies of their body, so one store of the schedule can
appear many times with different constant offsets (``C_local[0, j]``, ``C_local[1, j]``,
...). The copies of one store are grouped into a ``StoreSite``: same buffer, same enclosing
loop variables and extents, same affine index templates up to constants, same arithmetic.
A site records how many copies it has (the unroll factor) and the constants of every copy,
so footprints cover all copies, and the features are computed once per site instead of once
per copy (a 64-step auto-unroll would otherwise cost 64 rows).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from schedule import expr as E
from schedule import loop_ir as L

from .expr_analysis import N_OPS, Coefs, count_ops, linearize


@dataclass(slots=True)
class Loop:
    """One enclosing loop: its variable (by id), constant extent, kind and unroll pragma."""

    var_id: int
    extent: int
    kind: str
    auto_unroll: int
    node_id: int


@dataclass(slots=True)
class Access:
    """The accesses of one buffer with one affine index template within a site.

    ``dims`` holds each index dimension's ``(coefs, cap)``; ``consts`` one tuple of
    per-dimension constants for every copy/occurrence; ``count`` the accesses per execution
    of the site's loop nest body (all copies together)."""

    buffer: L.Buffer
    dims: list[tuple[Coefs, int]]
    consts: list[tuple[int, ...]] = field(default_factory=list)
    read: bool = False
    write: bool = False
    count: int = 0


@dataclass(slots=True)
class StoreSite:
    """A store of the program (all its unrolled copies) in its loop nest."""

    buffer: L.Buffer
    loops: list[Loop]
    copies: int
    copy_depth: int  # loops[:copy_depth] are shared by every copy (where the unroll was)
    guards: int  # enclosing if-statements
    ops: list[int]  # operation counts of one copy, slots of expr_analysis.OPS
    accesses: list[Access]
    alloc: tuple[int, int] | None  # (bytes, times allocated) when the program allocates it
    store_dims: list[Coefs]  # the store's index coefficients (which loops it is spatial in)


@dataclass(slots=True)
class ProgramInfo:
    loops: int = 0
    allocs: int = 0
    alloc_bytes: int = 0
    shared_bytes: int = 0  # GPU block-shared buffers
    stores: int = 0  # store statements, every unrolled copy counted
    prefetches: int = 0  # prefetch hints run (loop iterations and unrolled copies counted)


@dataclass(slots=True)
class _Occurrence:
    node_ids: tuple[int, ...]
    consts: list[tuple[int, ...]]  # per access: its per-dimension constants


@dataclass(slots=True)
class _Pending:
    first: tuple  # (buffer, loops, guards, ops, accesses, store coefs) of the first copy
    occurrences: list[_Occurrence]
    copy_depth: int  # where loops kept as ``unrolled`` sit (len(loops) when none)


@dataclass(slots=True)
class _Unrolled:
    """A loop the program unrolls but that the lowered form keeps as a loop."""

    var_id: int
    extent: int
    depth: int  # real loops outside it


# Explicitly unrolled loops larger than this stay loops (lowering's code-size guard).
MAX_UNROLL_STEPS = 4096


def _extent(e: E.Expr) -> int:
    return int(e.value) if isinstance(e, E.Const) else 1


class _SiteCollector(L.StmtVisitor):
    """The walk of ``collect_sites``: it keeps the enclosing loops, the unrolled loops and
    the guard conditions of the statement it is at, and files every store under its site.
    Vector stores (made only by vectorization, just before C printing) are not sites."""

    def __init__(self) -> None:
        self.pending: dict[tuple, _Pending] = {}
        self.info = ProgramInfo()
        self.loops: list[Loop] = []
        self.unrolled: list[_Unrolled] = []
        self.conds: list[E.Expr] = []
        self.allocs: dict[int, tuple[int, int]] = {}
        self.loop_vars: set[int] = set()
        self.steps = L.UnrolledSize()
        self.max_step = 0  # the innermost enclosing ``auto_unroll_max_step`` pragma's bound

    def visit_for(self, s: L.For) -> None:
        extent = _extent(s.extent)
        pragma = int(s.pragmas.get("auto_unroll_max_step", 0))
        outer_max_step = self.max_step
        self.max_step = max_step = max(outer_max_step, pragma)
        steps = self.steps.visit(s) if s.kind in (L.For.UNROLLED, L.For.SERIAL) else None
        unroll = steps is not None and steps <= MAX_UNROLL_STEPS and (
            s.kind == L.For.UNROLLED or (max_step > 0 and steps <= max_step))
        if unroll:
            self.unrolled.append(_Unrolled(id(s.var), extent, len(self.loops)))
            self.visit(s.body)
            self.unrolled.pop()
        else:
            self.loop_vars.add(id(s.var))
            self.loops.append(Loop(id(s.var), extent, s.kind, pragma, id(s)))
            self.visit(s.body)
            self.loops.pop()
        self.max_step = outer_max_step

    def visit_if(self, s: L.IfThenElse) -> None:
        self.conds.append(s.cond)
        self.visit(s.then_body)
        self.conds.pop()
        if s.else_body is not None:
            self.conds.append(E.Not(s.cond) if s.cond.dtype == "bool" else s.cond)
            self.visit(s.else_body)
            self.conds.pop()

    def visit_allocate(self, s: L.Allocate) -> None:
        self.info.allocs += 1
        self.info.alloc_bytes += s.buffer.nbytes
        if s.buffer.scope == "shared":
            self.info.shared_bytes += s.buffer.nbytes
        self.allocs[id(s.buffer)] = (s.buffer.nbytes, math.prod(lp.extent for lp in self.loops))
        self.visit(s.body)

    def visit_prefetch(self, s: L.Prefetch) -> None:
        self.info.prefetches += math.prod(lp.extent for lp in self.loops) * math.prod(
            u.extent for u in self.unrolled)

    def visit_store(self, s: L.Store) -> None:
        loops, unrolled, conds = self.loops, self.unrolled, self.conds
        ops = [0] * N_OPS
        loads: list[E.Load] = []
        count_ops(s.value, ops, loads)
        for index in s.indices:
            count_ops(index, ops, loads)
        for cond in conds:
            count_ops(cond, ops, loads)
        raw = [(s.buffer, [linearize(i) for i in s.indices], True)]
        for load in loads:
            if isinstance(load.source, L.Buffer):
                raw.append((load.source, [linearize(i) for i in load.indices], False))
        node_ids = tuple(lp.node_id for lp in loops)
        if unrolled:
            raw, occurrences = _expand_unrolled(raw, unrolled, node_ids)
            copy_depth = min(u.depth for u in unrolled)
        else:
            occurrences = [_Occurrence(node_ids, [tuple(k for _, k, _ in dims)
                                                  for _, dims, _ in raw])]
            copy_depth = len(loops)
        self.info.stores += len(occurrences)
        templates = tuple(
            (id(buf), write, tuple((tuple(sorted(c.items())), cap) for c, _, cap in dims))
            for buf, dims, write in raw)
        key = (id(s.buffer), tuple((lp.var_id, lp.extent, lp.kind) for lp in loops),
               len(conds), templates, tuple(ops[:7]))
        entry = self.pending.get(key)
        if entry is None:
            store_dims = [c for c, _, _ in raw[0][1]]
            self.pending[key] = _Pending((s.buffer, list(loops), len(conds), ops, raw,
                                          store_dims), occurrences, copy_depth)
        else:
            entry.occurrences.extend(occurrences)
            entry.copy_depth = min(entry.copy_depth, copy_depth)


def collect_sites(func: L.LoweredFunc) -> tuple[list[StoreSite], ProgramInfo]:
    """The store sites of ``func`` in program order, and program-level counts.

    Both forms of ``lower`` give the same sites: the full form has unrolled loops expanded
    into copies, the analysis form (``unroll=False``) keeps them as loops -- marked
    ``unrolled``, or under an ``auto_unroll_max_step`` pragma -- and here each such loop's
    iterations become copies with the constants they would have."""
    collector = _SiteCollector()
    collector.visit(func.body)
    info = collector.info
    info.loops = len(collector.loop_vars)
    return [_finish(p, collector.allocs) for p in collector.pending.values()], info


def _expand_unrolled(raw: list, unrolled: list[_Unrolled], node_ids: tuple[int, ...]
                     ) -> tuple[list, list[_Occurrence]]:
    """The accesses without the unrolled variables, and one occurrence per iteration of the
    unrolled loops with the constants that iteration gives each index."""
    uids = [u.var_id for u in unrolled]
    stripped, weights = [], []
    for buf, dims, write in raw:
        sdims, wdims = [], []
        for coefs, const, cap in dims:
            sdims.append(({v: c for v, c in coefs.items() if v not in uids}, const, cap))
            wdims.append((const, [coefs.get(v, 0.0) for v in uids]))
        stripped.append((buf, sdims, write))
        weights.append(wdims)
    occurrences = []
    for values in itertools.product(*(range(u.extent) for u in unrolled)):
        consts = [tuple(const + math.floor(sum(w * v for w, v in zip(ws, values, strict=True)))
                        for const, ws in wdims) for wdims in weights]
        occurrences.append(_Occurrence(node_ids, consts))
    return stripped, occurrences


def _finish(p: _Pending, allocs: dict[int, tuple[int, int]]) -> StoreSite:
    buffer, loops, guards, ops, raw, store_dims = p.first
    occurrences = p.occurrences
    depth = min(len(loops), p.copy_depth)
    first_ids = occurrences[0].node_ids
    for occ in occurrences[1:]:
        for d in range(depth):
            if occ.node_ids[d] != first_ids[d]:
                depth = d
                break
    merged: dict[tuple, Access] = {}
    accesses: list[Access] = []
    for n, (buf, dims, write) in enumerate(raw):
        template = (id(buf), tuple((tuple(sorted(c.items())), cap) for c, _, cap in dims))
        acc = merged.get(template)
        if acc is None:
            acc = merged[template] = Access(buf, [(c, cap) for c, _, cap in dims])
            accesses.append(acc)
        acc.read |= not write
        acc.write |= write
        acc.count += len(occurrences)
        acc.consts.extend(occ.consts[n] for occ in occurrences)
    return StoreSite(buffer, loops, len(occurrences), depth, guards, ops, accesses,
                     allocs.get(id(buffer)), store_dims)
