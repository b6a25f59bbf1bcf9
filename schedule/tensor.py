"""Tensors and the operations that produce them: placeholders, computes and reductions.

A ``Tensor`` is the single output of an ``Operation``. A ``ComputeOp`` defines
every element of its output by one expression over its axes; a reduction is a
``Reduce`` node at the top of that expression. These objects are immutable
definitions; schedules never modify them (cache stages create new operations).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import dtype as dt
from .expr import Const, Expr, Load, Var, as_expr, walk


class TensorExprError(ValueError):
    """A tensor expression was defined incorrectly (shape, dtype, indices, reductions)."""


class IterVar:
    """An iteration axis: a variable with a range ``[0, extent)`` and a kind."""

    __slots__ = ("extent", "kind", "var")

    SPATIAL = "spatial"
    REDUCE = "reduce"

    def __init__(self, var: Var, extent: int, kind: str):
        self.var = var
        self.extent = int(extent)
        self.kind = kind

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def is_reduce(self) -> bool:
        return self.kind == IterVar.REDUCE

    def __repr__(self) -> str:
        return f"IterVar({self.name}, extent={self.extent}, {self.kind})"


def _delegate(name: str) -> Callable[..., Expr]:
    def method(self: IterVar, *args: Any) -> Expr:
        return getattr(self.var, name)(*args)

    return method


# An axis can be used directly in index arithmetic (``k <= i``, ``i * 2 + r``), as in TVM.
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__neg__", "__lt__",
              "__le__", "__gt__", "__ge__"):
    setattr(IterVar, _name, _delegate(_name))


def _extent(value: Any, what: str) -> int:
    if isinstance(value, Const):
        value = value.value
    if isinstance(value, bool) or not isinstance(value, int):
        if hasattr(value, "__index__"):
            value = int(value)
        else:
            raise TensorExprError(f"{what} must be a positive integer, got {value!r}")
    if value < 1:
        raise TensorExprError(f"{what} must be a positive integer, got {value}")
    return value


def reduce_axis(dom: tuple[int, int] | int, name: str = "rv") -> IterVar:
    """A reduction axis over ``range(dom)`` or ``[dom[0], dom[1])`` (the start must be 0)."""
    if isinstance(dom, tuple | list):
        if len(dom) != 2:
            raise TensorExprError(f"reduce_axis range must be (start, end), got {dom!r}")
        start, end = dom
        if start != 0:
            raise TensorExprError(f"reduce_axis {name}: ranges must start at 0, got {start}")
        dom = end
    return IterVar(Var(name), _extent(dom, f"reduce_axis {name} extent"), IterVar.REDUCE)


class Reducer:
    """A commutative, associative combiner with an identity element."""

    def __init__(self, name: str, combine: Callable[[Expr, Expr], Expr],
                 identity: Callable[[str], Expr]):
        self.name = name
        self._combine = combine
        self._identity = identity

    def combine(self, acc: Expr, value: Expr) -> Expr:
        return as_expr(self._combine(acc, value), acc.dtype)

    def identity(self, dtype: str) -> Expr:
        return as_expr(self._identity(dtype), dtype)

    def key(self, dtype: str) -> tuple:
        """Structural identity: the combine expression over two symbolic operands."""
        from .printer import expr_str

        body = self.combine(Var("x", dtype), Var("y", dtype))
        return (self.name, expr_str(body), expr_str(self.identity(dtype)))

    def __call__(self, source: Any, axis: IterVar | Sequence[IterVar],
                 where: Any = None) -> Reduce:
        axes = list(axis) if isinstance(axis, list | tuple) else [axis]
        if not axes:
            raise TensorExprError(f"{self.name}: reduction needs at least one axis")
        for a in axes:
            if not isinstance(a, IterVar) or not a.is_reduce:
                raise TensorExprError(f"{self.name}: axis {a!r} is not a te.reduce_axis")
        if len({id(a) for a in axes}) != len(axes):
            raise TensorExprError(f"{self.name}: the same reduce axis is listed twice")
        source = as_expr(source)
        cond = None if where is None else as_expr(where)
        if cond is not None and cond.dtype != "bool":
            raise TensorExprError(f"{self.name}: 'where' must be a bool expression")
        return Reduce(self, source, tuple(axes), cond)


class Reduce(Expr):
    """A reduction of ``source`` over ``axis`` (only valid as the top of a compute body)."""

    __slots__ = ("axis", "condition", "reducer", "source")

    def __init__(self, reducer: Reducer, source: Expr, axis: tuple[IterVar, ...],
                 condition: Expr | None):
        object.__setattr__(self, "reducer", reducer)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "axis", axis)
        object.__setattr__(self, "condition", condition)
        object.__setattr__(self, "dtype", source.dtype)

    def children(self) -> tuple[Expr, ...]:
        return (self.source,) if self.condition is None else (self.source, self.condition)

    def rebuild(self, children: list[Expr]) -> Reduce:
        cond = children[1] if len(children) > 1 else None
        return Reduce(self.reducer, children[0], self.axis, cond)

    def _make_key(self) -> tuple:
        cond = None if self.condition is None else self.condition.key()
        return ("reduce", self.reducer.key(self.dtype), self.source.key(),
                tuple(a.var.key() for a in self.axis), cond)


def comm_reducer(fcombine: Callable[[Expr, Expr], Expr], fidentity: Callable[[str], Any],
                 name: str = "reduce") -> Reducer:
    """Declare a commutative reducer, e.g. ``comm_reducer(lambda x, y: x * y, lambda t: 1)``."""
    return Reducer(name, fcombine, fidentity)


# ---------------------------------------------------------------------------- operations


class Operation:
    """Base of placeholder and compute operations; each has exactly one output tensor."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __init__(self) -> None:
        self.output = Tensor(self)

    @property
    def input_tensors(self) -> list[Tensor]:
        return []


