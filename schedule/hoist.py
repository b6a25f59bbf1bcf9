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
from .loop_ir import (
    Allocate,
    Buffer,
    For,
    IfThenElse,
    Stmt,
    StmtMutator,
    StmtVisitor,
    Store,
    VStore,
    seq,
)
from .vectorize import StridedLoad, VLoad

#: Most slots hoisted out of one loop (about the vector registers of the widest target).
MAX_SLOTS = 32

Slot = tuple[int, int, int]  # (constant offset, lanes, lanes accessed: fewer if masked)


def hoist_accumulators(s: Stmt, in_registers: Collection[Buffer] = ()) -> Stmt:
    """``s`` with loop-invariant accesses to local buffers kept in one-slot buffers;
    buffers ``in_registers`` (already promoted whole) are left as they are."""
    return _Hoist(frozenset(in_registers)).visit(s)


class _Hoist(StmtMutator):
    def __init__(self, skip: frozenset[Buffer]):
        self.skip = skip
        self.local: frozenset[Buffer] = frozenset()  # hoistable buffers allocated around

    def _within(self, local: frozenset[Buffer], s: Stmt) -> Stmt:
        outer, self.local = self.local, local
        out = self.visit(s)
        self.local = outer
        return out

    def visit_allocate(self, s: Allocate) -> Stmt:
        hoistable = s.buffer.scope == "local" and s.buffer not in self.skip
        return Allocate(s.buffer, self._within(
            self.local | {s.buffer} if hoistable else self.local, s.body))

    def visit_for(self, s: For) -> Stmt:
        plans = {buf: plan for buf in sorted(self.local, key=lambda b: b.name)
                 if (plan := _plan(s, buf)) is not None}
        body = self._within(self.local - plans.keys(), s.body)
        out: Stmt = For(s.var, s.extent, s.kind, body, s.pragmas, s.intrin)
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
    uses = _Accesses(buf)
    try:
        uses.visit(loop)
    except _NotHoistable:
        return None
    if not uses.stores:
        return None
    accesses, bound = uses.accesses, uses.bound
    base: Expr | None = None
    slots: set[Slot] = set()
    for index, lanes, active in accesses:
        b, offset = _split_offset(index)
        if free_vars(b) & bound or (base is not None and b.key() != base.key()):
            return None
        base = b
        slots.add((offset, lanes, active))
    ordered = sorted(slots)
    if len(ordered) > MAX_SLOTS:
        return None
    for (o1, _, a1), (o2, _, _) in itertools.pairwise(ordered):
        if o2 < o1 + a1:  # overlapping slots that are not the same slot
            return None
    assert base is not None
    return base, ordered


class _Accesses(StmtVisitor):
    """The accesses to ``buf`` (index, lanes), its stores and the loop variables bound in a
    loop; raises ``_NotHoistable`` at an access under a condition or at a parallel loop."""

    def __init__(self, buf: Buffer):
        self.buf = buf
        self.accesses: list[tuple[Expr, int, int]] = []  # (index, lanes, active)
        self.bound: set[Var] = set()
        self.stores = 0
        self.guarded = False

    def visit_expr(self, e: Expr) -> None:
        for n in walk(e):
            if isinstance(n, VLoad) and n.buffer is self.buf:
                self.accesses.append((n.base, n.lanes, n.active))
            elif isinstance(n, StridedLoad) and n.buffer is self.buf:
                raise _NotHoistable
            elif isinstance(n, Load) and n.source is self.buf:
                self.accesses.append((n.indices[0], 1, 1))
            else:
                continue
            if self.guarded:
                raise _NotHoistable

    def visit_for(self, s: For) -> None:
        if s.kind == For.PARALLEL:
            raise _NotHoistable
        self.bound.add(s.var)
        super().visit_for(s)

    def visit_if(self, s: IfThenElse) -> None:
        self.visit_expr(s.cond)
        outer, self.guarded = self.guarded, True
        self.visit(s.then_body)
        if s.else_body is not None:
            self.visit(s.else_body)
        self.guarded = outer

    def _store(self, buffer: Buffer, index: Expr, lanes: int, active: int,
               value: Expr) -> None:
        if buffer is self.buf:
            if self.guarded:
                raise _NotHoistable
            self.stores += 1
            self.accesses.append((index, lanes, active))
        self.visit_expr(value)

    def visit_store(self, s: Store) -> None:
        self._store(s.buffer, s.indices[0], 1, 1, s.value)

    def visit_vstore(self, s: VStore) -> None:
        self._store(s.buffer, s.base, s.lanes, s.active, s.value)


# ---------------------------------------------------------------------------- rewrite


def _hoist(region: Stmt, buf: Buffer, base: Expr, slots: list[Slot]) -> Stmt:
    """``region`` with its accesses to ``buf`` at ``slots`` read into one-slot buffers
    before it and written back after it (a masked slot's lanes past its end are computed
    in the register and never written back)."""
    regs = {slot: Buffer(f"{buf.name}_acc{i}", (slot[1],), buf.dtype, "local")
            for i, slot in enumerate(slots)}
    zero = Const(0, base.dtype)

    def address(slot: Slot) -> Expr:
        return arith.simplify(base + slot[0])

    def slot_of(index: Expr, lanes: int, active: int) -> Buffer:
        return regs[(_split_offset(index)[1], lanes, active)]

    class Rewrite(StmtMutator):
        """Accesses to ``buf`` go to the slot buffers."""

        def visit_expr(self, e: Expr) -> Expr:
            def fn(n: Expr) -> Expr | None:
                if isinstance(n, VLoad) and n.buffer is buf:
                    return VLoad(slot_of(n.base, n.lanes, n.active), zero, n.lanes)
                if isinstance(n, Load) and n.source is buf:
                    return Load(slot_of(n.indices[0], 1, 1), (zero,), n.dtype)
                return None
            return transform(e, fn)

        def visit_store(self, st: Store) -> Stmt:
            target = slot_of(st.indices[0], 1, 1) if st.buffer is buf else st.buffer
            index = (zero,) if st.buffer is buf else st.indices
            return Store(target, index, self.visit_expr(st.value))

        def visit_vstore(self, st: VStore) -> Stmt:
            if st.buffer is buf:
                return VStore(slot_of(st.base, st.lanes, st.active), zero,
                              self.visit_expr(st.value), st.lanes)
            return VStore(st.buffer, st.base, self.visit_expr(st.value), st.lanes, st.active)

    def read(slot: Slot) -> Stmt:
        _, lanes, active = slot
        if lanes == 1:
            return Store(regs[slot], (zero,), Load(buf, (address(slot),), buf.dtype))
        return VStore(regs[slot], zero, VLoad(buf, address(slot), lanes, active), lanes)

    def write(slot: Slot) -> Stmt:
        _, lanes, active = slot
        if lanes == 1:
            return Store(buf, (address(slot),), Load(regs[slot], (zero,), buf.dtype))
        return VStore(buf, address(slot), VLoad(regs[slot], zero, lanes), lanes, active)

    out: Stmt = seq(*(read(slot) for slot in slots), Rewrite().visit(region),
                    *(write(slot) for slot in slots))
    for reg in reversed(regs.values()):
        out = Allocate(reg, out)
    return out


__all__ = ["MAX_SLOTS", "hoist_accumulators"]
