"""FoldConstant: evaluate the parts of a program that depend only on constants, at compile
time, with the interpreter's operator computes.

Folded:

- an operator call whose inputs are all constants (or tuples of constants) becomes
  ``ir.const`` of its value (a tuple-valued one, ``split``'s, a tuple of constants);
- ``tuple.i`` of a literal tuple becomes the field, when the other fields are pure;
- ``let %x = <constant>; body`` (or a tuple of constants) is inlined into ``body``.

Not folded: calls of anything but operators (functions may have effects or not return),
reference operations, operators without inputs (``zeros``, ``ones``: folding them only
makes big constants out of nothing), calls whose result would be bigger than its inputs
together by more than ``SMALL_RESULT`` elements (``broadcast_to``, ``full`` of a big
shape; the limit is ``PassContext.config["FoldConstant.small_result"]``), ``nn.dropout``
(random when training; ``SimplifyInference`` removes it), and anything inside a
``Primitive`` (fused) function. Shapes are computed by the operators' type relations on
the constants, so nothing big is evaluated to be thrown away.
"""

from __future__ import annotations

import math

import numpy as np

from ..expr import Call, Constant, Expr, Let, Op, Tuple, TupleGetItem, Var
from ..interpreter import EvaluationError, evaluate
from ..module import Module
from ..types import TensorType, TupleType, Type
from ._util import LetInlining, Rewriter, is_pure, map_functions
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["SMALL_RESULT", "FoldConstant", "fold_constant"]

#: A folded result may exceed its inputs' total size by at most this many elements.
SMALL_RESULT = 1024
_NEVER = frozenset({"nn.dropout"})


def _is_const_value(e: Expr) -> bool:
    if isinstance(e, Constant):
        return True
    return isinstance(e, Tuple) and all(_is_const_value(f) for f in e.fields)


def _const_type(e: Expr) -> Type:
    if isinstance(e, Constant):
        return TensorType(e.shape, e.dtype)
    return TupleType(tuple(_const_type(f) for f in e.fields))


def _size(t: Type) -> int:
    if isinstance(t, TupleType):
        return sum(_size(f) for f in t.fields)
    if isinstance(t, TensorType) and all(isinstance(d, int) for d in t.shape):
        return math.prod(t.shape)
    return -1  # unknown: never small


def _as_expr(value: object) -> Expr:
    if isinstance(value, tuple):
        return Tuple([_as_expr(v) for v in value])
    return Constant(np.asarray(value))


class _Folder(LetInlining, Rewriter):
    def __init__(self, small_result: int):
        super().__init__()
        self.small_result = small_result

    def visit_call(self, e: Call) -> Expr:
        new = super().visit_call(e)
        if not isinstance(new.op, Op) or new.op.name in _NEVER or not new.args:
            return new
        if not all(_is_const_value(a) for a in new.args):
            return new
        arg_types = [_const_type(a) for a in new.args]
        try:
            out_type = new.op.opdef.infer_type(arg_types, new.attrs)
        except Exception:  # an ill-typed call: leave it for type inference to report
            return new
        out_size = _size(out_type)
        if out_size < 0 or out_size > max(sum(_size(t) for t in arg_types),
                                          self.small_result):
            return new
        try:
            value = evaluate(new)
        except EvaluationError:  # it fails when run, too: leave that to run time
            return new
        return _as_expr(value)

    def visit_tuple_getitem(self, e: TupleGetItem) -> Expr:
        new = super().visit_tuple_getitem(e)
        tup = new.tuple_value
        if type(tup) is not Tuple or new.index >= len(tup.fields):
            return new
        others = [f for i, f in enumerate(tup.fields) if i != new.index]
        if not all(isinstance(f, Constant | Var | Op) or is_pure(f) for f in others):
            return new
        return tup.fields[new.index]

    def inlines(self, e: Let, value: Expr) -> bool:
        return _is_const_value(value)


def fold_constant(expr: Expr, small_result: int = SMALL_RESULT) -> Expr:
    """``expr`` with its constant parts folded (see the module docstring)."""
    return _Folder(small_result).visit(expr)


def _run(module: Module, ctx: PassContext) -> Module:
    limit = int(ctx.config.get("FoldConstant.small_result", SMALL_RESULT))
    return map_functions(module, lambda f: fold_constant(f, limit))


def FoldConstant() -> Pass:
    """Fold constant subexpressions (opt level 2)."""
    return module_pass("FoldConstant", opt_level=2)(_run)
