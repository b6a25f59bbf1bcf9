"""FoldConstant: operator calls on constants (also through tuples, projections and lets
bound to constants) become constants; big results from small inputs, calls of functions,
references and Primitive functions are left alone."""

from __future__ import annotations

import numpy as np

import ir
from ir.op import add, multiply, nn, ones, reshape, split, zeros
from ir.transform import FoldConstant

from .helpers import op_counts, run


def test_folds_a_constant_chain_and_keeps_the_rest():
    x = ir.var("x", shape=(2, 3))
    c1, c2 = ir.const(np.ones((2, 3), "float32")), ir.const(np.full((2, 3), 2, "float32"))
    body = add(x, multiply(add(c1, c2), c2))
    out = run(FoldConstant(), ir.Function([x], body))
    expected = ir.Function([x], add(x, ir.const(np.full((2, 3), 6, "float32"))))
    ir.assert_structural_equal(out["main"], expected)


def test_tuples_projections_and_let_bound_constants():
    x = ir.var("x", shape=(4,))
    c = ir.const(np.arange(4, dtype="float32"))
    t, v = ir.Var("t"), ir.Var("v")
    parts = split(c, indices_or_sections=2)                     # a tuple of constants
    body = ir.Let(t, ir.Tuple([c, x]),
                  ir.Let(v, ir.TupleGetItem(parts, 1),
                         add(x, ir.op.concatenate(ir.Tuple([v, v]), axis=0))))
    out = run(FoldConstant(), ir.Function([x], body))
    # the let of a tuple with a variable stays; the projected split half is inlined and
    # the concatenate of constants is folded
    assert op_counts(out) == {"add": 1}
    text = ir.astext(out)
    assert "split" not in text and "concatenate" not in text and "let %t" in text


def test_projection_of_a_literal_tuple():
    x, y = ir.var("x", shape=(3,)), ir.var("y", shape=(3,))
    f = ir.Function([x, y], ir.TupleGetItem(ir.Tuple([x, nn.relu(y)]), 0))
    out = run(FoldConstant(), f)
    ir.assert_structural_equal(out["main"], ir.Function([x, y], x))


def test_big_results_from_small_inputs_are_not_folded():
    x = ir.var("x", shape=(64, 64))
    big = add(x, zeros(shape=(64, 64)))                           # no inputs: never folded
    bcast = ir.op.broadcast_to(ir.const(np.float32(1)), shape=(64, 64))
    small = reshape(ones(shape=(2, 2)), newshape=(4,))
    f = ir.Function([x], ir.Tuple([big, add(x, bcast), small]))
    out = run(FoldConstant(), f)
    counts = op_counts(out)
    assert counts["zeros"] == 1 and counts["broadcast_to"] == 1 and counts["ones"] == 1
    # a cap from the context config lets the broadcast fold
    with ir.transform.PassContext(opt_level=4, check_meaning=True,
                                  config={"FoldConstant.small_result": 5000}):
        out = FoldConstant()(ir.Module({"main": f}))
    assert op_counts(out)["broadcast_to"] == 0


def test_calls_of_functions_references_and_primitives_stay():
    x = ir.var("x", shape=(2,))
    c = ir.const(np.ones(2, "float32"))
    p = ir.var("p", shape=(2,))
    double = ir.Function([p], add(p, p))
    prim = ir.Function([p], add(p, add(c, c))).with_attr("Primitive", 1)
    r = ir.Var("r")
    body = ir.Let(r, ir.RefCreate(c),
                  add(add(ir.Call(double, [c]), ir.RefRead(r)), ir.Call(prim, [x])))
    f = ir.Function([x], body)
    out = run(FoldConstant(), f)
    ir.assert_structural_equal(out["main"], f)


def test_dropout_and_nothing_to_fold_keep_the_function():
    x = ir.var("x", shape=(2,))
    f = ir.Function([x], ir.TupleGetItem(nn.dropout(ir.const(np.ones(2, "float32"))), 0))
    out = run(FoldConstant(), f)
    assert out["main"] is f
