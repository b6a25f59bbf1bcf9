"""The packed-channel (NCHW[x]c) operators of ``schedule.ops``: layouts, layout_transform,
conv2d_nchwc, depthwise_conv2d_nchwc and pooling over packed data, each compiled and
checked against numpy (the NCHW references with the layouts converted by numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from schedule import ops, te
from schedule.ops import Layout, layout_transform
from schedule.ops import reference as ref

from .helpers import check


def test_layout_parse_and_shapes() -> None:
    lay = Layout.parse("NCHW16c")
    assert lay.primal == "NCHW" and lay.block("C") == 16 and lay.block("H") is None
    assert lay.shape({"N": 1, "C": 64, "H": 5, "W": 7}) == (1, 4, 5, 7, 16)
    assert lay.extents((1, 4, 5, 7, 16)) == {"N": 1, "C": 64, "H": 5, "W": 7}
    kernel = Layout.parse("OIHW8i16o")
    assert kernel.shape({"O": 32, "I": 24, "H": 3, "W": 3}) == (2, 3, 3, 3, 8, 16)


@pytest.mark.parametrize("bad", ["", "NCHWc", "NCHW16C", "NCHW16x", "NNCHW", "NCHW0c", "N-C"])
def test_layout_parse_errors(bad: str) -> None:
    with pytest.raises(ValueError, match="layout"):
        Layout.parse(bad)


def test_layout_shape_must_divide() -> None:
    with pytest.raises(ValueError, match="not a multiple of 16"):
        Layout.parse("NCHW16c").shape({"N": 1, "C": 24, "H": 2, "W": 2})


def test_reference_layout_transform_moves_each_element() -> None:
    x = np.arange(2 * 32 * 3 * 5, dtype="float32").reshape(2, 32, 3, 5)
    packed = ref.layout_transform(x, "NCHW", "NCHW16c")
    assert packed.shape == (2, 2, 3, 5, 16)
    assert packed[1, 1, 2, 3, 4] == x[1, 20, 2, 3]
    assert np.array_equal(ref.layout_transform(packed, "NCHW16c", "NCHW"), x)
    eight = ref.layout_transform(packed, "NCHW16c", "NCHW8c")
    assert np.array_equal(ref.layout_transform(eight, "NCHW8c", "NHWC"), x.transpose(0, 2, 3, 1))


@pytest.mark.parametrize(("shape", "src", "dst"), [
    ((1, 32, 5, 7), "NCHW", "NCHW16c"),
    ((1, 2, 5, 7, 16), "NCHW16c", "NCHW"),
    ((2, 4, 3, 3, 8), "NCHW8c", "NCHW16c"),
    ((1, 3, 4, 4), "NCHW", "NHWC3c"),
])
def test_layout_transform_built(shape, src, dst) -> None:
    x = te.placeholder(shape, "float32", name="x")
    y = layout_transform(x, src, dst)
    check(te.create_schedule(y), [x, y], lambda a: ref.layout_transform(a, src, dst),
          rtol=0, atol=0)


def _packed(shape_nchw, block, rng):
    x = rng.standard_normal(shape_nchw).astype("float32")
    return x, ref.layout_transform(x, "NCHW", f"NCHW{block}c")


@pytest.mark.parametrize(("C", "K", "H", "W", "RS", "stride", "pad", "ic", "oc"), [
    (32, 32, 9, 9, 3, 1, 1, 16, 16),
    (16, 32, 11, 13, 3, 2, 1, 8, 16),  # stride 2 on sizes that divide nothing
    (3, 16, 15, 15, 7, 2, 3, 3, 8),    # the stem of a ResNet: 3 input channels
    (24, 8, 6, 6, 1, 1, 0, 8, 8),
])
def test_conv2d_nchwc_built(C, K, H, W, RS, stride, pad, ic, oc) -> None:
    data = te.placeholder((1, C // ic, H, W, ic), "float32", name="data")
    kernel = te.placeholder((K // oc, C // ic, RS, RS, ic, oc), "float32", name="kernel")
    out = ops.conv2d_nchwc(data, kernel, stride=stride, padding=pad)

    def reference(d, k):
        nchw = ref.conv2d_nchw(ref.layout_transform(d, f"NCHW{ic}c", "NCHW"),
                               ref.layout_transform(k, f"OIHW{ic}i{oc}o", "OIHW"),
                               stride=stride, padding=pad)
        return ref.layout_transform(nchw, "NCHW", f"NCHW{oc}c")

    check(te.create_schedule(out), [data, kernel, out], reference, rtol=1e-4, atol=1e-4)
    d = np.random.default_rng(1).standard_normal(data.shape).astype("float32")
    k = np.random.default_rng(2).standard_normal(kernel.shape).astype("float32")
    np.testing.assert_allclose(ref.conv2d_nchwc(d, k, stride, pad), reference(d, k),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("C", "H", "stride", "block"), [(32, 10, 1, 16), (16, 9, 2, 8)])
def test_depthwise_conv2d_nchwc_built(C, H, stride, block) -> None:
    data = te.placeholder((1, C // block, H, H, block), "float32", name="data")
    kernel = te.placeholder((C // block, 1, 3, 3, 1, block), "float32", name="kernel")
    out = ops.depthwise_conv2d_nchwc(data, kernel, stride=stride, padding=1)

    def reference(d, k):
        nchw = ref.depthwise_conv2d_nchw(ref.layout_transform(d, f"NCHW{block}c", "NCHW"),
                                         ref.layout_transform(k, f"OIHW1i{block}o", "OIHW"),
                                         stride=stride, padding=1)
        return ref.layout_transform(nchw, "NCHW", f"NCHW{block}c")

    check(te.create_schedule(out), [data, kernel, out], reference)
    d = np.random.default_rng(1).standard_normal(data.shape).astype("float32")
    k = np.random.default_rng(2).standard_normal(kernel.shape).astype("float32")
    np.testing.assert_allclose(ref.depthwise_conv2d_nchwc(d, k, stride, 1), reference(d, k),
                               rtol=1e-5, atol=1e-5)


def test_conv2d_nchwc_rejects_mismatched_kernel() -> None:
    data = te.placeholder((1, 2, 8, 8, 16), "float32", name="data")
    kernel = te.placeholder((2, 4, 3, 3, 8, 16), "float32", name="kernel")
    with pytest.raises(ValueError, match="input channels"):
        ops.conv2d_nchwc(data, kernel)


@pytest.mark.parametrize("kind", ["max", "avg", "global"])
def test_pooling_over_packed_channels(kind: str) -> None:
    block = 8
    data = te.placeholder((1, 2, 9, 9, block), "float32", name="data")
    if kind == "max":
        out, pool = ops.max_pool2d(data, 3, 2, 1), lambda x: ref.max_pool2d(x, 3, 2, 1)
    elif kind == "avg":
        out, pool = ops.avg_pool2d(data, 3, 2, 1), lambda x: ref.avg_pool2d(x, 3, 2, 1)
    else:
        out, pool = ops.global_avg_pool2d(data), ref.global_avg_pool2d

    def reference(d):
        nchw = pool(ref.layout_transform(d, f"NCHW{block}c", "NCHW"))
        return ref.layout_transform(nchw, "NCHW", f"NCHW{block}c")

    check(te.create_schedule(out), [data, out], reference)
