"""DeadCodeElimination: drop the ``let`` bindings whose variable is never used, when
dropping them cannot change meaning; optionally inline those used exactly once.

A binding can go only if its value is pure (``_util.impure_nodes``): no reference
operation, and no call of a function, variable or global (it may have an effect, or not
return) — operator and constructor calls, tuples, closures (creating one does nothing) and
calls of literal functions with pure bodies are pure. Other bindings stay even when unused.

Liveness is found by marking, not by counting and re-counting: the walk starts at the
function's result and at the values of the bindings that must stay; a pure binding's value
is walked only once its variable is reached. So a chain of bindings that only feed each
other and then nothing disappears at once, in one pass, and a binding whose only use is in
another dead binding is dead too. Global functions are kept (a module's globals are its
interface); ``Primitive`` functions are not entered.

``inline_once`` (off by default, as in TVM): a pure, non-recursive binding whose variable
is used exactly once (counting a use inside a shared dataflow node once) is substituted
into its use.
"""

from __future__ import annotations

from ..expr import Expr, Function, Let, Pattern, Var
from ..module import Module
from ..vars import free_vars
from ..visitor import ExprVisitor
from ._util import Rewriter, impure_nodes, map_functions
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["DeadCodeElimination", "eliminate_dead_code"]


class _Pure(ExprVisitor):
    """Collects the lets of an expression whose value is pure (var id -> let)."""

    def __init__(self, impure: set[int]):
        super().__init__()
        self.impure = impure
        self.pure_lets: dict[int, Let] = {}

    def visit_let_binding(self, e: Let) -> None:
        if id(e.value) not in self.impure:
            self.pure_lets[id(e.var)] = e
        super().visit_let_binding(e)


class _Liveness(ExprVisitor):
    """Marks the live variables of pure lets, and counts the uses of every variable in
    the live code."""

    def __init__(self, pure_lets: dict[int, Let]):
        super().__init__()
        self.pure_lets = pure_lets
        self.live: set[int] = set()
        self.uses: dict[int, int] = {}
        self.pending: list[Expr] = []

    def run(self, root: Expr) -> None:
        self.visit(root)
        while self.pending:  # a worklist, so that long chains of uses do not recurse
            self.visit(self.pending.pop())

    def visit(self, e: Expr) -> None:
        if type(e) is Var:
            key = id(e)
            self.uses[key] = self.uses.get(key, 0) + 1
            let = self.pure_lets.get(key)
            if let is not None and key not in self.live:
                self.live.add(key)
                self.pending.append(let.value)
        super().visit(e)

    # binders are not uses
    def visit_let_binding(self, e: Let) -> None:
        if id(e.var) not in self.pure_lets:
            self.visit(e.value)

    def visit_function(self, e: Function) -> None:
        self.visit(e.body)

    def visit_pattern(self, p: Pattern) -> None:
        pass


class _Sweep(Rewriter):
    def __init__(self, live: _Liveness, inline_once: bool):
        super().__init__()
        self.liveness = live
        self.inline_once = inline_once
        self.dropped: set[int] = set()

    def visit_let_binding(self, e: Let) -> tuple[Var, Expr]:
        key = id(e.var)
        if key in self.liveness.pure_lets:
            if key not in self.liveness.live:
                self.dropped.add(id(e))
                return e.var, e.value
            if (self.inline_once and self.liveness.uses.get(key) == 1
                    and not (isinstance(e.value, Function)
                             and any(v is e.var for v in free_vars(e.value)))):
                value = self.visit(e.value)
                self._memo[key] = (e.var, value)
                self.dropped.add(id(e))
                return e.var, value
        return super().visit_let_binding(e)

    def rebuild_let(self, e: Let, var: Var, value: Expr, body: Expr) -> Expr:
        if id(e) in self.dropped:
            return body
        return super().rebuild_let(e, var, value, body)


def eliminate_dead_code(expr: Expr, inline_once: bool = False) -> Expr:
    """``expr`` without its dead pure let bindings (see the module docstring)."""
    pure = _Pure(impure_nodes(expr))
    pure.visit(expr)
    if not pure.pure_lets:
        return expr
    live = _Liveness(pure.pure_lets)
    live.run(expr)
    return _Sweep(live, inline_once).visit(expr)


def DeadCodeElimination(inline_once: bool = False) -> Pass:
    """Remove unused pure let bindings (opt level 1); ``inline_once`` also substitutes
    those used exactly once."""

    def run(module: Module, ctx: PassContext) -> Module:
        return map_functions(module, lambda f: eliminate_dead_code(f, inline_once))

    return module_pass("DeadCodeElimination", opt_level=1)(run)
