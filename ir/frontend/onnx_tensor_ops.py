"""Converters of ONNX tensor operators to IR calls: elementwise arithmetic, math, logic and
comparisons, ``Where``, ``Clip``, ``Cast``, reductions, the shape operators (Reshape, Flatten,
Transpose, Squeeze/Unsqueeze, Concat, Split, Slice, Gather, Expand, Tile, Pad), Identity and
Dropout (inference: the identity), and the operators that only make constants (Constant,
ConstantOfShape, Shape, Size, Range).

Where ONNX moved an attribute to an input over the opsets (Squeeze's ``axes``, Split's
``split``, Clip's ``min``/``max``, the reductions' ``axes``, Pad's ``pads``), both forms are
read: the attribute when the node has it, else the input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..types import TensorType
from .onnx_context import (
    MAX_FOLDED_ELEMENTS,
    NodeContext,
    Value,
    converter,
    foldable_size,
    onnx_dtype,
    onnx_dtype_name,
)

# ------------------------------------------------------------------ elementwise, binary

_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide",
           "Equal": "equal", "Less": "less", "Greater": "greater",
           "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal",
           "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor"}


def _legacy_broadcast(ctx: NodeContext, a: Value, b: Value) -> Value:
    """``b`` aligned to ``a`` as opsets < 7 say: with ``broadcast=1`` and an ``axis``, b's
    dimensions match a's from that axis on (numpy aligns them at the end)."""
    if ctx.opset >= 7:
        return b
    ctx.ignore("consumed_inputs")
    axis = ctx.attr("axis")
    if not int(ctx.attr("broadcast", 0)) or axis is None:
        return b
    axis = int(axis) + a.ndim if int(axis) < 0 else int(axis)
    trailing = a.ndim - axis - b.ndim
    if trailing <= 0:
        return b
    return ctx.call("reshape", b, newshape=[*b.shape, *[1] * trailing])


@converter(*_BINARY)
def _binary(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    if a.dtype != b.dtype:
        raise ctx.fail(f"inputs have different dtypes {a.dtype} and {b.dtype}")
    return ctx.call(_BINARY[ctx.op_type], a, _legacy_broadcast(ctx, a, b))


@converter("Pow")
def _pow(ctx: NodeContext) -> Value:
    base, exp = ctx.input(0), ctx.input(1)
    if base.dtype == exp.dtype:
        return ctx.call("power", base, exp)
    # ONNX allows mixed dtypes; the result has the base's.
    if base.dtype.startswith("float") or not exp.dtype.startswith("float"):
        return ctx.call("power", base, ctx.cast(exp, base.dtype))
    return ctx.cast(ctx.call("power", ctx.cast(base, exp.dtype), exp), base.dtype)


_VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}


@converter(*_VARIADIC)
def _variadic(ctx: NodeContext) -> Value:
    values = [ctx.input(i) for i in range(ctx.num_inputs)]
    if not values:
        raise ctx.fail("needs at least one input")
    out = values[0]
    for v in values[1:]:
        out = ctx.call(_VARIADIC[ctx.op_type], out, v)
    if ctx.op_type == "Mean" and len(values) > 1:
        out = ctx.call("divide", out, ctx.scalar(len(values), out))
    return out


# ------------------------------------------------------------------- elementwise, unary

_UNARY = {"Sqrt": "sqrt", "Exp": "exp", "Log": "log", "Tanh": "tanh", "Sigmoid": "sigmoid",
          "Erf": "erf", "Abs": "abs", "Neg": "negative", "Floor": "floor", "Ceil": "ceil",
          "Relu": "nn.relu", "Not": "logical_not"}


@converter(*_UNARY)
def _unary(ctx: NodeContext) -> Value:
    return ctx.call(_UNARY[ctx.op_type], ctx.input(0))


