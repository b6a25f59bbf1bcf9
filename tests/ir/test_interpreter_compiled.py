"""``ir.evaluate(..., mode="compiled")``: operator calls with a lowering run JIT-compiled
kernels (default schedule, cached per operator / attributes / input shapes and dtypes);
the result equals the numpy reference. Calls without a lowering (or whose lowering cannot
express the case) fall back to numpy, counted in ``ir.jit.stats()``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import ir
import ir.jit
from ir.op_registry import OpDef, OpPattern, register_op
from ir.types import TupleType

from .test_rnn_example import inputs as rnn_inputs
from .test_rnn_example import rnn_module, to_list

F32 = "float32"


class Delta:
    """The change of the JIT counters over a block."""

    def __enter__(self) -> Delta:
        self.before = ir.jit.stats()
        return self

    def __exit__(self, *exc: object) -> None:
        after = ir.jit.stats()
        self.d = {k: after[k] - self.before[k] for k in after}

    def __getitem__(self, key: str) -> int:
        return self.d[key]


def run_both(params: list[ir.Var], body: ir.Expr, args: list[np.ndarray]) -> tuple:
    fn = ir.Function(params, body)
    return ir.evaluate(fn, *args), ir.evaluate(fn, *args, mode="compiled")


def _rand(shape: tuple[int, ...], dtype: str = F32, seed: int = 0,
          positive: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed + len(shape) * 7 + sum(shape))
    if dtype.startswith("int"):
        return rng.integers(-20, 20, shape).astype(dtype)
    x = rng.uniform(0.5, 1.5, shape) if positive else rng.uniform(-1.5, 1.5, shape)
    return x.astype(dtype)


# name -> (input shapes, builder(vars) -> expr, rtol, positive inputs)
CASES: dict[str, tuple[list[tuple[int, ...]], Callable[..., ir.Expr], float, bool]] = {
    "add": ([(1, 16), (16,)], lambda a, b: ir.op.add(a, b), 1e-6, False),  # broadcast
    "subtract": ([(3, 4), (3, 4)], lambda a, b: ir.op.subtract(a, b), 1e-6, False),
    "multiply": ([(3, 4), (1, 4)], lambda a, b: ir.op.multiply(a, b), 1e-6, False),
    "divide": ([(3, 4), (3, 4)], lambda a, b: ir.op.divide(a, b), 1e-5, True),
    "nn.relu": ([(3, 4)], lambda a: ir.op.nn.relu(a), 1e-6, False),
    "sigmoid": ([(3, 4)], lambda a: ir.op.sigmoid(a), 1e-5, False),
    "tanh": ([(1, 16)], lambda a: ir.op.tanh(a), 1e-5, False),
    "clip": ([(3, 4)], lambda a: ir.op.clip(a, a_min=-0.5, a_max=0.7), 1e-6, False),
    "reshape": ([(3, 4)], lambda a: ir.op.reshape(a, newshape=(2, 6)), 1e-6, False),
    "transpose": ([(2, 3, 4)], lambda a: ir.op.transpose(a, axes=(2, 0, 1)), 1e-6, False),
    "concatenate": ([(2, 3), (2, 2)],
                    lambda a, b: ir.op.concatenate(ir.Tuple([a, b]), axis=1), 1e-6, False),
    "sum": ([(3, 4, 5)], lambda a: ir.op.sum(a, axis=(0, 2)), 1e-5, False),
    "max": ([(3, 4)], lambda a: ir.op.max(a, axis=1, keepdims=True), 1e-6, False),
    "min": ([(3, 4, 2)], lambda a: ir.op.min(a, axis=(0, 2)), 1e-6, False),
    "nn.pad": ([(2, 3)], lambda a: ir.op.nn.pad(a, pad_width=((0, 1), (2, 1)),
                                                 pad_value=0.25), 1e-6, False),
    "nn.bias_add": ([(2, 3, 4, 4), (3,)], lambda a, b: ir.op.nn.bias_add(a, b, axis=1), 1e-6,
                    False),
    "nn.dense": ([(1, 8), (16, 8)], lambda a, b: ir.op.nn.dense(a, b), 1e-5, False),
    "nn.matmul": ([(3, 4), (4, 5)], lambda a, b: ir.op.nn.matmul(a, b), 1e-5, False),
    "nn.batch_matmul": ([(2, 3, 4), (2, 5, 4)], lambda a, b: ir.op.nn.batch_matmul(a, b),
                        1e-5, False),
    "nn.conv2d": ([(1, 2, 5, 5), (3, 2, 3, 3)],
                  lambda a, b: ir.op.nn.conv2d(a, b, padding=(1, 1), strides=(2, 2)), 1e-5,
                  False),
    "nn.max_pool2d": ([(1, 2, 5, 5)], lambda a: ir.op.nn.max_pool2d(
        a, pool_size=(2, 2), strides=(2, 2), padding=(1, 1)), 1e-6, False),
    "nn.avg_pool2d": ([(1, 2, 5, 5)], lambda a: ir.op.nn.avg_pool2d(
        a, pool_size=(3, 3), strides=(1, 1), padding=(1, 1)), 1e-5, False),
    "nn.global_avg_pool2d": ([(1, 2, 3, 3)], lambda a: ir.op.nn.global_avg_pool2d(a), 1e-5,
                             False),
    "layout_transform": ([(1, 8, 3, 3)], lambda a: ir.op.layout_transform(
        a, src_layout="NCHW", dst_layout="NCHW4c"), 0, False),
    "nn.conv2d_nchwc": ([(1, 2, 5, 5, 4), (3, 2, 3, 3, 4, 2)],
                        lambda a, b: ir.op.nn.conv2d_nchwc(a, b, padding=(1, 1),
                                                           strides=(2, 2)), 1e-5, False),
    "nn.depthwise_conv2d_nchwc": ([(1, 2, 5, 5, 4), (2, 1, 3, 3, 1, 4)],
                                  lambda a, b: ir.op.nn.depthwise_conv2d_nchwc(a, b, padding=1),
                                  1e-5, False),
    "nn.dense_packed": ([(5, 6), (2, 6, 4)], lambda a, b: ir.op.nn.dense_packed(a, b), 1e-5,
                        False),
    "nn.winograd_input": ([(1, 2, 5, 6, 4)], lambda a: ir.op.nn.winograd_input(
        a, tile=4, padding=(1, 0, 2, 1)), 1e-4, False),
    "nn.winograd_output": ([(16, 9, 8)], lambda a: ir.op.nn.winograd_output(
        a, tile=2, out_size=(5, 6), block=4), 1e-5, False),
    "nn.conv2d_transpose": ([(1, 4, 5, 5), (4, 3, 3, 3)], lambda a, b: ir.op.nn.conv2d_transpose(
        a, b, strides=(2, 2), padding=(1, 0, 1, 2), output_padding=(1, 1), dilation=(1, 2),
        groups=2), 1e-5, False),
    "argmax": ([(3, 5)], lambda a: ir.op.argmax(a, axis=(1,)), 0, False),
    "argmin": ([(3, 4, 5)], lambda a: ir.op.argmin(a, axis=(1,), keepdims=True,
                                                   select_last_index=True), 0, False),
    "prod": ([(3, 4)], lambda a: ir.op.prod(a, axis=(1,)), 1e-5, False),
    "broadcast_to": ([(3, 1)], lambda a: ir.op.broadcast_to(a, shape=(2, 3, 4)), 0, False),
    "full": ([()], lambda a: ir.op.full(a, shape=(2, 3)), 0, False),
    "zeros": ([], lambda: ir.op.zeros(shape=(2, 3)), 0, False),
    "ones": ([], lambda: ir.op.ones(shape=(3,), dtype="int32"), 0, False),
    "nn.softmax": ([(3, 5)], lambda a: ir.op.nn.softmax(a), 1e-5, False),
    "nn.log_softmax": ([(3, 5)], lambda a: ir.op.nn.log_softmax(a), 1e-5, False),
    "nn.layer_norm": ([(3, 6), (6,), (6,)],
                      lambda a, g, b: ir.op.nn.layer_norm(a, g, b, epsilon=1e-5), 1e-4, False),
    **{name: ([(3, 4)], getattr(ir.op, name), 1e-5, name in ("log", "sqrt", "rsqrt"))
       for name in ("exp", "log", "sqrt", "rsqrt", "erf", "abs", "floor", "ceil", "negative")},
    **{name: ([(3, 4), (1, 4)], getattr(ir.op, name), 1e-5, name == "power")
       for name in ("maximum", "minimum", "power", "less", "greater", "less_equal",
                    "greater_equal", "equal", "not_equal")},
    "cast": ([(3, 4)], lambda a: ir.op.cast(a, dtype="int32"), 0, False),
    "mean": ([(3, 4, 5)], lambda a: ir.op.mean(a, axis=(1,), keepdims=True), 1e-5, False),
    "squeeze": ([(3, 1, 4)], lambda a: ir.op.squeeze(a, axis=(1,)), 0, False),
    "expand_dims": ([(3, 4)], lambda a: ir.op.expand_dims(a, axis=1), 0, False),
    "strided_slice": ([(5, 6)], lambda a: ir.op.strided_slice(
        a, begin=(1, 5), end=(5, 0), strides=(2, -2)), 0, False),
    "take": ([(3, 4)], lambda a: ir.op.take(a, ir.const(np.array([[3, 0], [9, -2]], "int32")),
                                            axis=1), 0, False),
}


# bool inputs, tuple results, attributes: label -> ((shape, dtype) per input, builder)
OTHER_CASES: dict[str, tuple[list[tuple[tuple[int, ...], str]], Callable[..., ir.Expr]]] = {
    "where": ([((3, 4), "bool"), ((3, 4), F32), ((1, 4), F32)], ir.op.where),
    **{name: ([((3, 4), "bool"), ((1, 4), "bool")], getattr(ir.op, name))
       for name in ("logical_and", "logical_or", "logical_xor")},
    "logical_not": ([((3, 4), "bool")], ir.op.logical_not),
    "nn.leaky_relu": ([((3, 4), F32)], lambda a: ir.op.nn.leaky_relu(a, alpha=0.2)),
    "split (sections)": ([((6, 4), F32)], lambda a: ir.op.split(a, indices_or_sections=3)),
    "split (indices, axis 1)": ([((3, 6), F32)], lambda a: ir.op.split(
        a, indices_or_sections=(1, 4), axis=1)),
    "softmax over axis 0": ([((3, 5), F32)], lambda a: ir.op.nn.softmax(a, axis=0)),
    "log_softmax over axis 1 of 3": ([((2, 3, 4), F32)],
                                     lambda a: ir.op.nn.log_softmax(a, axis=1)),
    # quantization (round half up and clips, bit for bit)
    "nn.conv2d_nchw4c_int8": ([((1, 2, 6, 6, 4), "uint8")], lambda a: ir.op.nn.conv2d_nchw4c_int8(
        a, ir.const(np.random.default_rng(1).integers(-128, 128, (1, 2, 3, 3, 16, 4))
                    .astype("int8")), strides=2, padding=1)),
    "qnn.simulated_quantize": ([((3, 4), F32)],
                               lambda a: ir.op.qnn.simulated_quantize(a, scale=0.01)),
    "qnn.quantize": ([((3, 4), F32)], lambda a: ir.op.qnn.quantize(a, scale=0.004)),
    "qnn.dequantize": ([((3, 4), "int32")], lambda a: ir.op.qnn.dequantize(a, scale=0.5)),
    "qnn.requantize": ([((3, 4), "int32")], lambda a: ir.op.qnn.requantize(
        a, multiplier=1518500250, shift=36, out_dtype="int8")),
    "qnn.requantize_per_channel": ([((3, 4), "int32")], lambda a: ir.op.qnn.requantize_per_channel(
        a, ir.const(np.array([3, 7, 1], "int64")), shift=4, axis=0, out_dtype="int32")),
}


def _other_case(label: str) -> tuple[list[ir.Var], ir.Expr, list[np.ndarray]]:
    inputs, make = OTHER_CASES[label]
    rng = np.random.default_rng(3)
    params = [ir.var(f"x{i}", shape=s, dtype=t) for i, (s, t) in enumerate(inputs)]
    bounds = {"uint8": (0, 256), "int8": (-128, 128)}
    args = [rng.random(s) > 0.5 if t == "bool" else
            rng.integers(*bounds.get(t, (-3000, 3000)), s).astype(t) if "int" in t
            else _rand(s, seed=i)
            for i, (s, t) in enumerate(inputs)]
    return params, make(*params), args


def test_every_lowered_operator_has_a_case() -> None:
    lowered = {n for n in ir.list_ops() if ir.get_op_def(n).lowering is not None}
    covered = set(CASES) | {_other_case(label)[1].op.name for label in OTHER_CASES}
    assert lowered <= covered, f"no compiled-mode case for {sorted(lowered - covered)}"


@pytest.mark.parametrize("label", list(OTHER_CASES))
def test_compiled_matches_numpy_for_bool_tuple_and_axis_cases(label: str) -> None:
    params, body, args = _other_case(label)
    with Delta() as d:
        want, got = run_both(params, body, args)
    assert d["fallbacks"] == 0, ir.jit.fallback_reasons()
    assert d["compiled"] + d["cache_hits"] == 1  # another test may have compiled it first
    for w, g in zip(want if isinstance(want, tuple) else (want,),
                    got if isinstance(got, tuple) else (got,), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_matches_numpy(name: str) -> None:
    shapes, make, rtol, positive = CASES[name]
    params = [ir.var(f"x{i}", shape=s) for i, s in enumerate(shapes)]
    args = [_rand(s, positive=positive, seed=i) for i, s in enumerate(shapes)]
    body = make(*params)
    assert body.op.name == name
    with Delta() as d:
        want, got = run_both(params, body, args)
    assert d["fallbacks"] == 0, ir.jit.fallback_reasons()
    assert d["compiled"] + d["cache_hits"] == 1
    assert isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)
    # the same call again: served by the cached kernel
    with Delta() as d:
        again = ir.evaluate(ir.Function(params, make(*params)), *args, mode="compiled")
    assert d.d == {"compiled": 0, "cache_hits": 1, "fallbacks": 0}
    np.testing.assert_array_equal(again, got)


def test_integer_inputs_compile_too() -> None:
    a, b = ir.var("a", shape=(2, 3), dtype="int32"), ir.var("b", shape=(2, 3), dtype="int32")
    x, y = _rand((2, 3), "int32", 1), _rand((2, 3), "int32", 2)
    with Delta() as d:
        want, got = run_both([a, b], ir.op.add(a, b), [x, y])
    assert d["fallbacks"] == 0
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_one_kernel_per_distinct_call() -> None:
    """A call repeated in a program compiles once; another shape is another kernel."""
    x = ir.var("x", shape=(2, 5))
    body = ir.op.nn.relu(ir.op.nn.relu(ir.op.nn.relu(x)))
    data = _rand((2, 5))
    ir.jit.clear_cache()
    with Delta() as d:
        ir.evaluate(ir.Function([x], body), data, mode="compiled")
    assert d.d == {"compiled": 1, "cache_hits": 2, "fallbacks": 0}
    y = ir.var("y", shape=(5, 2))
    with Delta() as d:
        ir.evaluate(ir.Function([y], ir.op.nn.relu(y)), data.T.copy(), mode="compiled")
    assert d["compiled"] == 1


def test_operators_without_lowering_fall_back() -> None:
    x = ir.var("x", shape=(3, 4))
    data = _rand((3, 4))
    with Delta() as d:
        want, got = run_both([x], ir.TupleGetItem(ir.op.nn.dropout(x), 0), [data])
    assert d.d == {"compiled": 0, "cache_hits": 0, "fallbacks": 1}
    np.testing.assert_array_equal(got, want)


def test_lowering_errors_and_unsupported_dtypes_fall_back() -> None:
    x = ir.var("x", shape=(3, 4))
    data = _rand((3, 4))
    gamma = ir.const(np.ones(3, "float32"))
    with Delta() as d:  # layer_norm lowers only the last axis
        want, got = run_both([x], ir.op.nn.layer_norm(x, gamma, gamma, axis=0), [data])
    assert d.d == {"compiled": 0, "cache_hits": 0, "fallbacks": 1}
    np.testing.assert_array_equal(got, want)
    assert any(op == "nn.layer_norm" and "LoweringError" in why
               for (op, _), why in ir.jit.fallback_reasons().items())
    z = ir.var("z", shape=(3, 4), dtype="float64")  # the schedule layer has no float64
    d64 = data.astype("float64")
    with Delta() as d:
        want, got = run_both([z], ir.op.add(z, z), [d64])
    assert d.d == {"compiled": 0, "cache_hits": 0, "fallbacks": 1}
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    with Delta() as d:  # remembered: not retried, still counted
        ir.evaluate(ir.Function([z], ir.op.add(z, z)), d64, mode="compiled")
    assert d.d == {"compiled": 0, "cache_hits": 0, "fallbacks": 1}


def test_errors_keep_their_message_in_compiled_mode() -> None:
    a, b = ir.var("a"), ir.var("b")
    f = ir.Function([a, b], ir.op.add(a, b))
    with pytest.raises(ir.EvaluationError, match="add failed"):
        ir.evaluate(f, np.ones((2, 3), F32), np.ones((4,), F32), mode="compiled")


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="compiled"):
        ir.evaluate(ir.const(1.0), mode="fast")


@pytest.fixture
def tuple_output_op():
    """A test-only operator whose lowering returns two tensors: (a + b, a - b)."""
    name = "test_jit.add_sub"

    def relation(types, attrs):
        return TupleType((types[0], types[0]))

    def lowering(inputs, attrs, out_type):
        from schedule import ops

        return ops.add(inputs[0], inputs[1]), ops.subtract(inputs[0], inputs[1])

    op = register_op(OpDef(name=name, num_inputs=2, attrs_schema={}, type_relation=relation,
                           pattern=OpPattern.OPAQUE,
                           compute=lambda args, attrs: (args[0] + args[1], args[0] - args[1]),
                           lowering=lowering), override=True)
    yield op
    ir.Op._table.pop(name, None)


def test_tuple_outputs(tuple_output_op: ir.Op) -> None:
    a, b = ir.var("a", shape=(2, 3)), ir.var("b", shape=(2, 3))
    call = ir.Call(tuple_output_op, [a, b])
    body = ir.Tuple([ir.TupleGetItem(call, 1), ir.TupleGetItem(call, 0)])
    x, y = _rand((2, 3), seed=3), _rand((2, 3), seed=4)
    with Delta() as d:
        want, got = run_both([a, b], body, [x, y])
    assert d.d == {"compiled": 1, "cache_hits": 0, "fallbacks": 0}, ir.jit.fallback_reasons()
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_rnn_in_compiled_mode_equals_numpy_mode() -> None:
    args = rnn_inputs(2)
    mod = rnn_module()
    want = to_list(ir.evaluate(mod, **args))
    with Delta() as d:
        got = to_list(ir.evaluate(mod, **args, mode="compiled"))
    assert len(got) == len(want) == args["n"]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    # dense (3 shapes), add (2), tanh, subtract and equal (int32 scalars): few kernels,
    # many hits, nothing on numpy
    assert d["compiled"] <= 8
    assert d["cache_hits"] >= 7 * (args["n"] - 1)
    assert d["fallbacks"] == 0


def test_rnn_type_inferred_in_compiled_mode() -> None:
    args = rnn_inputs(3)
    mod = ir.infer_type(rnn_module())
    want = to_list(ir.evaluate(mod, **args))
    got = to_list(ir.evaluate(mod, **args, mode="compiled"))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
