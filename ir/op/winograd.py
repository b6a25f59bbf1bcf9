"""The two transforms of a Winograd convolution on packed channels (``ConvertWinograd``
makes them from 3x3 stride-1 ``nn.conv2d_nchwc``; the op library's
``schedule.ops.winograd`` holds the maths):

- ``nn.winograd_input(data, tile, padding)``: data ``(N, C/b, H, W, b)`` -> the input
  tiles in the Winograd domain ``(alpha^2, N*TH*TW, C)``, ``alpha = tile + 2``;
- ``nn.batch_matmul(V, U, transpose_b=False)`` with ``U (alpha^2, C, K)`` the kernel's
  transform, computed once at compile time (an existing operator);
- ``nn.winograd_output(M, tile, out_size, block)``: ``(alpha^2, N*TH*TW, K)`` -> the
  convolution's output ``(N, K/block, OH, OW, block)``, out-elementwise-fusable (the bias,
  activation and residual add fuse into it as into the convolution).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..attrs import Attrs
from ..errors import IRTypeError
from ..op_registry import OpDef, OpPattern, register_op
from ..types import TensorType, Type, format_shape
from . import lowering as low
from . import relations as rel


def _reference():
    from schedule import ops

    return ops.reference


def _tile(op: str, attrs: Attrs) -> int:
    if attrs.tile not in (2, 4):
        raise IRTypeError(f"{op}: tile must be 2 or 4 (F(2x2, 3x3) or F(4x4, 3x3)), got "
                          f"{attrs.tile!r}")
    return attrs.tile


def _float(op: str, t: TensorType, what: str) -> None:
    if not t.dtype.startswith("float") or t.ndim not in (3, 5) or not rel.is_static(t.shape):
        raise IRTypeError(f"{op}: {what} {format_shape(t.shape)} ({t.dtype}) must be a float "
                          "tensor of static shape")


def _input_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.winograd_input"
    data = rel.expect_tensor(op, types[0], "data")
    tile = _tile(op, attrs)
    _float(op, data, "data")
    if data.ndim != 5:
        raise IRTypeError(f"{op}: data {format_shape(data.shape)} must be packed (N, C/b, H, "
                          "W, b)")
    n, co, h, w, block = data.shape
    top, left, bottom, right = rel.padding2d(op, attrs.padding)
    oh, ow = h + top + bottom - 2, w + left + right - 2
    if min(oh, ow) < 1:
        raise IRTypeError(f"{op}: a 3x3 window does not fit data {format_shape(data.shape)} "
                          f"with padding {attrs.padding}")
    th, tw = _reference().winograd_tiles(oh, ow, tile)
    return TensorType(((tile + 2) ** 2, n * th * tw, co * block), data.dtype)


def _output_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.winograd_output"
    products = rel.expect_tensor(op, types[0], "products")
    tile = _tile(op, attrs)
    _float(op, products, "products")
    oh, ow = rel.pair(op, attrs.out_size, "out_size")
    th, tw = _reference().winograd_tiles(oh, ow, tile)
    positions, count, k = products.shape if products.ndim == 3 else (None, 0, 0)
    if positions != (tile + 2) ** 2 or count % (th * tw) or attrs.block < 1 or \
            k % attrs.block:
        raise IRTypeError(f"{op}: products {format_shape(products.shape)} are not "
                          f"({(tile + 2) ** 2}, N * {th * tw}, K) with K a multiple of "
                          f"block={attrs.block} for a {oh}x{ow} output in {tile}x{tile} tiles")
    return TensorType((count // (th * tw), k // attrs.block, oh, ow, attrs.block),
                      products.dtype)


register_op(OpDef(
    name="nn.winograd_input", num_inputs=1,
    attrs_schema={"tile": (int, 4), "padding": (tuple, (1, 1, 1, 1))},
    type_relation=_input_relation, pattern=OpPattern.INJECTIVE,
    compute=lambda args, attrs: _reference().winograd_input_nchwc(
        np.asarray(args[0]), attrs.tile, rel.padding2d("nn.winograd_input", attrs.padding)),
    lowering=low.winograd_input,
    doc="The input tiles of a 3x3 stride-1 convolution of packed data (N, C/b, H, W, b) in "
        "the Winograd domain, (alpha^2, N*TH*TW, C) with alpha = tile + 2."))

register_op(OpDef(
    name="nn.winograd_output", num_inputs=1,
    attrs_schema={"tile": (int, 4), "out_size": (tuple, (1, 1)), "block": (int, 16)},
    type_relation=_output_relation, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    compute=lambda args, attrs: _reference().winograd_output_nchwc(
        np.asarray(args[0]), attrs.tile, rel.pair("nn.winograd_output", attrs.out_size,
                                                  "out_size"), attrs.block),
    lowering=low.winograd_output,
    doc="Products in the Winograd domain (alpha^2, N*TH*TW, K) back to the convolution's "
        "output (N, K/block, OH, OW, block) of size out_size."))
