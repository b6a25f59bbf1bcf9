"""Variables of an expression: which are bound inside it, which are free (captured from
outside), and the free type variables of an expression or a type.

Lists are in order of first appearance in a walk (``ExprVisitor``'s order), without
duplicates. A variable counts as bound if some binder inside the expression binds it (let,
function parameter, pattern variable), as in Relay.
"""

from __future__ import annotations

from .expr import Expr, Function, Let, Pattern, PatternVar, Var
from .types import FuncType, Type, TypeData, TypeVar, type_children
from .visitor import ExprVisitor


class _VarCollector(ExprVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.bound: dict[int, Var] = {}
        self.seen: dict[int, Var] = {}  # every variable, binder or use, in order

    def visit_var(self, e: Var) -> None:
        self.seen.setdefault(id(e), e)

    def visit_let_binding(self, e: Let) -> None:
        self.bound.setdefault(id(e.var), e.var)
        super().visit_let_binding(e)

    def visit_function(self, e: Function) -> None:
        for p in e.params:
            self.bound.setdefault(id(p), p)
        super().visit_function(e)

    def visit_pattern(self, p: Pattern) -> None:
        if isinstance(p, PatternVar):
            self.bound.setdefault(id(p.var), p.var)
        super().visit_pattern(p)


def _collect(expr: Expr) -> _VarCollector:
    c = _VarCollector()
    c.visit(expr)
    return c


def free_vars(expr: Expr) -> list[Var]:
    """The local variables ``expr`` uses but does not bind (a closure's captures; the
    parameters ``Module.from_expr`` gives a wrapped expression)."""
    c = _collect(expr)
    return [v for k, v in c.seen.items() if k not in c.bound]


def bound_vars(expr: Expr) -> list[Var]:
    """The variables bound inside ``expr`` (lets, parameters, pattern variables)."""
    c = _collect(expr)
    return [v for k, v in c.seen.items() if k in c.bound]


def all_vars(expr: Expr) -> list[Var]:
    """Every local variable of ``expr``, bound or free."""
    return list(_collect(expr).seen.values())


def _type_vars(t: Type, bound: set[int], out: dict[int, TypeVar]) -> None:
    if isinstance(t, TypeVar):
        if id(t) not in bound:
            out.setdefault(id(t), t)
        return
    binders: tuple[TypeVar, ...] = ()
    if isinstance(t, FuncType):
        binders = t.type_params
    elif isinstance(t, TypeData):
        binders = t.type_vars
    inner = bound | {id(v) for v in binders} if binders else bound
    for c in type_children(t):
        _type_vars(c, inner, out)


class _TypeVarCollector(ExprVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.bound: set[int] = set()
        self.out: dict[int, TypeVar] = {}

    def visit_type(self, t: Type) -> None:
        _type_vars(t, self.bound, self.out)

    def visit_function(self, e: Function) -> None:
        self.bound.update(id(v) for v in e.type_params)
        super().visit_function(e)


def free_type_vars(node: Expr | Type) -> list[TypeVar]:
    """The type variables used in ``node`` (its annotations, return types, type arguments,
    or the type itself) that no type parameter inside it binds."""
    if isinstance(node, Type):
        out: dict[int, TypeVar] = {}
        _type_vars(node, set(), out)
        return list(out.values())
    c = _TypeVarCollector()
    c.visit(node)
    return [v for k, v in c.out.items() if k not in c.bound]
