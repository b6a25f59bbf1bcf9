"""Accumulator hoisting on the vectorized loop IR (before register promotion).

A reduction tiled "SSRSRS" updates a small tile of a ``local`` buffer at addresses that do
not change inside its reduction loops: ``acc[base + c] += ...`` with ``base`` fixed by the
outer spatial loops. Left in memory, the compiler keeps the tile in registers across the
innermost loop at best (a 3x3 convolution window reloads and re-stores the whole tile every
three iterations). This pass finds the outermost loop inside which every access to such a
buffer has one loop-invariant ``base`` plus distinct constant offsets, loads each accessed
slot into a one-slot buffer before that loop and stores it back after it; register
promotion then turns those one-slot buffers into named variables.

It applies only where the rewrite is exact: the buffer is local, every access in the loop
is ``base + constant`` with the same invariant ``base``, slots are equal or disjoint, no
access sits under a condition, and the loop neither is nor contains a parallel loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection

from . import arith
from .expr import Binary, Const, Expr, Load, Var, free_vars, transform, walk
from .loop_ir import Allocate, Buffer, For, IfThenElse, Seq, Stmt, Store, seq
from .vectorize import VLoad, VStore

#: Most slots hoisted out of one loop (about the vector registers of the widest target).
MAX_SLOTS = 32

Slot = tuple[int, int]  # (constant offset, lanes)


def hoist_accumulators(s: Stmt, in_registers: Collection[Buffer] = ()) -> Stmt:
    """``s`` with loop-invariant accesses to local buffers kept in one-slot buffers;
    buffers ``in_registers`` (already promoted whole) are left as they are."""
    return _visit(s, frozenset(), frozenset(in_registers))


def _visit(s: Stmt, local: frozenset[Buffer], skip: frozenset[Buffer]) -> Stmt:
    if isinstance(s, Seq):
        return Seq([_visit(c, local, skip) for c in s.stmts])
    if isinstance(s, Allocate):
        hoistable = s.buffer.scope == "local" and s.buffer not in skip
        return Allocate(s.buffer, _visit(s.body, local | {s.buffer} if hoistable else local,
                                         skip))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, _visit(s.then_body, local, skip),
                          None if s.else_body is None else _visit(s.else_body, local, skip))
    if not isinstance(s, For):
        return s
    plans = {buf: plan for buf in sorted(local, key=lambda b: b.name)
             if (plan := _plan(s, buf)) is not None}
    body = _visit(s.body, local - plans.keys(), skip)
    out: Stmt = For(s.var, s.extent, s.kind, body, s.pragmas)
    for buf, (base, slots) in plans.items():
        out = _hoist(out, buf, base, slots)
    return out


# ---------------------------------------------------------------------------- analysis


class _NotHoistable(Exception):
    pass


def _split_offset(index: Expr) -> tuple[Expr, int]:
    """``index`` as ``base + constant``."""
    if isinstance(index, Const):
        return Const(0, index.dtype), int(index.value)
    if isinstance(index, Binary) and index.op == "+" and isinstance(index.b, Const):
        return index.a, int(index.b.value)
    return index, 0


def _plan(loop: For, buf: Buffer) -> tuple[Expr, list[Slot]] | None:
    """The invariant base and the slots of ``buf`` accessed in ``loop``, if hoistable."""
    accesses: list[tuple[Expr, int]] = []  # (index, lanes)
    bound: set[Var] = set()
    stores = 0

    def on_expr(e: Expr, guarded: bool) -> None:
        for n in walk(e):
            if isinstance(n, VLoad) and n.buffer is buf:
                accesses.append((n.base, n.lanes))
            elif isinstance(n, Load) and n.source is buf:
                accesses.append((n.indices[0], 1))
            else:
                continue
            if guarded:
                raise _NotHoistable

    def on_stmt(st: Stmt, guarded: bool) -> None:
        nonlocal stores
        if isinstance(st, Seq):
            for c in st.stmts:
                on_stmt(c, guarded)
        elif isinstance(st, For):
            if st.kind == For.PARALLEL:
                raise _NotHoistable
            bound.add(st.var)
            on_expr(st.extent, guarded)
            on_stmt(st.body, guarded)
        elif isinstance(st, Allocate):
            on_stmt(st.body, guarded)
        elif isinstance(st, IfThenElse):
            on_expr(st.cond, guarded)
            on_stmt(st.then_body, True)
            if st.else_body is not None:
                on_stmt(st.else_body, True)
        elif isinstance(st, Store | VStore):
            if st.buffer is buf:
                if guarded:
                    raise _NotHoistable
                stores += 1
                accesses.append((st.indices[0], 1) if isinstance(st, Store)
                                else (st.base, st.lanes))
            on_expr(st.value, guarded)

    try:
        on_stmt(loop, False)
    except _NotHoistable:
        return None
    if not stores:
        return None
    base: Expr | None = None
    slots: set[Slot] = set()
    for index, lanes in accesses:
        b, offset = _split_offset(index)
        if free_vars(b) & bound or (base is not None and b.key() != base.key()):
            return None
        base = b
        slots.add((offset, lanes))
    ordered = sorted(slots)
    if len(ordered) > MAX_SLOTS:
        return None
    for (o1, l1), (o2, _) in itertools.pairwise(ordered):
        if o2 < o1 + l1:  # overlapping slots that are not the same slot
            return None
    assert base is not None
    return base, ordered


# ---------------------------------------------------------------------------- rewrite


def _hoist(region: Stmt, buf: Buffer, base: Expr, slots: list[Slot]) -> Stmt:
    """``region`` with its accesses to ``buf`` at ``slots`` read into one-slot buffers
    before it and written back after it."""
    regs = {slot: Buffer(f"{buf.name}_acc{i}", (slot[1],), buf.dtype, "local")
            for i, slot in enumerate(slots)}
    zero = Const(0, base.dtype)

    def address(slot: Slot) -> Expr:
        return arith.simplify(base + slot[0])

    def slot_of(index: Expr, lanes: int) -> Buffer:
        return regs[(_split_offset(index)[1], lanes)]

    def rewrite_expr(e: Expr) -> Expr:
        def fn(n: Expr) -> Expr | None:
            if isinstance(n, VLoad) and n.buffer is buf:
                return VLoad(slot_of(n.base, n.lanes), zero, n.lanes)
            if isinstance(n, Load) and n.source is buf:
                return Load(slot_of(n.indices[0], 1), (zero,), n.dtype)
            return None
        return transform(e, fn)

    def rewrite(st: Stmt) -> Stmt:
        if isinstance(st, Seq):
            return Seq([rewrite(c) for c in st.stmts])
        if isinstance(st, For):
            return For(st.var, st.extent, st.kind, rewrite(st.body), st.pragmas)
        if isinstance(st, Allocate):
            return Allocate(st.buffer, rewrite(st.body))
        if isinstance(st, IfThenElse):
            return IfThenElse(rewrite_expr(st.cond), rewrite(st.then_body),
                              None if st.else_body is None else rewrite(st.else_body))
        if isinstance(st, Store):
            target = slot_of(st.indices[0], 1) if st.buffer is buf else st.buffer
            index = (zero,) if st.buffer is buf else st.indices
            return Store(target, index, rewrite_expr(st.value))
        if isinstance(st, VStore):
            if st.buffer is buf:
                return VStore(slot_of(st.base, st.lanes), zero, rewrite_expr(st.value),
                              st.lanes)
            return VStore(st.buffer, st.base, rewrite_expr(st.value), st.lanes)
        return st

    def read(slot: Slot) -> Stmt:
        offset, lanes = slot
        if lanes == 1:
            return Store(regs[slot], (zero,), Load(buf, (address(slot),), buf.dtype))
        return VStore(regs[slot], zero, VLoad(buf, address(slot), lanes), lanes)

    def write(slot: Slot) -> Stmt:
        offset, lanes = slot
        if lanes == 1:
            return Store(buf, (address(slot),), Load(regs[slot], (zero,), buf.dtype))
        return VStore(buf, address(slot), VLoad(regs[slot], zero, lanes), lanes)

    out: Stmt = seq(*(read(slot) for slot in slots), rewrite(region),
                    *(write(slot) for slot in slots))
    for reg in reversed(regs.values()):
        out = Allocate(reg, out)
    return out


__all__ = ["MAX_SLOTS", "hoist_accumulators"]
