"""Tensor intrinsics: named hardware operations a loop nest can be replaced by (tensorize).

An intrinsic is declared by a compute over placeholders that states its semantics
(e.g. a 1x16x16 int8 GEMM block). ``s[C].tensorize(axis, intrin)`` checks that the
loop nest from ``axis`` inward computes exactly that; the targets that own such
hardware (VTA, tensor cores) generate its code.
"""

from __future__ import annotations

from .expr import Expr, Load, Var, transform
from .printer import expr_str
from .tensor import ComputeOp, Reduce, Tensor, TensorExprError

_REGISTRY: dict[str, TensorIntrin] = {}


class TensorIntrin:
    def __init__(self, name: str, op: ComputeOp, targets: tuple[str, ...]):
        self.name = name
        self.op = op
        self.targets = targets

    @property
    def extents(self) -> list[int]:
        """Loop extents of the intrinsic: spatial axes, then reduce axes."""
        return [a.extent for a in self.op.axis] + [a.extent for a in self.op.reduce_axis]

    def body_signature(self) -> str:
        return body_signature(self.op)

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name}, extents={self.extents})"


class _Alias:
    """Stands in for a tensor in a signature: only its name is printed."""

    def __init__(self, name: str):
        self.name = name


def body_signature(op: ComputeOp) -> str:
    """The body's text with tensor and axis names replaced by positions, for matching."""
    axis_pos = {a.var: f"s{i}" for i, a in enumerate(op.axis)}
    axis_pos.update({a.var: f"r{i}" for i, a in enumerate(op.reduce_axis)})
    aliases: dict[int, _Alias] = {}

    def rename(node: Expr) -> Expr | None:
        if isinstance(node, Var) and node in axis_pos:
            return Var(axis_pos[node], node.dtype)
        if isinstance(node, Load):
            alias = aliases.setdefault(id(node.source.op), _Alias(f"in{len(aliases)}"))
            return Load(alias, node.indices, node.dtype)
        return None

    body = op.body
    source = body.source if isinstance(body, Reduce) else body
    reducer = body.reducer.name if isinstance(body, Reduce) else "none"
    return f"{reducer}:{op.dtype}:{expr_str(transform(source, rename))}"


def decl_tensor_intrin(output: Tensor, name: str,
                       targets: tuple[str, ...] = ("vta", "cuda")) -> TensorIntrin:
    """Declare (and register by name, for replay in any process) a tensor intrinsic."""
    if not isinstance(output.op, ComputeOp):
        raise TensorExprError(f"tensor intrinsic {name}: its semantics must be a te.compute")
    for t in output.op.input_tensors:
        if isinstance(t.op, ComputeOp):
            raise TensorExprError(
                f"tensor intrinsic {name}: inputs must be placeholders, {t.name} is a compute"
            )
    intrin = TensorIntrin(name, output.op, tuple(targets))
    _REGISTRY[name] = intrin
    return intrin


def get_tensor_intrin(name: str) -> TensorIntrin:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no tensor intrinsic named {name!r} is declared; known: "
                       f"{', '.join(sorted(_REGISTRY)) or 'none'}") from None
