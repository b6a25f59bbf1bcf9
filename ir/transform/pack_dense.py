"""PackDenseWeights: products by a constant weight read it in column panels.

A float ``nn.matmul(x, B)`` (``B`` a constant ``(K, N)``, or ``(N, K)`` with
``transpose_b``) or ``nn.dense(x, W)`` (``W`` a constant ``(N, K)``), with ``x`` a matrix
of at least ``block`` rows and ``N`` a multiple of ``block``, becomes
``nn.dense_packed(x, P)`` where ``P`` is the weight re-laid out once, here, into
``(N/block, K, block)``: panel ``p`` holds output columns ``p*block ..`` down the whole
reduction. A kernel's tile of output columns then streams its weights from consecutive
addresses, which is what keeps a weight too large for the caches (a transformer's 2.4 and
9.4 MB layers) flowing from memory at full speed (rows of the unpacked weight lie ``N``
elements apart, a page or more for wide layers). This is the packing BLAS libraries do
to B on every call; a model's weights are constant, so it is done at compile time.
Products with fewer rows (a batch-1 dense layer, a GEMV: its own sketch reads whole rows)
are left as they are.
"""

from __future__ import annotations

import numpy as np

from .. import op as ops
from ..expr import Call, Constant, Expr, Op
from ..module import Module
from ..visitor import ExprMutator
from ._util import map_typed_functions
from .infer_type import infer_type
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["PackDenseWeights", "pack_dense_weight"]


def pack_dense_weight(b: np.ndarray, block: int) -> np.ndarray:
    """A ``(K, N)`` matrix (``N`` a multiple of ``block``) -> ``(N/block, K, block)``: the
    op library's layout transform from ``KN`` to ``NK<block>n``."""
    from schedule import ops

    return ops.reference.layout_transform(b, "KN", f"NK{block}n")


def _weight_kn(call: Call) -> np.ndarray | None:
    """The call's constant weight as a ``(K, N)`` matrix, if it is a packable product."""
    if not isinstance(call.op, Op) or call.op.name not in ("nn.matmul", "nn.dense"):
        return None
    data, weight = call.args
    a = call.attrs
    if not isinstance(weight, Constant) or weight.data.ndim != 2:
        return None
    if a.out_dtype not in ("", weight.dtype) or not weight.dtype.startswith("float"):
        return None
    if call.op.name == "nn.dense":
        return weight.data.T
    if a.transpose_a:
        return None
    return weight.data.T if a.transpose_b else weight.data


class _Pack(ExprMutator):
    def __init__(self, block: int) -> None:
        super().__init__()
        self.block = block

    def visit_call(self, e: Call) -> Expr:
        call = super().visit_call(e)
        weight = _weight_kn(e)
        if weight is None:
            return call
        data = e.args[0].checked_type_or_none
        if (data is None or data.ndim != 2 or data.dtype != weight.dtype
                or not isinstance(data.shape[0], int) or data.shape[0] < self.block
                or weight.shape[1] % self.block):
            return call
        return ops.nn.dense_packed(call.args[0], Constant(pack_dense_weight(weight, self.block)))


def PackDenseWeights(block: int) -> Pass:
    """The pass (opt level 3; see the module docstring): ``block`` is the panel width,
    the target's vector lanes."""

    def run(module: Module, ctx: PassContext) -> Module:
        return infer_type(map_typed_functions(module, lambda f: _Pack(block).visit(f)))

    return module_pass("PackDenseWeights", 3)(run)
