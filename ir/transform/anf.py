"""Conversions between graph normal form (a dataflow DAG: subexpressions shared by object
identity) and A-normal form (every intermediate result named by a ``let``).

``to_a_normal_form(expr_or_module)``: every non-atomic subexpression (anything but a
``Var``, ``GlobalVar``, ``Constant``, ``Op`` or ``Constructor``) is bound by a ``let`` to a
fresh variable, in evaluation order, so every call's callee and arguments, every tuple
field, condition, matched value and reference operand is atomic. Scopes are kept: the
bindings of an ``if`` branch, a match clause or a function body stay inside it (they are
evaluated only when it is). A subexpression shared in the DAG is bound once, in the scope
where it is first reached, and reused wherever that binding is in scope; a subexpression
shared only by sibling branches is bound in each branch (evaluated only on the path taken).
Existing lets keep their variables (a let-bound function can still call itself).

``to_graph_normal_form(expr_or_module)`` (Relay's GNF): each ``let``-bound variable is
replaced by its value wherever it is used — uses then share one node, a dataflow graph —
unless the value may have a side effect: when the program uses references anywhere, a
value that contains a reference operation or calls anything but an operator or a
constructor stays let-bound (effects keep their order); a let-bound function that calls
itself stays too. Unused pure lets disappear.

Both preserve meaning (the interpreter gives the same results before and after), and both
walk let chains and deep dataflow chains without deep recursion.
"""

from __future__ import annotations

import itertools

from ..expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
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
from ..vars import free_vars
from ..visitor import ExprVisitor
from ._util import LetInlining

__all__ = ["is_atomic", "to_a_normal_form", "to_graph_normal_form"]

_ATOMS = (Var, GlobalVar, Constant, Op, Constructor)
_DATAFLOW = (Call, Tuple, TupleGetItem)


def is_atomic(e: Expr) -> bool:
    """Whether ``e`` is an atom of A-normal form (a variable, global, constant, operator or
    constructor)."""
    return isinstance(e, _ATOMS)


def _apply(x: Expr | Module, fn) -> Expr | Module:
    if isinstance(x, Module):
        out = Module(type_definitions=x.type_definitions)
        for gv, f in x.functions.items():
            out.add(gv, fn(f))
        return out
    if not isinstance(x, Expr):
        raise TypeError(f"expected an expression or a Module, got {type(x).__name__}")
    return fn(x)


# ---------------------------------------------------------------------------------- ANF


class _Scope:
    __slots__ = ("bindings", "memo", "parent")

    def __init__(self, parent: _Scope | None):
        self.parent = parent
        self.bindings: list[tuple[Var, Expr]] = []
        self.memo: dict[int, tuple[Expr, Expr]] = {}  # id(node) -> (node, its atom)

    def lookup(self, e: Expr) -> Expr | None:
        s: _Scope | None = self
        while s is not None:
            hit = s.memo.get(id(e))
            if hit is not None:
                return hit[1]
            s = s.parent
        return None

    def wrap(self, result: Expr) -> Expr:
        for var, value in reversed(self.bindings):
            result = Let(var, value, result)
        return result


