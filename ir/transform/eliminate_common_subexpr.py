"""EliminateCommonSubexpr: compute each distinct operator call once.

Two operator calls are the same computation when they call the same operator with equal
attributes on the same arguments — the same nodes after this rewrite, or constants of
equal value — so the walk, children first, keeps a table from that key to the first such
call and replaces later ones by it (the graph then shares one node). Tuples and tuple
projections are merged the same way, so ``split(x).0`` reached twice is one node.

Scoping: the table has one frame per scope — a function body, each ``if`` branch, each
match clause — and a call is only replaced by one from its own scope or an enclosing one,
never by one computed in a sibling branch. A ``let`` whose value becomes the value of an
earlier ``let`` in scope is dropped and its variable replaced by the earlier one (A-normal
form: ``let %b = add(%x, %y)`` after ``let %a = add(%x, %y)``), and a call equal to an
in-scope let's value is replaced by that variable.

Only operator calls are merged (operators are pure; a function call may have an effect);
``nn.dropout`` is never merged (random when training). ``Primitive`` functions are not
entered.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    If,
    Let,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from ..module import Module
from ._util import Rewriter, is_primitive, map_functions
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["EliminateCommonSubexpr", "eliminate_common_subexpr"]

_SKIP = frozenset({"nn.dropout"})


def _memoised(e: Expr) -> bool:
    """Whether evaluating ``e`` twice gives one computation (the interpreter memoises
    operator and constructor calls, tuples and projections); a function call may run its
    effects twice, so a let bound to one is never an alias target."""
    return type(e) in (Tuple, TupleGetItem) or (
        type(e) is Call and isinstance(e.op, Op | Constructor))


def _arg_key(e: Expr) -> Hashable:
    return ("c", e) if isinstance(e, Constant) else ("n", id(e))


class _CSE(Rewriter):
    def __init__(self) -> None:
        super().__init__()
        # per scope: computation key -> its node, and ("let", id(value)) -> the let's var
        self.scopes: list[dict[Hashable, Expr]] = [{}]
        self.aliased: set[int] = set()  # ids of lets replaced by an earlier variable

    def lookup(self, key: Hashable) -> Expr | None:
        for scope in reversed(self.scopes):
            hit = scope.get(key)
            if hit is not None:
                return hit
        return None

    def _merge(self, new: Expr, key: Hashable) -> Expr:
        hit = self.lookup(key)
        if hit is None:
            self.scopes[-1][key] = new
            return new
        return self.lookup(("let", id(hit))) or hit

    def visit_call(self, e: Call) -> Expr:
        new = super().visit_call(e)
        if not isinstance(new.op, Op) or new.op.name in _SKIP:
            return new
        return self._merge(new, ("call", new.op.name, new.attrs,
                                 tuple(_arg_key(a) for a in new.args)))

    def visit_tuple(self, e: Tuple) -> Expr:
        new = super().visit_tuple(e)
        return self._merge(new, ("tuple", tuple(_arg_key(f) for f in new.fields)))

    def visit_tuple_getitem(self, e: TupleGetItem) -> Expr:
        new = super().visit_tuple_getitem(e)
        return self._merge(new, ("get", id(new.tuple_value), new.index))

    def visit_let_binding(self, e: Let) -> tuple[Var, Expr]:
        value = self.visit(e.value)
        earlier = value if isinstance(value, Var) and value is not e.value else self.lookup(
            ("let", id(value)))
        if earlier is not None:
            self._memo[id(e.var)] = (e.var, earlier)
            self.aliased.add(id(e))
            return e.var, value
        if _memoised(value):
            self.scopes[-1][("let", id(value))] = e.var
        return self.visit(e.var), value

    def rebuild_let(self, e: Let, var: Var, value: Expr, body: Expr) -> Expr:
        if id(e) in self.aliased:
            return body
        return super().rebuild_let(e, var, value, body)

    def _scoped(self, e: Expr) -> Expr:
        self.scopes.append({})
        mark = len(self._memo)
        try:
            return self.visit(e)
        finally:
            self.scopes.pop()
            # Rewrites made in this scope may name its let variables: a node shared with
            # another scope must be rewritten again there (the memo is insertion-ordered).
            while len(self._memo) > mark:
                self._memo.popitem()

    def visit_function(self, e: Function) -> Expr:
        if is_primitive(e):
            return e
        body = self._scoped(e.body)
        if body is e.body:
            return e
        return Function(e.params, body, e.ret_type, e.type_params, e.attrs, e.span)

    def visit_if(self, e: If) -> Expr:
        cond = self.visit(e.cond)
        then, other = self._scoped(e.true_branch), self._scoped(e.false_branch)
        if cond is e.cond and then is e.true_branch and other is e.false_branch:
            return e
        return If(cond, then, other, e.span)

    def visit_clause(self, c: Clause) -> Clause:
        rhs = self._scoped(c.rhs)
        return c if rhs is c.rhs else Clause(c.lhs, rhs)


def eliminate_common_subexpr(expr: Expr) -> Expr:
    """``expr`` with repeated operator calls computed once (see the module docstring)."""
    return _CSE().visit(expr)


def _run(module: Module, ctx: PassContext) -> Module:
    return map_functions(module, eliminate_common_subexpr)


def EliminateCommonSubexpr() -> Pass:
    """Merge equal operator calls (opt level 3)."""
    return module_pass("EliminateCommonSubexpr", opt_level=3)(_run)
