"""Every operator's gradient rule against central finite differences in float64: the loss is
``sum(op(inputs) * R)`` for a fixed random ``R`` (per field for tuple outputs), its
gradient is taken by the first-order pass (and for a sample of operators by the
higher-order pass too), and each float input's gradient is compared element by element
with ``(loss(x + h) - loss(x - h)) / 2h``. Every operator's forward-mode (tangent) rule:
``J u`` from ``jvp`` against the directional difference ``(op(x + h u) - op(x - h u)) / 2h``,
and ``R . (J u)`` against the reverse mode's ``(R J) . u``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import ir
from ir.op import nn
from ir.transform import gradient, jvp
from ir.transform.ad import GradientError, has_gradient, has_tangent

F64 = "float64"
RNG = np.random.default_rng(7)


def normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def positive(*shape: int) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape)


def distinct(*shape: int) -> np.ndarray:
    """Values at least 1e-2 apart (no ties for max, pooling, comparisons)."""
    n = int(np.prod(shape))
    return RNG.permutation(np.linspace(-2, 2, n)).reshape(shape)


Case = tuple[str, Callable[..., ir.Expr], list[np.ndarray]]

CASES: list[Case] = [
    ("add", lambda a, b: ir.op.add(a, b), [normal(2, 3), normal(3)]),
    ("subtract", lambda a, b: ir.op.subtract(a, b), [normal(2, 1), normal(2, 3)]),
    ("multiply", lambda a, b: ir.op.multiply(a, b), [normal(2, 3), normal(1, 3)]),
    ("divide", lambda a, b: ir.op.divide(a, b), [normal(2, 3), positive(2, 3)]),
    ("power", lambda a, b: ir.op.power(a, b), [positive(2, 3), normal(3)]),
    ("maximum", lambda a, b: ir.op.maximum(a, b), [distinct(2, 3), distinct(2, 3) + 0.005]),
    ("minimum", lambda a, b: ir.op.minimum(a, b), [distinct(2, 3), distinct(2, 3) + 0.005]),
    ("negative", lambda a: ir.op.negative(a), [normal(4)]),
    ("abs", lambda a: ir.op.abs(a), [distinct(2, 3) + 0.001]),
    ("exp", lambda a: ir.op.exp(a), [normal(2, 3)]),
    ("log", lambda a: ir.op.log(a), [positive(2, 3)]),
    ("sqrt", lambda a: ir.op.sqrt(a), [positive(2, 3)]),
    ("rsqrt", lambda a: ir.op.rsqrt(a), [positive(2, 3)]),
    ("sigmoid", lambda a: ir.op.sigmoid(a), [normal(2, 3)]),
    ("tanh", lambda a: ir.op.tanh(a), [normal(2, 3)]),
    ("erf", lambda a: ir.op.erf(a), [normal(2, 3)]),
    ("nn.relu", lambda a: nn.relu(a), [distinct(3, 4) + 0.001]),
    ("nn.leaky_relu", lambda a: nn.leaky_relu(a, alpha=0.2), [distinct(3, 4) + 0.001]),
    ("clip", lambda a: ir.op.clip(a, a_min=-0.5, a_max=0.7), [distinct(3, 4) + 0.003]),
    ("where", lambda a, b: ir.op.where(ir.const(RNG.random((2, 3)) > 0.5), a, b),
     [normal(2, 3), normal(3)]),
    ("cast", lambda a: ir.op.multiply(ir.op.cast(a, dtype="float32"), ir.const(
        np.float32(1))), [normal(2, 3)]),
    ("nn.bias_add", lambda a, b: nn.bias_add(a, b, axis=1), [normal(2, 3, 4), normal(3)]),
    ("nn.dropout", lambda a: ir.TupleGetItem(nn.dropout(a, rate=0.3), 0), [normal(2, 3)]),
    ("sum", lambda a: ir.op.sum(a, axis=(1,)), [normal(2, 3, 4)]),
    ("sum keepdims", lambda a: ir.op.sum(a, axis=(0, 2), keepdims=True), [normal(2, 3, 4)]),
    ("mean", lambda a: ir.op.mean(a, axis=(-1,)), [normal(2, 3, 4)]),
    ("mean exclude", lambda a: ir.op.mean(a, axis=(1,), exclude=True), [normal(2, 3, 4)]),
    ("max", lambda a: ir.op.max(a, axis=(1,)), [distinct(2, 5, 3)]),
    ("min", lambda a: ir.op.min(a), [distinct(3, 4)]),
    ("prod", lambda a: ir.op.prod(a, axis=(1,)), [positive(2, 3)]),
    ("nn.dense", lambda a, b: nn.dense(a, b), [normal(3, 4), normal(5, 4)]),
    ("nn.dense 3-d", lambda a, b: nn.dense(a, b), [normal(2, 3, 4), normal(5, 4)]),
    ("nn.matmul", lambda a, b: nn.matmul(a, b), [normal(3, 4), normal(4, 2)]),
    ("nn.matmul tt", lambda a, b: nn.matmul(a, b, transpose_a=True, transpose_b=True),
     [normal(4, 3), normal(2, 4)]),
    ("nn.matmul ta", lambda a, b: nn.matmul(a, b, transpose_a=True), [normal(4, 3),
                                                                      normal(4, 2)]),
    ("nn.batch_matmul", lambda a, b: nn.batch_matmul(a, b), [normal(2, 3, 4), normal(2, 5, 4)]),
    ("nn.batch_matmul nn", lambda a, b: nn.batch_matmul(a, b, transpose_b=False),
     [normal(2, 3, 4), normal(2, 4, 5)]),
    ("nn.conv2d", lambda a, b: nn.conv2d(a, b, padding=(1, 1)),
     [normal(2, 3, 5, 5), normal(4, 3, 3, 3)]),
    ("nn.conv2d strided", lambda a, b: nn.conv2d(a, b, strides=(2, 2), padding=(1, 0, 0, 1),
                                                 dilation=(1, 2)),
     [normal(1, 2, 6, 7), normal(3, 2, 3, 2)]),
    ("nn.conv2d depthwise", lambda a, b: nn.conv2d(a, b, padding=(1, 1), groups=4),
     [normal(1, 4, 5, 5), normal(4, 1, 3, 3)]),
    ("nn.max_pool2d", lambda a: nn.max_pool2d(a, pool_size=(3, 3), strides=(2, 2),
                                               padding=(1, 1)), [distinct(1, 2, 5, 5)]),
    ("nn.avg_pool2d", lambda a: nn.avg_pool2d(a, pool_size=(2, 2), strides=(2, 2),
                                               padding=(1, 1)), [normal(1, 2, 5, 5)]),
    ("nn.avg_pool2d counting pad", lambda a: nn.avg_pool2d(
        a, pool_size=(3, 3), strides=(2, 2), padding=(1, 1), count_include_pad=True,
        ceil_mode=True), [normal(1, 2, 6, 6)]),
    ("nn.global_avg_pool2d", lambda a: nn.global_avg_pool2d(a), [normal(2, 3, 4, 4)]),
    ("nn.softmax", lambda a: nn.softmax(a, axis=1), [normal(3, 5)]),
    ("nn.log_softmax", lambda a: nn.log_softmax(a), [normal(3, 5)]),
    ("nn.layer_norm", lambda a, g, b: nn.layer_norm(a, g, b), [normal(3, 6), normal(6),
                                                               normal(6)]),
    ("nn.layer_norm axis 1", lambda a, g, b: nn.layer_norm(a, g, b, axis=1),
     [normal(2, 4, 3), normal(4), normal(4)]),
    ("nn.batch_norm", lambda a, g, b, m, v: ir.TupleGetItem(nn.batch_norm(a, g, b, m, v), 0),
     [normal(2, 3, 2, 2), normal(3), normal(3), normal(3), positive(3)]),
    ("reshape", lambda a: ir.op.reshape(a, newshape=(4, 3)), [normal(2, 6)]),
    ("squeeze", lambda a: ir.op.squeeze(a, axis=(1,)), [normal(3, 1, 2)]),
    ("expand_dims", lambda a: ir.op.expand_dims(a, axis=1), [normal(3, 2)]),
    ("transpose", lambda a: ir.op.transpose(a, axes=(1, 2, 0)), [normal(2, 3, 4)]),
    ("broadcast_to", lambda a: ir.op.broadcast_to(a, shape=(2, 3, 4)), [normal(3, 1)]),
    ("concatenate", lambda a, b: ir.op.concatenate(ir.Tuple([a, b]), axis=1),
     [normal(2, 3), normal(2, 2)]),
    ("split", lambda a: nn_split(a), [normal(2, 6)]),
    ("strided_slice", lambda a: ir.op.strided_slice(a, begin=(1, 0), end=(4, 5),
                                                     strides=(2, 2)), [normal(5, 5)]),
    ("take", lambda a: ir.op.take(a, ir.const(np.array([[0, 2], [2, 1]], "int32")), axis=1),
     [normal(2, 3)]),
    ("take flat", lambda a: ir.op.take(a, ir.const(np.array([5, 0, 5], "int32"))),
     [normal(2, 3)]),
    ("nn.pad", lambda a: nn.pad(a, pad_width=((1, 0), (2, 1))), [normal(2, 3)]),
    ("layout_transform", lambda a: ir.op.layout_transform(a, src_layout="NCHW",
                                                          dst_layout="NCHW2c"),
     [normal(1, 4, 2, 2)]),
]


def nn_split(a: ir.Expr) -> ir.Expr:
    return ir.op.split(a, indices_or_sections=(1, 4), axis=1)


def loss_function(build: Callable[..., ir.Expr], inputs: list[np.ndarray]) -> ir.Function:
    params = [ir.var(f"x{i}", shape=x.shape, dtype=F64) for i, x in enumerate(inputs)]
    out = build(*params)
    out_type = ir.infer_expr(ir.Function(params, out))
    out_type = out_type.ret_type
    fields = out_type.fields if isinstance(out_type, ir.TupleType) else [out_type]
    terms = []
    for i, t in enumerate(fields):
        value = ir.TupleGetItem(out, i) if isinstance(out_type, ir.TupleType) else out
        if t.dtype != F64:
            value = ir.op.cast(value, dtype=F64)
        weights = ir.const(RNG.standard_normal(tuple(t.shape)))
        terms.append(ir.op.sum(ir.op.multiply(value, weights)))
    loss = terms[0]
    for term in terms[1:]:
        loss = ir.op.add(loss, term)
    return ir.Function(params, loss)


def numeric_gradient(f: ir.Function, inputs: list[np.ndarray], i: int,
                     h: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(inputs[i])
    for idx in np.ndindex(inputs[i].shape):
        up = [x.copy() for x in inputs]
        down = [x.copy() for x in inputs]
        up[i][idx] += h
        down[i][idx] -= h
        out[idx] = (float(ir.evaluate(f, *up)) - float(ir.evaluate(f, *down))) / (2 * h)
    return out


HIGHER_ORDER_SAMPLE = {"multiply", "divide", "nn.dense", "nn.conv2d", "nn.max_pool2d",
                       "nn.softmax", "nn.layer_norm", "concatenate", "split", "take",
                       "nn.batch_norm"}


@pytest.mark.parametrize("name,build,inputs", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_finite_differences(name, build, inputs):
    f = loss_function(build, inputs)
    modes = ["first_order"] + (["higher_order"] if name in HIGHER_ORDER_SAMPLE else [])
    step = 1e-2 if name == "cast" else 1e-6  # float32 inside: a linear op, a wide step
    numeric = [numeric_gradient(f, inputs, i, step) for i in range(len(inputs))]
    for mode in modes:
        value, grads = ir.evaluate(gradient(f, mode=mode), *inputs)
        np.testing.assert_allclose(value, ir.evaluate(f, *inputs), rtol=1e-12)
        assert len(grads) == len(inputs)
        for i, (got, want) in enumerate(zip(grads, numeric, strict=True)):
            assert got.shape == inputs[i].shape and got.dtype == inputs[i].dtype
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} ({mode}): input {i}")


def _flat(value) -> np.ndarray:
    fields = value if isinstance(value, tuple) else (value,)
    return np.concatenate([np.ravel(np.asarray(f, np.float64)) for f in fields])


@pytest.mark.parametrize("name,build,inputs", CASES, ids=[c[0] for c in CASES])
def test_tangent_matches_directional_differences_and_reverse_mode(name, build, inputs):
    rng = np.random.default_rng(11)
    params = [ir.var(f"x{i}", shape=x.shape, dtype=F64) for i, x in enumerate(inputs)]
    f = ir.Function(params, build(*params))
    u = [rng.standard_normal(x.shape) for x in inputs]
    value, tangent = ir.evaluate(jvp(f), *inputs, *u)
    np.testing.assert_allclose(_flat(value), _flat(ir.evaluate(f, *inputs)), rtol=1e-12)
    h = 1e-2 if name == "cast" else 1e-6
    up = ir.evaluate(f, *[x + h * d for x, d in zip(inputs, u, strict=True)])
    down = ir.evaluate(f, *[x - h * d for x, d in zip(inputs, u, strict=True)])
    np.testing.assert_allclose(_flat(tangent), (_flat(up) - _flat(down)) / (2 * h),
                               rtol=1e-5, atol=1e-6, err_msg=name)
    loss = loss_function(build, inputs)
    _, loss_tangent = ir.evaluate(jvp(loss), *inputs, *u)
    _, grads = ir.evaluate(gradient(loss, mode="first_order"), *inputs)
    reverse = sum(float(np.sum(g * d)) for g, d in zip(grads, u, strict=True))
    exact = 1e-6 if name == "cast" else 1e-9  # cast: the tangent passes through float32
    np.testing.assert_allclose(float(loss_tangent), reverse, rtol=exact, atol=1e-12)


def test_every_differentiable_operator_has_a_rule():
    """The operators of models and of the issue's list all have a rule; those without one
    (their gradient ops, the packed convolutions, dense layer and Winograd transforms that
    compilation makes)
    are reported by name."""
    builtin = [n for n in ir.list_ops()
               if ir.get_op_def(n).compute.__module__.startswith("ir.op.")]
    without = [n for n in builtin if not has_gradient(n)]
    assert without == ["nn.avg_pool2d_grad", "nn.conv2d_backward_weight", "nn.conv2d_nchwc",
                       "nn.conv2d_transpose", "nn.dense_packed", "nn.depthwise_conv2d_nchwc",
                       "nn.max_pool2d_grad", "nn.winograd_input", "nn.winograd_output",
                       "strided_slice_grad", "take_grad"]
    assert [n for n in builtin if not has_tangent(n)] == [
        "nn.conv2d_nchwc", "nn.dense_packed", "nn.depthwise_conv2d_nchwc", "nn.winograd_input",
        "nn.winograd_output"]
    x = ir.var("x", shape=(1, 2, 3, 3), dtype=F64)
    w = ir.var("w", shape=(2, 1, 2, 2), dtype=F64)
    f = ir.Function([x, w], nn.conv2d_transpose(x, w))
    with pytest.raises(GradientError, match="no gradient is registered for operator "
                                            "nn.conv2d_transpose"):
        gradient(f, mode="first_order")


def test_integer_inputs_get_zero_gradients_and_no_flow():
    x = ir.var("x", shape=(3,), dtype=F64)
    n = ir.var("n", shape=(3,), dtype="int32")
    f = ir.Function([x, n], ir.op.multiply(x, ir.op.cast(ir.op.add(n, n), dtype=F64)))
    for mode in ("first_order", "higher_order"):
        _, (gx, gn) = ir.evaluate(gradient(f, mode=mode), np.ones(3), np.arange(3, dtype="int32"))
        np.testing.assert_array_equal(gx, [0, 2, 4])
        assert gn.dtype == np.int32 and not gn.any()


def test_dynamic_shapes_are_reported():
    x = ir.var("x", shape=("n", 3), dtype=F64)
    f = ir.Function([x], ir.op.sum(x, axis=(1,)))
    with pytest.raises(GradientError, match="static tensor shapes"):
        gradient(f, mode="first_order")
