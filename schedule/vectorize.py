"""Vectorization and register promotion on the flattened loop IR (before C printing).

A loop marked ``vectorized`` becomes explicit vector statements: its extent is cut into
chunks of the target's vector width (narrower power-of-two chunks and finally scalar code
for the tail; on a target with mask registers, a tail that would take several chunks is
one vector with its last lanes masked off), each load/store whose flat index advances by
one per iteration becomes a vector load/store, loop-invariant values broadcast, loads at
a small constant stride (a stride-2 convolution's input) become whole-vector loads over
their span gathered by shuffles, other strides lane-by-lane gathers. A body that cannot
be vectorized safely (a lane-dependent guard, a lane-dependent select over loads that
could read out of bounds, scattered stores, half-precision) stays a scalar loop.

Register promotion then turns a ``local`` buffer whose every access uses a
constant index (after unrolling) into named scalar or vector variables.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from . import arith
from . import dtype as dt
from .expr import (
    Binary,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Load,
    Logic,
    Not,
    Select,
    Var,
    free_vars,
    substitute,
    transform,
    walk,
)
from .loop_ir import (
    Allocate,
    Buffer,
    For,
    IfThenElse,
    Prefetch,
    Seq,
    Stmt,
    StmtMutator,
    StmtVisitor,
    Store,
    VStore,
    seq,
)
from .partition import partition_loop


class VLoad(Expr):
    """``lanes`` consecutive elements of ``buffer`` starting at flat index ``base``; with
    ``active`` below ``lanes``, only the first ``active`` are read and the others are zero
    (a masked load at a loop's end)."""

    __slots__ = ("active", "base", "buffer", "lanes")

    def __init__(self, buffer: Buffer, base: Expr, lanes: int, active: int | None = None):
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "lanes", lanes)
        object.__setattr__(self, "active", lanes if active is None else active)
        object.__setattr__(self, "dtype", vector_dtype(buffer.dtype, lanes))

    def children(self) -> tuple[Expr, ...]:
        return (self.base,)

    def rebuild(self, children: list[Expr]) -> VLoad:
        return VLoad(self.buffer, children[0], self.lanes, self.active)

    def _make_key(self) -> tuple:
        return ("vload", id(self.buffer), self.base.key(), self.lanes, self.active)


class StridedLoad(Expr):
    """``lanes`` elements of ``buffer`` at flat indices ``base + i * stride``. Printed as
    whole-vector loads that stay within the first and the last of those elements, combined
    by shuffles (``shuffle_plan``). With ``active`` below ``lanes`` only the first
    ``active`` elements are read (the vector loads masked to stay within them)."""

    __slots__ = ("active", "base", "buffer", "lanes", "stride")

    def __init__(self, buffer: Buffer, base: Expr, lanes: int, stride: int,
                 active: int | None = None):
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "lanes", lanes)
        object.__setattr__(self, "stride", stride)
        object.__setattr__(self, "active", lanes if active is None else active)
        object.__setattr__(self, "dtype", vector_dtype(buffer.dtype, lanes))

    def children(self) -> tuple[Expr, ...]:
        return (self.base,)

    def rebuild(self, children: list[Expr]) -> StridedLoad:
        return StridedLoad(self.buffer, children[0], self.lanes, self.stride, self.active)

    def _make_key(self) -> tuple:
        return ("sload", id(self.buffer), self.base.key(), self.lanes, self.stride,
                self.active)


#: The largest constant stride read by shuffling whole vectors (``stride`` loads and
#: ``stride - 1`` two-vector shuffles per vector, against ``lanes`` scalar loads).
MAX_SHUFFLED_STRIDE = 4


