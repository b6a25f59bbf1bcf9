"""The one traversal of expressions every pass is built on: ``ExprVisitor`` (read-only
walks) and ``ExprMutator`` (rewrites).

Each expression class names its handler (``visit_method``: ``visit_call``, ``visit_let``...);
the two base classes know every kind's children, and a pass subclasses one and overrides
the handlers of the kinds it cares about (calling the base method to keep recursing).
``visit(e)`` is memoised per node, so a subexpression shared by several parents (a DAG) is
visited once and, in a mutator, rewritten once (the rewrite is shared too).

Deep programs do not recurse deeply:

- Dataflow nodes (``Call``, ``Tuple``, ``TupleGetItem``) are expanded with an explicit
  stack: when ``visit`` meets one, it first visits its not-yet-visited dataflow
  descendants in post-order, so by the time a handler runs, its dataflow children are
  done and its own ``self.visit(child)`` calls return at once. A 1,000-operator model in
  graph form is walked at constant depth. The price: a handler sees its dataflow children
  already visited, so it cannot prune them; a pass that must (stop at some calls) sets
  ``expand_dataflow = False`` and recurses normally.
- Let chains (A-normal form) are walked by a loop in ``visit_let``: for each let of the
  chain in order ``visit_let_binding`` (the variable, then the value), then the final body,
  then, innermost first, ``leave_let`` (visitor) / ``rebuild_let`` (mutator). Override those
  to act on every let of a chain; an override of ``visit_let`` itself sees only the head
  of each chain.

Types inside expressions go through ``visit_type`` (nothing / identity by default) and
match patterns through ``visit_pattern``.
"""

from __future__ import annotations

from typing import ClassVar

