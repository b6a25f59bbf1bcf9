"""ConvertLayout to packed channels (NCHW16c): convs become nn.conv2d_nchwc /
nn.depthwise_conv2d_nchwc, the operators after them stay packed, layout_transform appears
only at the edges (a ResNet-like network: one in, one out, plus the kernels, transformed at
once), and every run is checked in the interpreter against the original."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.op import add, clip, concatenate, multiply, nn, reshape
from ir.transform import ConvertLayout, FoldConstant, FoldScaleAxis, SimplifyInference

from .helpers import calls_of, op_counts, rand, run
from .test_convert_layout import _resnet_like

PACK16 = ConvertLayout({"nn.conv2d": ("NCHW16c", "default")})
PACK8 = ConvertLayout({"nn.conv2d": ("NCHW8c", "default")})


def test_resnet_like_is_packed_between_one_transform_in_and_one_out():
    out = run([SimplifyInference(), FoldConstant(), FoldScaleAxis(), FoldConstant(), PACK8],
              _resnet_like())
    counts = op_counts(out)
    assert counts["nn.conv2d"] == 0 and counts["nn.conv2d_nchwc"] == 3
    assert counts["layout_transform"] == 2
    first, *rest = calls_of(out, "nn.conv2d_nchwc")
    assert first.checked_type.shape == (1, 1, 16, 16, 8)
    assert first.args[0].checked_type.shape == (1, 1, 16, 16, 3)  # 3 channels: one block
    assert first.args[1].data.shape == (1, 1, 3, 3, 3, 8)         # transformed at once
    transforms = calls_of(out, "layout_transform")
    assert {(t.attrs.src_layout, t.attrs.dst_layout) for t in transforms} == {
        ("NCHW", "NCHW3c"), ("NCHW8c", "NCHW")}
    assert calls_of(out, "nn.max_pool2d")[0].attrs.layout == "NCHW8c"
    assert calls_of(out, "nn.global_avg_pool2d")[0].attrs.layout == "NCHW8c"
    assert not calls_of(out, "nn.bias_add")   # an add of the packed bias instead
    for a in calls_of(out, "add"):
        assert len(a.checked_type.shape) == 5


def test_blocks_follow_the_channel_counts():
    x = ir.var("x", shape=(1, 24, 9, 9))
    y = nn.relu(nn.conv2d(x, rand(48, 24, 3, 3, seed=1), strides=2, padding=1))
    y = nn.conv2d(y, rand(20, 48, 1, 1, seed=2))
    out = run(PACK16, ir.Function([x], y))
    first, second = calls_of(out, "nn.conv2d_nchwc")
    assert first.args[0].checked_type.shape[-1] == 8      # 24 channels: blocks of 8
    assert first.checked_type.shape[-1] == 16             # 48 channels: blocks of 16
    assert second.checked_type.shape[-1] == 4             # 20 channels: blocks of 4
    assert out["main"].ret_type.shape == (1, 20, 5, 5)


def test_depthwise_and_clip_and_residual_stay_packed():
    x = ir.var("x", shape=(1, 32, 8, 8))
    y = clip(nn.conv2d(x, rand(32, 32, 1, 1, seed=1)), a_min=0.0, a_max=6.0)
    y = nn.conv2d(y, rand(32, 1, 3, 3, seed=2), padding=1, groups=32)
    y = add(y, x)
    out = run(PACK16, ir.Function([x], multiply(y, rand(32, 1, 1, seed=3))))
    counts = op_counts(out)
    assert counts["nn.depthwise_conv2d_nchwc"] == 1 and counts["nn.conv2d_nchwc"] == 1
    dw = calls_of(out, "nn.depthwise_conv2d_nchwc")[0]
    assert dw.args[1].data.shape == (2, 1, 3, 3, 1, 16)
    # x is packed once (shared by the conv and the residual add), the result unpacked once
    assert counts["layout_transform"] == 2


def test_concatenate_on_channels_and_unsupported_users_get_nchw():
    x = ir.var("x", shape=(1, 16, 6, 6))
    a = nn.conv2d(x, rand(16, 16, 3, 3, seed=1), padding=1)
    b = nn.conv2d(x, rand(32, 16, 1, 1, seed=2))
    cat = concatenate(ir.Tuple([a, b]), axis=1)
    out = run(PACK16, ir.Function([x], ir.Tuple([cat, ir.op.sum(a, axis=(1,))])))
    assert calls_of(out, "concatenate")[0].checked_type.shape == (1, 3, 6, 6, 16)
    # the sum sees a in NCHW: one transform back for it, one for the concatenation
    assert op_counts(out)["layout_transform"] == 3


def test_grouped_and_odd_channel_convs_stay_nchw():
    x = ir.var("x", shape=(1, 8, 6, 6))
    grouped = nn.conv2d(x, rand(8, 4, 3, 3, seed=1), padding=1, groups=2)
    odd = nn.conv2d(x, rand(17, 8, 1, 1, seed=2))            # 17 channels fit no block
    out = run(PACK16, ir.Function([x], ir.Tuple([grouped, odd])))
    assert op_counts(out)["nn.conv2d"] == 2 and op_counts(out)["layout_transform"] == 0


def test_non_constant_kernel_and_bias_are_transformed_by_operators():
    x = ir.var("x", shape=(1, 8, 5, 5))
    w = ir.var("w", shape=(8, 8, 3, 3))
    bias = ir.var("bias", shape=(8,))
    y = nn.bias_add(nn.conv2d(x, w, padding=1), bias)
    out = run(PACK8, ir.Function([x, w, bias], nn.relu(y)))
    assert op_counts(out)["layout_transform"] == 3   # data in, kernel, result out
    assert op_counts(out)["reshape"] == 1            # the bias, to (1, 1, 1, 1, 8)


def test_packed_request_checks_its_kernel_layout():
    with pytest.raises(ValueError, match="default"):
        ConvertLayout({"nn.conv2d": ("NCHW16c", "OIHW")})


def test_layout_transform_type_errors():
    x = ir.var("x", shape=(1, 24, 4, 4))
    with pytest.raises(ir.IRTypeError, match="not a multiple of 16"):
        ir.infer_type(ir.Module({"main": ir.Function(
            [x], ir.op.layout_transform(x, src_layout="NCHW", dst_layout="NCHW16c"))}))
    with pytest.raises(ir.IRTypeError, match="same primal axes"):
        ir.infer_type(ir.Module({"main": ir.Function(
            [x], ir.op.layout_transform(x, src_layout="NCHW", dst_layout="NCH"))}))


def test_flatten_after_pool_in_a_packed_graph_matches():
    x = ir.var("x", shape=(2, 3, 12, 12))
    y = nn.relu(nn.conv2d(x, rand(16, 3, 3, 3, seed=1), strides=2, padding=1))
    y = nn.avg_pool2d(y, pool_size=3, strides=2, padding=1)
    y = reshape(nn.global_avg_pool2d(y), newshape=(2, -1))
    out = run(PACK16, ir.Function([x], nn.dense(y, rand(4, 16, seed=2))))
    arg = np.random.default_rng(0).standard_normal((2, 3, 12, 12)).astype("float32")
    got = ir.evaluate(out, arg)
    want = ir.evaluate(ir.Module({"main": ir.Function([x], nn.dense(y, rand(4, 16, seed=2)))}),
                       arg)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_packed_conv_weight_that_does_not_fit_is_a_type_error():
    x = ir.var("x", shape=(1, 2, 6, 6, 8))
    for op, w_shape in ((ir.op.nn.conv2d_nchwc, (2, 4, 3, 3, 8, 16)),        # 4 != 2 blocks
                        (ir.op.nn.depthwise_conv2d_nchwc, (2, 1, 3, 3, 1, 16))):  # 16 != 8
        w = ir.var("w", shape=w_shape)
        with pytest.raises(ir.IRTypeError, match="does not fit input"):
            ir.infer_type(ir.Module({"main": ir.Function([x, w], op(x, w))}))


@pytest.mark.parametrize("pool", [
    lambda x, **kw: nn.max_pool2d(x, pool_size=2, **kw),
    lambda x, **kw: nn.avg_pool2d(x, pool_size=2, **kw),
    lambda x, **kw: nn.global_avg_pool2d(x, **kw),
])
def test_a_pool_whose_input_is_not_in_its_packed_layout_is_a_type_error(pool):
    def infer(shape, **attrs):
        x = ir.var("x", shape=shape)
        return ir.infer_type(ir.Module({"main": ir.Function([x], pool(x, **attrs))}))

    infer((1, 2, 6, 6, 8), layout="NCHW8c")  # packed as it says: fine
    with pytest.raises(ir.IRTypeError, match=r"input \(1, 16, 6, 6\) is not NCHW8c"):
        infer((1, 16, 6, 6), layout="NCHW8c")  # a plain NCHW tensor
    with pytest.raises(ir.IRTypeError, match=r"is not NCHW8c \(N, C/8, H, W, 8\)"):
        infer((1, 4, 6, 6, 4), layout="NCHW8c")  # packed by another block
    with pytest.raises(ir.IRTypeError, match="needs out_layout equal to it"):
        infer((1, 2, 6, 6, 8), layout="NCHW8c", out_layout="NCHW")
