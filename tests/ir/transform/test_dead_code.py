"""DeadCodeElimination: unused pure let bindings go (chains of them at once, inside
nested functions and branches too); effectful or possibly effectful ones stay; globals
stay; inline_once substitutes single uses."""

from __future__ import annotations

import numpy as np

import ir
from ir.op import add, multiply, nn
from ir.transform import DeadCodeElimination

from .helpers import run


def _lets(pairs, body):
    for var, value in reversed(pairs):
        body = ir.Let(var, value, body)
    return body


def test_drops_unused_lets_and_chains_of_them():
    x = ir.var("x", shape=(3,))
    a, b, c, d = (ir.Var(n) for n in "abcd")
    f = ir.Function([x], _lets([(a, add(x, x)), (b, multiply(a, a)), (c, nn.relu(b)),
                                (d, add(x, ir.const(np.ones(3, "float32"))))], d))
    out = run(DeadCodeElimination(), f)
    expected = ir.Function([x], ir.Let(d, add(x, ir.const(np.ones(3, "float32"))), d))
    ir.assert_structural_equal(out["main"], expected)


def test_inside_functions_and_branches():
    x = ir.var("x", shape=())
    a, b, g = ir.Var("a"), ir.Var("b"), ir.Var("g")
    y = ir.var("y", shape=())
    inner = ir.Function([y], ir.Let(a, add(y, y), y))            # %a unused inside
    cond = ir.op.greater(x, ir.const(0.0))
    body = ir.Let(g, inner, ir.If(cond, ir.Let(b, multiply(x, x), ir.Call(g, [x])), x))
    out = run(DeadCodeElimination(), ir.Function([x], body))
    expected = ir.Let(g, ir.Function([y], y), ir.If(cond, ir.Call(g, [x]), x))
    ir.assert_structural_equal(out["main"].body, expected)


def test_effects_and_calls_stay():
    x = ir.var("x", shape=(2,))
    r, w, k, u, g = (ir.Var(n) for n in "rwkug")
    p = ir.var("p", shape=(2,))
    f = ir.Function([x], _lets([
        (r, ir.RefCreate(x)),                                  # unused, but a reference
        (w, ir.RefWrite(r, add(x, x))),                        # an effect
        (g, ir.Function([p], p)),
        (k, ir.Call(g, [x])),                                  # a call: may have an effect
        (u, ir.Call(ir.GlobalVar("other"), [x])),
    ], ir.RefRead(r)))
    other = ir.Function([p], p)
    mod = ir.Module({"main": f, "other": other, "unused_global": ir.Function([p], p)})
    out = run(DeadCodeElimination(), mod)
    assert out == mod and set(out.functions) == set(mod.functions)


def test_pure_calls_of_literal_functions_and_closures_go():
    x = ir.var("x", shape=(2,))
    p = ir.var("p", shape=(2,))
    a, c = ir.Var("a"), ir.Var("c")
    f = ir.Function([x], _lets([(a, ir.Call(ir.Function([p], add(p, p)), [x])),
                                (c, ir.Function([p], ir.RefCreate(p)))], x))
    out = run(DeadCodeElimination(), f)
    ir.assert_structural_equal(out["main"], ir.Function([x], x))


def test_recursive_function_unused_goes_used_stays():
    n = ir.var("n", shape=(), dtype="int32")
    i = ir.var("i", shape=(), dtype="int32")
    loop = ir.Var("loop")
    body = ir.If(ir.op.less(i, ir.const(1)), i,
                 ir.Call(loop, [ir.op.subtract(i, ir.const(1))]))
    fn = ir.Function([i], body)
    unused = ir.Function([n], ir.Let(loop, fn, n))
    used = ir.Function([n], ir.Let(loop, fn, ir.Call(loop, [n])))
    assert run(DeadCodeElimination(), unused)["main"].body is n
    out = run(DeadCodeElimination(), used)
    ir.assert_structural_equal(out["main"], used)


def test_inline_once():
    x = ir.var("x", shape=(3,))
    a, b = ir.Var("a"), ir.Var("b")
    f = ir.Function([x], _lets([(a, add(x, x)), (b, multiply(a, a))], nn.relu(b)))
    out = run(DeadCodeElimination(inline_once=True), f)
    a2 = ir.Var("a")
    expected = ir.Function([x], ir.Let(a2, add(x, x), nn.relu(multiply(a2, a2))))
    ir.assert_structural_equal(out["main"], expected)
    # without the option nothing changes
    assert run(DeadCodeElimination(), f)["main"] is f


def test_long_chain_does_not_recurse():
    x = ir.var("x", shape=(2,))
    vars_ = [ir.Var(f"v{i}") for i in range(3000)]
    pairs, prev = [], x
    for v in vars_:
        pairs.append((v, add(prev, x)))
        prev = v
    f = ir.Function([x], _lets(pairs, x))                       # the whole chain is dead
    with ir.transform.PassContext(opt_level=4, check_meaning=True):
        out = DeadCodeElimination()(ir.Module({"main": f}))
    ir.assert_structural_equal(out["main"], ir.Function([x], x))
