"""Lowerings of IR operators to tensor expressions through the schedule layer's op library
(``schedule.ops``).

A lowering is ``fn(inputs, attrs, out_type) -> te.Tensor`` (or a tuple of them): ``inputs``
are the ``te.Tensor`` of each input in order (a tuple-typed input, as ``concatenate``'s, is a
list of tensors), ``attrs`` the call's attributes (schema-complete) and ``out_type`` the
call's inferred output type (static shapes only). A lowering that cannot express a case
(a layout or attribute the op library does not support) raises ``LoweringError``; the
caller then keeps the operator on its numpy compute or reports it.

``schedule`` is imported lazily, on the first lowering, so that importing ``ir`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..attrs import Attrs
from ..types import TensorType, Type


class LoweringError(NotImplementedError):
    """The op library has no compute for this case of the operator."""


def _lib() -> tuple[Any, Any]:
    from schedule import ops, te

    return ops, te


def _static_shape(op_name: str, out_type: Type) -> tuple[int, ...]:
    if not isinstance(out_type, TensorType) or not all(isinstance(d, int)
                                                       for d in out_type.shape):
        raise LoweringError(f"{op_name}: lowering needs a static output shape, got {out_type}")
    return tuple(out_type.shape)  # type: ignore[arg-type]


def binary(name: str) -> Callable:
    """``ops.<name>(a, b)`` (add, subtract, multiply, divide)."""

    def lower(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
        ops, _ = _lib()
        return getattr(ops, name)(inputs[0], inputs[1])

    lower.__name__ = f"lower_{name}"
    return lower


def unary(name: str) -> Callable:
    """``ops.<name>(x)`` (relu, sigmoid, tanh)."""

    def lower(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
        ops, _ = _lib()
        return getattr(ops, name)(inputs[0])

    lower.__name__ = f"lower_{name}"
    return lower


def clip(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    x = inputs[0]
    if x.dtype.startswith(("int", "uint")):
        return ops.clip(x, int(attrs.a_min), int(attrs.a_max))
    return ops.clip(x, attrs.a_min, attrs.a_max)


def reshape(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    return ops.reshape(inputs[0], _static_shape("reshape", out_type))


def transpose(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    return ops.transpose(inputs[0], attrs.axes)


def concatenate(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    return ops.concatenate(list(inputs[0]), attrs.axis)


def reduction(name: str) -> Callable:
    """``ops.reduce_sum`` / ``reduce_max`` / ``reduce_min`` / ``reduce_prod`` over the axes
    the attributes select."""

    def lower(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
        from .relations import reduce_axes

        ops, _ = _lib()
        x = inputs[0]
        axes = reduce_axes(name, TensorType(tuple(x.shape), x.dtype), attrs)
        if not axes:
            raise LoweringError(f"{name}: no axis to reduce")
        if x.dtype == "bool":
            raise LoweringError(f"{name}: the op library reduces numbers, not bool")
        fn = {"sum": ops.reduce_sum, "max": ops.reduce_max, "min": ops.reduce_min,
              "prod": ops.reduce_prod}[name]
        return fn(x, list(axes), keepdims=attrs.keepdims)

    lower.__name__ = f"lower_{name}"
    return lower


def arg_reduction(name: str) -> Callable:
    """``ops.argmax`` / ``ops.argmin`` over the one axis the attributes select."""

    def lower(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
        from .relations import reduce_axes

        ops, _ = _lib()
        x = inputs[0]
        axes = reduce_axes(name, TensorType(tuple(x.shape), x.dtype), attrs)
        if len(axes) != 1:
            raise LoweringError(f"{name}: the lowering reduces one axis, got {len(axes)}")
        if x.dtype == "bool":
            raise LoweringError(f"{name}: the op library compares numbers, not bool")
        return getattr(ops, name)(x, axes[0], keepdims=attrs.keepdims,
                                  select_last_index=attrs.select_last_index)

    lower.__name__ = f"lower_{name}"
    return lower


def broadcast_to(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    _, te = _lib()
    x = inputs[0]
    shape = _static_shape("broadcast_to", out_type)
    lead = len(shape) - x.ndim

    def body(*idx: Any) -> Any:
        return x[tuple(0 if d == 1 else i for d, i in zip(x.shape, idx[lead:], strict=True))]

    return te.compute(shape, body, name="T_broadcast_to")


def full(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    _, te = _lib()
    fill = inputs[0]
    return te.compute(_static_shape("full", out_type),
                      lambda *idx: te.cast(out_type.dtype, fill[()]), name="T_full")


def constant_fill(value: int) -> Callable[[Sequence[Any], Attrs, Type], Any]:
    """The lowering of ``zeros`` / ``ones``: a tensor of ``value`` (no inputs)."""
    def lower(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
        _, te = _lib()
        fill = te.const(value, out_type.dtype)
        return te.compute(_static_shape("zeros" if value == 0 else "ones", out_type),
                          lambda *idx: fill, name="T_zeros" if value == 0 else "T_ones")

    return lower


def conv2d_transpose(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    from . import relations as rel

    ops, _ = _lib()
    op = "nn.conv2d_transpose"
    return ops.conv2d_transpose_nchw(
        inputs[0], inputs[1], stride=rel.pair(op, attrs.strides, "strides"),
        padding=rel.padding2d(op, attrs.padding),
        output_padding=rel.pair(op, attrs.output_padding, "output_padding", minimum=0),
        dilation=rel.pair(op, attrs.dilation, "dilation"), groups=attrs.groups,
        out_dtype=attrs.out_dtype or None)


def pad(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    if attrs.pad_mode != "constant":
        raise LoweringError(f"nn.pad: pad_mode {attrs.pad_mode!r} has no lowering")
    x = inputs[0]
    value = attrs.pad_value
    if not x.dtype.startswith(("float", "bfloat")):
        value = int(value)
    return ops.pad(x, [p[0] for p in attrs.pad_width], [p[1] for p in attrs.pad_width], value)


def bias_add(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    return ops.bias_add(inputs[0], inputs[1], axis=attrs.axis)


def dense(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    x, w = inputs
    if x.ndim != 2:
        raise LoweringError(f"nn.dense: lowering takes 2-d input, got {list(x.shape)}")
    return ops.dense(x, w, out_dtype=attrs.out_dtype or None)


def dense_packed(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    return ops.dense_packed(inputs[0], inputs[1])


def matmul(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    a, b = inputs
    if a.ndim != 2:
        raise LoweringError(f"nn.matmul: lowering takes 2-d input, got {list(a.shape)}")
    return ops.matmul(a, b, transpose_a=attrs.transpose_a, transpose_b=attrs.transpose_b,
                      out_dtype=attrs.out_dtype or None)


def batch_matmul(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    a, b = inputs
    if attrs.transpose_a or a.shape[0] != b.shape[0]:
        raise LoweringError("nn.batch_matmul: lowering needs transpose_a=False and equal "
                            "batch sizes")
    return ops.batch_matmul(a, b, transpose_b=attrs.transpose_b,
                            out_dtype=attrs.out_dtype or None)


def conv2d(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    layouts = (attrs.data_layout, attrs.kernel_layout, attrs.out_layout or attrs.data_layout)
    if layouts == ("NCHW", "OIHW", "NCHW"):
        fn = ops.conv2d_nchw
    elif layouts == ("NHWC", "HWIO", "NHWC"):
        fn = ops.conv2d_nhwc
    else:
        raise LoweringError(f"nn.conv2d: layouts {layouts} have no lowering (NCHW/OIHW and "
                            "NHWC/HWIO do)")
    from . import relations as rel

    op = "nn.conv2d"
    return fn(inputs[0], inputs[1], stride=rel.pair(op, attrs.strides, "strides"),
              padding=rel.padding2d(op, attrs.padding),
              dilation=rel.pair(op, attrs.dilation, "dilation"), groups=attrs.groups,
              out_dtype=attrs.out_dtype or None)


def layout_transform(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    return ops.layout_transform(inputs[0], attrs.src_layout, attrs.dst_layout)


def int8_packed_conv(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    """The lowering of ``nn.conv2d_nchw4c_int8``."""
    from . import relations as rel

    ops, _ = _lib()
    op = "nn.conv2d_nchw4c_int8"
    return ops.conv2d_nchw4c_int8(inputs[0], inputs[1], rel.pair(op, attrs.strides, "strides"),
                                  rel.padding2d(op, attrs.padding))


def packed_conv(name: str) -> Callable:
    """The lowering of ``nn.<name>`` (``conv2d_nchwc``, ``depthwise_conv2d_nchwc``)."""
    def lower(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
        from . import relations as rel

        ops, _ = _lib()
        op = f"nn.{name}"
        return getattr(ops, name)(inputs[0], inputs[1],
                                  stride=rel.pair(op, attrs.strides, "strides"),
                                  padding=rel.padding2d(op, attrs.padding),
                                  dilation=rel.pair(op, attrs.dilation, "dilation"),
                                  out_dtype=attrs.out_dtype or None)

    return lower


def _pool_layout(name: str, attrs: Attrs) -> None:
    """Pooling lowers NCHW and the packed NCHW[x]c (where C blocks pool like a batch axis)."""
    from . import relations as rel

    if not rel.is_nchw_or_packed(attrs.layout) or (attrs.out_layout or attrs.layout
                                                   ) != attrs.layout:
        raise LoweringError(f"{name}: only NCHW and NCHW[x]c have a lowering, got "
                            f"{attrs.layout}")


def _pool_args(name: str, attrs: Attrs) -> tuple[tuple, tuple, tuple]:
    from . import relations as rel

    _pool_layout(name, attrs)
    if attrs.ceil_mode or tuple(attrs.dilation) not in ((1,), (1, 1)):
        raise LoweringError(f"{name}: ceil_mode and dilation have no lowering")
    return (rel.pair(name, attrs.pool_size, "pool_size"), rel.pair(name, attrs.strides, "strides"),
            rel.padding2d(name, attrs.padding))


def max_pool2d(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    size, strides, padding = _pool_args("nn.max_pool2d", attrs)
    return ops.max_pool2d(inputs[0], size, strides, padding)


def avg_pool2d(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    size, strides, padding = _pool_args("nn.avg_pool2d", attrs)
    return ops.avg_pool2d(inputs[0], size, strides, padding,
                          count_include_pad=attrs.count_include_pad)


def global_avg_pool2d(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    _pool_layout("nn.global_avg_pool2d", attrs)
    return ops.global_avg_pool2d(inputs[0])


def _last_axis(name: str, x: Any, axis: int) -> None:
    if axis not in (-1, x.ndim - 1):
        raise LoweringError(f"{name}: only the last axis has a lowering, got axis={axis}")


def _permuted(x: Any, perm: Sequence[int], name: str) -> Any:
    """``x`` with its axes permuted (``out.shape[k] == x.shape[perm[k]]``)."""
    _, te = _lib()
    inverse = [perm.index(k) for k in range(len(perm))]
    return te.compute(tuple(x.shape[p] for p in perm),
                      lambda *idx: x[tuple(idx[inverse[k]] for k in range(len(perm)))],
                      name=name)


def _over_axis(name: str, x: Any, axis: int, last_axis_fn: Callable[[Any], Any]) -> Any:
    """``last_axis_fn`` (softmax, log_softmax over the last axis) applied over ``axis``:
    the axis is moved last and back with two transposes when it is not last already."""
    axis = axis % x.ndim
    if axis == x.ndim - 1:
        return last_axis_fn(x)
    perm = [k for k in range(x.ndim) if k != axis] + [axis]
    inverse = [perm.index(k) for k in range(x.ndim)]
    short = name.rsplit(".", 1)[-1]
    moved = last_axis_fn(_permuted(x, perm, f"T_{short}_in"))
    return _permuted(moved, inverse, f"T_{short}_out")


def softmax(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    return _over_axis("nn.softmax", inputs[0], attrs.axis, ops.softmax)


def log_softmax(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    return _over_axis("nn.log_softmax", inputs[0], attrs.axis, ops.log_softmax)


def split(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> list[Any]:
    """One slice per part of the tuple result, each reading ``x`` at its offset."""
    _, te = _lib()
    x = inputs[0]
    axis = attrs.axis % x.ndim
    parts, offset = [], 0
    for n, part in enumerate(out_type.fields):
        shape = _static_shape("split", part)

        def body(*idx: Any, start: int = offset) -> Any:
            return x[tuple(i + start if k == axis else i for k, i in enumerate(idx))]

        parts.append(te.compute(shape, body, name=f"T_split_{n}"))
        offset += shape[axis]
    return parts


def layer_norm(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    ops, _ = _lib()
    _last_axis("nn.layer_norm", inputs[0], attrs.axis)
    if not (attrs.center and attrs.scale):
        raise LoweringError("nn.layer_norm: center=False or scale=False has no lowering")
    return ops.layer_norm(inputs[0], inputs[1], inputs[2], eps=attrs.epsilon)


def _index_from_output(t: Any, idx: Sequence[Any], out_shape: Sequence[int]) -> Any:
    """``t``'s element that numpy broadcasting pairs with output index ``idx``."""
    offset = len(out_shape) - t.ndim
    return t[tuple(0 if d == 1 and out_shape[offset + k] != 1 else idx[offset + k]
                   for k, d in enumerate(t.shape))]


