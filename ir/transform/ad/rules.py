"""Reverse-mode rules, one per operator: given a call, the expressions standing for its
inputs and output, and the output's adjoint, the adjoint of each input, built from IR
operators (so gradients type-check, fuse and compile like any program).

``register_gradient(name)`` adds a rule; ``gradient_rule(name)`` finds one. A rule takes a
``GradCall`` and returns one entry per input: an expression of the input's type, ``None``
(no gradient flows: an integer input, an index, a condition), or for a tuple-typed input
(``concatenate``) a list with an entry per field. Broadcasting operators sum their adjoint
back to each input's shape (``collapse_sum``). Rules need static shapes, which type
inference has put on every call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ... import op as ops
from ...attrs import Attrs
from ...builder import const
from ...errors import IRTypeError
from ...expr import Call, Expr, Tuple, TupleGetItem
from ...types import TensorType, TupleType, Type, format_shape

GradEntry = "Expr | None | list[Expr | None]"


class GradientError(IRTypeError):
    """A program the gradient pass cannot differentiate (says which operator or node)."""


@dataclass(frozen=True)
class GradCall:
    """What a rule sees of one operator call."""

    call: Call
    inputs: tuple[Expr, ...]  # the inputs' values
    output: Expr  # the call's value
    grad: Expr  # the output's adjoint (a Tuple of the fields' adjoints for a tuple output)

    @property
    def attrs(self) -> Attrs:
        return self.call.attrs

    def input_type(self, i: int) -> TensorType:
        return _static_tensor(self.call.args[i].checked_type, self.call, f"input {i}")

    @property
    def output_type(self) -> TensorType:
        return _static_tensor(self.call.checked_type, self.call, "output")

    def shape(self, i: int) -> tuple[int, ...]:
        return tuple(self.input_type(i).shape)  # type: ignore[arg-type]


class RuleTable:
    """Operator name -> rule, for one kind of rule (``what``, as errors name it)."""

    def __init__(self, what: str):
        self.what = what
        self.rules: dict[str, Callable] = {}

    def register(self, *names: str) -> Callable[[Callable], Callable]:
        """Decorator: the rule of operators ``names``."""

        def add(rule: Callable) -> Callable:
            for name in names:
                self.rules[name] = rule
            return rule

        return add

    def get(self, name: str) -> Callable:
        rule = self.rules.get(name)
        if rule is None:
            raise GradientError(f"no {self.what} is registered for operator {name}")
        return rule

    def __contains__(self, name: str) -> bool:
        return name in self.rules


Rule = Callable[[GradCall], list]
_RULES = RuleTable("gradient")
#: decorator: ``rule`` is the reverse-mode rule of operators ``names``
register_gradient = _RULES.register
#: the rule of an operator; GradientError when it has none
gradient_rule = _RULES.get


def has_gradient(name: str) -> bool:
    return name in _RULES


def differentiable(t: Type) -> bool:
    """Whether adjoints flow through values of type ``t`` (floating tensors, or tuples
    holding one)."""
    if isinstance(t, TensorType):
        return t.dtype.startswith(("float", "bfloat"))
    if isinstance(t, TupleType):
        return any(differentiable(f) for f in t.fields)
    return False


def _static_tensor(t: Type | None, call: Call, what: str) -> TensorType:
    if isinstance(t, TupleType):
        return t  # type: ignore[return-value]
    if not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
        raise GradientError(f"{call.op.name}: the gradient needs static tensor shapes, but its "
                            f"{what} has type {t}")
    return t


# ------------------------------------------------------------------------------ helpers


def _static_shape(t: TensorType) -> tuple[int, ...]:
    if not all(isinstance(d, int) for d in t.shape):
        raise GradientError(f"gradient: the gradient needs static tensor shapes, got {t}")
    return tuple(t.shape)  # type: ignore[arg-type]


def zeros(t: TensorType) -> Expr:
    return ops.zeros(shape=_static_shape(t), dtype=t.dtype)


def ones(t: TensorType) -> Expr:
    return ops.ones(shape=_static_shape(t), dtype=t.dtype)


def scalar(value: float, dtype: str) -> Expr:
    return const(np.array(value, dtype=dtype))


def collapse_sum(g: Expr, g_shape: Sequence[int], shape: Sequence[int]) -> Expr:
    """``g`` (of ``g_shape``, a broadcast of ``shape``) summed back to ``shape``."""
    g_shape, shape = tuple(g_shape), tuple(shape)
    if g_shape == shape:
        return g
    lead = len(g_shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and g_shape[lead + i] != 1)
    if axes:
        g = ops.sum(g, axis=axes, keepdims=True)
    return ops.reshape(g, newshape=shape) if len(g_shape) != len(shape) or axes else g


def keep_dims(g: Expr, out: TensorType, x: TensorType, axes: Sequence[int]) -> Expr:
    """A reduction's output adjoint ``g`` reshaped to keep the reduced ``axes`` (size 1)
    and broadcast to the input's shape."""
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    if tuple(out.shape) != kept:
        g = ops.reshape(g, newshape=kept)
    return ops.broadcast_to(g, shape=tuple(x.shape))


