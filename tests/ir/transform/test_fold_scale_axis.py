"""FoldScaleAxis: per-channel scales after conv2d / dense go into the weights, per-channel
shifts become or join a bias, scales before them go into the weights too; conv ->
batch_norm ends as conv2d + bias_add. Shared layers, scales varying along other axes and
non-constant scales are left alone."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.op import add, divide, multiply, nn, subtract
from ir.transform import FoldConstant, FoldScaleAxis, InferType, SimplifyInference

from .helpers import assert_main, op_counts, rand, run

BN_PIPELINE = [InferType(), SimplifyInference(), FoldConstant(), FoldScaleAxis(),
               FoldConstant()]


def _bn_consts(c: int, seed: int):
    rng = np.random.default_rng(seed)
    gamma = ir.const(rng.uniform(0.5, 1.5, c).astype("float32"))
    beta = ir.const(rng.uniform(-1, 1, c).astype("float32"))
    mean = ir.const(rng.uniform(-1, 1, c).astype("float32"))
    var = ir.const(rng.uniform(0.5, 2, c).astype("float32"))
    return gamma, beta, mean, var


def test_scale_after_conv_goes_into_the_constant_kernel():
    x = ir.var("x", shape=(1, 3, 6, 6))
    w = rand(4, 3, 3, 3)
    s = rand(4, 1, 1, seed=1)
    f = ir.Function([x], multiply(nn.conv2d(x, w, padding=1), s))
    out = run(FoldScaleAxis(), f)
    w2 = ir.const(w.data * s.data.reshape(4, 1, 1, 1))
    assert_main(out, ir.Function([x], nn.conv2d(x, w2, padding=1)))


@pytest.mark.parametrize("layout", [("NCHW", "OIHW"), ("NHWC", "HWIO")])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_batch_norm_becomes_conv_and_bias(layout, with_bias):
    data_layout, kernel_layout = layout
    nchw = data_layout == "NCHW"
    x = ir.var("x", shape=(1, 3, 8, 8) if nchw else (1, 8, 8, 3))
    w = rand(*((8, 3, 3, 3) if nchw else (3, 3, 3, 8)))
    y = nn.conv2d(x, w, padding=1, data_layout=data_layout, kernel_layout=kernel_layout)
    axis = 1 if nchw else 3
    if with_bias:
        y = nn.bias_add(y, rand(8, seed=3), axis=axis)
    y = ir.TupleGetItem(nn.batch_norm(y, *_bn_consts(8, seed=2), axis=axis), 0)
    out = run(BN_PIPELINE, ir.Function([x], nn.relu(y)))
    assert op_counts(out) == {"nn.conv2d": 1, "nn.bias_add": 1, "nn.relu": 1}
    conv = out["main"].body.args[0].args[0]
    assert isinstance(conv.args[1], ir.Constant)


def test_dense_scale_and_shift():
    x = ir.var("x", shape=(2, 5))
    w = rand(4, 5)
    f = ir.Function([x], add(divide(nn.dense(x, w), rand(4, seed=1, low=1, high=2)),
                             rand(1, 4, seed=2)))
    out = run(FoldScaleAxis(), f)
    assert op_counts(out) == {"nn.dense": 1, "nn.bias_add": 1}


def test_shift_joins_an_existing_bias_and_subtract():
    x = ir.var("x", shape=(1, 2, 4, 4))
    conv = nn.conv2d(x, rand(3, 2, 1, 1))
    b, c = rand(3, seed=1), rand(3, 1, 1, seed=2)
    out = run(FoldScaleAxis(), ir.Function([x], subtract(nn.bias_add(conv, b), c)))
    expected = nn.bias_add(conv, ir.const(b.data - c.data.reshape(3)))
    assert_main(out, ir.Function([x], expected))


def test_variable_kernel_gets_a_multiply():
    x, w = ir.var("x", shape=(1, 2, 4, 4)), ir.var("w", shape=(3, 2, 3, 3))
    s = rand(1, 3, 1, 1, seed=1)
    out = run(FoldScaleAxis(), ir.Function([x, w], multiply(s, nn.conv2d(x, w))))
    expected = nn.conv2d(x, multiply(w, ir.const(s.data.reshape(3, 1, 1, 1))))
    assert_main(out, ir.Function([x, w], expected))


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_forward_scale_before_conv(groups):
    x = ir.var("x", shape=(1, 4, 5, 5))
    s = rand(4, 1, 1, seed=1)
    conv = nn.conv2d(multiply(x, s), rand(8, 4 // groups, 3, 3), padding=1, groups=groups)
    out = run([FoldScaleAxis(), FoldConstant()], ir.Function([x], conv))
    assert op_counts(out) == {"nn.conv2d": 1}


def test_forward_through_relu_needs_positive_scales():
    x = ir.var("x", shape=(2, 3))
    w = rand(4, 3)
    pos, neg = rand(3, seed=1, low=0.5, high=2), rand(3, seed=1)
    folded = run(FoldScaleAxis(), ir.Function([x], nn.dense(nn.relu(multiply(x, pos)), w)))
    assert_main(folded, ir.Function([x], nn.dense(nn.relu(x),
                                                  ir.const(w.data * pos.data[None, :]))))
    kept = ir.Function([x], nn.dense(nn.relu(multiply(x, neg)), w))
    assert op_counts(run(FoldScaleAxis(), kept))["multiply"] == 1


def test_left_alone():
    x = ir.var("x", shape=(1, 2, 4, 4))
    s = ir.var("s", shape=(3, 1, 1))
    conv = nn.conv2d(x, rand(3, 2, 1, 1))
    cases = [
        multiply(conv, rand(1, 1, 4, seed=1)),             # varies along W, not channels
        multiply(conv, s),                                 # not a constant
        ir.Tuple([multiply(conv, rand(3, 1, 1)), conv]),   # the conv has another user
        multiply(nn.relu(conv), rand(3, 1, 1)),            # not right after the layer
        multiply(conv, rand(2, 3, 1, 1)),                  # grows the result
    ]
    for body in cases:
        params = [x, s] if "s" in {v.name_hint for v in ir.free_vars(body)} else [x]
        f = ir.Function(params, body)
        assert run(FoldScaleAxis(), f)["main"] is f


def test_layer_with_its_own_out_dtype_is_left_alone():
    x = ir.var("x", shape=(2, 3))
    f = ir.Function([x], multiply(nn.dense(x, rand(4, 3), out_dtype="float32"), rand(4)))
    assert op_counts(run(FoldScaleAxis(), f)) == op_counts(f)
