"""Intermediates kept in the output they become: a buffer whose last use is an element-wise
store into a kernel output, each element read where that output's element is written,
lives in the output itself instead of a buffer of its own.

A softmax fused per row computes ``exp`` into a row buffer, sums it, then writes
``out = exp * (1 / sum)``: with the row buffer in the output's row, the exponentials are
written where they end up and scaled in place, and one row buffer less passes through the
L1 cache (a quarter less time on that program, one thread). Runs on flat (one index per
access) statements, before vectorization.

The buffer ``B`` of an allocation is placed in output ``T`` at ``offset`` when, inside the
allocation, the statements storing into ``T`` are those that read ``B`` (the pieces of an
unrolled loop, or a split's main part and guarded tail: several), and for each of them

* every read of ``B`` is ``B[j]`` and the store is to ``T[offset + j]``, one offset for
  all (no loop inside the allocation appears in it);
* the loops around it inside the allocation, narrowed by the branches on the way (each a
  bound on one of those loops: a split's guard), enumerate ``j`` over a range once (``j``
  a constant plus a mixed-radix number of them), and together the ranges cover ``B``
  once: every element is overwritten once, after being read;
* everything else touching ``B`` comes before the first of them, outside their loops:
  what is overwritten is not read again;

and ``T`` is never read by the kernel (an output only) and has ``B``'s element type, and
``B`` is neither a cache stage's buffer (``cache_read``/``cache_write``: asked for apart)
nor an accumulator (stored from its own value: kept apart, it can live in registers).
"""

from __future__ import annotations

import itertools

from .arith import linear, simplify
from .expr import Binary, Compare, Const, Expr, Load, conjuncts, free_vars, transform, walk
from .loop_ir import Allocate, Buffer, For, IfThenElse, Seq, Stmt, StmtMutator, Store, walk_stmts


def store_in_place(body: Stmt) -> Stmt:
    """``body`` (flat) with intermediates placed in the outputs they become (see module)."""
    read = {n.source for s in walk_stmts(body) for e in _exprs(s) for n in walk(e)
            if isinstance(n, Load)}
    return _InPlace(read).visit(body)


class _InPlace(StmtMutator):
    def __init__(self, read: set):
        self.read = read

    def visit_allocate(self, s: Allocate) -> Stmt | None:
        body = self.visit(s.body)
        placed = _placement(s.buffer, body, self.read)
        if placed is None:
            return Allocate(s.buffer, body)
        target, offset = placed
        return _Relocate(s.buffer, target, offset).visit(body)


def _placement(buf: Buffer, body: Stmt, read: set) -> tuple[Buffer, Expr] | None:
    """(output, offset) to keep ``buf`` in, or None."""
    order = list(walk_stmts(body))
    if buf.scope != "global" or any(isinstance(st, Store) and st.buffer is buf
                                    and _reads(st.value, buf) for st in order):
        return None  # a cache stage, or an accumulator: kept apart to live in registers
    stores = [st for st in order if isinstance(st, Store) and st.buffer is not buf
              and st.buffer not in read and _reads(st.value, buf)]
    if not stores or stores[0].buffer.dtype != buf.dtype:
        return None
    target = stores[0].buffer
    final = {id(st) for st in stores}
    if any(isinstance(st, Store) and st.buffer is target and id(st) not in final
           for st in order):
        return None
    first = min(n for n, st in enumerate(order) if id(st) in final)
    before = {id(st) for st in order[:first]}
    others = [st for st in order if id(st) not in final and _touches_itself(st, buf)]
    if any(id(st) not in before for st in others):
        return None
    offset: Expr | None = None
    spans = []
    parents = _parents(body)
    for store in stores:
        placed = _overwrite(buf, _path_to(parents, store), store, others)
        if placed is None or (offset is not None and placed[0].key() != offset.key()):
            return None
        offset = placed[0]
        spans.append(placed[1])
    covered = 0
    for start, count in sorted(spans):
        if start != covered:
            return None
        covered += count
    return (target, offset) if covered == buf.size else None


def _overwrite(buf: Buffer, path: list[Stmt], store: Store,
               others: list[Stmt]) -> tuple[Expr, tuple[int, int]] | None:
    """(offset, (first index, count)) of the elements of ``buf`` that ``store`` (at the end
    of ``path``) overwrites where they are read, or None where it does not qualify."""
    loops = [node for node in path if isinstance(node, For)]
    if loops:
        inside = {id(st) for st in walk_stmts(loops[0])}
        if any(id(st) in inside for st in others):
            return None
    reads = {n.indices[0].key(): n.indices[0] for n in walk(store.value)
             if isinstance(n, Load) and n.source is buf}
    if len(reads) != 1:
        return None
    (index,) = reads.values()
    offset = simplify(Binary("-", store.indices[0], index, index.dtype))
    ranges = _loop_ranges(path, loops)
    span = None if ranges is None else _enumerated(index, ranges)
    if span is None or free_vars(offset) & {loop.var for loop in loops}:
        return None
    return offset, span


