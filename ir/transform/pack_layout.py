"""ConvertLayout to packed channels (``NCHW16c``): NCHW ``nn.conv2d`` becomes
``nn.conv2d_nchwc`` (or ``nn.depthwise_conv2d_nchwc``) and the operators after it follow in
the packed layout, so ``layout_transform`` appears only at the graph's edges.

A tensor's layout here is ``Packed(b)``: the original is 4-d NCHW and its rewrite is
``(N, C/b, H, W, b)``. The block of ``C`` channels is the largest power of two from
``max_block`` (the target's float32 vector lanes) down to 4 that divides ``C``, or ``C``
itself when it is at most ``max_block`` (3 input channels pack as one block of 3);
channel counts that fit neither leave their conv in NCHW. Operators:

- ``nn.conv2d`` (float32, data NCHW, any OIHW permutation of kernel; groups 1, or
  depthwise with groups = C = K): data packed by ``C``'s block, the kernel transformed to
  ``OIHW[ic]i[oc]o`` (at once, with numpy, when it is a constant), output packed by ``K``'s.
- follow their input: elementwise unary operators; ``nn.max_pool2d`` / ``nn.avg_pool2d`` /
  ``nn.global_avg_pool2d`` (layout ``NCHW<b>c``); ``nn.bias_add`` on the channel axis
  (becomes an ``add`` of the bias reshaped to ``(1, C/b, 1, 1, b)``); ``concatenate`` of
  channels all divisible by the block.
- broadcasting binary operators with a 4-d result: the other operand is brought to the
  block (a packed one of another block by ``layout_transform``, a per-channel one such as a
  ``(C, 1, 1)`` constant packed, one with a single channel given a trailing axis of 1;
  constants at once).
- everything else sees NCHW: a packed input gets one ``layout_transform`` back (shared by
  all such users).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..expr import Call, Constant, Expr, Tuple
from ..op import make_call
from ..types import TensorType
from .convert_layout import _BINARY, _POOLS, _UNARY, _Convert


@dataclass(frozen=True)
class Packed:
    """The layout ``NCHW<block>c`` of a tensor that is NCHW in the original."""

    block: int

    @property
    def name(self) -> str:
        return f"NCHW{self.block}c"


def _shape(e: Expr) -> tuple | None:
    t = e.checked_type_or_none
    return tuple(t.shape) if isinstance(t, TensorType) else None


def _static_4d(e: Expr) -> tuple[int, int, int, int] | None:
    shape = _shape(e)
    if shape is None or len(shape) > 4 or not all(isinstance(d, int) for d in shape):
        return None
    return (1,) * (4 - len(shape)) + shape  # type: ignore[return-value]


def _transform(e: Expr, src: str, dst: str) -> Expr:
    if isinstance(e, Constant):
        from schedule import ops

        return Constant(ops.reference.layout_transform(e.data, src, dst))
    return make_call("layout_transform", e, src_layout=src, dst_layout=dst)


def _reshape(e: Expr, shape: tuple[int, ...]) -> Expr:
    if isinstance(e, Constant):
        return Constant(np.ascontiguousarray(e.data.reshape(shape)))
    return make_call("reshape", e, newshape=shape)


class _Pack(_Convert):
    def __init__(self, max_block: int):
        super().__init__("NCHW", "OIHW")
        self.max_block = max_block
        self.rules = {"nn.conv2d": self.conv2d, "nn.bias_add": self.bias_add,
                      "concatenate": self.concatenate}
        for names, rule in ((_UNARY, self.unary), (_BINARY, self.binary),
                            (_POOLS, self.pool)):
            self.rules.update(dict.fromkeys(names, rule))

    def block(self, channels: int) -> int | None:
        """The block that packs ``channels`` (see the module docstring)."""
        b = self.max_block
        while b >= 4:
            if channels % b == 0:
                return b
            b //= 2
        return channels if channels <= self.max_block else None

    # ------------------------------------------------------------- layout changes

    def restore_tensor(self, e: Expr, layout: Any) -> Expr:
        return _transform(e, layout.name, "NCHW")

    def change(self, e: Expr, new: Expr, have: Any, want: Any) -> Expr:
        if have is not None:
            return _transform(new, have.name, want.name)
        n, c, h, w = _static_4d(e)  # type: ignore[misc]  # packable() said so
        if _shape(e) != (n, c, h, w):
            new = _reshape(new, (n, c, h, w))
        if c == 1:
            return _reshape(new, (n, 1, h, w, 1))
        return _transform(new, "NCHW", want.name)

    def packable(self, e: Expr, want: Packed) -> bool:
        """Whether original ``e`` can be brought to ``want`` as a broadcast operand."""
        have = self.tensor_layout(e)
        if isinstance(have, Packed):
            return True
        dims = _static_4d(e)
        return dims is not None and (dims[1] == 1 or dims[1] % want.block == 0)

    # -------------------------------------------------------------------- calls

    def conv2d(self, e: Call) -> tuple[Expr, object] | None:
        a = e.attrs
        data_shape, kernel_type = _static_4d(e.args[0]), e.args[1].checked_type_or_none
        if (a.data_layout != "NCHW" or (a.out_layout or "NCHW") != "NCHW"
                or data_shape is None or not isinstance(kernel_type, TensorType)
                or kernel_type.dtype != "float32" or (a.out_dtype or "float32") != "float32"
                or _shape(e.args[0]) != data_shape):
            return None
        channels = data_shape[1]
        kernel_dims = dict(zip(a.kernel_layout, kernel_type.shape, strict=True))
        out_channels = kernel_dims["O"]
        depthwise = a.groups > 1 and a.groups == channels == out_channels
        if (a.groups != 1 and not depthwise) or not isinstance(out_channels, int):
            return None
        ic, oc = self.block(channels), self.block(out_channels)
        if ic is None or oc is None or (depthwise and ic != oc):
            return None
        data = self.as_layout(e.args[0], Packed(ic))
        kernel_layout = f"OIHW1i{oc}o" if depthwise else f"OIHW{ic}i{oc}o"
        kernel = _transform(self.as_layout(e.args[1], None), a.kernel_layout, kernel_layout)
        op = "nn.depthwise_conv2d_nchwc" if depthwise else "nn.conv2d_nchwc"
        new = make_call(op, data, kernel, strides=a.strides, padding=a.padding,
                        dilation=a.dilation, out_dtype=a.out_dtype, span=e.span)
        return new, Packed(oc)

    def binary(self, e: Call) -> tuple[Expr, object] | None:
        lays = [self.tensor_layout(x) for x in e.args]
        target = next((lay for lay in lays if lay is not None), None)
        out = _shape(e)
        if target is None or out is None or len(out) != 4:
            return None
        if not all(lay == target or self.packable(x, target)
                   for x, lay in zip(e.args, lays, strict=True)):
            return None
        args = [self.visit(x) if lay == target or _shape(x) == () else
                self.as_layout(x, target) for x, lay in zip(e.args, lays, strict=True)]
        return Call(e.op, args, e.attrs, span=e.span), target

    def pool(self, e: Call) -> tuple[Expr, object] | None:
        have = self.tensor_layout(e.args[0])
        a = e.attrs
        if have is None or a.layout != "NCHW" or (a.out_layout or "NCHW") != "NCHW":
            return None
        new = Call(e.op, [self.visit(e.args[0])], a.replace(layout=have.name, out_layout=""),
                   span=e.span)
        return new, have

    def bias_add(self, e: Call) -> tuple[Expr, object] | None:
        have = self.tensor_layout(e.args[0])
        out = _shape(e)
        if have is None or out is None or len(out) != 4 or e.attrs.axis % 4 != 1:
            return None
        channels = out[1]
        bias = _reshape(self.as_layout(e.args[1], None),
                        (1, channels // have.block, 1, 1, have.block))
        return make_call("add", self.visit(e.args[0]), bias, span=e.span), have

    def concatenate(self, e: Call) -> tuple[Expr, object] | None:
        tup = e.args[0]
        out = _shape(e)
        if type(tup) is not Tuple or out is None or len(out) != 4 or e.attrs.axis % 4 != 1:
            return None
        target = next((lay for lay in map(self.tensor_layout, tup.fields) if lay is not None),
                      None)
        if target is None or not all(
                (dims := _static_4d(f)) is not None and _shape(f) == dims
                and dims[1] % target.block == 0 for f in tup.fields):
            return None
        fields = [self.as_layout(f, target) for f in tup.fields]
        return Call(e.op, [Tuple(fields, tup.span)], e.attrs.replace(axis=1),
                    span=e.span), target


def pack_layout(expr: Expr, max_block: int) -> Expr:
    """``expr`` (typed) with its NCHW conv2d calls on channels packed in blocks of up to
    ``max_block`` (see the module docstring)."""
    return _Pack(max_block).visit(expr)
