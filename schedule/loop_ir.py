"""The loop IR that lowering produces and code generation consumes: its statements, the one
traversal every pass is built on, and its printer.

Statements: ``For`` (a loop from 0, serial / parallel / vectorized / unrolled, or bound
to a GPU thread index), ``Seq``, ``Store``, ``IfThenElse``, ``Allocate``, ``VStore`` (a
vector store, made by vectorization just before C printing) and ``Barrier`` (a GPU
block's threads wait for each other; made by the GPU lowering). Buffers are flat arrays
with a shape, a dtype, a scope and row strides. Loads in expressions are ``expr.Load``
nodes whose source is a ``Buffer``.

``StmtVisitor`` (read-only walks) and ``StmtMutator`` (rewrites) are the only code that
knows each statement kind's children: a statement class names its ``visit_<kind>``
method, and the two base classes recurse through every kind. A pass subclasses one of
them and overrides the methods of the kinds it cares about (calling the base method to
keep recursing), and ``visit_expr`` to see or rewrite the expressions statements hold.
A new statement kind is its class here plus its two ``visit_`` methods (and the passes
that have something to do with it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import ClassVar

from . import dtype as dt
from .expr import Const, Expr, Load, Var
from .printer import expr_str


class Buffer:
    """A named array. ``strides`` are in elements; padded rows come from storage_align."""

    def __init__(self, name: str, shape: Sequence[int], dtype: str, scope: str = "global",
                 align: dict[int, tuple[int, int]] | None = None):
        self.name = name
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.scope = scope
        strides = [1] * len(self.shape)
        for d in range(len(self.shape) - 2, -1, -1):
            stride = strides[d + 1] * self.shape[d + 1]
            if align and d in align:
                factor, offset = align[d]
                stride += (offset - stride) % factor
            strides[d] = stride
        self.strides = tuple(strides)

    @property
    def size(self) -> int:
        """Elements to allocate (including storage-align padding)."""
        if not self.shape:
            return 1
        return self.strides[0] * self.shape[0]

    @property
    def nbytes(self) -> int:
        return self.size * dt.itemsize(self.dtype)

    def load(self, indices: Sequence[Expr]) -> Load:
        return Load(self, tuple(indices), self.dtype)

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype}, {self.scope})"


class Stmt:
    __slots__ = ()
    #: The method of ``StmtVisitor`` / ``StmtMutator`` that handles this kind.
    visit_method: ClassVar[str]


class For(Stmt):
    SERIAL, PARALLEL, VECTORIZED, UNROLLED = "serial", "parallel", "vectorized", "unrolled"
    #: The outermost loop of a nest a tensor intrinsic computes (only targets that have
    #: the intrinsic generate code for it).
    TENSORIZED = "tensorized"
    __slots__ = ("body", "extent", "intrin", "kind", "pragmas", "var")
    visit_method = "visit_for"

    def __init__(self, var: Var, extent: Expr | int, kind: str, body: Stmt,
                 pragmas: dict[str, int] | None = None, intrin: str | None = None):
        from .expr import as_expr

        self.var = var
        self.extent = as_expr(extent)
        self.kind = kind
        self.body = body
        self.pragmas = dict(pragmas or {})
        #: the tensor intrinsic a ``tensorized`` loop's nest computes
        self.intrin = intrin


class Seq(Stmt):
    """Statements in order; nested sequences are flattened and ``None`` items dropped."""

    __slots__ = ("stmts",)
    visit_method = "visit_seq"

    def __init__(self, stmts: Sequence[Stmt | None]):
        flat: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Seq):
                flat.extend(s.stmts)
            elif s is not None:
                flat.append(s)
        self.stmts = flat


class Store(Stmt):
    __slots__ = ("buffer", "indices", "value")
    visit_method = "visit_store"

    def __init__(self, buffer: Buffer, indices: Sequence[Expr], value: Expr):
        self.buffer = buffer
        self.indices = tuple(indices)
        self.value = value


class VStore(Stmt):
    """``lanes`` consecutive elements of ``buffer`` from flat index ``base`` (vectorization);
    with ``active`` below ``lanes``, only the first ``active`` lanes are written (a masked
    store: the vector's other lanes are past the loop's end)."""

    __slots__ = ("active", "base", "buffer", "lanes", "value")
    visit_method = "visit_vstore"

    def __init__(self, buffer: Buffer, base: Expr, value: Expr, lanes: int,
                 active: int | None = None):
        self.buffer, self.base, self.value, self.lanes = buffer, base, value, lanes
        self.active = lanes if active is None else active


class IfThenElse(Stmt):
    __slots__ = ("cond", "else_body", "then_body")
    visit_method = "visit_if"

    def __init__(self, cond: Expr, then_body: Stmt, else_body: Stmt | None = None):
        self.cond = cond
        self.then_body = then_body
        self.else_body = else_body


class Allocate(Stmt):
    __slots__ = ("body", "buffer")
    visit_method = "visit_allocate"

    def __init__(self, buffer: Buffer, body: Stmt):
        self.buffer = buffer
        self.body = body


class Prefetch(Stmt):
    """A hint that the element of ``buffer`` at ``indices`` will be read soon: its cache
    line is fetched into the nearest cache without waiting for it (the ``prefetch`` schedule
    primitive). It computes nothing and never faults, wherever it points."""

    __slots__ = ("buffer", "indices")
    visit_method = "visit_prefetch"

    def __init__(self, buffer: Buffer, indices: Sequence[Expr]):
        self.buffer = buffer
        self.indices = tuple(indices)


class Barrier(Stmt):
    """Every thread of a GPU block waits here until all have arrived, and their writes to
    shared memory before it are visible to all after it."""

    __slots__ = ()
    visit_method = "visit_barrier"


def seq(*stmts: Stmt | None) -> Stmt:
    items = [s for s in stmts if s is not None]
    return items[0] if len(items) == 1 else Seq(items)


# ---------------------------------------------------------------------------- traversal


class StmtVisitor:
    """A read-only walk over a statement tree, in program order: a statement's expressions
    (``visit_expr``, which does not descend into them: ``expr.walk`` does) come before its
    child statements. ``visit`` returns what the kind's method returns."""

    def visit(self, s: Stmt):
        return getattr(self, s.visit_method)(s)

    def visit_expr(self, e: Expr) -> None:
        pass

    def visit_for(self, s: For) -> None:
        self.visit_expr(s.extent)
        self.visit(s.body)

    def visit_seq(self, s: Seq) -> None:
        for c in s.stmts:
            self.visit(c)

    def visit_store(self, s: Store) -> None:
        for i in s.indices:
            self.visit_expr(i)
        self.visit_expr(s.value)

    def visit_vstore(self, s: VStore) -> None:
        self.visit_expr(s.base)
        self.visit_expr(s.value)

    def visit_if(self, s: IfThenElse) -> None:
        self.visit_expr(s.cond)
        self.visit(s.then_body)
        if s.else_body is not None:
            self.visit(s.else_body)

    def visit_allocate(self, s: Allocate) -> None:
        self.visit(s.body)

    def visit_prefetch(self, s: Prefetch) -> None:
        for i in s.indices:
            self.visit_expr(i)

    def visit_barrier(self, s: Barrier) -> None:
        pass