def _loop_ranges(path: list[Stmt], loops: list[For]) -> dict[tuple, tuple[int, int]] | None:
    """{loop variable: (first, count)} of the iterations that reach the end of ``path``:
    each loop's extent, narrowed by the branches taken on the way (a split's guarded tail:
    ``if (outer * 16 < 985) ... else if (inner + 992 < 1000) ...``), or None where a branch
    is not a bound on one of those loops."""
    ranges: dict[tuple, tuple[int, int]] = {}
    for loop in loops:
        if not isinstance(loop.extent, Const):
            return None
        ranges[loop.var.key()] = (0, int(loop.extent.value))
    for node, child in itertools.pairwise(path):
        if not isinstance(node, IfThenElse):
            continue
        bounds = conjuncts(node.cond) if child is node.then_body else [_negated(node.cond)]
        for bound in bounds:
            narrowed = None if bound is None else _narrow(bound, ranges)
            if narrowed is None:
                return None
            ranges = narrowed
    return ranges


#: each comparison and its negation
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _negated(e: Expr) -> Expr | None:
    """``not e`` for a comparison ``e``, None for anything else (a conjunction's negation
    is no single bound)."""
    if isinstance(e, Compare) and e.op in _NEGATED:
        return Compare(_NEGATED[e.op], e.a, e.b, e.dtype)
    return None


def _narrow(bound: Expr, ranges: dict[tuple, tuple[int, int]]
            ) -> dict[tuple, tuple[int, int]] | None:
    """``ranges`` with ``bound`` applied: a comparison linear in one of their variables."""
    if not isinstance(bound, Compare) or bound.op not in _NEGATED:
        return None
    a, b = (bound.a, bound.b) if bound.op in ("<", "<=") else (bound.b, bound.a)
    lin = linear(Binary("-", a, b, a.dtype))  # the bound is lin < 0 (lin <= 0 for <=, >=)
    if lin is None or len(lin.terms) != 1:
        return None
    const = lin.const - (1 if bound.op in ("<=", ">=") else 0)
    ((key, coeff),) = lin.terms.items()
    if key not in ranges:
        return None
    first, count = ranges[key]
    last = first + count
    if coeff > 0:  # v < -const / coeff
        last = min(last, -(const // coeff))
    else:  # v > const / -coeff
        first = max(first, const // -coeff + 1)
    return {**ranges, key: (first, max(0, last - first))}


def _enumerated(index: Expr, ranges: dict[tuple, tuple[int, int]]
                ) -> tuple[int, int] | None:
    """(start, count) where ``index`` takes each value in [start, start + count) exactly
    once over the loop variables' ``ranges``, or None."""
    lin = linear(index)
    if lin is None or set(lin.terms) - set(ranges) or any(
            count > 1 and key not in lin.terms for key, (_, count) in ranges.items()):
        return None
    start, stride = lin.const, 1
    for key, coeff in sorted(lin.terms.items(), key=lambda kv: kv[1]):
        first, count = ranges[key]
        if coeff != stride:
            return None
        start += coeff * first
        stride *= count
    return (start, stride) if start >= 0 else None


def _parents(s: Stmt) -> dict[int, Stmt]:
    """{id(statement): the statement directly around it} for every statement in ``s``."""
    parents: dict[int, Stmt] = {}
    for node in walk_stmts(s):
        if isinstance(node, Seq):
            children = list(node.stmts)
        elif isinstance(node, For | Allocate):
            children = [node.body]
        elif isinstance(node, IfThenElse):
            children = [node.then_body, *([node.else_body] if node.else_body else [])]
        else:
            children = []
        parents.update((id(child), node) for child in children)
    return parents


def _path_to(parents: dict[int, Stmt], target: Stmt) -> list[Stmt]:
    """The statements from the outermost (that ``parents`` maps) down to ``target``."""
    path = [target]
    while id(path[-1]) in parents:
        path.append(parents[id(path[-1])])
    return path[::-1]


def _exprs(s: Stmt) -> list[Expr]:
    if isinstance(s, Store):
        return [*s.indices, s.value]
    if isinstance(s, For):
        return [s.extent]
    if isinstance(s, IfThenElse):
        return [s.cond]
    return []


def _reads(e: Expr, buf: Buffer) -> bool:
    return any(isinstance(n, Load) and n.source is buf for n in walk(e))


def _touches_itself(s: Stmt, buf: Buffer) -> bool:
    """Whether ``s`` itself (not a statement inside it) stores into or reads ``buf``."""
    return (isinstance(s, Store) and s.buffer is buf) or any(_reads(e, buf) for e in _exprs(s))


class _Relocate(StmtMutator):
    """Accesses to ``buf[i]`` become accesses to ``target[offset + i]``."""

    def __init__(self, buf: Buffer, target: Buffer, offset: Expr):
        self.buf, self.target, self.offset = buf, target, offset

    def _index(self, i: Expr) -> Expr:
        return simplify(Binary("+", self.offset, i, i.dtype))

    def visit_expr(self, e: Expr) -> Expr:
        def fn(n: Expr) -> Expr | None:
            if isinstance(n, Load) and n.source is self.buf:
                return Load(self.target, (self._index(self.visit_expr(n.indices[0])),),
                            n.dtype)
            return None
        return transform(e, fn)

    def visit_store(self, s: Store) -> Stmt | None:
        if s.buffer is not self.buf:
            return super().visit_store(s)
        return Store(self.target, (self._index(self.visit_expr(s.indices[0])),),
                     self.visit_expr(s.value))