class _ToANF:
    def __init__(self) -> None:
        self.counter = itertools.count()

    def fresh(self) -> Var:
        return Var(f"x{next(self.counter)}")

    def top(self, e: Expr) -> Expr:
        if isinstance(e, Function):
            return self.function(e, None)
        scope = _Scope(None)
        return scope.wrap(self.atom(e, scope))

    def atom(self, e: Expr, scope: _Scope) -> Expr:
        """``e`` as an atom, its computation appended to ``scope``'s bindings."""
        if isinstance(e, _ATOMS):
            return e
        hit = scope.lookup(e)
        if hit is not None:
            return hit
        if type(e) is Let:
            return self.let_chain(e, scope)
        if type(e) in _DATAFLOW:
            self.pre_dataflow(e, scope)
            hit = scope.lookup(e)
            if hit is not None:
                return hit
        value = self.compound(e, scope)
        var = self.fresh()
        scope.bindings.append((var, value))
        scope.memo[id(e)] = (e, var)
        return var

    def pre_dataflow(self, root: Expr, scope: _Scope) -> None:
        """Bind the dataflow descendants of ``root`` children first, with an explicit stack
        (so a chain of 10,000 operator calls does not recurse)."""
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            e, ready = stack.pop()
            if scope.lookup(e) is not None:
                continue
            if ready:
                if e is not root:
                    self.atom(e, scope)
                continue
            stack.append((e, True))
            kids = (e.op, *e.args) if type(e) is Call else (
                e.fields if type(e) is Tuple else (e.tuple_value,))
            stack.extend((c, False) for c in reversed(kids)
                         if type(c) in _DATAFLOW and scope.lookup(c) is None)

    def let_chain(self, e: Let, scope: _Scope) -> Expr:
        head = e
        while type(e) is Let:
            if isinstance(e.value, Function):
                value: Expr = self.function(e.value, scope)
            else:
                value = self.value(e.value, scope)
            scope.bindings.append((e.var, value))
            e = e.body
        result = self.atom(e, scope)
        scope.memo[id(head)] = (head, result)
        return result

    def value(self, e: Expr, scope: _Scope) -> Expr:
        """``e`` with atomic parts (the right side of a let): an atom, or one compound
        node whose children are atoms."""
        if isinstance(e, _ATOMS) or type(e) is Let:
            return self.atom(e, scope)
        hit = scope.lookup(e)
        if hit is not None:
            return hit
        if type(e) in _DATAFLOW:
            self.pre_dataflow(e, scope)
        return self.compound(e, scope)

    def compound(self, e: Expr, scope: _Scope) -> Expr:
        kind = type(e)
        if kind is Call:
            return Call(self.atom(e.op, scope), [self.atom(a, scope) for a in e.args],
                        e.attrs, e.type_args, e.span)
        if kind is Tuple:
            return Tuple([self.atom(f, scope) for f in e.fields], e.span)
        if kind is TupleGetItem:
            return TupleGetItem(self.atom(e.tuple_value, scope), e.index, e.span)
        if kind is Function:
            return self.function(e, scope)
        if kind is If:
            cond = self.atom(e.cond, scope)
            return If(cond, self.block(e.true_branch, scope), self.block(e.false_branch, scope),
                      span=e.span)
        if kind is Match:
            data = self.atom(e.data, scope)
            return Match(data, [Clause(c.lhs, self.block(c.rhs, scope)) for c in e.clauses],
                         e.complete, e.span)
        if kind is RefCreate:
            return RefCreate(self.atom(e.value, scope), e.span)
        if kind is RefRead:
            return RefRead(self.atom(e.ref, scope), e.span)
        if kind is RefWrite:
            ref = self.atom(e.ref, scope)
            return RefWrite(ref, self.atom(e.value, scope), e.span)
        raise TypeError(f"to_a_normal_form: unknown expression {e!r}")

    def block(self, e: Expr, parent: _Scope | None) -> Expr:
        inner = _Scope(parent)
        return inner.wrap(self.atom(e, inner))

    def function(self, f: Function, scope: _Scope | None) -> Function:
        return Function(f.params, self.block(f.body, scope), f.ret_type, f.type_params,
                        f.attrs, f.span)


def to_a_normal_form(x: Expr | Module) -> Expr | Module:
    """``x`` (an expression, or every global function of a module) in A-normal form (see
    the module docstring)."""
    return _apply(x, lambda e: _ToANF().top(e))


# ---------------------------------------------------------------------------------- GNF


class _Effects(ExprVisitor):
    """Whether an expression contains a reference operation or (``calls``) a call of
    something other than an operator or constructor."""

    def __init__(self) -> None:
        super().__init__()
        self.refs = False
        self.calls = False

    def visit_call(self, e: Call) -> None:
        if not isinstance(e.op, Op | Constructor):
            self.calls = True
        super().visit_call(e)

    def visit_ref_create(self, e: RefCreate) -> None:
        self.refs = True
        super().visit_ref_create(e)

    def visit_ref_read(self, e: RefRead) -> None:
        self.refs = True
        super().visit_ref_read(e)

    def visit_ref_write(self, e: RefWrite) -> None:
        self.refs = True
        super().visit_ref_write(e)


def _effects(e: Expr) -> _Effects:
    v = _Effects()
    v.visit(e)
    return v


class _ToGNF(LetInlining):
    def __init__(self, program_has_refs: bool):
        super().__init__()
        self.program_has_refs = program_has_refs

    def pure(self, value: Expr) -> bool:
        if not self.program_has_refs:
            return True
        eff = _effects(value)
        return not eff.refs and not eff.calls

    def inlines(self, e: Let, value: Expr) -> bool:
        recursive = isinstance(e.value, Function) and any(v is e.var
                                                          for v in free_vars(e.value))
        return not recursive and self.pure(e.value)


def to_graph_normal_form(x: Expr | Module) -> Expr | Module:
    """``x`` (an expression, or every global function of a module) in graph normal form
    (see the module docstring)."""
    if isinstance(x, Module):
        has_refs = any(_effects(f).refs for f in x.functions.values())
    elif isinstance(x, Expr):
        has_refs = _effects(x).refs
    else:
        raise TypeError(f"expected an expression or a Module, got {type(x).__name__}")
    return _apply(x, lambda e: _ToGNF(has_refs).visit(e))
