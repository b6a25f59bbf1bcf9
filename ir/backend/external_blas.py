"""The ``blas`` external codegen: regions of dense layers, matrix products and
convolutions (float32, static shapes), with the bias adds, ReLUs and additions around them,
run by the BLAS library numpy links (OpenBLAS here) instead of generated kernels.

A region compiles to its subgraph as JSON (``ir.save_json``) plus a small executor that
walks it: ``nn.dense`` / ``nn.matmul`` / ``nn.batch_matmul`` are ``np.matmul`` (one
``sgemm`` per product), ``nn.conv2d`` is an im2col matrix times the weights reshaped to
``(O, C*R*S)`` (one ``sgemm`` per image and group); the others run their numpy reference.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..expr import Call, Constant, Function, Op, Tuple, TupleGetItem, Var
from ..module import Module
from ..serialize import save_json
from ..visitor import dataflow_post_order
from .external import ExternalCodegen, ExternalModule, register_codegen


def _float32(call: Call) -> bool:
    return all(a.checked_type.dtype == "float32" for a in call.args)


def _conv_supported(call: Call) -> bool:
    a = call.attrs
    return (_float32(call) and a.data_layout == "NCHW" and a.kernel_layout == "OIHW"
            and a.out_layout in ("", "NCHW") and a.out_dtype in ("", "float32"))


def _im2col_conv(x: np.ndarray, w: np.ndarray, call: Call, out_shape: tuple) -> np.ndarray:
    from ..op.relations import padding2d, pair

    a = call.attrs
    (sh, sw), (dh, dw) = pair("nn.conv2d", a.strides, "strides"), pair("nn.conv2d", a.dilation,
                                                                         "dilation")
    pt, pl, pb, pr = padding2d("nn.conv2d", a.padding)
    n, c, _, _ = x.shape
    o, ci, r, s = w.shape
    g = a.groups
    oh, ow = out_shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    out = np.empty(out_shape, np.float32)
    for gi in range(g):
        xs = xp[:, gi * ci:(gi + 1) * ci]
        cols = np.empty((n, ci, r, s, oh, ow), np.float32)
        for ry in range(r):
            for rx in range(s):
                cols[:, :, ry, rx] = xs[:, :, ry * dh:ry * dh + sh * (oh - 1) + 1:sh,
                                        rx * dw:rx * dw + sw * (ow - 1) + 1:sw]
        cols = cols.reshape(n, ci * r * s, oh * ow)
        wg = w[gi * (o // g):(gi + 1) * (o // g)].reshape(o // g, ci * r * s)
        out[:, gi * (o // g):(gi + 1) * (o // g)] = np.matmul(wg, cols).reshape(
            n, o // g, oh, ow)
    return out


class BlasModule(ExternalModule):
    """A region run on numpy's BLAS (module docstring)."""

    def __init__(self, func: Function, symbol: str):
        self.func = func
        self.symbol = symbol
        self.nodes = dataflow_post_order(func.body)
        self.json = save_json(Module({symbol: func}))

    def describe(self) -> str:
        return self.json

    def __call__(self, *args: Any) -> Any:
        values: dict[int, Any] = {id(p): np.asarray(a) for p, a in zip(
            self.func.params, args, strict=True)}

        def value(e: Any) -> Any:
            return e.data if isinstance(e, Constant) else values[id(e)]

        for e in self.nodes:
            if id(e) in values or isinstance(e, Constant | Var | Op):
                continue
            if isinstance(e, Tuple):
                values[id(e)] = tuple(value(f) for f in e.fields)
            elif isinstance(e, TupleGetItem):
                values[id(e)] = value(e.tuple_value)[e.index]
            elif isinstance(e, Call) and isinstance(e.op, Op):
                values[id(e)] = self.run_op(e, [value(a) for a in e.args])
            else:
                raise TypeError(f"blas: unexpected {type(e).__name__} in a region")
        return value(self.func.body)

    @staticmethod
    def run_op(call: Call, args: list[np.ndarray]) -> np.ndarray:
        name = call.op.name
        if name == "nn.dense":
            return np.matmul(args[0], args[1].T)
        if name == "nn.conv2d":
            return _im2col_conv(args[0], args[1], call, tuple(call.checked_type.shape))
        return np.asarray(call.op.opdef.compute(args, call.attrs))


class BlasCodegen(ExternalCodegen):
    name = "blas"
    ops: ClassVar[dict] = {"nn.dense": _float32, "nn.matmul": _float32, "nn.batch_matmul": _float32,
                           "nn.conv2d": _conv_supported, "nn.bias_add": _float32,
                           "nn.relu": _float32, "add": _float32}

    def compile(self, func: Function, symbol: str) -> ExternalModule:
        return BlasModule(func, symbol)


register_codegen(BlasCodegen())
