"""Element-wise operators: arithmetic with numpy-style broadcasting, activations, bias_add,
and the ``elementwise_chain`` used by the ``elementwise`` workload."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .. import te
from ..dtype import is_float
from ..tensor import Tensor
from . import tags
from ._util import normalize_axis

Operand = Tensor | int | float | te.Expr


def _broadcast_shape(a: Sequence[int], b: Sequence[int], op: str) -> tuple[int, ...]:
    nd = max(len(a), len(b))
    a = [1] * (nd - len(a)) + list(a)
    b = [1] * (nd - len(b)) + list(b)
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise ValueError(f"{op}: shapes {a} and {b} cannot be broadcast together")
        out.append(max(x, y))
    return tuple(out)


def _load(t: Operand, idx: Sequence[te.Var], out_shape: Sequence[int], like: str) -> te.Expr:
    if not isinstance(t, Tensor):
        return te.const(t, like) if isinstance(t, int | float) else t
    offset = len(out_shape) - t.ndim
    src = [0 if d == 1 and out_shape[offset + k] != 1 else idx[offset + k]
           for k, d in enumerate(t.shape)]
    return t[tuple(src)]


def _binary(op: str, fn: Callable[[te.Expr, te.Expr], te.Expr], a: Operand, b: Operand,
            name: str | None) -> Tensor:
    ta = a if isinstance(a, Tensor) else None
    tb = b if isinstance(b, Tensor) else None
    if ta is None and tb is None:
        raise TypeError(f"{op}: at least one operand must be a te.Tensor")
    if ta is not None and tb is not None and ta.dtype != tb.dtype:
        raise ValueError(f"{op}: operand dtypes differ ({ta.dtype} and {tb.dtype})")
    dtype = (ta or tb).dtype  # type: ignore[union-attr]
    if op == "divide" and not is_float(dtype):
        raise ValueError(f"divide: needs float tensors, got {dtype} (use te.floordiv)")
    shape_a = ta.shape if ta is not None else ()
    shape_b = tb.shape if tb is not None else ()
    shape = _broadcast_shape(shape_a, shape_b, op)
    kind = tags.ELEMWISE if (ta is None or tb is None or shape_a == shape_b) else tags.BROADCAST

    def body(*idx: te.Var) -> te.Expr:
        return fn(_load(a, idx, shape, dtype), _load(b, idx, shape, dtype))

    return te.compute(shape, body, name=name or f"T_{op}", tag=tags.make(tags.INJECTIVE, kind))


def add(a: Operand, b: Operand, name: str | None = None) -> Tensor:
    """``a + b`` with numpy broadcasting (either side may be a scalar)."""
    return _binary("add", lambda x, y: x + y, a, b, name)


def subtract(a: Operand, b: Operand, name: str | None = None) -> Tensor:
    """``a - b`` with numpy broadcasting."""
    return _binary("subtract", lambda x, y: x - y, a, b, name)


def multiply(a: Operand, b: Operand, name: str | None = None) -> Tensor:
    """``a * b`` with numpy broadcasting."""
    return _binary("multiply", lambda x, y: x * y, a, b, name)


def divide(a: Operand, b: Operand, name: str | None = None) -> Tensor:
    """``a / b`` with numpy broadcasting (float dtypes only)."""
    return _binary("divide", lambda x, y: x / y, a, b, name)


def _unary(op: str, fn: Callable[[te.Expr], te.Expr], x: Tensor, name: str | None,
           float_only: bool = False) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a te.Tensor, got {type(x).__name__}")
    if float_only and not is_float(x.dtype):
        raise ValueError(f"{op}: needs a float tensor, got {x.dtype}")
    return te.compute(x.shape, lambda *i: fn(x[i]), name=name or f"T_{op}",
                      tag=tags.make(tags.INJECTIVE, tags.ELEMWISE))


def relu(x: Tensor, name: str | None = None) -> Tensor:
    """``max(x, 0)``."""
    return _unary("relu", lambda v: te.max(v, te.const(0, x.dtype)), x, name)


_INV_SQRT2 = 1.0 / math.sqrt(2.0)


def gelu(x: Tensor, name: str | None = None) -> Tensor:
    """GELU in its exact erf form: ``0.5 * x * (1 + erf(x / sqrt(2)))``."""
    return _unary("gelu", lambda v: 0.5 * v * (1.0 + te.erf(v * _INV_SQRT2)), x, name,
                  float_only=True)


def sigmoid(x: Tensor, name: str | None = None) -> Tensor:
    """``1 / (1 + exp(-x))``."""
    return _unary("sigmoid", te.sigmoid, x, name, float_only=True)


def tanh(x: Tensor, name: str | None = None) -> Tensor:
    """Hyperbolic tangent."""
    return _unary("tanh", te.tanh, x, name, float_only=True)


def clip(x: Tensor, a_min: float | int, a_max: float | int, name: str | None = None) -> Tensor:
    """``min(max(x, a_min), a_max)``."""
    if a_min > a_max:
        raise ValueError(f"clip: a_min {a_min} is greater than a_max {a_max}")
    lo, hi = te.const(a_min, x.dtype), te.const(a_max, x.dtype)
    return _unary("clip", lambda v: te.min(te.max(v, lo), hi), x, name)


def requantize(x: Tensor, shift: int, name: str = "T_requant") -> Tensor:
    """int32 accumulators back to int8, as a quantized network does between layers:
    ``int8(clip(floor(x / 2**shift), -128, 127))`` (the division is an arithmetic shift)."""
    if x.dtype != "int32":
        raise ValueError(f"requantize: needs int32 accumulators, got {x.dtype}")
    if not 0 <= shift <= 30:
        raise ValueError(f"requantize: shift must be in 0..30, got {shift}")
    lo, hi, scale = te.const(-128, "int32"), te.const(127, "int32"), te.const(1 << shift, "int32")
    return te.compute(x.shape, lambda *i: te.cast("int8", te.min(te.max(
        te.floordiv(x[i], scale), lo), hi)), name=name,
        tag=tags.make(tags.INJECTIVE, tags.ELEMWISE))


def bias_add(data: Tensor, bias: Tensor, axis: int = 1, name: str = "T_bias_add") -> Tensor:
    """``data + bias`` with the 1-d ``bias`` along ``axis`` (1: channels of NCHW, like TVM)."""
    axis = normalize_axis(axis, data.ndim, "bias_add")
    if bias.ndim != 1 or bias.shape[0] != data.shape[axis]:
        raise ValueError(f"bias_add: bias must have shape [{data.shape[axis]}] for axis {axis} "
                         f"of {list(data.shape)}, got {list(bias.shape)}")
    if bias.dtype != data.dtype:
        raise ValueError(f"bias_add: bias dtype {bias.dtype} differs from {data.dtype}")
    return te.compute(data.shape, lambda *i: data[i] + bias[i[axis]], name=name,
                      tag=tags.make(tags.INJECTIVE, tags.BROADCAST))


def bias_activation(x: Tensor, bias: Tensor | None, activation: str, axis: int = 1) -> Tensor:
    """A layer's epilogue: ``activation(x + bias)`` with the bias along ``axis`` (stages
    ``T_bias_add``, then ``T_relu`` / ``T_gelu``; ``activation`` none, relu or gelu)."""
    if bias is not None:
        x = bias_add(x, bias, axis=axis)
    if activation == "relu":
        return relu(x)
    if activation == "gelu":
        return gelu(x)
    if activation != "none":
        raise ValueError(f"activation must be none, relu or gelu, got {activation!r}")
    return x


# name -> (number of tensor operands, builder, works on integer dtypes)
CLIP_RANGE = (-1, 1)
CHAIN_OPS: dict[str, tuple[int, Callable[..., Tensor], bool]] = {
    "add": (2, add, True),
    "sub": (2, subtract, True),
    "mul": (2, multiply, True),
    "div": (2, divide, False),
    "relu": (1, relu, True),
    "gelu": (1, gelu, False),
    "sigmoid": (1, sigmoid, False),
    "tanh": (1, tanh, False),
    "clip": (1, lambda x, name=None: clip(x, *CLIP_RANGE, name=name), True),
}


def elementwise_chain(x: Tensor, ops: Sequence[str], operands: Sequence[Tensor] = ()) -> Tensor:
    """Apply ``ops`` in order to ``x``; each binary op (add, sub, mul, div) takes the next tensor
    of ``operands`` as its right-hand side. ``clip`` clips to ``CLIP_RANGE`` = [-1, 1]."""
    rest = list(operands)
    y: Any = x
    for op in ops:
        if op not in CHAIN_OPS:
            raise ValueError(f"elementwise: unknown op {op!r}; known: {', '.join(CHAIN_OPS)}")
        arity, fn, _ = CHAIN_OPS[op]
        if arity == 2:
            if not rest:
                raise ValueError(f"elementwise: no operand left for binary op {op!r}")
            y = fn(y, rest.pop(0), name=f"T_{op}")
        else:
            y = fn(y, name=f"T_{op}")
    if rest:
        raise ValueError(f"elementwise: {len(rest)} operand(s) left unused")
    return y
