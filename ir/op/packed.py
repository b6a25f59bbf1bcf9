"""Operators over packed-channel layouts (``NCHW16c``: see ``schedule.ops.Layout``), which
``ConvertLayout`` introduces where the target prefers them: ``layout_transform`` (no
namespace), ``nn.conv2d_nchwc`` and ``nn.depthwise_conv2d_nchwc``; and the 8-bit
``nn.conv2d_nchw4c_int8`` (``PackInt8Convolutions`` makes it from quantized convolutions):
uint8 data ``(N, C/4, H, W, 4)`` times an int8 weight ``(K/16, C/4, R, S, 16, 4)`` into int32
``(N, K/16, OH, OW, 16)``, the layout of the 4-byte dot-product instruction (VNNI); and
``nn.dense_packed`` (``PackDenseWeights`` makes it from products by a constant matrix):
data ``(M, K)`` times a weight packed in column panels ``(N/b, K, b)`` gives ``(M, N)``.

Shapes: ``nn.conv2d_nchwc`` takes data ``(N, C/ic, H, W, ic)`` and a weight ``(K/oc, C/ic,
R, S, ic, oc)`` (layout ``OIHW[ic]i[oc]o``) and gives ``(N, K/oc, OH, OW, oc)``;
``nn.depthwise_conv2d_nchwc`` takes data ``(N, C/b, H, W, b)`` and a weight ``(C/b, 1, R,
S, 1, b)`` and gives ``(N, C/b, OH, OW, b)``. Their numpy computes convert to NCHW, run the
op library's references and convert back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..attrs import Attrs
from ..errors import IRTypeError
from ..op_registry import OpDef, OpPattern, register_op
from ..types import TensorType, Type, format_shape
from . import lowering as low
from . import relations as rel


def _layout(op: str, name: object, what: str) -> Any:
    from schedule import ops

    try:
        return ops.Layout.parse(name)  # type: ignore[arg-type]
    except ValueError as exc:
        raise IRTypeError(f"{op}: {what}: {exc}") from None


def _reference() -> Any:
    from schedule import ops

    return ops.reference


# ------------------------------------------------------------------------ layout_transform


def _layout_transform_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "layout_transform"
    data = rel.expect_tensor(op, types[0])
    src = _layout(op, attrs.src_layout, "src_layout")
    dst = _layout(op, attrs.dst_layout, "dst_layout")
    if sorted(src.primal) != sorted(dst.primal):
        raise IRTypeError(f"{op}: {src.name} and {dst.name} do not have the same primal axes")
    if not rel.is_static(data.shape):
        raise IRTypeError(f"{op}: input {format_shape(data.shape)} must have a static shape")
    try:
        shape = dst.shape(src.extents(tuple(data.shape)))  # type: ignore[arg-type]
    except ValueError as exc:
        raise IRTypeError(f"{op}: input {format_shape(data.shape)}: {exc}") from None
    return TensorType(shape, data.dtype)


register_op(OpDef(
    name="layout_transform", num_inputs=1,
    attrs_schema={"src_layout": (str, "NCHW"), "dst_layout": (str, "NCHW")},
    type_relation=_layout_transform_relation, pattern=OpPattern.INJECTIVE,
    compute=lambda args, attrs: _reference().layout_transform(
        np.asarray(args[0]), attrs.src_layout, attrs.dst_layout),
    lowering=low.layout_transform,
    doc="The input (in ``src_layout``, e.g. NCHW) in ``dst_layout`` (e.g. NCHW16c: the "
        "channels packed in blocks of 16 as the last axis)."))

# ------------------------------------------------------------------------- packed convs

_CONV_SCHEMA = {"strides": (tuple, (1, 1)), "padding": (tuple, (0, 0)),
                "dilation": (tuple, (1, 1)), "out_dtype": (str, "")}


def _packed_conv_relation(op: str, depthwise: bool):
    def relation(types: Sequence[Type], attrs: Attrs) -> Type:
        data = rel.expect_tensor(op, types[0], "input")
        weight = rel.expect_tensor(op, types[1], "weight")
        rel.same_dtype(op, [data, weight])
        if data.ndim != 5 or weight.ndim != 6 or not rel.is_static(
                data.shape) or not rel.is_static(weight.shape):
            raise IRTypeError(f"{op}: input {format_shape(data.shape)} and weight "
                              f"{format_shape(weight.shape)} must be static, of rank 5 and 6")
        n, co, h, w, ci = data.shape
        ko, wco, r, s, wci, ki = weight.shape
        fits = ((ko, wco, wci, ki) == (co, 1, 1, ci) if depthwise
                else (wco, wci) == (co, ci))
        if not fits:
            expected = (f"({co}, 1, R, S, 1, {ci})" if depthwise
                        else f"(K/oc, {co}, R, S, {ci}, oc)")
            raise IRTypeError(f"{op}: weight {format_shape(weight.shape)} does not fit input "
                              f"{format_shape(data.shape)}: expected {expected}")
        strides = rel.pair(op, attrs.strides, "strides")
        dilation = rel.pair(op, attrs.dilation, "dilation")
        pads = rel.padding2d(op, attrs.padding)
        oh = rel.window_out_dim(h, r, strides[0], pads[0] + pads[2], dilation[0])
        ow = rel.window_out_dim(w, s, strides[1], pads[1] + pads[3], dilation[1])
        if min(oh, ow) < 1:  # type: ignore[type-var]
            raise IRTypeError(f"{op}: the {r}x{s} window does not fit input "
                              f"{format_shape(data.shape)} with padding {pads}")
        return TensorType((n, ko, oh, ow, ki), attrs.out_dtype or data.dtype)

    return relation


def _packed_conv(name: str):
    def compute(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        op = f"nn.{name}"
        fn = getattr(_reference(), name)
        x, w = (np.asarray(a) for a in args)
        return fn(x, w, rel.pair(op, attrs.strides, "strides"), rel.padding2d(op, attrs.padding),
                  rel.pair(op, attrs.dilation, "dilation"), attrs.out_dtype or str(x.dtype))

    return compute


register_op(OpDef(
    name="nn.conv2d_nchwc", num_inputs=2, attrs_schema=_CONV_SCHEMA,
    type_relation=_packed_conv_relation("nn.conv2d_nchwc", depthwise=False),
    pattern=OpPattern.OUT_ELEMWISE_FUSABLE, compute=_packed_conv("conv2d_nchwc"),
    lowering=low.packed_conv("conv2d_nchwc"),
    doc="2-d convolution with packed channels: data NCHW[ic]c, weight OIHW[ic]i[oc]o, "
        "output NCHW[oc]c (ConvertLayout makes these from nn.conv2d)."))

register_op(OpDef(
    name="nn.depthwise_conv2d_nchwc", num_inputs=2, attrs_schema=_CONV_SCHEMA,
    type_relation=_packed_conv_relation("nn.depthwise_conv2d_nchwc", depthwise=True),
    pattern=OpPattern.OUT_ELEMWISE_FUSABLE, compute=_packed_conv("depthwise_conv2d_nchwc"),
    lowering=low.packed_conv("depthwise_conv2d_nchwc"),
    doc="Depthwise 2-d convolution with packed channels: data NCHW[b]c, weight OIHW1i[b]o, "
        "output NCHW[b]c."))


def _int8_conv_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.conv2d_nchw4c_int8"
    data = rel.expect_tensor(op, types[0], "data")
    weight = rel.expect_tensor(op, types[1], "weight")
    if (data.dtype, weight.dtype) != ("uint8", "int8"):
        raise IRTypeError(f"{op}: data must be uint8 and weight int8, got {data.dtype} and "
                          f"{weight.dtype}")
    if data.ndim != 5 or weight.ndim != 6 or data.shape[4] != 4 or weight.shape[5] != 4 \
            or weight.shape[1] != data.shape[1]:
        raise IRTypeError(f"{op}: data {format_shape(data.shape)} and weight "
                          f"{format_shape(weight.shape)} are not (N, C/4, H, W, 4) and "
                          "(K/oc, C/4, R, S, oc, 4)")
    n, _, h, w, _ = data.shape
    ko, _, r, s, oc, _ = weight.shape
    (sh, sw), pads = rel.pair(op, attrs.strides, "strides"), rel.padding2d(op, attrs.padding)
    oh = rel.window_out_dim(h, r, sh, pads[0] + pads[2], 1)
    ow = rel.window_out_dim(w, s, sw, pads[1] + pads[3], 1)
    if min(oh, ow) < 1:  # type: ignore[type-var]
        raise IRTypeError(f"{op}: the {r}x{s} window does not fit input "
                          f"{format_shape(data.shape)} with padding {pads}")
    return TensorType((n, ko, oh, ow, oc), "int32")


def _int8_conv(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    op = "nn.conv2d_nchw4c_int8"
    return _reference().conv2d_nchw4c_int8(np.asarray(args[0]), np.asarray(args[1]),
                                           rel.pair(op, attrs.strides, "strides"),
                                           rel.padding2d(op, attrs.padding))


register_op(OpDef(
    name="nn.conv2d_nchw4c_int8", num_inputs=2,
    attrs_schema={"strides": (tuple, (1, 1)), "padding": (tuple, (0, 0))},
    type_relation=_int8_conv_relation, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    compute=_int8_conv, lowering=low.int8_packed_conv,
    doc="8-bit convolution in the dot-product instruction's layouts: uint8 data NCHW4c, "
        "int8 weight OIHW16o4i, int32 output NCHW16c."))


# ------------------------------------------------------------------------- packed dense


def _dense_packed_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.dense_packed"
    data = rel.expect_tensor(op, types[0], "input")
    weight = rel.expect_tensor(op, types[1], "weight")
    rel.same_dtype(op, [data, weight])
    if data.ndim != 2 or weight.ndim != 3:
        raise IRTypeError(f"{op}: input {format_shape(data.shape)} must have rank 2 and "
                          f"weight {format_shape(weight.shape)} rank 3 (N/b, K, b)")
    panels, k, block = weight.shape
    if not rel.dims_agree(data.shape[1], k):
        raise IRTypeError(f"{op}: input {format_shape(data.shape)} and weight "
                          f"{format_shape(weight.shape)} disagree on the reduction dimension")
    return TensorType((data.shape[0], panels * block), data.dtype)


def _dense_packed(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = (np.asarray(a) for a in args)
    return np.matmul(x, _reference().layout_transform(w, f"NK{w.shape[2]}n", "KN"))


register_op(OpDef(
    name="nn.dense_packed", num_inputs=2, attrs_schema={},
    type_relation=_dense_packed_relation, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    compute=_dense_packed,
    lowering=low.dense_packed,
    doc="data (M, K) times a weight in column panels (N/b, K, b) -> (M, N): the (K, N) "
        "weight's column j is panel j // b, lane j % b (PackDenseWeights makes it)."))
