"""SimplifyInference: dropout(x).0 is x; batch_norm(...).0 is a scale and a shift along
its axis (center/scale honoured, any axis, through a let too); layer_norm and the other
outputs stay."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.op import add, divide, expand_dims, multiply, nn, sqrt, subtract
from ir.transform import SimplifyInference

from .helpers import assert_main, op_counts, run


def test_dropout_becomes_its_input():
    x = ir.var("x", shape=(2, 3))
    f = ir.Function([x], nn.relu(ir.TupleGetItem(nn.dropout(x, rate=0.3), 0)))
    out = run(SimplifyInference(), f)
    assert_main(out, ir.Function([x], nn.relu(x)))


def _bn_params(c: int):
    return [ir.var(n, shape=(c,)) for n in ("gamma", "beta", "mean", "moving_var")]


def test_batch_norm_exact_form():
    x = ir.var("x", shape=(1, 4, 3, 3))
    gamma, beta, mean, var = params = _bn_params(4)
    f = ir.Function([x, *params], ir.TupleGetItem(nn.batch_norm(x, *params), 0))
    out = run(SimplifyInference(), f)
    eps = ir.const(np.float32(1e-5))
    scale = divide(gamma, sqrt(add(var, eps)))
    shift = subtract(beta, multiply(mean, scale))
    body = add(multiply(x, expand_dims(scale, axis=1, num_newaxis=2)),
               expand_dims(shift, axis=1, num_newaxis=2))
    assert_main(out, ir.Function([x, *params], body))


@pytest.mark.parametrize("axis,center,scale", [(1, True, True), (-1, False, True),
                                                (2, True, False), (0, False, False)])
def test_batch_norm_axes_and_flags(axis, center, scale):
    shape = (2, 3, 4)
    c = shape[axis]
    x = ir.var("x", shape=shape)
    params = _bn_params(c)
    bn = nn.batch_norm(x, *params, axis=axis, center=center, scale=scale, epsilon=1e-3)
    out = run(SimplifyInference(), ir.Function([x, *params], ir.TupleGetItem(bn, 0)))
    assert "nn.batch_norm" not in op_counts(out)


def test_through_a_let_and_other_outputs_stay():
    x = ir.var("x", shape=(1, 2, 2, 2))
    params = _bn_params(2)
    t = ir.Var("t")
    body = ir.Let(t, nn.batch_norm(x, *params),
                  ir.Tuple([ir.TupleGetItem(t, 0), ir.TupleGetItem(t, 1)]))
    out = run(SimplifyInference(), ir.Function([x, *params], body))
    counts = op_counts(out)
    assert counts["nn.batch_norm"] == 1 and counts["multiply"] == 2   # the let stays


def test_layer_norm_stays():
    x = ir.var("x", shape=(2, 4))
    g, b = ir.var("g", shape=(4,)), ir.var("b", shape=(4,))
    f = ir.Function([x, g, b], nn.layer_norm(x, g, b))
    assert run(SimplifyInference(), f)["main"] is f
