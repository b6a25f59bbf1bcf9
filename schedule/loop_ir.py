"""The loop IR that lowering produces and code generation consumes, with its printer.

Statements: ``For`` (a loop from 0, serial / parallel / vectorized / unrolled),
``Seq``, ``Store``, ``IfThenElse`` and ``Allocate``. Buffers are flat arrays
with a shape, a dtype, a scope and row strides. Loads in expressions are
``expr.Load`` nodes whose source is a ``Buffer``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from . import dtype as dt
from .expr import Expr, Load, Var, walk
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


class For(Stmt):
    SERIAL, PARALLEL, VECTORIZED, UNROLLED = "serial", "parallel", "vectorized", "unrolled"
    __slots__ = ("body", "extent", "kind", "pragmas", "var")

    def __init__(self, var: Var, extent: Expr | int, kind: str, body: Stmt,
                 pragmas: dict[str, int] | None = None):
        from .expr import as_expr

        self.var = var
        self.extent = as_expr(extent)
        self.kind = kind
        self.body = body
        self.pragmas = dict(pragmas or {})


class Seq(Stmt):
    __slots__ = ("stmts",)

    def __init__(self, stmts: Sequence[Stmt]):
        flat: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Seq):
                flat.extend(s.stmts)
            elif s is not None:
                flat.append(s)
        self.stmts = flat


class Store(Stmt):
    __slots__ = ("buffer", "indices", "value")

    def __init__(self, buffer: Buffer, indices: Sequence[Expr], value: Expr):
        self.buffer = buffer
        self.indices = tuple(indices)
        self.value = value


class IfThenElse(Stmt):
    __slots__ = ("cond", "else_body", "then_body")

    def __init__(self, cond: Expr, then_body: Stmt, else_body: Stmt | None = None):
        self.cond = cond
        self.then_body = then_body
        self.else_body = else_body


class Allocate(Stmt):
    __slots__ = ("body", "buffer")

    def __init__(self, buffer: Buffer, body: Stmt):
        self.buffer = buffer
        self.body = body


def seq(*stmts: Stmt | None) -> Stmt:
    items = [s for s in stmts if s is not None]
    return items[0] if len(items) == 1 else Seq(items)


def children(s: Stmt) -> list[Stmt]:
    if isinstance(s, For | Allocate):
        return [s.body]
    if isinstance(s, Seq):
        return list(s.stmts)
    if isinstance(s, IfThenElse):
        return [s.then_body] + ([s.else_body] if s.else_body is not None else [])
    return []


def walk_stmts(s: Stmt) -> Iterator[Stmt]:
    yield s
    for c in children(s):
        yield from walk_stmts(c)


def stmt_exprs(s: Stmt) -> list[Expr]:
    if isinstance(s, Store):
        return [*s.indices, s.value]
    if isinstance(s, IfThenElse):
        return [s.cond]
    if isinstance(s, For):
        return [s.extent]
    return []


def loads_in(s: Stmt) -> Iterator[Load]:
    for st in walk_stmts(s):
        for e in stmt_exprs(st):
            for node in walk(e):
                if isinstance(node, Load):
                    yield node


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


def stmt_str(s: Stmt, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(s, Seq):
        return "".join(stmt_str(c, indent) for c in s.stmts)
    if isinstance(s, For):
        kind = "" if s.kind == For.SERIAL else f" {s.kind}"
        pragmas = "".join(f" @{k}={v}" for k, v in s.pragmas.items())
        return (f"{pad}for{kind} {s.var.name} in 0..{expr_str(s.extent)}{pragmas}:\n"
                f"{stmt_str(s.body, indent + 1)}")
    if isinstance(s, Store):
        idx = ", ".join(expr_str(i) for i in s.indices)
        return f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}\n"
    if isinstance(s, IfThenElse):
        out = f"{pad}if {expr_str(s.cond)}:\n{stmt_str(s.then_body, indent + 1)}"
        if s.else_body is not None:
            out += f"{pad}else:\n{stmt_str(s.else_body, indent + 1)}"
        return out
    if isinstance(s, Allocate):
        b = s.buffer
        return (f"{pad}allocate {b.name}: {b.dtype}{list(b.shape)} {b.scope}\n"
                f"{stmt_str(s.body, indent)}")
    return f"{pad}<{type(s).__name__}>\n"