def shuffle_plan(lanes: int, stride: int) -> tuple[list[int], list[list[int]]]:
    """How ``StridedLoad`` is printed: the offsets (from ``base``) of the whole vectors
    loaded, every one within ``[0, (lanes - 1) * stride]`` so nothing outside the
    elements read is touched, and for each vector after the first the indices of a
    two-vector shuffle ``(so far, this vector)``: index ``i`` keeps lane ``i`` of the
    result so far, ``lanes + j`` takes lane ``j`` of this vector."""
    if lanes < 2 or stride < 2:
        raise ValueError(f"a strided load needs at least 2 lanes and a stride of at least 2, "
                         f"got {lanes} lanes at stride {stride}")
    last = (lanes - 1) * stride
    count = -(-(last + 1) // lanes)
    offsets = [min(j * lanes, last + 1 - lanes) for j in range(count)]
    source = [next(j for j, o in enumerate(offsets) if o <= i * stride < o + lanes)
              for i in range(lanes)]

    def lane_index(i: int, j: int) -> int:
        """Where lane ``i`` of the result is taken from in step ``j``'s shuffle."""
        if source[i] == j:
            return lanes + i * stride - offsets[j]
        if j == 1:  # the first step also reads the first vector; later lanes: any
            return i * stride - offsets[0] if source[i] == 0 else 0
        return i

    return offsets, [[lane_index(i, j) for i in range(lanes)] for j in range(1, count)]


class Broadcast(Expr):
    __slots__ = ("lanes", "value")

    def __init__(self, value: Expr, lanes: int):
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "lanes", lanes)
        object.__setattr__(self, "dtype", vector_dtype(value.dtype, lanes))

    def children(self) -> tuple[Expr, ...]:
        return (self.value,)

    def rebuild(self, children: list[Expr]) -> Broadcast:
        return Broadcast(children[0], self.lanes)

    def _make_key(self) -> tuple:
        return ("bcast", self.value.key(), self.lanes)


class Lanes(Expr):
    """A vector built lane by lane from scalar expressions (gathers, iota)."""

    __slots__ = ("values",)

    def __init__(self, values: list[Expr]):
        object.__setattr__(self, "values", tuple(values))
        object.__setattr__(self, "dtype", vector_dtype(values[0].dtype, len(values)))

    def children(self) -> tuple[Expr, ...]:
        return self.values

    def rebuild(self, children: list[Expr]) -> Lanes:
        return Lanes(children)

    def _make_key(self) -> tuple:
        return ("lanes", *(v.key() for v in self.values))


def vector_dtype(scalar: str, lanes: int) -> str:
    return f"{scalar}x{lanes}"


def split_vector_dtype(dtype: str) -> tuple[str, int]:
    """("float32", 16) for "float32x16"; (dtype, 1) for scalars."""
    if "x" in dtype:
        base, lanes = dtype.rsplit("x", 1)
        return base, int(lanes)
    return dtype, 1


class CannotVectorize(Exception):
    pass


# ---------------------------------------------------------------------------- flattening


def flat_index(buf: Buffer, indices: tuple[Expr, ...]) -> Expr:
    flat: Expr = Const(0, "int64" if buf.size >= 2**31 else "int32")
    for idx, stride in zip(indices, buf.strides, strict=True):
        flat = flat + (idx * stride if stride != 1 else idx)
    return arith.simplify(flat)


def _flatten_expr(e: Expr) -> Expr:
    def fn(node: Expr) -> Expr | None:
        if isinstance(node, Load) and isinstance(node.source, Buffer):
            return Load(node.source, (flat_index(node.source, node.indices),), node.dtype)
        return None

    return transform(e, fn)


def flatten(s: Stmt) -> Stmt:
    """Multi-dimensional buffer indices become one flat (row-major, strided) index."""
    return _Flatten().visit(s)


class _Flatten(StmtMutator):
    def visit_expr(self, e: Expr) -> Expr:
        return _flatten_expr(e)

    def visit_store(self, s: Store) -> Stmt:
        idx = flat_index(s.buffer, s.indices)
        return Store(s.buffer, (idx,), _flatten_expr(s.value))

    def visit_prefetch(self, s: Prefetch) -> Stmt:
        return Prefetch(s.buffer, (flat_index(s.buffer, s.indices),))


# ---------------------------------------------------------------------------- vectorize


def vectorize(s: Stmt, vector_bytes: int, masked_tails: bool = False) -> Stmt:
    """``s`` with its vectorized loops in vector statements. ``masked_tails`` (a target with
    mask registers: AVX-512): a loop's last lanes that would take several narrower chunks
    (14 of 16: 8 + 4 + 2) are one whole vector with its last lanes masked off instead."""
    with arith.memo_scope():
        return _Vectorize(vector_bytes, masked_tails).visit(s)


class _Vectorize(StmtMutator):
    def __init__(self, vector_bytes: int, masked_tails: bool):
        self.vector_bytes = vector_bytes
        self.masked_tails = masked_tails

    def visit_for(self, s: For) -> Stmt:
        if s.kind != For.VECTORIZED:
            return super().visit_for(s)
        return seq(*(_vectorize_or_keep(piece, self.vector_bytes, self.masked_tails)
                     for piece in partition_loop(s)))


