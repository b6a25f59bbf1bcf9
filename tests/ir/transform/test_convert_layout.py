"""ConvertLayout: conv2d runs in the desired layout and the layout-aware operators after it
follow, with transposes only at the edges of the converted region (a ResNet-like network
gets exactly two); constants are converted at once; operators that need the original
layout get it back."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.op import add, multiply, nn, reshape
from ir.transform import ConvertLayout, FoldConstant, SimplifyInference

from .helpers import calls_of, op_counts, rand, run

NHWC = ConvertLayout({"nn.conv2d": ("NHWC", "HWIO")})




def _bn(y, c, seed):
    rng = np.random.default_rng(seed)
    stats = [ir.const(rng.uniform(0.5, 1.5, c).astype("float32")) for _ in range(4)]
    return ir.TupleGetItem(nn.batch_norm(y, *stats), 0)


def _resnet_like(batch_norm_op: bool = True) -> ir.Function:
    x = ir.var("x", shape=(1, 3, 16, 16))
    y = nn.conv2d(x, rand(8, 3, 3, 3, seed=1), padding=1)
    y = nn.relu(nn.bias_add(y, rand(8, seed=2)))
    y = nn.max_pool2d(y, pool_size=2, strides=2)
    # a basic block: conv-bn-relu-conv-bn + shortcut, relu
    z = nn.relu(_bn(nn.conv2d(y, rand(8, 8, 3, 3, seed=3), padding=1), 8, 4))
    z = _bn(nn.conv2d(z, rand(8, 8, 3, 3, seed=5), padding=1), 8, 6)
    z = nn.relu(add(z, y))
    z = nn.global_avg_pool2d(z)
    z = reshape(z, newshape=(1, -1))
    return ir.Function([x], nn.dense(z, rand(10, 8, seed=7)))


def test_resnet_like_has_one_transpose_in_and_one_out():
    out = run(NHWC, _resnet_like())
    assert op_counts(out)["transpose"] == 2
    for conv in calls_of(out, "nn.conv2d"):
        assert (conv.attrs.data_layout, conv.attrs.kernel_layout) == ("NHWC", "HWIO")
        assert isinstance(conv.args[1], ir.Constant)
    assert calls_of(out, "nn.max_pool2d")[0].attrs.layout == "NHWC"
    assert calls_of(out, "nn.global_avg_pool2d")[0].attrs.layout == "NHWC"
    assert {bn.attrs.axis for bn in calls_of(out, "nn.batch_norm")} == {3}
    assert calls_of(out, "nn.bias_add")[0].attrs.axis == 3
    # the input is transposed on its way in, and the pooled result on its way out
    transposes = calls_of(out, "transpose")
    assert {t.attrs.axes for t in transposes} == {(0, 2, 3, 1), (0, 3, 1, 2)}
    assert any(t.args[0] is out["main"].params[0] for t in transposes)


def test_after_simplify_inference_per_channel_constants_follow():
    out = run([SimplifyInference(), FoldConstant(), NHWC], _resnet_like())
    assert op_counts(out)["transpose"] == 2
    for m in calls_of(out, "multiply"):
        assert m.args[1].shape == (1, 1, 1, 8)             # (8, 1, 1) lifted and transposed


def test_back_and_forth_and_let_form():
    x = ir.var("x", shape=(1, 4, 5, 5))
    y = nn.conv2d(x, rand(4, 4, 3, 3), padding=1)
    f = ir.Function([x], nn.softmax(ir.op.mean(nn.relu(y), axis=(2, 3)), axis=-1))
    out = run(NHWC, f)
    mean = calls_of(out, "mean")[0]
    assert mean.attrs.axis == (1, 2) and op_counts(out)["transpose"] == 1
    anf = ir.to_a_normal_form(f)
    assert op_counts(run(NHWC, anf))["transpose"] == 1


def test_nhwc_to_nchw_and_default_kernel():
    x = ir.var("x", shape=(1, 6, 6, 3))
    y = nn.conv2d(x, rand(3, 3, 3, 4), data_layout="NHWC", kernel_layout="HWIO")
    y = nn.avg_pool2d(nn.relu(y), pool_size=2, layout="NHWC")
    out = run(ConvertLayout({"nn.conv2d": ("NCHW", "default")}), ir.Function([x], y))
    conv = calls_of(out, "nn.conv2d")[0]
    assert (conv.attrs.data_layout, conv.attrs.kernel_layout) == ("NCHW", "OIHW")
    assert calls_of(out, "nn.avg_pool2d")[0].attrs.layout == "NCHW"
    assert op_counts(out)["transpose"] == 2


def test_concat_split_transpose_pad_and_variable_operands():
    x = ir.var("x", shape=(1, 2, 4, 4))
    s = ir.var("s", shape=(4, 1, 1))
    w = ir.var("w", shape=(4, 2, 1, 1))
    a = nn.conv2d(x, w)
    b = multiply(nn.conv2d(x, rand(4, 2, 1, 1, seed=1)), s)
    cat = ir.op.concatenate(ir.Tuple([a, b]), axis=1)
    halves = ir.op.split(nn.pad(cat, pad_width=((0, 0), (0, 0), (1, 1), (0, 0))), 2, axis=1)
    body = ir.op.transpose(add(ir.TupleGetItem(halves, 0), ir.TupleGetItem(halves, 1)),
                           axes=(0, 2, 3, 1))
    out = run(NHWC, ir.Function([x, s, w], body))
    assert calls_of(out, "concatenate")[0].attrs.axis == 3
    assert calls_of(out, "split")[0].attrs.axis == 3
    # x, the variable kernel and the variable scale are transposed; the final transpose
    # to NHWC cancels out against the converted layout
    assert op_counts(out)["transpose"] == 3 and op_counts(out)["expand_dims"] == 1
    assert calls_of(out, "nn.pad")[0].attrs.pad_width == ((0, 0), (1, 1), (0, 0), (0, 0))


def test_nothing_to_convert():
    x = ir.var("x", shape=(1, 4, 4, 2))
    f = ir.Function([x], nn.relu(nn.conv2d(x, rand(1, 1, 2, 3), data_layout="NHWC",
                                           kernel_layout="HWIO")))
    out = run(NHWC, f)
    assert "transpose" not in op_counts(out)
    g = ir.Function([x], nn.relu(reshape(x, newshape=(4, 8))))
    assert run(NHWC, g)["main"] is g


@pytest.mark.parametrize("bad", [{"nn.dense": ("NC",)}, {"nn.conv2d": ("NCWH2", "OIHW")},
                                 {"nn.conv2d": ("NCHW", "OIXW")}])
def test_bad_desired_layouts(bad):
    with pytest.raises(ValueError, match="ConvertLayout"):
        ConvertLayout(bad)


def test_tuple_results_share_the_transpose_back():
    x = ir.var("x", shape=(1, 2, 4, 4))
    y = nn.relu(nn.conv2d(x, rand(3, 2, 1, 1)))
    t = ir.Var("t")
    body = ir.Let(t, nn.batch_norm(y, *[rand(3, seed=i, low=0.5, high=1.5) for i in range(4)]),
                  ir.Tuple([y, reshape(y, newshape=(1, -1)), ir.TupleGetItem(t, 0),
                            ir.TupleGetItem(t, 1)]))
    out = run(NHWC, ir.Function([x], body))
    # x in; y back once (for the tuple and the reshape); the batch norm output back once
    assert op_counts(out)["transpose"] == 3
