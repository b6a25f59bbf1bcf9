"""Forward-mode rules, one per operator: given a call, its inputs' values and tangents and
its output's value, the output's tangent (a Tuple for tuple outputs), built from IR
operators.

``register_tangent(name)`` adds a rule; ``tangent_rule(name)`` finds one. A rule takes a
``TangentCall``: ``tangents[i]`` is the tangent of input ``i`` (a Tuple expression for a
tuple input), or None for an input tangents do not flow through (integers, booleans).
Linear operators apply themselves to the tangents; bilinear ones (products, dense,
convolutions) use the product rule; the rest multiply by their derivative. A rule returns
None when the output's tangent is zero (comparisons, rounding).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ... import op as ops
from ...attrs import Attrs
from ...expr import Call, Expr, Tuple
from ...types import TensorType, TupleType
from .rules import (
    GradientError,
    RuleTable,
    _static_tensor,
    along_axis,
    keep_dims,
    reduced_axes,
    scalar,
)


@dataclass(frozen=True)
class TangentCall:
    """What a forward-mode rule sees of one operator call."""

    call: Call
    inputs: tuple[Expr, ...]
    tangents: tuple[Expr | None, ...]
    output: Expr

    @property
    def attrs(self) -> Attrs:
        return self.call.attrs

    def input_type(self, i: int) -> TensorType:
        return _static_tensor(self.call.args[i].checked_type, self.call, f"input {i}")

    @property
    def output_type(self) -> TensorType:
        return _static_tensor(self.call.checked_type, self.call, "output")

    @property
    def dtype(self) -> str:
        """The output's dtype (its first field's for a tuple)."""
        t = self.output_type
        return t.fields[0].dtype if isinstance(t, TupleType) else t.dtype

    def same_op(self, *args: Expr) -> Expr:
        """This call's operator, with its attributes, over ``args``."""
        return Call(self.call.op, list(args), self.call.attrs)

    def linear(self) -> Expr:
        """The operator applied to the tangents (the inputs without one kept as they are):
        the tangent of an operator linear in its differentiable inputs."""
        return self.same_op(*(x if t is None else t
                              for x, t in zip(self.inputs, self.tangents, strict=True)))

    def product(self) -> Expr:
        """The product rule of an operator linear in each of its two inputs."""
        (a, b), (ta, tb) = self.inputs, self.tangents
        return ops.add(self.same_op(ta, b), self.same_op(a, tb))

    def scaled(self, slope: Expr) -> Expr:
        return ops.multiply(self.tangents[0], slope)


TangentRule = Callable[[TangentCall], "Expr | None"]
_RULES = RuleTable("tangent (forward-mode) rule")
#: decorator: ``rule`` is the forward-mode rule of operators ``names``
register_tangent = _RULES.register
tangent_rule = _RULES.get


def has_tangent(name: str) -> bool:
    return name in _RULES


_LINEAR = ("add", "subtract", "negative", "reshape", "squeeze", "expand_dims", "transpose",
           "broadcast_to", "sum", "mean", "concatenate", "split", "strided_slice", "take",
           "nn.avg_pool2d", "nn.global_avg_pool2d", "layout_transform", "nn.bias_add",
           "nn.dropout", "cast", "nn.avg_pool2d_grad", "strided_slice_grad", "take_grad",
           "annotation.compiler_begin", "annotation.compiler_end")
register_tangent(*_LINEAR)(TangentCall.linear)
register_tangent("multiply", "nn.dense", "nn.matmul", "nn.batch_matmul", "nn.conv2d",
                 "nn.conv2d_transpose", "nn.conv2d_backward_weight")(TangentCall.product)


@register_tangent("floor", "ceil", "equal", "not_equal", "less", "less_equal", "greater",
                  "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not",
                  "argmax", "argmin", "zeros", "ones", "qnn.quantize", "qnn.dequantize",
                  "qnn.requantize", "qnn.requantize_per_channel", "nn.conv2d_nchw4c_int8")
def _zero(c: TangentCall) -> None:
    return None


@register_tangent("qnn.simulated_quantize")
def _straight_through(c: TangentCall) -> Expr:
    return c.tangents[0]  # the straight-through estimator, as the reverse rule


@register_tangent("full")
def _full(c: TangentCall) -> Expr | None:
    t = c.tangents[0]
    return None if t is None else ops.full(t, shape=tuple(c.output_type.shape),
                                           dtype=c.dtype)


@register_tangent("nn.pad")
def _pad(c: TangentCall) -> Expr:
    if c.attrs.pad_mode != "constant":
        raise GradientError(f"nn.pad: forward mode handles pad_mode 'constant', got "
                            f"{c.attrs.pad_mode!r}")
    return ops.nn.pad(c.tangents[0], pad_width=c.attrs.pad_width, pad_value=0.0)