def reduced_axes(attrs: Attrs, ndim: int) -> tuple[int, ...]:
    axes = range(ndim) if attrs.axis is None else [a % ndim for a in attrs.axis]
    if attrs.exclude:
        axes = [a for a in range(ndim) if a not in set(axes)]
    return tuple(sorted(axes))


def _binary_shapes(c: GradCall) -> tuple[tuple, tuple, tuple]:
    return tuple(c.output_type.shape), c.shape(0), c.shape(1)


# -------------------------------------------------------------- elementwise, broadcast


@register_gradient("add")
def _add(c: GradCall) -> list:
    out, a, b = _binary_shapes(c)
    return [collapse_sum(c.grad, out, a), collapse_sum(c.grad, out, b)]


@register_gradient("subtract")
def _subtract(c: GradCall) -> list:
    out, a, b = _binary_shapes(c)
    return [collapse_sum(c.grad, out, a), collapse_sum(ops.negative(c.grad), out, b)]


@register_gradient("multiply")
def _multiply(c: GradCall) -> list:
    out, a, b = _binary_shapes(c)
    x, y = c.inputs
    return [collapse_sum(ops.multiply(c.grad, y), out, a),
            collapse_sum(ops.multiply(c.grad, x), out, b)]


@register_gradient("divide")
def _divide(c: GradCall) -> list:
    out, a, b = _binary_shapes(c)
    x, y = c.inputs
    ga = ops.divide(c.grad, y)
    gb = ops.negative(ops.multiply(ga, c.output))
    return [collapse_sum(ga, out, a), collapse_sum(gb, out, b)]


@register_gradient("power")
def _power(c: GradCall) -> list:
    out, a, b = _binary_shapes(c)
    x, y = c.inputs
    dtype = c.output_type.dtype
    ga = ops.multiply(c.grad, ops.multiply(y, ops.power(x, ops.subtract(y, scalar(1, dtype)))))
    gb = ops.multiply(c.grad, ops.multiply(c.output, ops.log(x)))
    return [collapse_sum(ga, out, a), collapse_sum(gb, out, b)]


def _select(cond: Expr, g: Expr, dtype: str) -> Expr:
    return ops.where(cond, g, scalar(0, dtype))


@register_gradient("maximum", "minimum")
def _extremum(c: GradCall) -> list:
    out, a, b = _binary_shapes(c)
    x, y = c.inputs
    dtype = c.output_type.dtype
    first = (ops.greater_equal if c.call.op.name == "maximum" else ops.less_equal)(x, y)
    return [collapse_sum(_select(first, c.grad, dtype), out, a),
            collapse_sum(ops.where(first, scalar(0, dtype), c.grad), out, b)]


@register_gradient("negative")
def _negative(c: GradCall) -> list:
    return [ops.negative(c.grad)]


@register_gradient("abs")
def _abs(c: GradCall) -> list:
    (x,) = c.inputs
    return [ops.where(ops.less(x, scalar(0, c.output_type.dtype)), ops.negative(c.grad),
                      c.grad)]


@register_gradient("exp")
def _exp(c: GradCall) -> list:
    return [ops.multiply(c.grad, c.output)]


@register_gradient("log")
def _log(c: GradCall) -> list:
    return [ops.divide(c.grad, c.inputs[0])]


@register_gradient("sqrt")
def _sqrt(c: GradCall) -> list:
    half = scalar(0.5, c.output_type.dtype)
    return [ops.divide(ops.multiply(c.grad, half), c.output)]


@register_gradient("rsqrt")
def _rsqrt(c: GradCall) -> list:
    # d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
    y = c.output
    cube = ops.multiply(ops.multiply(y, y), y)
    return [ops.multiply(c.grad, ops.multiply(scalar(-0.5, c.output_type.dtype), cube))]


