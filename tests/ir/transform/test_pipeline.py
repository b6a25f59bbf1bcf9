"""A mixed optimisation pipeline on a conv-bn-relu-conv-bn-add network, meaning checked
after every pass: batch norms end as biases of their convolutions, a duplicated branch is
computed once, a dead binding disappears."""

from __future__ import annotations

import numpy as np

import ir
from ir.op import add, multiply, nn
from ir.transform import (
    DeadCodeElimination,
    EliminateCommonSubexpr,
    FoldConstant,
    FoldScaleAxis,
    InferType,
    PassContext,
    Sequential,
    SimplifyInference,
    ToGraphNormalForm,
)

from .helpers import op_counts, run

PIPELINE = [InferType(), SimplifyInference(), FoldConstant(), FoldScaleAxis(),
            FoldConstant(), EliminateCommonSubexpr(), DeadCodeElimination()]


def _consts(seed: int):
    rng = np.random.default_rng(seed)
    w1 = ir.const(rng.uniform(-1, 1, (4, 4, 3, 3)).astype("float32"))
    w2 = ir.const(rng.uniform(-1, 1, (4, 4, 3, 3)).astype("float32"))
    stats = [ir.const(rng.uniform(0.5, 1.5, 4).astype("float32")) for _ in range(8)]
    return w1, w2, stats


def _block(x: ir.Expr) -> ir.Expr:
    w1, w2, s = _consts(0)                                  # equal values on every call
    y = nn.relu(ir.TupleGetItem(nn.batch_norm(nn.conv2d(x, w1, padding=1), *s[:4]), 0))
    z = ir.TupleGetItem(nn.batch_norm(nn.conv2d(y, w2, padding=1), *s[4:]), 0)
    return add(z, x)


def _network() -> ir.Function:
    x = ir.var("x", shape=(1, 4, 6, 6))
    dead = ir.Var("dead")
    # the block is built twice from equal constants: one of them is redundant
    return ir.Function([x], ir.Let(dead, multiply(x, x), add(_block(x), _block(x))))


def test_pipeline_on_graph_form():
    f = _network()
    with PassContext(opt_level=4, check_meaning=True) as ctx:
        out = Sequential(PIPELINE)(ir.Module({"main": f}))
    assert ctx.trace == [p.name for p in PIPELINE]
    ir.infer_type(out)
    assert op_counts(out) == {"nn.conv2d": 2, "nn.bias_add": 2, "nn.relu": 1, "add": 2}
    x = np.random.default_rng(1).uniform(-1, 1, (1, 4, 6, 6)).astype("float32")
    np.testing.assert_allclose(ir.evaluate(out, x), ir.evaluate(ir.Module({"main": f}), x),
                               rtol=1e-4, atol=1e-4)


def test_pipeline_on_a_normal_form_after_graph_conversion():
    anf = ir.to_a_normal_form(_network())
    out = run([ToGraphNormalForm(), *PIPELINE], anf)
    assert op_counts(out) == {"nn.conv2d": 2, "nn.bias_add": 2, "nn.relu": 1, "add": 2}


def test_low_opt_level_runs_only_the_cheap_passes():
    with PassContext(opt_level=1, check_meaning=True) as ctx:
        Sequential(PIPELINE)(ir.Module({"main": _network()}))
    assert ctx.trace == ["InferType", "SimplifyInference", "DeadCodeElimination"]