class PlaceholderOp(Operation):
    def __init__(self, shape: tuple[int, ...], dtype: str, name: str):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        super().__init__()


class ComputeOp(Operation):
    """``output[axis...] = body`` for every point of the axes."""

    def __init__(self, name: str, axis: list[IterVar], body: Expr, tag: str = "",
                 attrs: dict[str, Any] | None = None):
        self.name = name
        self.axis = list(axis)
        self.body = body
        self.reduce_axis = list(body.axis) if isinstance(body, Reduce) else []
        self.shape = tuple(a.extent for a in axis)
        self.dtype = body.dtype
        self.tag = tag
        self.attrs = dict(attrs or {})
        super().__init__()

    @property
    def input_tensors(self) -> list[Tensor]:
        """The tensors the body reads, in order of first read (found once: the body does
        not change)."""
        found = self.__dict__.get("_input_tensors")
        if found is None:
            seen: dict[int, Tensor] = {}
            for node in walk(self.body):
                if isinstance(node, Load) and isinstance(node.source, Tensor):
                    seen.setdefault(id(node.source.op), node.source)
            found = self.__dict__["_input_tensors"] = list(seen.values())
        return list(found)

    @property
    def is_injective(self) -> bool:
        return not isinstance(self.body, Reduce)


class Tensor:
    """The output of an operation; indexing it (``A[i, j]``) makes an element read."""

    __slots__ = ("op",)

    def __init__(self, op: Operation):
        self.op = op

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    def __getitem__(self, indices: Any) -> Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise TensorExprError(
                f"tensor {self.name} has {self.ndim} dimension(s) {list(self.shape)} but was "
                f"indexed with {len(indices)} index(es)"
            )
        exprs = []
        for i in indices:
            if isinstance(i, IterVar):
                i = i.var
            e = as_expr(i)
            if not dt.is_int(e.dtype):
                raise TensorExprError(f"index of {self.name} must be an integer, got {e.dtype}")
            exprs.append(e)
        return Load(self, tuple(exprs), self.dtype)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={list(self.shape)}, {self.dtype})"


# ---------------------------------------------------------------------------- constructors


def placeholder(shape: Sequence[int] | int, dtype: str = "float32",
                name: str = "placeholder") -> Tensor:
    """An input tensor."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(_extent(s, f"shape of {name}") for s in shape)
    return PlaceholderOp(shape, dt.check_dtype(dtype), name).output


def _axis_names(fcompute: Callable[..., Any], ndim: int) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return [f"ax{i}" for i in range(ndim)]
    params = [p for p in params if p.default is p.empty]
    if len(params) != ndim:
        raise TensorExprError(
            f"compute of shape {ndim}-d needs a function of {ndim} index argument(s), "
            f"got one of {len(params)}"
        )
    return [p.name for p in params]


def compute(shape: Sequence[int] | int, fcompute: Callable[..., Any], name: str = "compute",
            tag: str = "", attrs: dict[str, Any] | None = None) -> Tensor:
    """Define a tensor by a function from indices to an expression, like TVM's te.compute."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(_extent(s, f"shape of {name}") for s in shape)
    names = _axis_names(fcompute, len(shape))
    axis = [IterVar(Var(n), s, IterVar.SPATIAL) for n, s in zip(names, shape, strict=True)]
    body = fcompute(*[a.var for a in axis])
    if isinstance(body, list | tuple):
        raise TensorExprError(f"compute {name}: multiple outputs are not supported")
    try:
        body = as_expr(body)
    except TypeError as err:
        raise TensorExprError(f"compute {name}: {err}") from None
    check_body(name, axis, body)
    return ComputeOp(name, axis, body, tag, attrs).output


def check_body(name: str, axis: list[IterVar], body: Expr) -> None:
    reduce_vars = set()
    if isinstance(body, Reduce):
        reduce_vars = {a.var for a in body.axis}
        inner = [body.source] + ([body.condition] if body.condition is not None else [])
    else:
        inner = [body]
    allowed = {a.var for a in axis} | reduce_vars
    for root in inner:
        for node in walk(root):
            if isinstance(node, Reduce):
                raise TensorExprError(
                    f"compute {name}: a reduction must be the whole body of a compute, not part "
                    "of a larger expression (compute it in its own stage)"
                )
            if isinstance(node, Var) and node not in allowed:
                raise TensorExprError(
                    f"compute {name}: variable '{node.name}' is neither an axis of this compute "
                    "nor one of the reduce axes of its reduction (mismatched reduce axes?)"
                )


def min_value(dtype: str) -> Expr:
    if dt.is_float(dtype):
        return Const(float("-inf"), dtype)
    if dtype == "bool":
        return Const(False, dtype)
    return Const(int(np.iinfo(dt.numpy_dtype(dtype)).min), dtype)


def max_value(dtype: str) -> Expr:
    if dt.is_float(dtype):
        return Const(float("inf"), dtype)
    if dtype == "bool":
        return Const(True, dtype)
    return Const(int(np.iinfo(dt.numpy_dtype(dtype)).max), dtype)