@converter("Sign")
def _sign(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    zero = ctx.scalar(0, x)
    positive = ctx.call("cast", ctx.call("greater", x, zero), dtype=x.dtype)
    negative = ctx.call("cast", ctx.call("less", x, zero), dtype=x.dtype)
    return ctx.call("subtract", positive, negative)


@converter("Reciprocal")
def _reciprocal(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    return ctx.call("divide", ctx.scalar(1, x), x)


@converter("Identity")
def _identity(ctx: NodeContext) -> Value:
    return ctx.input(0)


@converter("Where")
def _where(ctx: NodeContext) -> Value:
    return ctx.call("where", ctx.input(0, "condition"), ctx.input(1), ctx.input(2))


@converter("Cast")
def _cast(ctx: NodeContext) -> Value:
    to = ctx.attr("to")
    ctx.ignore("saturate", "round_mode")  # only about float8 / 4-bit targets
    if to is None:
        raise ctx.fail("attribute to is required")
    dtype = onnx_dtype(int(to))
    if dtype is None:
        raise ctx.unsupported("to", onnx_dtype_name(int(to)), "the IR has no such dtype")
    return ctx.cast(ctx.input(0), dtype)


@converter("CastLike")
def _cast_like(ctx: NodeContext) -> Value:
    ctx.ignore("saturate", "round_mode")
    return ctx.cast(ctx.input(0), ctx.input(1).dtype)


@converter("Clip")
def _clip(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    bounds: list[Value | float | None] = []
    if ctx.opset < 11 or ctx.has_attr("min") or ctx.has_attr("max"):
        for name in ("min", "max"):
            value = ctx.attr(name)
            bounds.append(None if value is None else float(value))
    else:
        for i in (1, 2):
            v = ctx.optional_input(i)
            bounds.append(v if v is None or v.const is None else float(v.const.reshape(-1)[0]))
    lo, hi = bounds
    if isinstance(lo, float) and isinstance(hi, float):
        # ONNX: every value becomes max when min > max
        return ctx.call("clip", x, a_min=min(lo, hi), a_max=hi)
    # one bound, or bounds computed at run time; exact in the input's dtype
    out = x
    for bound, op in ((lo, "maximum"), (hi, "minimum")):
        if bound is not None:
            out = ctx.call(op, out, bound if isinstance(bound, Value) else ctx.scalar(bound, x))
    return out


# ------------------------------------------------------------------------- reductions

_REDUCE = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min",
           "ReduceProd": "prod"}


def _reduce_axes(ctx: NodeContext, axes_input_opset: int) -> list[int] | None:
    """The ``axes`` of a reduction (attribute, or input from ``axes_input_opset`` on);
    None for 'all axes'."""
    if ctx.opset < axes_input_opset or ctx.has_attr("axes"):
        axes = ctx.attr("axes")
        return None if axes is None else [int(a) for a in axes]
    return ctx.int_list_input(1, "axes")


@converter(*_REDUCE)
def _reduce(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    axes = _reduce_axes(ctx, 13 if ctx.op_type == "ReduceSum" else 18)
    keepdims = bool(ctx.attr("keepdims", 1))
    noop = bool(ctx.attr("noop_with_empty_axes", 0))
    if not axes:
        if noop:
            return x
        axes = None
    if x.ndim == 0:
        return x
    out = ctx.call(_REDUCE[ctx.op_type], x, axis=axes, keepdims=keepdims)
    reduced = range(x.ndim) if axes is None else axes
    if 0 in (x.shape[a] for a in reduced) and all(isinstance(d, int) for d in out.shape):
        # over nothing: the reduction's identity (numpy's max / min have none)
        return ctx.const(np.full(out.shape, _empty_reduction(ctx.op_type, x.dtype), x.dtype))
    return out


def _empty_reduction(op_type: str, dtype: str) -> object:
    kind = np.dtype(dtype).kind
    if op_type in ("ReduceMax", "ReduceMin"):
        low = op_type == "ReduceMax"
        if kind == "b":
            return not low
        if kind in "iu":
            return np.iinfo(dtype).min if low else np.iinfo(dtype).max
        return -np.inf if low else np.inf
    return {"ReduceSum": 0, "ReduceProd": 1}.get(op_type, np.nan)


@converter("ArgMax", "ArgMin")
def _arg_reduce(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    out = ctx.call("argmax" if ctx.op_type == "ArgMax" else "argmin", x,
                   axis=[int(ctx.attr("axis", 0))], keepdims=bool(ctx.attr("keepdims", 1)),
                   select_last_index=bool(ctx.attr("select_last_index", 0)))
    return ctx.cast(out, "int64")


# ------------------------------------------------------------------ constants and shapes


@converter("Constant")
def _constant(ctx: NodeContext) -> Value:
    given = [name for name in ctx.attrs]
    if len(given) != 1:
        raise ctx.fail(f"needs exactly one value attribute, got {given or 'none'}")
    name = given[0]
    value = ctx.attr(name)
    if name == "value":
        return ctx.const(value)
    if name == "value_float":
        return ctx.const(value, "float32")
    if name == "value_floats":
        return ctx.const(list(value), "float32")
    if name in ("value_int", "value_ints"):
        return ctx.const(value, "int64")
    raise ctx.unsupported(name, "...", "string and sparse constants are not supported")


@converter("ConstantOfShape")
def _constant_of_shape(ctx: NodeContext) -> Value:
    shape = ctx.int_list_input(0, "shape")
    value = ctx.attr("value")
    fill = np.zeros((), "float32") if value is None else np.asarray(value).reshape(-1)[:1]
    if any(d < 0 for d in shape or ()):
        raise ctx.fail(f"shape {shape} has a negative dimension")
    if not foldable_size(TensorType(tuple(shape or ()), str(fill.dtype))):
        raise ctx.fail(f"shape {shape} has more than {MAX_FOLDED_ELEMENTS} elements")
    return ctx.const(np.full(shape or (), fill.reshape(()), dtype=fill.dtype))


def _clamp_range(v: int, size: int) -> int:
    v = v + size if v < 0 else v
    return min(max(v, 0), size)


@converter("Shape")
def _shape(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    shape = ctx.static_shape(x, "the input's")
    start = _clamp_range(int(ctx.attr("start", 0)), len(shape))
    end = ctx.attr("end")
    end = len(shape) if end is None else _clamp_range(int(end), len(shape))
    return ctx.const(np.array(shape[start:end], dtype="int64").reshape(-1))


@converter("Size")
def _size(ctx: NodeContext) -> Value:
    return ctx.const(math.prod(ctx.static_shape(ctx.input(0), "the input's")), "int64")


@converter("Range")
def _range(ctx: NodeContext) -> Value:
    start, limit, delta = (ctx.const_input(i, n) for i, n in enumerate(("start", "limit",
                                                                        "delta")))
    if start is None or limit is None or delta is None:
        raise ctx.fail("start, limit and delta are required")
    if delta == 0:
        raise ctx.fail("delta must not be 0")
    return ctx.const(np.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype))


# ------------------------------------------------------------------- shape manipulation


@converter("Reshape")
def _reshape(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if ctx.opset < 5:
        raise ctx.fail("opset < 5 (shape as an attribute) is not supported")
    shape = ctx.int_list_input(1, "shape")
    allowzero = bool(ctx.attr("allowzero", 0))
    if any(d < -1 for d in shape) or shape.count(-1) > 1:
        raise ctx.fail(f"shape {shape} is not valid (entries >= -1, at most one -1)")
    if all(isinstance(d, int) for d in x.shape):
        # resolve 0 and -1 here, so the IR carries the plain target shape
        out = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(shape)]
        if -1 in out:
            known = math.prod(d for d in out if d != -1)
            total = math.prod(x.shape)
            if known == 0 or total % known:
                raise ctx.fail(f"cannot reshape {tuple(x.shape)} into {shape}")
            out[out.index(-1)] = total // known
        if tuple(out) == tuple(x.shape):
            return x
        return ctx.call("reshape", x, newshape=out, allowzero=0 in out)
    return ctx.call("reshape", x, newshape=shape, allowzero=allowzero)


@converter("Flatten")
def _flatten(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    axis = int(ctx.attr("axis", 1))
    if not -x.ndim <= axis <= x.ndim:
        raise ctx.unsupported("axis", axis, f"out of range for rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    lead, rest = x.shape[:axis], x.shape[axis:]
    if all(isinstance(d, int) for d in lead):
        newshape = [math.prod(lead), -1]
    elif all(isinstance(d, int) for d in rest):
        newshape = [-1, math.prod(rest)]
    else:
        raise ctx.fail(f"input shape {x.shape} must be static on one side of axis {axis}")
    return ctx.call("reshape", x, newshape=newshape)


@converter("Transpose")
def _transpose(ctx: NodeContext) -> Value:
    perm = ctx.attr("perm")
    return ctx.call("transpose", ctx.input(0), axes=None if perm is None else list(perm))


def _axes(ctx: NodeContext, input_opset: int, required: bool) -> list[int] | None:
    if ctx.opset < input_opset or ctx.has_attr("axes"):
        axes = ctx.attr("axes")
        axes = None if axes is None else [int(a) for a in axes]
    else:
        axes = ctx.int_list_input(1, "axes")
    if axes is None and required:
        raise ctx.fail("axes are required")
    return axes


@converter("Squeeze")
def _squeeze(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    axes = _axes(ctx, 13, required=False)
    if axes is not None and not axes:
        axes = None
    return ctx.call("squeeze", x, axis=axes)


@converter("Unsqueeze")
def _unsqueeze(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    axes = _axes(ctx, 13, required=True)
    rank = x.ndim + len(axes)
    norm = sorted(a + rank if a < 0 else a for a in axes)
    if len(set(norm)) != len(norm) or any(not 0 <= a < rank for a in norm):
        raise ctx.fail(f"axes {axes} are not distinct axes of the rank-{rank} output")
    out = x
    for a in norm:  # ascending: each new axis lands at its final position
        out = ctx.call("expand_dims", out, axis=a)
    return out


@converter("Concat")
def _concat(ctx: NodeContext) -> Value:
    axis = ctx.attr("axis")
    if axis is None:
        raise ctx.fail("attribute axis is required")
    values = [ctx.input(i) for i in range(ctx.num_inputs)]
    return ctx.call("concatenate", ctx.tuple(values), axis=int(axis))


@converter("Split")
def _split(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    axis = int(ctx.attr("axis", 0))
    n = ctx.num_outputs
    if ctx.opset < 13 or ctx.has_attr("split"):
        sizes = ctx.attr("split")
    else:
        sizes = ctx.int_list_input(1, "split")
    num_outputs = ctx.attr("num_outputs")
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise ctx.unsupported("axis", axis, f"out of range for rank {x.ndim}")
    dim = x.shape[axis]
    if sizes is None and num_outputs is not None:
        if int(num_outputs) != n:
            raise ctx.fail(f"num_outputs={num_outputs} but the node has {n} outputs")
        if not isinstance(dim, int):
            raise ctx.fail(f"splitting dimension {dim} into {n} needs a static size")
        chunk = -(-dim // n)  # the last part may be smaller
        sizes = [min(chunk, dim - k * chunk) for k in range(n)]
    if sizes is None:
        parts = ctx.call("split", x, indices_or_sections=n, axis=axis)
    else:
        sizes = [int(s) for s in sizes]
        if len(sizes) != n or any(s < 0 for s in sizes) or (
                isinstance(dim, int) and sum(sizes) != dim):
            raise ctx.fail(f"split sizes {sizes} do not split dimension {dim} into {n} parts")
        indices = list(np.cumsum(sizes[:-1], dtype=np.int64))
        parts = ctx.call("split", x, indices_or_sections=[int(i) for i in indices], axis=axis)
    return [ctx.item(parts, i) for i in range(n)]


@converter("Slice")
def _slice(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes, steps = ctx.attr("axes"), None
    else:
        starts, ends = ctx.int_list_input(1, "starts"), ctx.int_list_input(2, "ends")
        axes, steps = ctx.int_list_input(3, "axes"), ctx.int_list_input(4, "steps")
    if starts is None or ends is None or len(starts) != len(ends):
        raise ctx.fail(f"starts {starts} and ends {ends} must be given, of one length")
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(axes) == len(steps) == len(starts):
        raise ctx.fail(f"starts, ends, axes {axes} and steps {steps} differ in length")
    if 0 in steps:
        raise ctx.fail(f"steps {steps} must not hold 0")
    # out-of-range bounds clamp as Python slices do, which is ONNX's rule too
    return ctx.call("strided_slice", x, begin=[int(v) for v in starts],
                    end=[int(v) for v in ends], strides=[int(s) for s in steps],
                    axes=[int(a) for a in axes])


@converter("Gather")
def _gather(ctx: NodeContext) -> Value:
    data, indices = ctx.input(0), ctx.input(1, "indices")
    axis = int(ctx.attr("axis", 0))
    # 'wrap' takes ONNX's negative indices (counted from the end) right
    return ctx.call("take", data, indices, axis=axis, mode="wrap")


def _broadcast_shape(ctx: NodeContext, a: Sequence, b: Sequence) -> list:
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + list(a)
    b = [1] * (rank - len(b)) + list(b)
    out = []
    for x, y in zip(a, b, strict=True):
        if x == 1 or x == y:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            raise ctx.fail(f"shapes {tuple(a)} and {tuple(b)} do not broadcast")
    return out


@converter("Expand")
def _expand(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    shape = _broadcast_shape(ctx, x.shape, ctx.int_list_input(1, "shape"))
    if tuple(shape) == tuple(x.shape):
        return x
    return ctx.call("broadcast_to", x, shape=[d if isinstance(d, int) else str(d)
                                              for d in shape])


@converter("Tile")
def _tile(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    repeats = ctx.int_list_input(1, "repeats")
    shape = ctx.static_shape(x, "the input's")
    if repeats is None or len(repeats) != len(shape) or any(r < 0 for r in repeats):
        raise ctx.fail(f"repeats {repeats} must give a count >= 0 for each of the "
                       f"{len(shape)} axes")
    if all(r == 1 for r in repeats):
        return x
    # (d0, d1) -> (1, d0, 1, d1) -> broadcast to (r0, d0, r1, d1) -> (r0 * d0, r1 * d1)
    spread = [v for d in shape for v in (1, d)]
    target = [v for r, d in zip(repeats, shape, strict=True) for v in (r, d)]
    out = ctx.call("reshape", x, newshape=spread)
    out = ctx.call("broadcast_to", out, shape=target)
    return ctx.call("reshape", out, newshape=[r * d for r, d in zip(repeats, shape,
                                                                     strict=True)])


@converter("Pad")
def _pad(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise ctx.unsupported("mode", mode, "constant, edge, reflect and wrap are")
    if ctx.opset < 11:
        pads, value = ctx.attr("pads"), float(ctx.attr("value", 0.0))
        axes = None
    else:
        pads = ctx.int_list_input(1, "pads")
        fill = ctx.const_input(2, "constant_value")
        value = 0.0 if fill is None or fill.size == 0 else float(fill.reshape(-1)[0])
        axes = ctx.int_list_input(3, "axes")
    if pads is None:
        raise ctx.fail("pads are required")
    axes = list(range(x.ndim)) if axes is None else [a + x.ndim if a < 0 else a for a in axes]
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"pads {pads} must hold 2 x {len(axes)} values")
    widths = [[0, 0] for _ in range(x.ndim)]
    for k, a in enumerate(axes):
        widths[a] = [int(pads[k]), int(pads[k + len(axes)])]
    if any(p < 0 for w in widths for p in w):  # negative pads crop
        x = ctx.call("strided_slice", x, begin=[max(0, -b) for b, _ in widths],
                     end=[e if e < 0 else _SLICE_END for _, e in widths])
        widths = [[max(0, b), max(0, e)] for b, e in widths]
    if not any(b or e for b, e in widths):
        return x
    if mode == "wrap":
        return _wrap_pad(ctx, x, widths)
    return ctx.call("nn.pad", x, pad_width=widths, pad_value=value, pad_mode=mode)


_SLICE_END = 2 ** 31 - 1  # "to the end" for strided_slice


def _wrap_pad(ctx: NodeContext, x: Value, widths: list[list[int]]) -> Value:
    """Pad each axis with the values from its other end (numpy's 'wrap')."""
    for axis, (before, after) in enumerate(widths):
        if not (before or after):
            continue
        size = x.shape[axis]
        if not isinstance(size, int) or max(before, after) > size:
            raise ctx.fail(f"wrap padding {(before, after)} of axis {axis} needs a static "
                           f"size of at least that much, got {size}")
        parts = [x]
        if before:
            parts.insert(0, ctx.call("strided_slice", x, begin=[size - before], end=[size],
                                     axes=[axis]))
        if after:
            parts.append(ctx.call("strided_slice", x, begin=[0], end=[after], axes=[axis]))
        x = ctx.call("concatenate", ctx.tuple(parts), axis=axis)
    return x


@converter("Dropout")
def _dropout(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    ctx.ignore("seed", "is_test")
    ratio = ctx.attr("ratio", 0.5) if ctx.opset < 12 else ctx.const_input(1, "ratio")
    training = ctx.const_input(2, "training_mode") if ctx.opset >= 12 else None
    if training is not None and bool(training.reshape(-1)[0]) and (
            ratio is None or float(np.asarray(ratio).reshape(-1)[0]) != 0.0):
        raise ctx.fail("training_mode=True (random dropout) is not supported; inference "
                       "only")
    outputs = [x]
    if ctx.output_used(1):
        outputs.append(ctx.const(np.ones(ctx.static_shape(x, "the input's"), bool)))
    return outputs


__all__: list[str] = []
