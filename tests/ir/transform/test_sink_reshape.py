"""SinkReshape: element-wise operators after the reshape an ONNX MatMul import leaves move
before it (so the product's kernel absorbs bias and activation), reshapes of reshapes
collapse, and what would change the meaning stays; every run is checked in the
interpreter against the original (the helpers' meaning check)."""

from __future__ import annotations

import numpy as np

import ir
from ir.op import add, divide, erf, multiply, nn, reshape
from ir.transform.sink_reshape import SinkReshape

from .helpers import op_counts, rand, run


def _onnx_like_ffn(x: ir.Expr) -> ir.Expr:
    """(1, 8, 16) @ (16, 32) + bias, GELU, flattened again for the next product, as the
    ONNX importer writes a 3-d MatMul."""
    flat = reshape(x, newshape=[8, 16])
    y = reshape(nn.matmul(flat, rand(16, 32, seed=1)), newshape=[1, 8, 32])
    y = add(y, rand(32, seed=2))
    gelu = multiply(multiply(y, add(erf(divide(y, ir.const(np.float32(1.4142135)))),
                                    ir.const(np.float32(1.0)))), ir.const(np.float32(0.5)))
    return nn.matmul(reshape(gelu, newshape=[8, 32]), rand(32, 16, seed=3))


def test_the_bias_and_gelu_move_before_the_reshape_and_the_flattening_disappears():
    x = ir.var("x", shape=(1, 8, 16))
    out = run(SinkReshape(), ir.Function([x], _onnx_like_ffn(x)))
    # only the input's flattening is left: the activation's reshapes cancel out
    assert op_counts(out)["reshape"] == 1
    assert out["main"].ret_type.shape == (8, 16)


def test_the_product_then_fuses_with_its_bias_and_activation():
    x = ir.var("x", shape=(1, 8, 16))
    module = ir.infer_type(ir.Module({"main": ir.Function([x], _onnx_like_ffn(x))}))
    tasks = ir.extract_tasks(module)
    assert any(t.ops[0].startswith("nn.") and "erf" in t.ops and "add" in t.ops
               and ("nn.matmul" in t.ops or "nn.dense_packed" in t.ops) for t in tasks), \
        [t.ops for t in tasks]
    data = np.random.default_rng(0).standard_normal((1, 8, 16)).astype("float32")
    np.testing.assert_allclose(ir.build(module)(data), ir.evaluate(module, data),
                               rtol=1e-4, atol=1e-5)


def test_what_stays_behind_the_reshape():
    x = ir.var("x", shape=(8, 16))
    r = ir.var("r", shape=(1, 8, 16))
    y = reshape(x, newshape=[1, 8, 16])
    cases = [
        add(y, r),                                        # a full operand, not a view
        add(reshape(x, newshape=[2, 64]), rand(64)),      # the last axis changes
        add(y, rand(8, 1, seed=4)),                       # broadcast along another axis
        nn.relu(reshape(x, newshape=[1, 8, 16], allowzero=True)),
    ]
    out = run(SinkReshape(), ir.Function([x, r], ir.Tuple(cases)))
    for call in out["main"].body.fields[:3]:
        assert call.op.name == "add"
    assert out["main"].body.fields[3].op.name == "nn.relu"


def test_views_of_one_shape_combine():
    x = ir.var("x", shape=(4, 6))
    a = reshape(x, newshape=[2, 2, 6])
    b = reshape(nn.relu(x), newshape=[2, 2, 6])
    out = run(SinkReshape(), ir.Function([x], multiply(a, b)))
    body = out["main"].body
    assert body.op.name == "reshape" and body.args[0].op.name == "multiply"
    assert op_counts(out)["reshape"] == 1