class StmtMutator:
    """A rewrite of a statement tree, bottom-up. The result is a new tree: every loop,
    sequence, branch and allocation is rebuilt (so a node's identity stands for one place
    in one tree, as the guard versioning and the cost model's loop ids assume); a store is
    rebuilt when ``visit_expr`` changed one of its expressions. ``visit_expr`` maps every
    expression a statement holds (the identity here)."""

    def visit(self, s: Stmt):
        return getattr(self, s.visit_method)(s)

    def visit_expr(self, e: Expr) -> Expr:
        return e

    def visit_for(self, s: For) -> Stmt | None:
        return For(s.var, self.visit_expr(s.extent), s.kind, self.visit(s.body), s.pragmas,
                   s.intrin)

    def visit_seq(self, s: Seq) -> Stmt | None:
        return Seq([self.visit(c) for c in s.stmts])

    def visit_store(self, s: Store) -> Stmt | None:
        indices = [self.visit_expr(i) for i in s.indices]
        value = self.visit_expr(s.value)
        if value is s.value and all(n is o for n, o in zip(indices, s.indices, strict=True)):
            return s
        return Store(s.buffer, indices, value)

    def visit_vstore(self, s: VStore) -> Stmt | None:
        base, value = self.visit_expr(s.base), self.visit_expr(s.value)
        if base is s.base and value is s.value:
            return s
        return VStore(s.buffer, base, value, s.lanes, s.active)

    def visit_if(self, s: IfThenElse) -> Stmt | None:
        return IfThenElse(self.visit_expr(s.cond), self.visit(s.then_body),
                          None if s.else_body is None else self.visit(s.else_body))

    def visit_allocate(self, s: Allocate) -> Stmt | None:
        return Allocate(s.buffer, self.visit(s.body))

    def visit_prefetch(self, s: Prefetch) -> Stmt | None:
        indices = [self.visit_expr(i) for i in s.indices]
        if all(n is o for n, o in zip(indices, s.indices, strict=True)):
            return s
        return Prefetch(s.buffer, indices)

    def visit_barrier(self, s: Barrier) -> Stmt | None:
        return s