def _vectorize_or_keep(loop: For, vector_bytes: int, masked_tails: bool) -> Stmt:
    try:
        return _vectorize_loop(loop, vector_bytes, masked_tails)
    except CannotVectorize:
        return For(loop.var, loop.extent, For.SERIAL, loop.body, {**loop.pragmas, "simd": 1})


def _chunks(extent: int, lanes: int) -> list[tuple[int, int]]:
    out, start = [], 0
    width = lanes
    while start < extent:
        while width > 1 and start + width > extent:
            width //= 2
        out.append((start, width))
        start += width
    return out


def _masked_tail(extent: int, lanes: int) -> int:
    """How many lanes a masked last vector would hold: the lanes left after the whole
    vectors, where they would take more than one narrower chunk (3 or more, not a power of
    two); 0 where they would not."""
    tail = extent % lanes
    return tail if tail >= 3 and tail & (tail - 1) else 0


def _vectorize_loop(loop: For, vector_bytes: int, masked_tails: bool = False) -> Stmt:
    if not isinstance(loop.extent, Const):
        raise CannotVectorize("dynamic extent")
    body = loop.body
    stores = _straight_line(body, loop.var)
    dtypes = {st.buffer.dtype for st in stores}
    if any(d in ("float16", "bool") for d in dtypes) or not stores:
        raise CannotVectorize("dtype")
    width = min(vector_bytes // dt.itemsize(d) for d in dtypes)
    width = min(width, 64)
    extent = int(loop.extent.value)
    chunks = _chunks(extent, width)
    masked: Stmt | None = None
    if masked_tails and (active := _masked_tail(extent, width)):
        try:
            masked = _vector_stmt(body, loop.var, extent - active, width, active)
            chunks = [(start, lanes) for start, lanes in chunks if start < extent - active]
        except CannotVectorize:  # something in the body cannot run on masked-off lanes
            masked = None
    out: list[Stmt] = []
    for start, lanes in chunks:
        if lanes == 1:
            out.append(_substitute_stmt(body, {loop.var: Const(start, loop.var.dtype)}))
        else:
            out.append(_vector_stmt(body, loop.var, start, lanes))
    if masked is not None:
        out.append(masked)
    return seq(*out)


def _straight_line(s: Stmt, var: Var) -> list[Store]:
    """The stores of ``s``, which may only hold stores under guards independent of ``var``."""
    finder = _StraightLine(var)
    finder.visit(s)
    return finder.stores


class _StraightLine(StmtVisitor):
    def __init__(self, var: Var):
        self.var = var
        self.stores: list[Store] = []

    def visit_store(self, s: Store) -> None:
        self.stores.append(s)

    def visit_if(self, s: IfThenElse) -> None:
        if self.var in free_vars(s.cond):
            raise CannotVectorize(type(s).__name__)
        super().visit_if(s)

    def _refuse(self, s: Stmt) -> None:
        raise CannotVectorize(type(s).__name__)

    visit_for = visit_vstore = visit_allocate = _refuse


def _substitute_stmt(s: Stmt, mapping: dict[Var, Expr]) -> Stmt:
    from .passes import simplify_stmt, substitute_stmt

    return simplify_stmt(substitute_stmt(s, mapping), {}) or Seq([])


def _vector_stmt(s: Stmt, var: Var, start: int, lanes: int, active: int | None = None) -> Stmt:
    """The vector form of a straight-line body for lanes ``var = start .. start + lanes - 1``
    (guards do not depend on ``var``); with ``active``, only the first ``active`` lanes
    exist: the others read nothing, write nothing, and compute on zeros."""
    return _VectorStmt(var, start, lanes, lanes if active is None else active).visit(s)


class _VectorStmt(StmtMutator):
    def __init__(self, var: Var, start: int, lanes: int, active: int):
        self.var, self.start, self.lanes, self.active = var, start, lanes, active

    def visit_if(self, s: IfThenElse) -> Stmt:
        var = self.var
        cond = arith.simplify(substitute(s.cond, {var: Const(self.start, var.dtype)}))
        return IfThenElse(cond, self.visit(s.then_body),
                          None if s.else_body is None else self.visit(s.else_body))

    def visit_prefetch(self, s: Prefetch) -> Stmt:
        """One hint per vector, at its first lane (a vector of 64 bytes is one cache line,
        and the next vector's hint fetches the next)."""
        start = Const(self.start, self.var.dtype)
        return Prefetch(s.buffer, tuple(arith.simplify(substitute(i, {self.var: start}))
                                        for i in s.indices))

    def visit_store(self, s: Store) -> Stmt:
        var, start, lanes, active = self.var, self.start, self.lanes, self.active
        coeff, base = _stride(s.indices[0], var, start, active)
        if coeff != 1:
            raise CannotVectorize("store stride")
        _check_maskable(s.buffer.dtype, lanes, active)
        value = _vec(s.value, _Chunk(var, start, lanes, active), _users(s.value, var))
        if split_vector_dtype(value.dtype)[1] == 1:
            value = Broadcast(value, lanes)
        return VStore(s.buffer, base, value, lanes, active)


def _stride(index: Expr, var: Var, start: int, lanes: int) -> tuple[int | None, Expr]:
    """(coefficient of ``var``, index at ``var = start``) over the chunk's lanes
    ``var = start .. start + lanes - 1``; coefficient None if not affine there. An index
    that divides ``var`` (a panel-packed weight's ``W[j // 16, k, j % 16]``) can still be
    affine over a chunk that stays inside one block: it is simplified with the lane's
    range first."""
    coeff, base = _affine_stride(index, var, start)
    if coeff is not None or var not in free_vars(index):
        return coeff, base
    lane, lane_range = _lane(var.dtype, lanes)
    within = substitute(index, {var: Binary("+", Const(start, var.dtype), lane, var.dtype)})
    return _affine_stride(arith.simplify(within, lane_range), lane, 0)


@functools.cache
def _lane(dtype: str, lanes: int) -> tuple[Var, arith.Ranges]:
    """The lane variable of a chunk and its range (one object per kind, so that
    simplifications of the many loads of one statement are shared)."""
    lane = Var("lane", dtype)
    return lane, {lane: (0, lanes - 1)}


def _affine_stride(index: Expr, var: Var, start: int) -> tuple[int | None, Expr]:
    lin = arith.linear(index)
    if lin is None:
        return None, index
    coeff = 0
    for k, c in lin.terms.items():
        atom = lin.atoms[k]
        if atom is var:
            coeff = c
        elif var in free_vars(atom):
            return None, index
    return coeff, arith.simplify(substitute(index, {var: Const(start, var.dtype)}))


def _users(e: Expr, var: Var) -> set[int]:
    """The ids of the nodes of ``e`` that depend on ``var`` (one pass over a shared tree)."""
    found: set[int] = set()
    done: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if not expanded:
            stack.append((node, True))
            stack.extend((c, False) for c in node.children())
            continue
        done.add(id(node))
        if node is var or any(id(c) in found for c in node.children()):
            found.add(id(node))
    return found


class _Chunk(NamedTuple):
    """The lanes being vectorized: ``var = start .. start + lanes - 1``, of which the first
    ``active`` exist (all of them but in a masked tail)."""

    var: Var
    start: int
    lanes: int
    active: int

    @property
    def masked(self) -> bool:
        return self.active < self.lanes


#: vector sizes a masked load or store is printed for (AVX-512's, VL and BW included)
MASKED_BITS = (128, 256, 512)


def _check_maskable(dtype: str, lanes: int, active: int) -> None:
    if active < lanes and (dtype == "bool" or dt.itemsize(dtype) * lanes * 8 not in MASKED_BITS):
        raise CannotVectorize("masked access width")


def _vec(e: Expr, c: _Chunk, users: set[int]) -> Expr:
    """The vector form of ``e`` for the chunk's lanes; scalars stay scalar (the C vector
    extension broadcasts them in mixed operations). ``users`` are the ids of the nodes that
    depend on the chunk's variable (``_users``)."""
    var, start, lanes = c.var, c.start, c.lanes
    if id(e) not in users:
        return arith.simplify(e) if dt.is_int(e.dtype) else e
    if isinstance(e, Var):
        return Lanes([Const(start + i, e.dtype) for i in range(lanes)])
    if isinstance(e, Load):
        coeff, base = _stride(e.indices[0], var, start, c.active)
        _check_maskable(e.dtype, lanes, c.active)
        if coeff == 1:
            return VLoad(e.source, base, lanes, c.active)
        if coeff is not None and 2 <= coeff <= MAX_SHUFFLED_STRIDE and lanes >= 4:
            return StridedLoad(e.source, base, lanes, coeff, c.active)
        # masked-off lanes read nothing: they are zero
        return Lanes([arith.simplify(substitute(e, {var: Const(start + i, var.dtype)}))
                      if i < c.active else Const(0, e.dtype) for i in range(lanes)])
    if isinstance(e, Select):
        cond = _vec(e.cond, c, users)
        if split_vector_dtype(cond.dtype)[1] > 1 and any(
                isinstance(n, Load) for side in (e.true_value, e.false_value) for n in walk(side)):
            raise CannotVectorize("lane-dependent select over loads")
        sides = [_vec(side, c, users) for side in (e.true_value, e.false_value)]
        sides = [x if split_vector_dtype(x.dtype)[1] > 1 else Broadcast(x, lanes) for x in sides]
        return Select(cond, sides[0], sides[1])
    if isinstance(e, Compare | Logic):
        return type(e)(e.op, _vec(e.a, c, users), _vec(e.b, c, users),
                       vector_dtype("bool", lanes))
    if isinstance(e, Binary):
        if c.masked and dt.is_int(e.dtype) and e.op in ("/", "floordiv", "floormod"):
            raise CannotVectorize("integer division on masked-off (zero) lanes")
        a, b = _vec(e.a, c, users), _vec(e.b, c, users)
        return Binary(e.op, a, b, vector_dtype(e.dtype, lanes))
    if isinstance(e, Not):
        return _not_vec(_vec(e.a, c, users), lanes)
    if isinstance(e, Call):
        args = tuple(_vec(a, c, users) for a in e.args)
        return Call(e.name, args, vector_dtype(e.dtype, lanes))
    if isinstance(e, Cast):
        inner = _vec(e.value, c, users)
        if split_vector_dtype(inner.dtype)[0] == "bool":
            raise CannotVectorize("cast of a mask")
        return _cast_vec(e.dtype, inner, lanes)
    raise CannotVectorize(type(e).__name__)


def _not_vec(a: Expr, lanes: int) -> Expr:
    return Compare("==", a, Broadcast(Const(False, "bool"), lanes), vector_dtype("bool", lanes))


def _cast_vec(dtype: str, inner: Expr, lanes: int) -> Expr:
    out = Cast.__new__(Cast)
    object.__setattr__(out, "dtype", vector_dtype(dtype, lanes))
    object.__setattr__(out, "value", inner)
    return out


# ---------------------------------------------------------------------------- promotion


def promote_registers(s: Stmt) -> dict[Buffer, int]:
    """Find local buffers that can live in variables: every access has a constant index
    (scalar accesses), or every access is a vector of the same lane count at a constant,
    aligned base. Returns {buffer: lanes of each variable}."""
    accesses: dict[Buffer, set[tuple[str, int, int]]] = {}
    local: list[Buffer] = []

    def record(buf: Buffer, kind: str, index: Expr, lanes: int) -> None:
        value = int(index.value) if isinstance(index, Const) else -1
        accesses.setdefault(buf, set()).add((kind, value, lanes))

    class Accesses(StmtVisitor):
        def visit_expr(self, e: Expr) -> None:
            for n in walk(e):
                if isinstance(n, VLoad):  # a masked access leaves part of its vector out
                    record(n.buffer, "v" if n.active == n.lanes else "masked", n.base, n.lanes)
                elif isinstance(n, StridedLoad):  # read as wider vectors: stays in memory
                    record(n.buffer, "strided", n.base, n.lanes)
                elif isinstance(n, Load) and isinstance(n.source, Buffer):
                    record(n.source, "s", n.indices[0], 1)

        def visit_allocate(self, st: Allocate) -> None:
            if st.buffer.scope == "local":
                local.append(st.buffer)
            super().visit_allocate(st)

        def visit_store(self, st: Store) -> None:
            record(st.buffer, "s", st.indices[0], 1)
            self.visit_expr(st.value)

        def visit_vstore(self, st: VStore) -> None:
            record(st.buffer, "v" if st.active == st.lanes else "masked", st.base, st.lanes)
            self.visit_expr(st.value)

    Accesses().visit(s)
    promoted: dict[Buffer, int] = {}
    for buf in local:
        acc = accesses.get(buf, set())
        if not acc or any(value < 0 for _, value, _ in acc):
            continue
        kinds = {k for k, _, _ in acc}
        if kinds & {"strided", "masked"}:
            continue
        lane_counts = {lanes for _, _, lanes in acc}
        if len(kinds) != 1 or len(lane_counts) != 1:
            continue
        lanes = lane_counts.pop()
        if any(value % lanes for _, value, _ in acc) or buf.size % lanes:
            continue
        if buf.size // lanes > 64:  # more variables than registers: leave it in memory
            continue
        promoted[buf] = lanes
    return promoted


__all__ = ["Broadcast", "Lanes", "StridedLoad", "VLoad", "VStore", "flatten", "promote_registers",
           "split_vector_dtype", "vectorize"]
