"""SimplifyInference: rewrite the operators that mean something simpler at inference.

- ``nn.dropout(x).0`` is ``x`` (dropout is the identity at inference).
- ``nn.batch_norm(x, gamma, beta, mean, var).0`` is a scale and a shift along its axis:
  ``x * s + (beta - mean * s)`` with ``s = gamma / sqrt(var + epsilon)`` (no ``gamma``
  when ``scale`` is off, no ``beta`` when ``center`` is off); the per-channel vectors are
  given trailing axes of size 1 (``expand_dims``) so that they broadcast along the axis.
  With constant statistics, ``FoldConstant`` then turns ``s`` and the shift into
  constants, and ``FoldScaleAxis`` folds them into a preceding convolution.

The other outputs of ``batch_norm`` (the moving statistics) and of ``dropout`` (the mask)
are left as they are; the calls stay only if those are used (``DeadCodeElimination`` and
graph form drop the rest). The projection may reach the call through a let-bound variable
(A-normal form). ``nn.layer_norm`` is one operator here and stays. Needs types (the rank
and dtype of the input): the pass runs type inference first.
"""

from __future__ import annotations

from ..expr import Call, Expr, Let, TupleGetItem, Var
from ..module import Module
from ..op import make_call
from ..types import TensorType
from ._util import Rewriter, call_of, const_like, map_typed_functions
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["SimplifyInference", "batch_norm_to_scale_shift"]


def batch_norm_to_scale_shift(bn: Call, data_type: TensorType) -> Expr:
    """The first output of ``bn`` (a ``nn.batch_norm`` call whose data has type
    ``data_type``) as multiply-and-add operator calls."""
    x, gamma, beta, mean, var = bn.args
    attrs, ndim, dtype = bn.attrs, len(data_type.shape), data_type.dtype
    axis = attrs.axis % ndim
    std = make_call("sqrt", make_call("add", var, const_like(attrs.epsilon, dtype)))
    scale = make_call("divide", gamma if attrs.scale else const_like(1.0, dtype), std)
    mean_scaled = make_call("multiply", mean, scale)
    if attrs.center:
        shift = make_call("subtract", beta, mean_scaled)
    else:
        shift = make_call("negative", mean_scaled)
    trailing = ndim - 1 - axis

    def along_axis(v: Expr) -> Expr:
        return make_call("expand_dims", v, axis=1, num_newaxis=trailing) if trailing else v

    return make_call("add", make_call("multiply", x, along_axis(scale)), along_axis(shift))


class _Simplify(Rewriter):
    def __init__(self) -> None:
        super().__init__()
        self.let_values: dict[int, Expr] = {}  # id(let var) -> its (rewritten) value

    def visit_let_binding(self, e: Let) -> tuple[Var, Expr]:
        var, value = super().visit_let_binding(e)
        self.let_values[id(var)] = value
        return var, value

    def visit_tuple_getitem(self, e: TupleGetItem) -> Expr:
        new = super().visit_tuple_getitem(e)
        if new.index != 0:
            return new
        src = new.tuple_value
        if type(src) is Var:
            src = self.let_values.get(id(src), src)
        if call_of(src, "nn.dropout") is not None:
            return src.args[0]
        t = e.checked_type_or_none
        if (call_of(src, "nn.batch_norm") is not None and isinstance(t, TensorType)
                and t.dtype.startswith("float")):
            return batch_norm_to_scale_shift(src, t)
        return new


def _run(module: Module, ctx: PassContext) -> Module:
    return map_typed_functions(module, lambda f: _Simplify().visit(f))


def SimplifyInference() -> Pass:
    """Inference-time simplification of dropout and batch_norm (opt level 0)."""
    return module_pass("SimplifyInference", opt_level=0)(_run)
