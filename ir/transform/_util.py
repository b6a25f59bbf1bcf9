"""Helpers the optimisation passes share: recognising operator calls, counting how many
parents use each node, telling pure expressions from effectful ones, a mutator base that
leaves fused (``Primitive``) functions alone, a mixin that inlines chosen ``let``s, and
mapping a rewrite over a module's global functions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..builder import const
from ..expr import (
    Call,
    Constant,
    Constructor,
    Expr,
    Function,
    If,
    Let,
    Match,
    Op,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ..module import Module
from ..types import TensorType
from ..visitor import ExprMutator, ExprVisitor

__all__ = ["LetInlining", "Rewriter", "call_of", "const_like", "impure_nodes", "is_primitive",
           "is_pure", "map_functions", "map_typed_functions", "op_name", "perm_or_none",
           "static_tensor_type", "use_counts"]


def op_name(e: Expr) -> str | None:
    """The operator's name when ``e`` calls a registered operator, else None."""
    if type(e) is Call and isinstance(e.op, Op):
        return e.op.name
    return None


def call_of(e: Expr, *names: str) -> Call | None:
    """``e`` when it is a call of one of the operators ``names``, else None."""
    return e if op_name(e) in names else None  # type: ignore[return-value]


def is_primitive(f: Function) -> bool:
    return bool(f.attrs.get("Primitive"))


def static_tensor_type(e: Expr) -> TensorType | None:
    """``e``'s checked type when it is a tensor type with a static shape."""
    t = e.checked_type_or_none
    if isinstance(t, TensorType) and all(isinstance(d, int) for d in t.shape):
        return t
    return None


def const_like(value: np.ndarray | float, dtype: str) -> Constant:
    """A constant of ``value`` in ``dtype``."""
    return const(np.asarray(value).astype(dtype))


def perm_or_none(perm: tuple[int, ...] | list[int]) -> tuple[int, ...] | None:
    """``perm`` as a tuple, or None when it is the identity."""
    perm = tuple(perm)
    return None if perm == tuple(range(len(perm))) else perm


class Rewriter(ExprMutator):
    """An ``ExprMutator`` that does not enter ``Primitive`` (fused) functions: they are
    kernels already, and passes before fusion must not change them."""

    def visit_function(self, e: Function) -> Expr:
        if is_primitive(e):
            return e
        return super().visit_function(e)


class LetInlining(ExprMutator):
    """A mutator mixin that drops the ``let``s whose (visited) value ``inlines`` accepts:
    every use of the variable becomes that value. Put it before the mutator base, as in
    ``class P(LetInlining, Rewriter)``."""

    def __init__(self) -> None:
        super().__init__()
        self.inlined: set[int] = set()  # ids of the lets whose value was inlined

    def inlines(self, e: Let, value: Expr) -> bool:
        raise NotImplementedError

    def visit_let_binding(self, e: Let) -> tuple[Var, Expr]:
        value = self.visit(e.value)
        if self.inlines(e, value):
            self._memo[id(e.var)] = (e.var, value)
            self.inlined.add(id(e))
            return e.var, value
        return self.visit(e.var), value

    def rebuild_let(self, e: Let, var: Var, value: Expr, body: Expr) -> Expr:
        if id(e) in self.inlined:
            return body
        return super().rebuild_let(e, var, value, body)


def map_functions(module: Module, rewrite: Callable[[Function], Function]) -> Module:
    """A copy of ``module`` with ``rewrite`` applied to each global function that is not
    ``Primitive``."""
    return _rewritten(module, module, rewrite)


def _rewritten(module: Module, source: Module, rewrite: Callable[[Function], Function]
               ) -> Module:
    """A copy of ``module`` with each non-``Primitive`` function of ``source`` that
    ``rewrite`` changes replaced by the rewrite."""
    out = module.copy()
    for gv, func in source.functions.items():
        if is_primitive(func):
            continue
        new = rewrite(func)
        if new is not func:
            out.add(gv, new, update=True)
    return out


def map_typed_functions(module: Module, rewrite: Callable[[Function], Function]) -> Module:
    """``map_functions`` for rewrites that read checked types: ``rewrite`` sees the
    functions of ``infer_type(module)``; a function it leaves as it is stays the input's
    own (so a pass that changes nothing returns the functions it was given)."""
    from .infer_type import infer_type

    return _rewritten(module, infer_type(module), rewrite)


# ------------------------------------------------------------------------------- uses


class _UseCounter(ExprVisitor):
    """Counts, for each node, the edges that reach it from a distinct parent node (a parent
    shared in the DAG counts once; ``add(%c, %c)`` counts twice)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[int, int] = {}

    def visit(self, e: Expr) -> None:
        self.counts[id(e)] = self.counts.get(id(e), 0) + 1
        super().visit(e)


def use_counts(expr: Expr) -> dict[int, int]:
    """id(node) -> how many parent edges use it within ``expr`` (``expr`` itself counts 1).
    A dataflow node used once can be rewritten without duplicating work for other users."""
    c = _UseCounter()
    c.visit(expr)
    return c.counts


# ---------------------------------------------------------------------------- effects


class _Impure(ExprVisitor):
    """Marks the nodes whose evaluation may have an effect: a reference operation, or a
    call of anything but an operator, a constructor or a literal function whose body is
    pure (a call of a variable or global may run an effect, or never return). Creating a
    closure is pure whatever its body does."""

    def __init__(self) -> None:
        super().__init__()
        self.impure: set[int] = set()

    def _from(self, e: Expr, *children: Expr) -> None:
        if any(id(c) in self.impure for c in children):
            self.impure.add(id(e))

    def visit_call(self, e: Call) -> None:
        super().visit_call(e)
        op = e.op
        if isinstance(op, Function):
            callee_pure = id(op.body) not in self.impure
        else:
            callee_pure = isinstance(op, Op | Constructor)
        if not callee_pure:
            self.impure.add(id(e))
        self._from(e, *e.args)

    def visit_tuple(self, e: Tuple) -> None:
        super().visit_tuple(e)
        self._from(e, *e.fields)

    def visit_tuple_getitem(self, e: TupleGetItem) -> None:
        super().visit_tuple_getitem(e)
        self._from(e, e.tuple_value)

    def leave_let(self, e: Let) -> None:
        self._from(e, e.value, e.body)

    def visit_if(self, e: If) -> None:
        super().visit_if(e)
        self._from(e, e.cond, e.true_branch, e.false_branch)

    def visit_match(self, e: Match) -> None:
        super().visit_match(e)
        self._from(e, e.data, *(c.rhs for c in e.clauses))

    def visit_ref_create(self, e: RefCreate) -> None:
        super().visit_ref_create(e)
        self.impure.add(id(e))

    def visit_ref_read(self, e: RefRead) -> None:
        super().visit_ref_read(e)
        self.impure.add(id(e))

    def visit_ref_write(self, e: RefWrite) -> None:
        super().visit_ref_write(e)
        self.impure.add(id(e))


def impure_nodes(expr: Expr) -> set[int]:
    """The ids of the nodes of ``expr`` whose evaluation may have an effect (see
    ``_Impure``); every other node can be dropped or moved without changing meaning."""
    v = _Impure()
    v.visit(expr)
    return v.impure


def is_pure(expr: Expr) -> bool:
    """Whether evaluating ``expr`` surely has no effect."""
    return id(expr) not in impure_nodes(expr)