class _Collect(StmtVisitor):
    def __init__(self) -> None:
        self.stmts: list[Stmt] = []

    def visit(self, s: Stmt) -> None:
        self.stmts.append(s)
        super().visit(s)


def walk_stmts(s: Stmt) -> Iterator[Stmt]:
    """Every statement of ``s``, ``s`` first, in program order."""
    collect = _Collect()
    collect.visit(s)
    return iter(collect.stmts)


class UnrolledSize(StmtVisitor):
    """How many stores a statement runs if fully unrolled (the longer branch of an ``if``);
    None when a loop extent is not a constant. Answers are kept per statement node, so
    asking again for nested loops (as the unroller and the cost model do) costs nothing."""

    def __init__(self) -> None:
        self._memo: dict[int, int | None] = {}

    def visit(self, s: Stmt) -> int | None:
        key = id(s)
        if key not in self._memo:
            self._memo[key] = super().visit(s)
        return self._memo[key]

    def visit_for(self, s: For) -> int | None:
        if not isinstance(s.extent, Const):
            return None
        if s.kind == For.TENSORIZED:  # one intrinsic: about a vector statement per output
            return int(s.extent.value)
        n = self.visit(s.body)
        return None if n is None else int(s.extent.value) * n

    def visit_seq(self, s: Seq) -> int | None:
        total = 0
        for child in s.stmts:
            n = self.visit(child)
            if n is None:
                return None
            total += n
        return total

    def visit_if(self, s: IfThenElse) -> int | None:
        a = self.visit(s.then_body)
        b = 0 if s.else_body is None else self.visit(s.else_body)
        return None if a is None or b is None else max(a, b)

    def visit_allocate(self, s: Allocate) -> int | None:
        return self.visit(s.body)

    def visit_store(self, s: Store | VStore) -> int:
        return 1

    visit_vstore = visit_store

    def visit_barrier(self, s: Barrier | Prefetch) -> int:
        return 0

    visit_prefetch = visit_barrier


# ---------------------------------------------------------------------------- printing


class LoweredFunc:
    """A lowered program: argument buffers and a body."""

    def __init__(self, name: str, args: list[Buffer], body: Stmt):
        self.name = name
        self.args = args
        self.body = body

    def __str__(self) -> str:
        args = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in self.args)
        return f"func {self.name}({args}) {{\n{stmt_str(self.body, 1)}}}\n"

    __repr__ = __str__


class _Printer(StmtVisitor):
    def __init__(self, indent: int):
        self.indent = indent
        self.parts: list[str] = []

    def line(self, text: str) -> None:
        self.parts.append(f"{'  ' * self.indent}{text}\n")

    def nested(self, s: Stmt) -> None:
        self.indent += 1
        self.visit(s)
        self.indent -= 1

    def visit_for(self, s: For) -> None:
        kind = "" if s.kind == For.SERIAL else f" {s.kind}"
        pragmas = "".join(f" @{k}={v}" for k, v in s.pragmas.items())
        self.line(f"for{kind} {s.var.name} in 0..{expr_str(s.extent)}{pragmas}:")
        self.nested(s.body)

    def visit_store(self, s: Store) -> None:
        idx = ", ".join(expr_str(i) for i in s.indices)
        self.line(f"{s.buffer.name}[{idx}] = {expr_str(s.value)}")

    def visit_vstore(self, s: VStore) -> None:
        self.line(f"<{type(s).__name__}>")

    def visit_if(self, s: IfThenElse) -> None:
        self.line(f"if {expr_str(s.cond)}:")
        self.nested(s.then_body)
        if s.else_body is not None:
            self.line("else:")
            self.nested(s.else_body)

    def visit_allocate(self, s: Allocate) -> None:
        b = s.buffer
        self.line(f"allocate {b.name}: {b.dtype}{list(b.shape)} {b.scope}")
        self.visit(s.body)

    def visit_prefetch(self, s: Prefetch) -> None:
        self.line(f"prefetch {s.buffer.name}[{', '.join(expr_str(i) for i in s.indices)}]")

    def visit_barrier(self, s: Barrier) -> None:
        self.line("barrier")


def stmt_str(s: Stmt, indent: int = 0) -> str:
    printer = _Printer(indent)
    printer.visit(s)
    return "".join(printer.parts)
