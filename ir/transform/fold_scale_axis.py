"""FoldScaleAxis: fold per-channel scales and shifts into the weights and bias of the
convolution or dense layer next to them.

Backward (a scale after the layer):

- ``multiply(P, S)`` (or ``divide(P, S)``, as the scale ``1 / S``), where ``S`` is a
  constant that varies only along P's output-channel axis and ``P`` is ``nn.conv2d(x, w)``
  (any layouts, any groups: the scale goes on the kernel's ``O`` axis) or
  ``nn.dense(x, w)`` (rows of ``w``), possibly behind ``nn.bias_add(., b)``: the weight
  (and the bias) are scaled instead. ``P`` (and the layer behind its bias) must have no
  other user, or they would see the scale too.
- ``add(P, B)`` / ``subtract(P, B)`` with a per-output-channel constant ``B``: becomes
  ``nn.bias_add(P, b)``, or joins P's own bias when P is a bias_add used only here.

Forward (a scale before the layer): ``nn.conv2d(multiply(x, S), w)`` with ``S`` constant
per input channel becomes ``nn.conv2d(x, w * S)`` (any groups; zero padding stays zero),
also through ``nn.relu`` when every scale is positive; ``nn.dense(multiply(x, S), w)``
likewise along the reduction axis.

So the output of ``SimplifyInference`` on conv -> batch_norm, after ``FoldConstant``
(``add(multiply(conv2d(x, W), S), B)``, through a bias_add or not), becomes
``nn.bias_add(nn.conv2d(x, W'), b')``. A constant weight or bias is scaled at once (a new
constant); any other weight gets a ``multiply`` by a constant in front of it.

Only floating-point tensors, and only in graph form: a let-bound intermediate hides the
pattern (run ``ToGraphNormalForm`` first). The pass runs type inference first (it needs
shapes).
"""

from __future__ import annotations

import numpy as np

from ..expr import Call, Constant, Expr
from ..module import Module
from ..op import make_call
from ..types import TensorType
from ._util import Rewriter, call_of, map_typed_functions, op_name, static_tensor_type, use_counts
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["FoldScaleAxis", "fold_scale_axis"]

_HANDLED = frozenset({"multiply", "divide", "add", "subtract", "nn.conv2d", "nn.dense"})


def _channel_vector(c: Expr, out: TensorType, axis: int) -> np.ndarray | None:
    """The per-channel values of constant ``c`` when, broadcast against a tensor of type
    ``out``, it varies only along ``axis`` (and does not grow the result); else None."""
    if not isinstance(c, Constant) or c.dtype != out.dtype or not out.dtype.startswith(
            "float"):
        return None
    rank = len(out.shape)
    if c.data.ndim > rank:
        return None
    shape = (1,) * (rank - c.data.ndim) + c.shape
    channels = out.shape[axis]
    if any(d != 1 for i, d in enumerate(shape) if i != axis) or shape[axis] not in (
            1, channels):
        return None
    return np.array(np.broadcast_to(c.data.reshape(-1), (channels,)))


