"""Intermediates kept in the output they become: a buffer whose last use is an element-wise
store into a kernel output, each element read where that output's element is written,
lives in the output itself instead of a buffer of its own.

A softmax fused per row computes ``exp`` into a row buffer, sums it, then writes
``out = exp * (1 / sum)``: with the row buffer in the output's row, the exponentials are
written where they end up and scaled in place, and one row buffer less passes through the
L1 cache (a quarter less time on that program, one thread). Runs on flat (one index per
access) statements, before vectorization.

The buffer ``B`` of an allocation is placed in output ``T`` at ``offset`` when, inside the
allocation, exactly one statement ``S`` stores into ``T`` reading ``B``, and

* every read of ``B`` in ``S`` is ``B[j]`` and ``S`` stores to ``T[offset + j]``, the
  offset the same for all of the allocation (no loop inside it appears in the offset);
* the loops around ``S`` inside the allocation enumerate ``j`` over ``B`` exactly once
  (``j`` a mixed-radix number of them), with no branch between: ``S`` overwrites every
  element of ``B`` once, each after reading it, and nothing else of ``T`` in that span;
* nothing after ``S`` (in the allocation) touches ``B``, and nothing else inside the loops
  around ``S`` does: what ``S`` overwrote is not read again;
* ``T`` is never read by the kernel (an output only) and has ``B``'s element type;
* ``B`` is not a cache stage's buffer (``cache_read``/``cache_write``: asked for apart) nor
  an accumulator (stored from its own value: kept apart, it can live in registers).
"""

from __future__ import annotations

import itertools

from .arith import linear, simplify
from .expr import Binary, Const, Expr, Load, free_vars, transform, walk
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
    if buf.scope != "global" or any(isinstance(st, Store) and st.buffer is buf
                                    and _reads(st.value, buf) for st in walk_stmts(body)):
        return None  # a cache stage, or an accumulator: kept apart to live in registers
    stores = [st for st in walk_stmts(body) if isinstance(st, Store) and st.buffer is not buf
              and st.buffer not in read and st.buffer.dtype == buf.dtype
              and _reads(st.value, buf)]
    if len(stores) != 1:
        return None
    store = stores[0]
    path = _path_to(body, store)
    if path is None:
        return None
    loops: list[For] = []
    for node, child in itertools.pairwise(path):
        if isinstance(node, IfThenElse):
            return None
        if isinstance(node, Seq):
            after = node.stmts[node.stmts.index(child) + 1:]
            if any(_touches(st, buf) for st in after):
                return None
        if isinstance(node, For):
            loops.append(node)
    if any(isinstance(st, Store) and st.buffer is store.buffer and st is not store
           for st in walk_stmts(body)):
        return None
    if any(_touches(st, buf) for loop in loops for st in walk_stmts(loop.body)
           if st is not store and not isinstance(st, Seq | For | Allocate)):
        return None
    reads = {n.indices[0].key(): n.indices[0] for n in walk(store.value)
             if isinstance(n, Load) and n.source is buf}
    if len(reads) != 1:
        return None
    (index,) = reads.values()
    offset = simplify(Binary("-", store.indices[0], index, index.dtype))
    loop_vars = {loop.var for loop in loops}
    if free_vars(offset) & loop_vars or not _enumerates(index, loops, buf.size):
        return None
    return store.buffer, offset


def _enumerates(index: Expr, loops: list[For], size: int) -> bool:
    """Whether ``index`` takes each value in [0, size) exactly once over ``loops``."""
    lin = linear(index)
    if lin is None or lin.const != 0:
        return False
    extents = {}
    for loop in loops:
        if not isinstance(loop.extent, Const):
            return False
        extents[loop.var.key()] = int(loop.extent.value)
    if set(lin.terms) - set(extents) or any(
            e > 1 and k not in lin.terms for k, e in extents.items()):
        return False
    stride = 1
    for key, coeff in sorted(lin.terms.items(), key=lambda kv: kv[1]):
        if coeff != stride:
            return False
        stride *= extents[key]
    return stride == size


def _path_to(s: Stmt, target: Stmt) -> list[Stmt] | None:
    """The statements from ``s`` down to ``target``, both included."""
    if s is target:
        return [s]
    children: list[Stmt] = []
    if isinstance(s, Seq):
        children = list(s.stmts)
    elif isinstance(s, For | Allocate):
        children = [s.body]
    elif isinstance(s, IfThenElse):
        children = [s.then_body] + ([s.else_body] if s.else_body is not None else [])
    for child in children:
        rest = _path_to(child, target)
        if rest is not None:
            return [s, *rest]
    return None


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


def _touches(s: Stmt, buf: Buffer) -> bool:
    return any((isinstance(st, Store) and st.buffer is buf)
               or any(_reads(e, buf) for e in _exprs(st)) for st in walk_stmts(s))


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
