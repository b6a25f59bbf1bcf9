"""The loop IR's traversal: ``StmtVisitor`` and ``StmtMutator`` know every statement kind,
walk in program order, and a mutator's result is a new tree."""

from __future__ import annotations

import pytest

from schedule import loop_ir
from schedule.expr import Compare, Const, Expr, Var
from schedule.loop_ir import (
    Allocate,
    Buffer,
    For,
    IfThenElse,
    Seq,
    Stmt,
    StmtMutator,
    StmtVisitor,
    Store,
    VStore,
    stmt_str,
    walk_stmts,
)


def _kinds() -> list[type[Stmt]]:
    return [c for c in vars(loop_ir).values()
            if isinstance(c, type) and issubclass(c, Stmt) and c is not Stmt]


def _program() -> Stmt:
    """allocate t; for i: t[i] = 1; if i < 3: out[i] = t[i] else: out[i] = 0"""
    i = Var("i")
    tmp, out = Buffer("t", (4,), "float32", "local"), Buffer("out", (4,), "float32")
    guard = IfThenElse(Compare("<", i, Const(3, "int32"), "bool"),
                       Store(out, (i,), tmp.load([i])), Store(out, (i,), Const(0.0, "float32")))
    return Allocate(tmp, For(i, 4, For.SERIAL, Seq([Store(tmp, (i,), Const(1.0, "float32")),
                                                    guard])))


@pytest.mark.parametrize("kind", _kinds(), ids=lambda k: k.__name__)
def test_every_statement_kind_has_a_visitor_and_a_mutator_method(kind: type[Stmt]) -> None:
    assert callable(getattr(StmtVisitor, kind.visit_method))
    assert callable(getattr(StmtMutator, kind.visit_method))


def test_walk_stmts_is_in_program_order() -> None:
    names = [type(s).__name__ for s in walk_stmts(_program())]
    assert names == ["Allocate", "For", "Seq", "Store", "IfThenElse", "Store", "Store"]


def test_a_visitor_sees_each_expression_before_the_statements_under_it() -> None:
    seen: list[str] = []

    class Trace(StmtVisitor):
        def visit_expr(self, e: Expr) -> None:
            seen.append(type(e).__name__)

    Trace().visit(_program())
    # extent; store index, value; condition; then index, value; else index, value
    assert seen == ["Const", "Var", "Const", "Compare", "Var", "Load", "Var", "Const"]


def test_the_identity_mutator_rebuilds_the_tree_but_keeps_unchanged_stores() -> None:
    program = _program()
    copy = StmtMutator().visit(program)
    assert stmt_str(copy) == stmt_str(program)
    old, new = list(walk_stmts(program)), list(walk_stmts(copy))
    for a, b in zip(old, new, strict=True):
        assert type(a) is type(b)
        assert (a is b) == isinstance(a, Store)


def test_a_mutator_maps_every_expression() -> None:
    class Double(StmtMutator):
        def visit_expr(self, e: Expr) -> Expr:
            return Const(2.0, "float32") if isinstance(e, Const) and e.dtype == "float32" else e

    text = stmt_str(Double().visit(_program()))
    assert "1.0" not in text and "0.0" not in text and text.count("2.0") == 2


def test_a_vector_store_is_rebuilt_only_when_an_expression_changes() -> None:
    buf = Buffer("b", (16,), "float32")
    store = VStore(buf, Const(0, "int32"), Const(1.0, "float32"), 8)
    assert StmtMutator().visit(store) is store

    class Shift(StmtMutator):
        def visit_expr(self, e: Expr) -> Expr:
            return Const(8, "int32") if e.dtype == "int32" else e

    moved = Shift().visit(store)
    assert isinstance(moved, VStore) and moved.base.value == 8 and moved.lanes == 8