@register_tangent("divide")
def _divide(c: TangentCall) -> Expr:
    (_, b), (ta, tb) = c.inputs, c.tangents
    return ops.divide(ops.subtract(ta, ops.multiply(c.output, tb)), b)


@register_tangent("power")
def _power(c: TangentCall) -> Expr:
    (a, b), (ta, tb) = c.inputs, c.tangents
    return ops.multiply(c.output, ops.add(ops.multiply(b, ops.divide(ta, a)),
                                          ops.multiply(ops.log(a), tb)))


@register_tangent("maximum", "minimum")
def _extremum(c: TangentCall) -> Expr:
    (a, b), (ta, tb) = c.inputs, c.tangents
    first = (ops.greater_equal if c.call.op.name == "maximum" else ops.less_equal)(a, b)
    return ops.where(first, ta, tb)


@register_tangent("where")
def _where(c: TangentCall) -> Expr:
    return ops.where(c.inputs[0], c.tangents[1], c.tangents[2])


@register_tangent("abs")
def _abs(c: TangentCall) -> Expr:
    t = c.tangents[0]
    return ops.where(ops.less(c.inputs[0], scalar(0, c.dtype)), ops.negative(t), t)


@register_tangent("exp")
def _exp(c: TangentCall) -> Expr:
    return c.scaled(c.output)


@register_tangent("log")
def _log(c: TangentCall) -> Expr:
    return ops.divide(c.tangents[0], c.inputs[0])


@register_tangent("sqrt")
def _sqrt(c: TangentCall) -> Expr:
    return ops.divide(c.scaled(scalar(0.5, c.dtype)), c.output)


@register_tangent("rsqrt")
def _rsqrt(c: TangentCall) -> Expr:
    y = c.output
    return c.scaled(ops.multiply(scalar(-0.5, c.dtype), ops.multiply(ops.multiply(y, y), y)))


@register_tangent("sigmoid")
def _sigmoid(c: TangentCall) -> Expr:
    y = c.output
    return c.scaled(ops.multiply(y, ops.subtract(scalar(1, c.dtype), y)))


@register_tangent("tanh")
def _tanh(c: TangentCall) -> Expr:
    y = c.output
    return c.scaled(ops.subtract(scalar(1, c.dtype), ops.multiply(y, y)))


@register_tangent("erf")
def _erf(c: TangentCall) -> Expr:
    x = c.inputs[0]
    return c.scaled(ops.multiply(scalar(2 / math.sqrt(math.pi), c.dtype),
                                 ops.exp(ops.negative(ops.multiply(x, x)))))


@register_tangent("nn.relu")
def _relu(c: TangentCall) -> Expr:
    return ops.where(ops.greater(c.inputs[0], scalar(0, c.dtype)), c.tangents[0],
                     scalar(0, c.dtype))


@register_tangent("nn.leaky_relu")
def _leaky_relu(c: TangentCall) -> Expr:
    t = c.tangents[0]
    return ops.where(ops.greater(c.inputs[0], scalar(0, c.dtype)), t,
                     ops.multiply(t, scalar(c.attrs.alpha, c.dtype)))


@register_tangent("clip")
def _clip(c: TangentCall) -> Expr:
    x, t = c.inputs[0], c.tangents[0]
    for bound, compare in ((c.attrs.a_min, ops.greater_equal), (c.attrs.a_max, ops.less_equal)):
        if bound is not None:
            t = ops.where(compare(x, scalar(bound, c.dtype)), t, scalar(0, c.dtype))
    return t


@register_tangent("max", "min")
def _max(c: TangentCall) -> Expr:
    # ties share the tangent equally, as the reverse rule shares the adjoint
    x_t = c.input_type(0)
    axes = reduced_axes(c.attrs, x_t.ndim)
    hit = ops.cast(ops.equal(c.inputs[0], keep_dims(c.output, c.output_type, x_t, axes)),
                   dtype=x_t.dtype)
    keep = c.attrs.keepdims
    return ops.divide(ops.sum(ops.multiply(hit, c.tangents[0]), axis=axes, keepdims=keep),
                      ops.sum(hit, axis=axes, keepdims=keep))


@register_tangent("prod")
def _prod(c: TangentCall) -> Expr:
    x_t = c.input_type(0)
    axes = reduced_axes(c.attrs, x_t.ndim)
    ratio = ops.sum(ops.divide(c.tangents[0], c.inputs[0]), axis=axes,
                    keepdims=c.attrs.keepdims)
    return ops.multiply(c.output, ratio)


@register_tangent("nn.softmax")
def _softmax(c: TangentCall) -> Expr:
    y, t = c.output, c.tangents[0]
    dot = ops.sum(ops.multiply(y, t), axis=(c.attrs.axis,), keepdims=True)
    return ops.multiply(y, ops.subtract(t, dot))