@register_gradient("sigmoid")
def _sigmoid(c: GradCall) -> list:
    y = c.output
    return [ops.multiply(c.grad, ops.multiply(y, ops.subtract(
        scalar(1, c.output_type.dtype), y)))]


@register_gradient("tanh")
def _tanh(c: GradCall) -> list:
    y = c.output
    return [ops.multiply(c.grad, ops.subtract(scalar(1, c.output_type.dtype),
                                              ops.multiply(y, y)))]


@register_gradient("erf")
def _erf(c: GradCall) -> list:
    (x,) = c.inputs
    dtype = c.output_type.dtype
    slope = ops.multiply(scalar(2 / math.sqrt(math.pi), dtype),
                         ops.exp(ops.negative(ops.multiply(x, x))))
    return [ops.multiply(c.grad, slope)]


@register_gradient("nn.relu")
def _relu(c: GradCall) -> list:
    dtype = c.output_type.dtype
    return [_select(ops.greater(c.inputs[0], scalar(0, dtype)), c.grad, dtype)]


@register_gradient("nn.leaky_relu")
def _leaky_relu(c: GradCall) -> list:
    dtype = c.output_type.dtype
    return [ops.where(ops.greater(c.inputs[0], scalar(0, dtype)), c.grad,
                      ops.multiply(c.grad, scalar(c.attrs.alpha, dtype)))]


@register_gradient("clip")
def _clip(c: GradCall) -> list:
    (x,) = c.inputs
    dtype = c.output_type.dtype
    inside: Expr | None = None
    for bound, compare in ((c.attrs.a_min, ops.greater_equal), (c.attrs.a_max, ops.less_equal)):
        if bound is not None:
            test = compare(x, scalar(bound, dtype))
            inside = test if inside is None else ops.logical_and(inside, test)
    return [c.grad if inside is None else _select(inside, c.grad, dtype)]


@register_gradient("where")
def _where(c: GradCall) -> list:
    out = tuple(c.output_type.shape)
    cond = c.inputs[0]
    dtype = c.output_type.dtype
    return [None, collapse_sum(_select(cond, c.grad, dtype), out, c.shape(1)),
            collapse_sum(ops.where(cond, scalar(0, dtype), c.grad), out, c.shape(2))]


@register_gradient("floor", "ceil", "equal", "not_equal", "less", "less_equal", "greater",
                   "greater_equal", "logical_and", "logical_or", "logical_xor",
                   "logical_not", "argmax", "argmin", "zeros", "ones")
def _no_gradient(c: GradCall) -> list:
    return [None] * len(c.inputs)


@register_gradient("annotation.compiler_begin", "annotation.compiler_end",
                   "qnn.simulated_quantize")
def _straight_through(c: GradCall) -> list:
    # annotations are the identity; simulated quantization passes the adjoint straight
    # through (the straight-through estimator of quantization-aware training)
    return [c.grad]


@register_gradient("qnn.quantize", "qnn.dequantize", "qnn.requantize",
                   "qnn.requantize_per_channel", "nn.conv2d_nchw4c_int8")
def _integer(c: GradCall) -> list:
    return [None] * len(c.inputs)


@register_gradient("cast")
def _cast(c: GradCall) -> list:
    t = c.input_type(0)
    if not differentiable(t):
        return [None]
    return [ops.cast(c.grad, dtype=t.dtype)]


@register_gradient("full")
def _full(c: GradCall) -> list:
    t = c.input_type(0)
    return [ops.cast(ops.sum(c.grad), dtype=t.dtype) if t.ndim == 0 else None]


@register_gradient("nn.bias_add")
def _bias_add(c: GradCall) -> list:
    ndim = len(c.shape(0))
    axis = c.attrs.axis % ndim
    others = tuple(a for a in range(ndim) if a != axis)
    return [c.grad, ops.sum(c.grad, axis=others) if others else c.grad]


@register_gradient("nn.dropout")
def _dropout(c: GradCall) -> list:
    # inference dropout is the identity on its first field
    return [TupleGetItem(c.grad, 0)]


# ---------------------------------------------------------------------------- reductions


@register_gradient("sum")
def _sum(c: GradCall) -> list:
    x = c.input_type(0)
    return [keep_dims(c.grad, c.output_type, x, reduced_axes(c.attrs, x.ndim))]


