"""The tensor-expression language, shaped like TVM's ``te`` namespace.

    A = te.placeholder((M, K), "float32", name="A")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C)
"""

from __future__ import annotations

from typing import Any

from . import expr as _e
from .expr import Expr, Var, cast, const, equal, not_equal
from .intrin import TensorIntrin, decl_tensor_intrin
from .schedule import Schedule, ScheduleError, Stage, create_schedule
from .tensor import (
    ComputeOp,
    IterVar,
    PlaceholderOp,
    Reduce,
    Reducer,
    Tensor,
    TensorExprError,
    comm_reducer,
    compute,
    max_value,
    min_value,
    placeholder,
    reduce_axis,
)

__all__ = [
    "ComputeOp", "Expr", "IterVar", "PlaceholderOp", "Reduce", "Reducer", "Schedule",
    "ScheduleError", "Stage", "Tensor", "TensorExprError", "TensorIntrin", "Var", "abs", "all",
    "any", "cast", "ceil", "comm_reducer", "compute", "const", "create_schedule",
    "decl_tensor_intrin", "equal", "erf", "exp", "floor", "floordiv", "floormod",
    "if_then_else", "log", "max", "max_value", "min", "min_value", "not_equal", "placeholder",
    "pow", "prod", "reduce_axis", "rsqrt", "sigmoid", "sqrt", "sum", "tanh", "var",
]

sum = comm_reducer(lambda x, y: x + y, lambda t: const(0, t), name="sum")
prod = comm_reducer(lambda x, y: x * y, lambda t: const(1, t), name="prod")
# A max-reduction starts from the lowest value of the dtype, a min-reduction from the highest.
_max_reducer = comm_reducer(lambda x, y: _e.binary("max", x, y), min_value, name="max")
_min_reducer = comm_reducer(lambda x, y: _e.binary("min", x, y), max_value, name="min")


def _two_or_reduce(reducer: Reducer, op: str, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Expr:
    if "axis" in kwargs:
        if len(args) != 1:
            raise TensorExprError(f"te.{op}(expr, axis=...) takes exactly one expression")
        return reducer(args[0], kwargs["axis"], kwargs.get("where"))
    if kwargs or len(args) != 2:
        raise TensorExprError(
            f"te.{op} takes either two values (te.{op}(a, b)) or one expression and "
            f"axis= (a reduction)"
        )
    return _e.binary(op, args[0], args[1])


def max(*args: Any, **kwargs: Any) -> Expr:
    """``max(a, b)`` of two values, or a max-reduction ``max(expr, axis=k)``."""
    return _two_or_reduce(_max_reducer, "max", args, kwargs)


def min(*args: Any, **kwargs: Any) -> Expr:
    """``min(a, b)`` of two values, or a min-reduction ``min(expr, axis=k)``."""
    return _two_or_reduce(_min_reducer, "min", args, kwargs)


def var(name: str, dtype: str = "int32") -> Var:
    return Var(name, dtype)


def if_then_else(cond: Any, true_value: Any, false_value: Any) -> Expr:
    return _e.select(cond, true_value, false_value)


def all(*conds: Any) -> Expr:
    return _e.all_of(conds)


def any(*conds: Any) -> Expr:
    return _e.any_of(conds)


def floordiv(a: Any, b: Any) -> Expr:
    return _e.binary("floordiv", a, b)


def floormod(a: Any, b: Any) -> Expr:
    return _e.binary("floormod", a, b)


def _math(name: str):
    def fn(x: Any) -> Expr:
        return _e.call(name, x)

    fn.__name__ = name
    fn.__doc__ = f"Element-wise {name}."
    return fn


exp = _math("exp")
log = _math("log")
sqrt = _math("sqrt")
rsqrt = _math("rsqrt")
tanh = _math("tanh")
erf = _math("erf")
sigmoid = _math("sigmoid")
abs = _math("abs")
floor = _math("floor")
ceil = _math("ceil")


def pow(x: Any, y: Any) -> Expr:
    return _e.call("pow", x, y)