@register_tangent("nn.log_softmax")
def _log_softmax(c: TangentCall) -> Expr:
    t = c.tangents[0]
    dot = ops.sum(ops.multiply(ops.exp(c.output), t), axis=(c.attrs.axis,), keepdims=True)
    return ops.subtract(t, dot)


@register_tangent("nn.layer_norm")
def _layer_norm(c: TangentCall) -> Expr:
    (x, gamma, _), (tx, tgamma, tbeta) = c.inputs, c.tangents
    t = c.input_type(0)
    axis = c.attrs.axis % t.ndim
    centred = ops.subtract(x, ops.mean(x, axis=(axis,), keepdims=True))
    var = ops.mean(ops.multiply(centred, centred), axis=(axis,), keepdims=True)
    rstd = ops.rsqrt(ops.add(var, scalar(c.attrs.epsilon, c.dtype)))
    xhat = ops.multiply(centred, rstd)
    tc = ops.subtract(tx, ops.mean(tx, axis=(axis,), keepdims=True))
    txhat = ops.multiply(rstd, ops.subtract(tc, ops.multiply(xhat, ops.mean(
        ops.multiply(xhat, tc), axis=(axis,), keepdims=True))))
    out = ops.multiply(txhat, along_axis(gamma, t.ndim, axis)) if c.attrs.scale else txhat
    if c.attrs.scale:
        out = ops.add(out, ops.multiply(xhat, along_axis(tgamma, t.ndim, axis)))
    if c.attrs.center:
        out = ops.add(out, along_axis(tbeta, t.ndim, axis))
    return out


@register_tangent("nn.batch_norm")
def _batch_norm(c: TangentCall) -> Expr:
    (x, gamma, _, mean, var), (tx, tg, tb, tm, tv) = c.inputs, c.tangents
    t = c.input_type(0)
    axis = c.attrs.axis % t.ndim

    def along(e: Expr) -> Expr:
        return along_axis(e, t.ndim, axis)

    rstd = ops.rsqrt(ops.add(var, scalar(c.attrs.epsilon, c.dtype)))
    cube = ops.multiply(ops.multiply(rstd, rstd), rstd)
    trstd = ops.multiply(scalar(-0.5, c.dtype), ops.multiply(cube, tv))
    centred = ops.subtract(x, along(mean))
    tcentred = ops.subtract(tx, along(tm))
    scale = ops.multiply(rstd, gamma) if c.attrs.scale else rstd
    tscale = ops.add(ops.multiply(trstd, gamma), ops.multiply(rstd, tg)) if c.attrs.scale \
        else trstd
    out = ops.add(ops.multiply(tcentred, along(scale)), ops.multiply(centred, along(tscale)))
    if c.attrs.center:
        out = ops.add(out, along(tb))
    return Tuple([out, tm, tv])


@register_tangent("nn.max_pool2d")
def _max_pool(c: TangentCall) -> Expr:
    """Each window's tangent is its first largest element's (as the reverse rule routes
    the adjoint): the taps are compared with the output one by one."""
    if c.attrs.layout != "NCHW" or c.attrs.ceil_mode:
        raise GradientError("nn.max_pool2d: forward mode handles NCHW without ceil_mode")
    x, t = c.inputs[0], c.tangents[0]
    (r, s), (sh, sw), (dh, dw) = c.attrs.pool_size, c.attrs.strides, c.attrs.dilation
    pads = ops.relations.padding2d("nn.max_pool2d", c.attrs.padding)
    widths = ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3]))
    xp = ops.nn.pad(x, pad_width=widths, pad_value=-math.inf)
    tp = ops.nn.pad(t, pad_width=widths)
    n, ch, oh, ow = c.output_type.shape
    out: Expr | None = None
    taken: Expr | None = None
    for ry in range(r):
        for rx in range(s):
            window = {"begin": (ry * dh, rx * dw),
                      "end": (ry * dh + sh * (oh - 1) + 1, rx * dw + sw * (ow - 1) + 1),
                      "strides": (sh, sw), "axes": (2, 3)}
            hit = ops.equal(ops.strided_slice(xp, **window), c.output)
            if taken is not None:
                hit = ops.logical_and(hit, ops.logical_not(taken))
            part = ops.where(hit, ops.strided_slice(tp, **window), scalar(0, c.dtype))
            out = part if out is None else ops.add(out, part)
            taken = hit if taken is None else ops.logical_or(taken, hit)
    return out


@register_tangent("nn.max_pool2d_grad")
def _max_pool_grad(c: TangentCall) -> Expr:
    # linear in the output gradient; the data only chooses the routes
    return c.same_op(c.tangents[0], c.inputs[1])