@register_gradient("mean")
def _mean(c: GradCall) -> list:
    x = c.input_type(0)
    axes = reduced_axes(c.attrs, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    spread = keep_dims(c.grad, c.output_type, x, axes)
    return [ops.divide(spread, scalar(count, x.dtype))]


@register_gradient("max", "min")
def _max(c: GradCall) -> list:
    # ties share the adjoint equally
    x = c.input_type(0)
    axes = reduced_axes(c.attrs, x.ndim)
    top = keep_dims(c.output, c.output_type, x, axes)
    hit = ops.cast(ops.equal(c.inputs[0], top), dtype=x.dtype)
    ties = keep_dims(ops.sum(hit, axis=axes, keepdims=c.attrs.keepdims), c.output_type, x,
                     axes)
    return [ops.divide(ops.multiply(keep_dims(c.grad, c.output_type, x, axes), hit), ties)]


@register_gradient("prod")
def _prod(c: GradCall) -> list:
    x = c.input_type(0)
    axes = reduced_axes(c.attrs, x.ndim)
    total = keep_dims(ops.multiply(c.grad, c.output), c.output_type, x, axes)
    return [ops.divide(total, c.inputs[0])]


# ------------------------------------------------------------------------ linear algebra


def _rows(e: Expr, shape: tuple) -> Expr:
    """``e`` flattened to a matrix over its last axis."""
    if len(shape) == 2:
        return e
    return ops.reshape(e, newshape=(math.prod(shape[:-1]), shape[-1]))


@register_gradient("nn.dense")
def _dense(c: GradCall) -> list:
    x, w = c.inputs
    out = tuple(c.output_type.shape)
    gx = ops.nn.matmul(c.grad, w)  # (..., N) @ (N, K)
    gw = ops.nn.matmul(_rows(c.grad, out), _rows(x, c.shape(0)), transpose_a=True)
    return [gx, gw]


_MATMUL_GRADS = {  # (transpose_a, transpose_b) -> ((a's factors, flags), (b's...))
    (False, False): (("g", "b", False, True), ("a", "g", True, False)),
    (True, False): (("b", "g", False, True), ("a", "g", False, False)),
    (False, True): (("g", "b", False, False), ("g", "a", True, False)),
    (True, True): (("b", "g", True, True), ("g", "a", True, True)),
}


@register_gradient("nn.matmul")
def _matmul(c: GradCall) -> list:
    a, b = c.inputs
    ta, tb = c.attrs.transpose_a, c.attrs.transpose_b
    if len(c.shape(0)) != 2:
        raise GradientError(f"nn.matmul: the gradient handles a rank-2 input, got "
                            f"{format_shape(c.shape(0))}")
    names = {"a": a, "b": b, "g": c.grad}
    return [ops.nn.matmul(names[p], names[q], transpose_a=fa, transpose_b=fb)
            for p, q, fa, fb in _MATMUL_GRADS[(ta, tb)]]


@register_gradient("nn.batch_matmul")
def _batch_matmul(c: GradCall) -> list:
    a, b = c.inputs
    if c.shape(0)[0] != c.shape(1)[0]:
        raise GradientError("nn.batch_matmul: the gradient needs equal batch sizes, got "
                            f"{format_shape(c.shape(0))} and {format_shape(c.shape(1))}")
    names = {"a": a, "b": b, "g": c.grad}
    key = (c.attrs.transpose_a, c.attrs.transpose_b)
    return [ops.nn.batch_matmul(names[p], names[q], transpose_a=fa, transpose_b=fb)
            for p, q, fa, fb in _MATMUL_GRADS[key]]


def _check_nchw(c: GradCall, data: str = "data_layout", kernel: str | None = "kernel_layout",
                want_kernel: str = "OIHW") -> None:
    layouts = [(data, c.attrs[data], "NCHW")]
    if kernel:
        layouts.append((kernel, c.attrs[kernel], want_kernel))
    for name, got, want in layouts:
        if got != want:
            raise GradientError(f"{c.call.op.name}: the gradient handles {name} {want}, got "
                                f"{got}")


@register_gradient("nn.conv2d")
def _conv2d(c: GradCall) -> list:
    _check_nchw(c)
    if c.attrs.out_layout not in ("", "NCHW"):
        raise GradientError(f"nn.conv2d: the gradient handles out_layout NCHW, got "
                            f"{c.attrs.out_layout}")
    x, w = c.inputs
    (_, _, h, wd), (_, _, r, s) = c.shape(0), c.shape(1)
    oh, ow = c.output_type.shape[2:]
    st, dil = c.attrs.strides, c.attrs.dilation
    pads = ops.relations.padding2d("nn.conv2d", c.attrs.padding)
    extra = tuple(size - ((o - 1) * stride + (k - 1) * d + 1 - before - after)
                  for size, o, stride, k, d, before, after in (
                      (h, oh, st[0], r, dil[0], pads[0], pads[2]),
                      (wd, ow, st[1], s, dil[1], pads[1], pads[3])))
    gx = ops.nn.conv2d_transpose(c.grad, w, strides=st, padding=pads, dilation=dil,
                                 groups=c.attrs.groups, output_padding=extra)
    gw = ops.nn.conv2d_backward_weight(c.grad, x, strides=st, padding=pads, dilation=dil,
                                       groups=c.attrs.groups, kernel_size=(r, s))
    return [gx, gw]


_POOL_ATTRS = ("pool_size", "strides", "dilation", "padding", "layout", "out_layout",
               "ceil_mode")


@register_gradient("nn.max_pool2d", "nn.avg_pool2d")
def _pool(c: GradCall) -> list:
    _check_nchw(c, data="layout", kernel=None)
    keys = _POOL_ATTRS + (("count_include_pad",) if c.call.op.name == "nn.avg_pool2d" else ())
    attrs = {k: c.attrs[k] for k in keys}
    builder = ops.nn.max_pool2d_grad if c.call.op.name == "nn.max_pool2d" else \
        ops.nn.avg_pool2d_grad
    return [builder(c.grad, c.inputs[0], **attrs)]


@register_gradient("nn.global_avg_pool2d")
def _global_avg_pool(c: GradCall) -> list:
    _check_nchw(c, data="layout", kernel=None)
    x = c.input_type(0)
    spread = ops.broadcast_to(c.grad, shape=tuple(x.shape))
    return [ops.divide(spread, scalar(x.shape[2] * x.shape[3], x.dtype))]


# ------------------------------------------------------------------------- normalisation


def along_axis(e: Expr, ndim: int, axis: int) -> Expr:
    """A 1-d ``e`` shaped to broadcast along ``axis`` of a rank-``ndim`` tensor."""
    return ops.expand_dims(e, axis=1, num_newaxis=ndim - 1 - axis) if axis < ndim - 1 else e


@register_gradient("nn.softmax")
def _softmax(c: GradCall) -> list:
    y, axis = c.output, c.attrs.axis
    dot = ops.sum(ops.multiply(c.grad, y), axis=(axis,), keepdims=True)
    return [ops.multiply(y, ops.subtract(c.grad, dot))]


@register_gradient("nn.log_softmax")
def _log_softmax(c: GradCall) -> list:
    total = ops.sum(c.grad, axis=(c.attrs.axis,), keepdims=True)
    return [ops.subtract(c.grad, ops.multiply(ops.exp(c.output), total))]


@register_gradient("nn.layer_norm")
def _layer_norm(c: GradCall) -> list:
    x, gamma, _ = c.inputs
    t = c.input_type(0)
    axis = c.attrs.axis % t.ndim
    dtype = t.dtype
    mean = ops.mean(x, axis=(axis,), keepdims=True)
    centred = ops.subtract(x, mean)
    var = ops.mean(ops.multiply(centred, centred), axis=(axis,), keepdims=True)
    rstd = ops.rsqrt(ops.add(var, scalar(c.attrs.epsilon, dtype)))
    xhat = ops.multiply(centred, rstd)
    others = tuple(a for a in range(t.ndim) if a != axis)
    gxhat = ops.multiply(c.grad, along_axis(gamma, t.ndim, axis)) if c.attrs.scale else c.grad
    mean_g = ops.mean(gxhat, axis=(axis,), keepdims=True)
    mean_gx = ops.mean(ops.multiply(gxhat, xhat), axis=(axis,), keepdims=True)
    gx = ops.multiply(rstd, ops.subtract(ops.subtract(gxhat, mean_g),
                                         ops.multiply(xhat, mean_gx)))

    def per_channel(e: Expr) -> Expr:
        return ops.sum(e, axis=others) if others else e

    ggamma = per_channel(ops.multiply(c.grad, xhat)) if c.attrs.scale else None
    gbeta = per_channel(c.grad) if c.attrs.center else None
    return [gx, ggamma, gbeta]


@register_gradient("nn.batch_norm")
def _batch_norm(c: GradCall) -> list:
    x, gamma, _, mean, var = c.inputs
    t = c.input_type(0)
    axis = c.attrs.axis % t.ndim
    dtype = t.dtype
    g = TupleGetItem(c.grad, 0)
    rstd = ops.rsqrt(ops.add(var, scalar(c.attrs.epsilon, dtype)))
    scale = ops.multiply(rstd, gamma) if c.attrs.scale else rstd
    others = tuple(a for a in range(t.ndim) if a != axis)
    centred = ops.subtract(x, along_axis(mean, t.ndim, axis))
    g_centred_sum = ops.sum(ops.multiply(g, centred), axis=others)
    g_sum = ops.sum(g, axis=others)
    gx = ops.multiply(g, along_axis(scale, t.ndim, axis))
    ggamma = ops.multiply(g_centred_sum, rstd) if c.attrs.scale else None
    gbeta = g_sum if c.attrs.center else None
    gmean = ops.negative(ops.multiply(g_sum, scale))
    # d rstd / d var = -1/2 rstd^3
    cube = ops.multiply(ops.multiply(rstd, rstd), rstd)
    gvar = ops.multiply(ops.multiply(g_centred_sum, scalar(-0.5, dtype)), cube)
    if c.attrs.scale:
        gvar = ops.multiply(gvar, gamma)
    return [gx, ggamma, gbeta, gmean, gvar]


# ------------------------------------------------------------------------- shape changes


@register_gradient("reshape", "squeeze", "expand_dims")
def _reshape(c: GradCall) -> list:
    return [ops.reshape(c.grad, newshape=c.shape(0))]


@register_gradient("transpose")
def _transpose(c: GradCall) -> list:
    ndim = len(c.shape(0))
    axes = c.attrs.axes or tuple(reversed(range(ndim)))
    inverse = tuple(int(i) for i in np.argsort([a % ndim for a in axes]))
    return [ops.transpose(c.grad, axes=inverse)]


@register_gradient("broadcast_to")
def _broadcast_to(c: GradCall) -> list:
    return [collapse_sum(c.grad, tuple(c.output_type.shape), c.shape(0))]


@register_gradient("layout_transform")
def _layout_transform(c: GradCall) -> list:
    return [ops.layout_transform(c.grad, src_layout=c.attrs.dst_layout,
                                 dst_layout=c.attrs.src_layout)]


@register_gradient("concatenate")
def _concatenate(c: GradCall) -> list:
    fields = c.call.args[0].checked_type.fields
    axis = c.attrs.axis % len(fields[0].shape)
    bounds = np.cumsum([f.shape[axis] for f in fields])[:-1]
    parts = ops.split(c.grad, indices_or_sections=tuple(int(b) for b in bounds), axis=axis)
    return [[TupleGetItem(parts, i) for i in range(len(fields))]]


@register_gradient("split")
def _split(c: GradCall) -> list:
    axis = c.attrs.axis % len(c.shape(0))
    fields = [TupleGetItem(c.grad, i) for i in range(len(c.call.checked_type.fields))]
    return [ops.concatenate(Tuple(fields), axis=axis)]


@register_gradient("strided_slice")
def _strided_slice(c: GradCall) -> list:
    keys = ("begin", "end", "strides", "axes", "slice_mode")
    return [ops.strided_slice_grad(c.grad, shape=c.shape(0), **{k: c.attrs[k] for k in keys})]


@register_gradient("take")
def _take(c: GradCall) -> list:
    keys = ("batch_dims", "axis", "mode")
    return [ops.take_grad(c.grad, c.inputs[1], shape=c.shape(0),
                          **{k: c.attrs[k] for k in keys}), None]


@register_gradient("nn.pad")
def _pad(c: GradCall) -> list:
    if c.attrs.pad_mode != "constant":
        raise GradientError(f"nn.pad: the gradient handles pad_mode 'constant', got "
                            f"{c.attrs.pad_mode!r}")
    shape = c.shape(0)
    begin = tuple(b for b, _ in c.attrs.pad_width)
    end = tuple(b + d for (b, _), d in zip(c.attrs.pad_width, shape, strict=True))
    return [ops.strided_slice(c.grad, begin=begin, end=end)]
