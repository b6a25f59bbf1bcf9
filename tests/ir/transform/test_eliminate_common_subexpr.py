"""EliminateCommonSubexpr: equal operator calls (same operator, attributes and arguments)
are computed once, in graph form and in A-normal form; different attributes, calls of
functions, dropout and sibling branches are not merged."""

from __future__ import annotations

import numpy as np

import ir
from ir.op import add, multiply, nn, split
from ir.transform import EliminateCommonSubexpr

from .helpers import op_counts, run


def test_graph_form_merges_equal_calls_transitively():
    x, y = ir.var("x", shape=(2, 3)), ir.var("y", shape=(2, 3))
    c1, c2 = ir.const(np.ones(3, "float32")), ir.const(np.ones(3, "float32"))
    a1, a2 = add(x, c1), add(x, c2)                       # equal constants, distinct nodes
    b1, b2 = nn.relu(a1), nn.relu(a2)
    out = run(EliminateCommonSubexpr(), ir.Function([x, y], multiply(b1, b2)))
    shared = nn.relu(add(x, c1))
    ir.assert_structural_equal(out["main"], ir.Function([x, y], multiply(shared, shared)))
    assert op_counts(out) == {"add": 1, "nn.relu": 1, "multiply": 1}


def test_attributes_and_arguments_must_match():
    x = ir.var("x", shape=(4, 4))
    f = ir.Function([x], ir.Tuple([ir.op.sum(x, axis=0), ir.op.sum(x, axis=1),
                                   ir.op.sum(x, axis=(0,)), ir.op.sum(nn.relu(x), axis=0)]))
    out = run(EliminateCommonSubexpr(), f)
    assert op_counts(out)["sum"] == 3


def test_split_projections_merge():
    x = ir.var("x", shape=(4,))
    f = ir.Function([x], add(ir.TupleGetItem(split(x, 2), 0), ir.TupleGetItem(split(x, 2), 0)))
    out = run(EliminateCommonSubexpr(), f)
    s = split(x, 2)
    ir.assert_structural_equal(out["main"],
                               ir.Function([x], add(ir.TupleGetItem(s, 0),
                                                    ir.TupleGetItem(s, 0))))
    assert op_counts(out) == {"split": 1, "add": 1}


def test_a_normal_form_aliases_the_later_let():
    x = ir.var("x", shape=(3,))
    a, b, c = ir.Var("a"), ir.Var("b"), ir.Var("c")
    f = ir.Function([x], ir.Let(a, add(x, x), ir.Let(b, add(x, x),
                                                       ir.Let(c, multiply(b, add(x, x)), c))))
    out = run(EliminateCommonSubexpr(), f)
    expected = ir.Function([x], ir.Let(a, add(x, x), ir.Let(c, multiply(a, a), c)))
    ir.assert_structural_equal(out["main"], expected)


def test_scopes_calls_of_functions_and_dropout_are_not_merged():
    x = ir.var("x", shape=())
    g = ir.GlobalVar("g")
    p = ir.var("p", shape=())
    cond = ir.op.greater(x, ir.const(0.0))
    a, b = ir.Var("a"), ir.Var("b")
    branches = ir.If(cond, ir.Let(a, add(x, x), a), ir.Let(b, add(x, x), b))
    calls = add(ir.Call(g, [x]), ir.Call(g, [x]))
    drops = add(ir.TupleGetItem(nn.dropout(x), 0), ir.TupleGetItem(nn.dropout(x), 0))
    f = ir.Function([x], ir.Tuple([branches, calls, drops]))
    mod = ir.Module({"main": f, "g": ir.Function([p], multiply(p, p))})
    out = run(EliminateCommonSubexpr(), mod)
    assert out == mod


def test_outer_call_reused_inside_a_branch_and_a_function():
    x = ir.var("x", shape=())
    p = ir.var("p", shape=())
    outer = multiply(x, x)
    cond = ir.op.greater(x, ir.const(0.0))
    fn = ir.Function([p], add(p, multiply(x, x)))
    body = ir.Tuple([outer, ir.If(cond, multiply(x, x), x), ir.Call(fn, [x])])
    out = run(EliminateCommonSubexpr(), ir.Function([x], body))
    assert op_counts(out)["multiply"] == 1


def test_node_shared_by_sibling_branches_keeps_its_scope():
    x = ir.var("x", shape=())
    a = ir.Var("a")
    shared = multiply(add(x, x), ir.const(2.0))            # one node in both branches
    cond = ir.op.greater(x, ir.const(0.0))
    then = ir.Let(a, add(x, x), add(a, shared))             # here add(x, x) becomes %a
    f = ir.Function([x], ir.If(cond, then, shared))
    out = run(EliminateCommonSubexpr(), f)
    expected_then = ir.Let(a, add(x, x), add(a, multiply(a, ir.const(2.0))))
    ir.assert_structural_equal(out["main"].body.true_branch, expected_then)
    ir.assert_structural_equal(out["main"].body.false_branch, shared)
    ir.infer_type(out)                                      # %a is not used out of scope


def test_a_shared_function_call_bound_twice_is_not_aliased():
    x = ir.var("x", shape=(2,))
    p = ir.var("p", shape=(2,))
    g = ir.GlobalVar("g")
    r, a, b = ir.Var("r"), ir.Var("a"), ir.Var("b")
    call = ir.Call(g, [x])                                   # one node, bound twice
    counter = ir.Let(r, ir.RefCreate(p), ir.RefRead(r))
    main = ir.Function([x], ir.Let(a, call, ir.Let(b, call, add(a, b))))
    mod = ir.Module({"main": main, "g": ir.Function([p], counter)})
    assert run(EliminateCommonSubexpr(), mod) == mod
