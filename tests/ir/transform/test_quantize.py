"""Quantization: the qnn operators (numpy against hand computations, compiled kernels equal
to numpy bit for bit), fixed-point factors, annotate (where simulated quantization goes),
calibrate (max / percentile / KL thresholds, unsigned activations, per-channel weights),
realize (integer convolutions accumulating in int32, requantization, equal to the
simulation to within rounding; built for the graph executor, equal to the interpreter),
accuracy on the ResNet-18-style test model, and clear errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.op.qnn import fixed_point, fixed_point_per_channel
from ir.transform.quantize import (
    QConfig,
    _kl_threshold,
    _sq_calls,
    annotate,
    calibrate,
    quantize,
    realize,
)
from ir.visitor import dataflow_post_order

from ..backend.blocks import mobilenet_inverted_residual, resnet_basic_block

F32 = "float32"
RNG = np.random.default_rng(5)


def run_both(params, body, args):
    f = ir.Function(params, body)
    return ir.evaluate(f, *args), ir.evaluate(f, *args, mode="compiled")


def test_quantize_dequantize_and_requantize_round_half_up_and_clip():
    x = ir.var("x", shape=(6,))
    xs = np.array([0.0, 0.125, -0.125, 0.3, 9.0, -9.0], F32)
    q, qc = run_both([x], ir.op.qnn.quantize(x, scale=0.05, out_dtype="int8"), [xs])
    np.testing.assert_array_equal(q, [0, 3, -2, 6, 127, -128])  # 2.5 -> 3, -2.5 -> -2
    np.testing.assert_array_equal(qc, q)
    i = ir.var("i", shape=(5,), dtype="int32")
    ints = np.array([7, -7, 1000, -1000, 3], "int32")
    m, shift = fixed_point(0.5)
    r, rc = run_both([i], ir.op.qnn.requantize(i, multiplier=m, shift=shift,
                                               out_dtype="int8"), [ints])
    np.testing.assert_array_equal(r, [4, -3, 127, -128, 2])  # 3.5 -> 4, -3.5 -> -3
    np.testing.assert_array_equal(rc, r)
    d, dc = run_both([i], ir.op.qnn.dequantize(i, scale=0.25), [ints])
    np.testing.assert_allclose(d, ints * 0.25)
    np.testing.assert_array_equal(dc, d)


def test_int8_dense_accumulates_in_int32_in_both_paths():
    x = ir.var("x", shape=(3, 40), dtype="int8")
    w = RNG.integers(-128, 128, (5, 40)).astype("int8")
    xs = RNG.integers(-128, 128, (3, 40)).astype("int8")
    y, yc = run_both([x], ir.op.nn.dense(x, ir.const(w), out_dtype="int32"), [xs])
    expected = xs.astype(np.int64) @ w.astype(np.int64).T
    assert np.abs(expected).max() > 2 ** 15  # far outside int8 and int16
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(yc, expected)


def test_requantize_per_channel_and_its_kernel():
    x = ir.var("x", shape=(2, 3, 4), dtype="int32")
    factors = np.array([0.5, 0.031, 0.9])
    mult, shift = fixed_point_per_channel(factors)
    xs = RNG.integers(-5000, 5000, (2, 3, 4)).astype("int32")
    body = ir.op.qnn.requantize_per_channel(x, ir.const(mult), shift=shift, axis=1,
                                            out_dtype="int32")
    got, compiled = run_both([x], body, [xs])
    want = np.floor(xs * factors.reshape(1, 3, 1) + 0.5)
    np.testing.assert_allclose(got, want, atol=1)
    np.testing.assert_array_equal(compiled, got)


def test_simulated_quantize_matches_quantize_then_dequantize():
    x = ir.var("x", shape=(4, 5))
    xs = RNG.standard_normal((4, 5)).astype(F32) * 3
    sim, sim_c = run_both([x], ir.op.qnn.simulated_quantize(x, scale=0.02, signed=False), [xs])
    want = np.clip(np.floor(xs / 0.02 + 0.5), 0, 255) * 0.02
    np.testing.assert_allclose(sim, want, rtol=1e-6)
    np.testing.assert_allclose(sim_c, sim, rtol=1e-6)
    per_channel = ir.op.qnn.simulated_quantize(x, scale=(0.1, 0.2, 0.3, 0.4), axis=0)
    got = ir.evaluate(ir.Function([x], per_channel), xs)
    scales = np.array([0.1, 0.2, 0.3, 0.4]).reshape(4, 1)
    np.testing.assert_allclose(got, np.clip(np.floor(xs / scales + 0.5), -127, 127) * scales,
                               rtol=1e-6)
    assert np.array_equal(ir.evaluate(ir.Function([x], ir.op.qnn.simulated_quantize(x)), xs),
                          xs)  # scale 0: not calibrated, the identity


@pytest.mark.parametrize("factor", [1e-6, 0.0123, 0.5, 0.999999, 1.0, 3.7, 1000.0])
def test_fixed_point_factors_are_accurate(factor):
    m, shift = fixed_point(factor)
    assert 0 < m < 2 ** 31 and 0 < shift < 63
    assert abs(m / 2 ** shift - factor) <= factor * 2 ** -29


def test_annotate_places_simulated_quantization():
    mod = resnet_basic_block()
    calls = _sq_calls(annotate(mod, QConfig(skip_conv_layers=()))["main"])
    kinds = [c.attrs.kind for c in calls]
    # two convs (data + weight each) and the residual add's two inputs
    assert kinds.count("weight") == 2 and kinds.count("activation") == 4
    skipped = _sq_calls(annotate(mod)["main"])  # the default skips the first conv
    assert [c.attrs.kind for c in skipped].count("weight") == 1
    assert all(c.attrs.scale == 0 for c in calls)


def test_calibration_modes_and_signs():
    x = ir.var("x", shape=(1, 4, 6, 6))
    w = ir.const(RNG.standard_normal((4, 4, 3, 3)).astype(F32))
    y = ir.op.nn.conv2d(ir.op.nn.relu(x), w, padding=1)
    mod = ir.Module({"main": ir.Function([x], ir.op.nn.conv2d(y, w, padding=1))})
    data = [[RNG.standard_normal((1, 4, 6, 6)).astype(F32)] for _ in range(4)]
    config = QConfig(skip_conv_layers=(), calibrate_mode="max")
    calls = _sq_calls(calibrate(annotate(mod, config), data, config)["main"])
    first, first_w, second, second_w = calls
    top = max(float(np.maximum(d[0], 0).max()) for d in data)
    assert not first.attrs.signed and first.attrs.scale == pytest.approx(top / 255)
    assert second.attrs.signed  # a convolution's output goes below zero
    wmax = np.abs(w.data).reshape(4, -1).max(axis=1) / 127
    np.testing.assert_allclose(first_w.attrs.scale, wmax)
    tensor = calibrate(annotate(mod, QConfig(skip_conv_layers=(), per_channel=False)), data,
                       QConfig(per_channel=False))
    assert isinstance(_sq_calls(tensor["main"])[1].attrs.scale, float)
    for mode in ("percentile", "kl_divergence"):
        cfg = QConfig(skip_conv_layers=(), calibrate_mode=mode)
        scale = _sq_calls(calibrate(annotate(mod, cfg), data, cfg)["main"])[0].attrs.scale
        assert 0 < scale <= top / 255


def test_kl_threshold_clips_rare_outliers():
    values = np.abs(np.concatenate([RNG.standard_normal(200000), [40.0, -55.0]]))
    threshold = _kl_threshold(values)
    assert 3.0 < threshold < 20.0  # the bulk kept, the two outliers clipped


@pytest.mark.parametrize("build", [resnet_basic_block, mobilenet_inverted_residual])
def test_realized_program_is_integer_and_matches_the_simulation(build):
    mod = build()
    config = QConfig(skip_conv_layers=())
    data = [[RNG.standard_normal((1, 8, 8, 8)).astype(F32)] for _ in range(8)]
    calibrated = calibrate(annotate(mod, config), data, config)
    real = realize(calibrated)
    nodes = [e for e in dataflow_post_order(real["main"].body)
             if isinstance(e, ir.Call) and isinstance(e.op, ir.Op)]
    names = {e.op.name for e in nodes}
    assert "qnn.simulated_quantize" not in names
    convs = [e for e in nodes if e.op.name == "nn.conv2d"]
    assert convs and all(e.attrs.out_dtype == "int32" for e in convs)
    assert all(e.args[1].checked_type.dtype == "int8" for e in convs)
    assert {"qnn.requantize_per_channel", "qnn.quantize", "qnn.dequantize"} <= names
    model = ir.build(real, target="cpu")
    for x in (RNG.standard_normal((1, 8, 8, 8)).astype(F32) for _ in range(3)):
        want, sim, got = ir.evaluate(mod, x), ir.evaluate(calibrated, x), ir.evaluate(real, x)
        assert np.linalg.norm(got - sim) <= 0.02 * np.linalg.norm(want)
        assert np.linalg.norm(got - want) <= 0.05 * np.linalg.norm(want)
        np.testing.assert_allclose(model(x), got, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_resnet18_style_model_keeps_its_predictions():
    """The ResNet-18-style test model (64 x 64 input, random weights and batch-norm
    statistics) quantized on 16 random inputs: on 40 other inputs the int8 model's top-1
    class agrees with float32's at least 70% of the time and its logits are within 15%
    (bench/quantize_models.py measures 500 inputs at 224 x 224)."""
    onnx = pytest.importorskip("onnx")
    from ..frontend import models

    mod = ir.from_onnx(onnx.load(str(models.resnet18(_tmp() / "r.onnx", size=64))))
    shape = (1, 3, 64, 64)
    calib = [[RNG.standard_normal(shape).astype(F32)] for _ in range(16)]
    quantized = quantize(mod, calib)
    float_model, int8_model = ir.build(mod, target="cpu"), ir.build(quantized, target="cpu")
    agree, errors = 0, []
    for _ in range(40):
        x = RNG.standard_normal(shape).astype(F32)
        a, b = float_model(x), int8_model(x)
        agree += int(np.argmax(a) == np.argmax(b))
        errors.append(np.linalg.norm(a - b) / np.linalg.norm(a))
    assert agree >= 28 and float(np.mean(errors)) < 0.15


def _tmp():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp())


def test_bad_input_is_reported():
    with pytest.raises(ValueError, match="calibrate_mode must be one of"):
        QConfig(calibrate_mode="entropy")
    with pytest.raises(ValueError, match="only 8-bit"):
        QConfig(nbit_activation=4)
    mod = resnet_basic_block()
    annotated = annotate(mod, QConfig(skip_conv_layers=()))
    with pytest.raises(ValueError, match="not calibrated"):
        realize(annotated)
    with pytest.raises(ValueError, match="dataset is empty"):
        calibrate(annotated, [], QConfig())
    x = ir.var("x", shape=(3,))
    with pytest.raises(ir.IRTypeError, match="out_dtype must be one of"):
        ir.infer_expr(ir.op.qnn.quantize(x, scale=0.1, out_dtype="float16"))


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("channels,stride,padding", [(8, 1, (1, 1)), (3, 2, (1, 0, 2, 1))])
def test_packed_int8_convolution_is_exact(dtype, channels, stride, padding):
    """PackInt8Convolutions: a quantized conv on the dot product's layouts (odd channel
    counts padded; int8 data offset by 128, its padding too) equals the plain one, in the
    interpreter and compiled."""
    from ir.transform import PassContext
    from ir.transform.pack_int8 import PackInt8Convolutions

    x = ir.var("x", shape=(1, channels, 9, 9), dtype=dtype)
    low, high = (0, 255) if dtype == "uint8" else (-128, 127)
    w = ir.const(RNG.integers(-128, 128, (32, channels, 3, 3)).astype("int8"))
    conv = ir.op.nn.conv2d(x, w, strides=stride, padding=padding, out_dtype="int32")
    mod = ir.infer_type(ir.Module({"main": ir.Function([x], conv)}))
    with PassContext(opt_level=3):
        packed = PackInt8Convolutions()(mod)
    assert "nn.conv2d_nchw4c_int8" in str(packed["main"])
    xs = RNG.integers(low, high + 1, (1, channels, 9, 9)).astype(dtype)
    want = ir.evaluate(mod, xs)
    np.testing.assert_array_equal(ir.evaluate(packed, xs), want)
    np.testing.assert_array_equal(ir.build(mod, target="cpu")(xs), want)