def _elementwise(name: str, inputs: Sequence[Any], out_type: Type, fn: Callable) -> Any:
    """``out[i] = fn(in0[i'], in1[i'], ...)`` with numpy broadcasting."""
    _, te = _lib()
    shape = _static_shape(name, out_type)

    def body(*idx: Any) -> Any:
        return fn(*(_index_from_output(x, idx, shape) for x in inputs))

    return te.compute(shape, body, name=f"T_{name.rsplit('.', 1)[-1]}")


def math(name: str, intrinsic: str | None = None) -> Callable:
    """A unary math function of the schedule layer (exp, log, sqrt, rsqrt, erf, abs...)."""

    def lower(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
        _, te = _lib()
        fn = getattr(te, intrinsic or name)
        return _elementwise(name, inputs, out_type, fn)

    lower.__name__ = f"lower_{name}"
    return lower


def elementwise(name: str, fn: Callable[..., Any]) -> Callable:
    """``fn`` over te expressions of the (broadcast) inputs, e.g. maximum, power, less."""

    def lower(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
        _, te = _lib()
        return _elementwise(name, inputs, out_type, lambda *xs: fn(te, *xs))

    lower.__name__ = f"lower_{name}"
    return lower


def cast(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    _, te = _lib()
    return _elementwise("cast", inputs, out_type, lambda x: te.cast(out_type.dtype, x))


def where(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    _, te = _lib()
    return _elementwise("where", inputs, out_type, te.if_then_else)


def leaky_relu(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    _, te = _lib()
    alpha = te.const(float(attrs.alpha), inputs[0].dtype)
    return _elementwise("nn.leaky_relu", inputs, out_type,
                        lambda x: te.if_then_else(x > te.const(0.0, x.dtype), x, x * alpha))


def mean(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    """The sum over the axes, then one multiply by 1/count (float dtypes)."""
    ops, te = _lib()
    total = reduction("sum")(inputs, attrs, out_type)
    x = inputs[0]
    if not x.dtype.startswith("float"):
        raise LoweringError("mean: only float dtypes have a lowering")
    count = 1
    for d in x.shape:
        count *= int(d)
    count //= max(1, _size(total.shape))
    scale = te.const(1.0 / count, x.dtype)
    return te.compute(total.shape, lambda *i: total[i] * scale, name="T_mean")


def _size(shape: Sequence[Any]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def strided_slice(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    from .transform import slice_plan

    _, te = _lib()
    x = inputs[0]
    shape = _static_shape("strided_slice", out_type)
    plan = slice_plan(TensorType(tuple(x.shape), x.dtype), attrs)
    starts = []
    for axis, d in enumerate(x.shape):
        b, e, s = plan.get(axis, (0, None, 1))
        starts.append((range(int(d))[slice(b, e, s)].start, s))

    def body(*idx: Any) -> Any:
        return x[tuple(i * s + start if (start, s) != (0, 1) else i
                       for i, (start, s) in zip(idx, starts, strict=True))]

    return te.compute(shape, body, name="T_strided_slice")


def take(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    """``take`` along one axis with ``mode='clip'`` (indices clamped into range)."""
    _, te = _lib()
    data, indices = inputs
    if attrs.axis is None or attrs.mode != "clip" or attrs.batch_dims:
        raise LoweringError("take: only an axis with mode='clip' and no batch_dims has a "
                            "lowering")
    axis = attrs.axis % data.ndim
    shape = _static_shape("take", out_type)
    n = indices.ndim
    extent = int(data.shape[axis])

    def body(*idx: Any) -> Any:
        position = te.cast("int32", indices[tuple(idx[axis:axis + n])])
        position = te.max(te.min(position, extent - 1), 0)
        return data[(*idx[:axis], position, *idx[axis + n:])]

    return te.compute(shape, body, name="T_take")


__all__ = ["LoweringError"]


def winograd_input(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    from . import relations as rel

    ops, _ = _lib()
    return ops.winograd_input_nchwc(inputs[0], attrs.tile,
                                    rel.padding2d("nn.winograd_input", attrs.padding))


def winograd_output(inputs: Sequence[Any], attrs: Attrs, out_type: Type) -> Any:
    from . import relations as rel

    ops, _ = _lib()
    return ops.winograd_output_nchwc(inputs[0], attrs.tile,
                                     rel.pair("nn.winograd_output", attrs.out_size, "out_size"),
                                     attrs.block)
