"""Tensor intrinsics: named hardware operations a loop nest can be replaced by (tensorize).

An intrinsic is declared by a compute over placeholders that states its semantics
(e.g. a 1x16x16 int8 GEMM block). ``s[C].tensorize(axis, intrin)`` checks that the
loop nest from ``axis`` inward computes exactly that; the targets that own such
hardware (VTA, tensor cores) generate its code.
"""

from __future__ import annotations

from .expr import Const, Expr, Load, Var, substitute, transform
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

    def matches_innermost(self, op: ComputeOp) -> bool:
        """Whether ``op``'s last spatial and last reduce axis, as the innermost loops,
        compute this (one spatial and one reduce axis) intrinsic."""
        if len(self.op.axis) != 1 or len(self.op.reduce_axis) != 1 or not op.axis \
                or not op.reduce_axis:
            return False
        s, r = op.axis[-1], op.reduce_axis[-1]
        if [s.extent, r.extent] != self.extents:
            return False
        values: dict[Var, Expr] = {a.var: Const(0, "int32") for a in [*op.axis, *op.reduce_axis]}
        values.update({s.var: s.var, r.var: r.var})
        return body_signature(op, values, {s.var: "s0", r.var: "r0"}) == self.body_signature()

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name}, extents={self.extents})"


class _Alias:
    """Stands in for a tensor in a signature: only its name is printed."""

    def __init__(self, name: str):
        self.name = name


def body_signature(op: ComputeOp, values: dict[Var, Expr] | None = None,
                   names: dict[Var, str] | None = None) -> str:
    """The body's text with tensors named by first use and element type, axes by position
    and kind (s0, r0), and index dimensions that do not vary inside the matched loops
    dropped, so that a loop nest inside a bigger computation can be compared with an
    intrinsic's definition.

    ``values`` expresses root axes through the matched loop variables (outer loops as 0);
    ``names`` names those variables. By default the op's own axes are the matched loops."""
    if values is None:
        values = {a.var: a.var for a in [*op.axis, *op.reduce_axis]}
        names = {a.var: f"s{i}" for i, a in enumerate(op.axis)}
        names.update({a.var: f"r{i}" for i, a in enumerate(op.reduce_axis)})
    aliases: dict[int, _Alias] = {}

    def rename(node: Expr) -> Expr | None:
        if isinstance(node, Var) and node in names:
            return Var(names[node], node.dtype)
        if isinstance(node, Load):
            alias = aliases.setdefault(id(node.source.op),
                                       _Alias(f"in{len(aliases)}:{node.dtype}"))
            varying = tuple(i for i in node.indices if not isinstance(i, Const))
            return Load(alias, varying, node.dtype)
        return None

    from .arith import simplify

    body = op.body
    source = body.source if isinstance(body, Reduce) else body
    source = transform(substitute(source, values),
                       lambda n: Load(n.source, tuple(simplify(i) for i in n.indices), n.dtype)
                       if isinstance(n, Load) else None)
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