def _along(v: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


def _scale_tensor(w: Expr, factor: np.ndarray) -> Expr:
    """``w * factor`` (``factor`` broadcasts to w's shape): a new constant when ``w`` is
    one, else a multiply."""
    if isinstance(w, Constant):
        return Constant((w.data * factor).astype(w.data.dtype))
    return make_call("multiply", w, Constant(factor))


def _out_axis(p: Expr, ndim: int) -> int | None:
    """The output-channel axis of a conv2d / dense call (None for anything else, and for
    one with its own ``out_dtype``: its weight's dtype may differ from the scale's)."""
    if call_of(p, "nn.conv2d", "nn.dense") is None or p.attrs.out_dtype:
        return None
    if p.op.name == "nn.conv2d":
        return (p.attrs.out_layout or p.attrs.data_layout).index("C")
    return ndim - 1


class _Fold(Rewriter):
    def __init__(self, uses: dict[int, int]):
        super().__init__()
        self.uses = uses
        self.new_uses: dict[int, int] = {}  # id(rewritten node) -> uses of its original
        self.new_types: dict[int, object] = {}  # id(rewritten node) -> type of its original

    def single_use(self, new: Expr) -> bool:
        return self.new_uses.get(id(new)) == 1

    def visit_call(self, e: Call) -> Expr:
        new = super().visit_call(e)
        name = op_name(new)
        out = static_tensor_type(e)
        if name in _HANDLED and out is not None:
            folded = None
            if name in ("multiply", "divide"):
                folded = self.backward_scale(new, out)
            elif name in ("add", "subtract"):
                folded = self.shift_to_bias(new, out)
            else:
                folded = self.forward_scale(e, new)
            if folded is not None:
                new = folded
        self.new_uses[id(new)] = self.uses.get(id(e), 0)
        self.new_types[id(new)] = e.checked_type_or_none
        return new

    def type_of(self, e: Expr) -> object:
        return e.checked_type_or_none or self.new_types.get(id(e))

    # ------------------------------------------------------------------ backward

    def _operands(self, call: Call, commutative: bool) -> list[tuple[Expr, Expr]]:
        a, b = call.args
        return [(a, b), (b, a)] if commutative else [(a, b)]

    def backward_scale(self, call: Call, out: TensorType) -> Expr | None:
        ndim = len(out.shape)
        for p, c in self._operands(call, call.op.name == "multiply"):
            if not self.single_use(p):
                continue
            inner, bias = p, None
            if call_of(p, "nn.bias_add") is not None:
                inner, bias = p.args
                if not self.single_use(inner):
                    continue
            axis = _out_axis(inner, ndim)
            if axis is None or (bias is not None and p.attrs.axis % ndim != axis):
                continue
            v = _channel_vector(c, out, axis)
            if v is None:
                continue
            if call.op.name == "divide":
                if not np.all(v != 0):
                    continue
                v = (1 / v).astype(v.dtype)
            layer = self.scale_layer(inner, v)
            if bias is None:
                return layer
            return Call(p.op, [layer, _scale_tensor(bias, v)], p.attrs, span=p.span)
        return None

    @staticmethod
    def scale_layer(layer: Call, v: np.ndarray) -> Call:
        x, w = layer.args
        if layer.op.name == "nn.conv2d":
            w2 = _scale_tensor(w, _along(v, 4, layer.attrs.kernel_layout.index("O")))
        else:
            w2 = _scale_tensor(w, v.reshape(-1, 1))
        return Call(layer.op, [x, w2], layer.attrs, span=layer.span)

    def shift_to_bias(self, call: Call, out: TensorType) -> Expr | None:
        ndim = len(out.shape)
        for p, c in self._operands(call, call.op.name == "add"):
            inner = p.args[0] if call_of(p, "nn.bias_add") is not None else p
            axis = _out_axis(inner, ndim)
            if axis is None or (inner is not p and p.attrs.axis % ndim != axis):
                continue
            v = _channel_vector(c, out, axis)
            if v is None:
                continue
            if call.op.name == "subtract":
                v = -v
            if inner is not p and self.single_use(p):
                b = p.args[1]
                b2 = (Constant((b.data + v).astype(b.data.dtype)) if isinstance(b, Constant)
                      else make_call("add", b, Constant(v)))
                return Call(p.op, [inner, b2], p.attrs, span=p.span)
            return make_call("nn.bias_add", p, Constant(v), axis=axis)
        return None

    # ------------------------------------------------------------------- forward

    def forward_scale(self, orig: Call, layer: Call) -> Expr | None:
        data, w = layer.args
        in_type = static_tensor_type(orig.args[0])
        w_type = static_tensor_type(orig.args[1])
        if in_type is None or w_type is None:
            return None
        if layer.attrs.out_dtype:
            return None
        is_conv = layer.op.name == "nn.conv2d"
        axis = layer.attrs.data_layout.index("C") if is_conv else len(in_type.shape) - 1
        through_relu = call_of(data, "nn.relu") is not None
        mul = data.args[0] if through_relu else data
        if call_of(mul, "multiply") is None or (through_relu and not (
                self.single_use(data) and self.single_use(mul))):
            return None
        for x, c in ((mul.args[0], mul.args[1]), (mul.args[1], mul.args[0])):
            v = _channel_vector(c, in_type, axis)
            if v is None or (through_relu and not np.all(v > 0)):
                continue
            x_type = self.type_of(x)
            if not isinstance(x_type, TensorType) or x_type.shape != in_type.shape:
                continue  # the scaled operand must be the data itself, not a broadcast one
            if through_relu:
                x = Call(data.op, [x], data.attrs, span=data.span)
            factor = (self._conv_input_factor(layer, v, w_type) if is_conv
                      else v.reshape(1, -1))
            return Call(layer.op, [x, _scale_tensor(w, factor)], layer.attrs,
                        span=layer.span)
        return None

    @staticmethod
    def _conv_input_factor(conv: Call, v: np.ndarray, w_type: TensorType) -> np.ndarray:
        """The factor, in the kernel's layout, that scales input channel ``c`` of every
        output channel reading it: kernel element (o, i) reads input channel
        ``group(o) * I + i``."""
        kl = conv.attrs.kernel_layout
        o_count, i_count = w_type.shape[kl.index("O")], w_type.shape[kl.index("I")]
        groups = conv.attrs.groups
        group = np.arange(o_count) // (o_count // groups)
        oi = v[group[:, None] * i_count + np.arange(i_count)[None, :]]  # (O, I)
        oihw = oi.reshape(o_count, i_count, 1, 1)
        return np.transpose(oihw, ["OIHW".index(ch) for ch in kl])


def fold_scale_axis(expr: Expr) -> Expr:
    """``expr`` (typed) with per-channel scales folded (see the module docstring)."""
    return _Fold(use_counts(expr)).visit(expr)


def _run(module: Module, ctx: PassContext) -> Module:
    return map_typed_functions(module, fold_scale_axis)


def FoldScaleAxis() -> Pass:
    """Fold per-channel scales and shifts into conv2d / dense weights and biases (opt
    level 3)."""
    return module_pass("FoldScaleAxis", opt_level=3)(_run)
