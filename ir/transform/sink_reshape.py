"""SinkReshape: element-wise operators move before a reshape, so they fuse with the
operator that produced the reshaped value.

ONNX models multiply 3-d activations by 2-d weights; the importer flattens them to a
matrix product and reshapes the result back, so a transformer's ``MatMul`` + bias + GELU
becomes ``gelu(reshape(matmul(...)) + bias)``, and the reshape (injective) stops the
product's kernel from absorbing the bias and the activation: they run as a kernel of their
own that reads and writes the whole activation again. Here ``f(reshape(x), c)`` becomes
``reshape(f(x, c))`` when ``f`` is element-wise or broadcasting and every other operand is
a view of the same shape, a scalar, or a constant vector along the last axis, which the
reshape keeps; and a reshape of a reshape becomes one reshape (none when it restores the
original shape, as where the next layer flattens the activation again).
"""

from __future__ import annotations

import numpy as np

from .. import op as ops
from ..expr import Call, Constant, Expr
from ..module import Module
from ..op_registry import OpPattern, get_op_def
from ..types import TensorType
from ..visitor import ExprMutator
from ._util import map_typed_functions, op_name
from .infer_type import infer_type
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["SinkReshape"]

_ELEMENTWISE = (OpPattern.ELEMWISE, OpPattern.BROADCAST)


class _Sink(ExprMutator):
    def __init__(self) -> None:
        super().__init__()
        #: id(reshape call) -> (the reshaped expression, its shape)
        self.views: dict[int, tuple[Expr, tuple]] = {}

    def _reshape(self, source: Expr, source_shape: tuple, shape: tuple) -> Expr:
        if tuple(shape) == tuple(source_shape):
            return source
        out = ops.reshape(source, newshape=list(shape))
        self.views[id(out)] = (source, tuple(source_shape))
        return out

    def visit_call(self, e: Call) -> Expr:
        call = super().visit_call(e)
        name = op_name(call)
        out_type = e.checked_type_or_none
        if name is None or not isinstance(out_type, TensorType):
            return call
        if name == "reshape":
            arg = call.args[0]
            if id(arg) in self.views:  # a reshape of a reshape
                source, shape = self.views[id(arg)]
                return self._reshape(source, shape, out_type.shape)
            arg_type = e.args[0].checked_type_or_none
            if isinstance(arg_type, TensorType) and not call.attrs.get("allowzero"):
                self.views[id(call)] = (arg, tuple(arg_type.shape))
            return call
        op_def = get_op_def(name)
        if op_def.pattern not in _ELEMENTWISE or op_def.attrs_schema:
            return call
        sunk = self._sink(call, e, out_type)
        return call if sunk is None else sunk

    def _sink(self, call: Call, e: Call, out_type: TensorType) -> Expr | None:
        shapes = {self.views[id(a)][1] for a in call.args if id(a) in self.views}
        if len(shapes) != 1:
            return None
        (shape,) = shapes
        if not shape or not out_type.shape or not all(
                isinstance(d, int) for d in (*shape, *out_type.shape)):
            return None
        last = out_type.shape[-1]
        if shape[-1] != last:
            return None
        args = []
        for a, original in zip(call.args, e.args, strict=True):
            if id(a) in self.views:
                args.append(self.views[id(a)][0])
                continue
            t = original.checked_type_or_none
            if not isinstance(t, TensorType) or not isinstance(a, Constant):
                return None
            size = int(np.prod(t.shape, dtype=np.int64))
            if size == 1:
                args.append(Constant(a.data.reshape(())))
            elif t.shape[-1] == last and size == last:
                args.append(Constant(a.data.reshape(last)))
            else:
                return None
        inner = Call(call.op, args, call.attrs, span=call.span)
        return self._reshape(inner, shape, out_type.shape)


def SinkReshape() -> Pass:
    """The pass (opt level 3; see the module docstring)."""

    def run(module: Module, ctx: PassContext) -> Module:
        return infer_type(map_typed_functions(module, lambda f: _Sink().visit(f)))

    return module_pass("SinkReshape", 3)(run)