from .expr import (
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
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from .types import Type

_DATAFLOW = frozenset({Call, Tuple, TupleGetItem})


def _dataflow_children(e: Expr) -> tuple[Expr, ...]:
    if type(e) is Call:
        return (e.op, *e.args)
    if type(e) is Tuple:
        return e.fields
    return (e.tuple_value,)


def _post_order_dataflow(root: Expr, done: dict, handle) -> None:
    """Call ``handle(e)`` on ``root`` and its dataflow descendants not in ``done``,
    children first, with an explicit stack (``handle`` records ``e`` in ``done``)."""
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        e, ready = stack.pop()
        if id(e) in done:
            continue
        if ready:
            handle(e)
            continue
        stack.append((e, True))
        stack.extend((c, False) for c in reversed(_dataflow_children(e))
                     if type(c) in _DATAFLOW and id(c) not in done)


def dataflow_inputs(e: Expr) -> tuple[Expr, ...]:
    """The operands of a dataflow node: a call's arguments, a tuple's fields, a
    projection's tuple (nothing for any other expression)."""
    if type(e) is Call:
        return e.args
    if type(e) is Tuple:
        return e.fields
    if type(e) is TupleGetItem:
        return (e.tuple_value,)
    return ()


def dataflow_post_order(root: Expr) -> list[Expr]:
    """The dataflow nodes (calls, tuples, projections) reachable from ``root`` through
    dataflow operands, each once and after its operands; iterative. Other expressions
    (variables, constants, functions, ``let``/``if``/``match``...) are not listed."""
    order: list[Expr] = []
    done: dict[int, Expr] = {}

    def handle(e: Expr) -> None:
        done[id(e)] = e
        order.append(e)

    if type(root) in _DATAFLOW:
        _post_order_dataflow(root, done, handle)
    return order


class ExprVisitor:
    """A read-only walk; every node once. Handlers return nothing."""

    #: Visit dataflow nodes with an explicit stack, children first (see the module doc).
    expand_dataflow: ClassVar[bool] = True

    def __init__(self) -> None:
        self._visited: dict[int, Expr] = {}  # id -> node (the node kept alive for its id)

    def visit(self, e: Expr) -> None:
        if id(e) in self._visited:
            return
        if self.expand_dataflow and type(e) in _DATAFLOW:
            _post_order_dataflow(e, self._visited, self._handle)
        else:
            self._handle(e)

    def _handle(self, e: Expr) -> None:
        self._visited[id(e)] = e
        getattr(self, e.visit_method)(e)

    def visit_type(self, t: Type) -> None:
        pass

    def visit_pattern(self, p: Pattern) -> None:
        if isinstance(p, PatternVar):
            self.visit(p.var)
        elif isinstance(p, PatternConstructor | PatternTuple):
            if isinstance(p, PatternConstructor):
                self.visit(p.constructor)
            for q in p.patterns:
                self.visit_pattern(q)

    def visit_var(self, e: Var) -> None:
        if e.type_annotation is not None:
            self.visit_type(e.type_annotation)

    def visit_global_var(self, e: GlobalVar) -> None:
        pass

    def visit_constant(self, e: Constant) -> None:
        pass

    def visit_op(self, e: Op) -> None:
        pass

    def visit_constructor(self, e: Constructor) -> None:
        pass

    def visit_call(self, e: Call) -> None:
        self.visit(e.op)
        for a in e.args:
            self.visit(a)
        for t in e.type_args:
            self.visit_type(t)

    def visit_tuple(self, e: Tuple) -> None:
        for f in e.fields:
            self.visit(f)

    def visit_tuple_getitem(self, e: TupleGetItem) -> None:
        self.visit(e.tuple_value)

    def visit_let(self, e: Let) -> None:
        chain = [e]
        body = e.body
        while type(body) is Let and id(body) not in self._visited:
            self._visited[id(body)] = body
            chain.append(body)
            body = body.body
        for let in chain:
            self.visit_let_binding(let)
        self.visit(body)
        for let in reversed(chain):
            self.leave_let(let)

    def visit_let_binding(self, e: Let) -> None:
        """One let of a chain: its variable, then its value."""
        self.visit(e.var)
        self.visit(e.value)

    def leave_let(self, e: Let) -> None:
        """After the body of let ``e`` (innermost first)."""

    def visit_function(self, e: Function) -> None:
        for p in e.params:
            self.visit(p)
        if e.ret_type is not None:
            self.visit_type(e.ret_type)
        self.visit(e.body)

    def visit_if(self, e: If) -> None:
        self.visit(e.cond)
        self.visit(e.true_branch)
        self.visit(e.false_branch)

    def visit_match(self, e: Match) -> None:
        self.visit(e.data)
        for c in e.clauses:
            self.visit_pattern(c.lhs)
            self.visit(c.rhs)

    def visit_ref_create(self, e: RefCreate) -> None:
        self.visit(e.value)

    def visit_ref_read(self, e: RefRead) -> None:
        self.visit(e.ref)

    def visit_ref_write(self, e: RefWrite) -> None:
        self.visit(e.ref)
        self.visit(e.value)


class ExprMutator:
    """A rewrite, bottom-up: each handler returns the node's replacement. A node is rebuilt
    only when one of its parts changed (else the handler returns it as is, keeping its
    checked type), and each node is rewritten once, so sharing is kept."""

    expand_dataflow: ClassVar[bool] = True

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Expr, Expr]] = {}  # id -> (node, its rewrite)

    def visit(self, e: Expr) -> Expr:
        hit = self._memo.get(id(e))
        if hit is not None:
            return hit[1]
        if self.expand_dataflow and type(e) in _DATAFLOW:
            _post_order_dataflow(e, self._memo, self._handle)
            return self._memo[id(e)][1]
        return self._handle(e)

    def _handle(self, e: Expr) -> Expr:
        new = getattr(self, e.visit_method)(e)
        if not isinstance(new, Expr):
            raise TypeError(f"{type(self).__name__}.{e.visit_method} returned {new!r}, "
                            "not an expression")
        self._memo[id(e)] = (e, new)
        return new

    def visit_type(self, t: Type) -> Type:
        return t

    def visit_pattern(self, p: Pattern) -> Pattern:
        if isinstance(p, PatternVar):
            var = self.visit(p.var)
            return p if var is p.var else PatternVar(var)
        if isinstance(p, PatternConstructor | PatternTuple):
            subs = tuple(self.visit_pattern(q) for q in p.patterns)
            if isinstance(p, PatternConstructor):
                con = self.visit(p.constructor)
                if con is p.constructor and _same(subs, p.patterns):
                    return p
                return PatternConstructor(con, subs)
            return p if _same(subs, p.patterns) else PatternTuple(subs)
        return p

    def visit_var(self, e: Var) -> Expr:
        return e

    def visit_global_var(self, e: GlobalVar) -> Expr:
        return e

    def visit_constant(self, e: Constant) -> Expr:
        return e

    def visit_op(self, e: Op) -> Expr:
        return e

    def visit_constructor(self, e: Constructor) -> Expr:
        return e

    def visit_call(self, e: Call) -> Expr:
        op = self.visit(e.op)
        args = tuple(self.visit(a) for a in e.args)
        type_args = tuple(self.visit_type(t) for t in e.type_args)
        if op is e.op and _same(args, e.args) and _same(type_args, e.type_args):
            return e
        return Call(op, args, e.attrs, type_args, e.span)

    def visit_tuple(self, e: Tuple) -> Expr:
        fields = tuple(self.visit(f) for f in e.fields)
        return e if _same(fields, e.fields) else Tuple(fields, e.span)

    def visit_tuple_getitem(self, e: TupleGetItem) -> Expr:
        value = self.visit(e.tuple_value)
        return e if value is e.tuple_value else TupleGetItem(value, e.index, e.span)

    def visit_let(self, e: Let) -> Expr:
        chain = [e]
        body = e.body
        while type(body) is Let and id(body) not in self._memo:
            chain.append(body)
            body = body.body
        bindings = [self.visit_let_binding(let) for let in chain]
        new = self.visit(body)
        for let, (var, value) in zip(reversed(chain), reversed(bindings), strict=True):
            new = self.rebuild_let(let, var, value, new)
            self._memo[id(let)] = (let, new)
        return new

    def visit_let_binding(self, e: Let) -> tuple[Var, Expr]:
        """One let of a chain: its rewritten variable and value."""
        return self.visit(e.var), self.visit(e.value)

    def rebuild_let(self, e: Let, var: Var, value: Expr, body: Expr) -> Expr:
        """The rewrite of let ``e`` from its rewritten parts (override to drop or
        replace lets; ``e`` itself when nothing changed)."""
        if var is e.var and value is e.value and body is e.body:
            return e
        return Let(var, value, body, e.span)

    def visit_function(self, e: Function) -> Expr:
        params = tuple(self.visit(p) for p in e.params)
        ret_type = None if e.ret_type is None else self.visit_type(e.ret_type)
        body = self.visit(e.body)
        if _same(params, e.params) and ret_type is e.ret_type and body is e.body:
            return e
        return Function(params, body, ret_type, e.type_params, e.attrs, e.span)

    def visit_if(self, e: If) -> Expr:
        parts = (self.visit(e.cond), self.visit(e.true_branch), self.visit(e.false_branch))
        if _same(parts, (e.cond, e.true_branch, e.false_branch)):
            return e
        return If(*parts, span=e.span)

    def visit_match(self, e: Match) -> Expr:
        data = self.visit(e.data)
        clauses = tuple(self.visit_clause(c) for c in e.clauses)
        if data is e.data and _same(clauses, e.clauses):
            return e
        return Match(data, clauses, e.complete, e.span)

    def visit_clause(self, c: Clause) -> Clause:
        lhs, rhs = self.visit_pattern(c.lhs), self.visit(c.rhs)
        return c if lhs is c.lhs and rhs is c.rhs else Clause(lhs, rhs)

    def visit_ref_create(self, e: RefCreate) -> Expr:
        value = self.visit(e.value)
        return e if value is e.value else RefCreate(value, e.span)

    def visit_ref_read(self, e: RefRead) -> Expr:
        ref = self.visit(e.ref)
        return e if ref is e.ref else RefRead(ref, e.span)

    def visit_ref_write(self, e: RefWrite) -> Expr:
        ref, value = self.visit(e.ref), self.visit(e.value)
        return e if ref is e.ref and value is e.value else RefWrite(ref, value, e.span)


def _same(xs: tuple, ys: tuple) -> bool:
    return all(x is y for x, y in zip(xs, ys, strict=True))
