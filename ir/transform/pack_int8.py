"""PackInt8Convolutions: quantized convolutions onto the CPU's 8-bit dot product.

A realized ``nn.conv2d`` of uint8 or int8 data (NCHW) by a constant int8 weight (OIHW)
into int32 (``groups`` 1, no dilation, output channels a multiple of 16) becomes
``layout_transform(nn.conv2d_nchw4c_int8(layout_transform(data, NCHW -> NCHW4c), W'),
NCHW16c -> NCHW)``: the weight re-laid out once here into ``(K/16, C/4, R, S, 16, 4)``,
input channels padded with zeros to a multiple of 4 (data and weight alike). The
instruction multiplies unsigned by signed bytes, so int8 data is offset by 128 into uint8
(its padding too: the image is padded with 128 before the convolution) and ``128 x`` the
sum of each output channel's weights is subtracted from the result: exact. The op
library's schedules for it use ``vpdpbusd`` where the CPU has AVX-512 VNNI (64
multiply-adds an instruction), plain vector code where not. The rest of the quantized
program (bias, requantization, ReLU) stays in NCHW.
"""

from __future__ import annotations

import numpy as np

from .. import op as ops
from ..expr import Call, Constant, Expr, Function, Op
from ..module import Module
from ..visitor import ExprMutator
from ._util import map_functions
from .infer_type import infer_type
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["PackInt8Convolutions", "pack_int8_weight"]

LANES, WORD = 16, 4


def pack_int8_weight(w: np.ndarray) -> np.ndarray:
    """OIHW int8 (O a multiple of 16) -> (O/16, ceil(I/4), H, W, 16, 4), zero-padded."""
    o, i, r, s = w.shape
    ci = -(-i // WORD) * WORD
    padded = np.zeros((o, ci, r, s), np.int8)
    padded[:, :i] = w
    return np.ascontiguousarray(padded.reshape(o // LANES, LANES, ci // WORD, WORD, r, s)
                                .transpose(0, 2, 4, 5, 1, 3))


def _packable(call: Call) -> bool:
    if not (isinstance(call.op, Op) and call.op.name == "nn.conv2d"):
        return False
    data, weight = call.args
    a = call.attrs
    dt = data.checked_type_or_none
    return (isinstance(weight, Constant) and weight.dtype == "int8" and dt is not None
            and dt.dtype in ("uint8", "int8") and a.out_dtype == "int32" and a.groups == 1
            and a.data_layout == "NCHW" and a.kernel_layout == "OIHW"
            and a.out_layout in ("", "NCHW") and tuple(a.dilation) in ((1,), (1, 1))
            and weight.shape[0] % LANES == 0)


class _Pack(ExprMutator):
    def visit_call(self, e: Call) -> Expr:
        call = super().visit_call(e)
        if not _packable(e):
            return call
        data = call.args[0]
        channels = e.args[0].checked_type.shape[1]
        if channels % WORD:
            pad = ((0, 0), (0, WORD - channels % WORD), (0, 0), (0, 0))
            data = ops.nn.pad(data, pad_width=pad, pad_value=0.0)
        signed = e.args[0].checked_type.dtype == "int8"
        padding = e.attrs.padding
        if signed:  # x + 128 as uint8, padded with 128 (module docstring)
            shifted = ops.add(ops.cast(data, dtype="int32"), Constant(np.array(128, np.int32)))
            data = ops.cast(shifted, dtype="uint8")
            pt, pl, pb, pr = ops.relations.padding2d("nn.conv2d", padding)
            if pt or pl or pb or pr:
                data = ops.nn.pad(data, pad_width=((0, 0), (0, 0), (pt, pb), (pl, pr)),
                                  pad_value=128.0)
            padding = (0, 0)
        packed = ops.layout_transform(data, src_layout="NCHW", dst_layout=f"NCHW{WORD}c")
        weight = Constant(pack_int8_weight(e.args[1].data))
        out = ops.nn.conv2d_nchw4c_int8(packed, weight, strides=e.attrs.strides,
                                        padding=padding)
        out = ops.layout_transform(out, src_layout=f"NCHW{LANES}c", dst_layout="NCHW")
        if signed:
            sums = e.args[1].data.astype(np.int64).reshape(e.args[1].shape[0], -1).sum(axis=1)
            correction = (128 * sums).astype(np.int32).reshape(1, -1, 1, 1)
            out = ops.subtract(out, Constant(correction))
        return out


def PackInt8Convolutions() -> Pass:
    """The pass (opt level 3; see the module docstring)."""

    def run(module: Module, ctx: PassContext) -> Module:
        module = infer_type(module)

        def rewrite(func: Function) -> Function:
            body = _Pack().visit(func.body)
            return func if body is func.body else Function(
                func.params, body, func.ret_type, func.type_params, func.attrs, func.span)

        return infer_type(map_functions(module, rewrite))

    return module_pass("PackInt8Convolutions", 3)(run)
