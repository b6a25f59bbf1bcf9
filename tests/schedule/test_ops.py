"""Tests of the operator library ``schedule.ops``.

* Correctness of every te definition against its numpy reference, two ways: compiled by
  ``schedule.build`` with the default schedule (``test_*_built``; these need the compiler
  and fail with ImportError until ``schedule.build`` exists), and evaluated by a small
  vectorised numpy interpreter of te graphs defined here (``test_*_interpreted``; no
  compiler needed).
* The workload registry: parameter validation, JSON schema, FLOPs, random inputs.
* The references against independent naive implementations.
* The te graph structure (shapes, dtypes, stage names and tags).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedule import ops, te
from schedule.expr import Binary, Call, Cast, Compare, Const, Load, Logic, Not, Select, Var
from schedule.ops import reference as ref
from schedule.tensor import ComputeOp, PlaceholderOp, Reduce, Tensor

# ---------------------------------------------------------------------------- te interpreter

_ERF = np.vectorize(math.erf, otypes=[np.float64])
_CALLS: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "erf": lambda x: _ERF(x).astype(x.dtype), "abs": np.abs,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "floor": np.floor, "ceil": np.ceil,
    "pow": np.power,
}
_BINARY: dict[str, Callable[..., np.ndarray]] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
    "floordiv": np.floor_divide, "floormod": np.mod, "min": np.minimum, "max": np.maximum,
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}
_REDUCERS = {"sum": np.sum, "max": np.max, "min": np.min}


def te_eval(out: Tensor, feed: dict[Tensor, np.ndarray]) -> np.ndarray:
    """Evaluate ``out`` with numpy: every compute over the grid of all its axes at once.

    Index variables are int64 ``arange``s broadcast along their own grid dimension; loads
    clip their indices into range (a ``Select`` then discards out-of-range lanes).
    """
    values: dict[int, np.ndarray] = {id(t.op): np.asarray(a) for t, a in feed.items()}

    def value(t: Tensor) -> np.ndarray:
        if id(t.op) not in values:
            if isinstance(t.op, PlaceholderOp):
                raise KeyError(f"no value fed for placeholder {t.name}")
            values[id(t.op)] = compute(t.op)
        return values[id(t.op)]

    def compute(op: ComputeOp) -> np.ndarray:
        axes = [*op.axis, *op.reduce_axis]
        env = {}
        for pos, iv in enumerate(axes):
            shape = [1] * len(axes)
            shape[pos] = iv.extent
            env[iv.var] = np.arange(iv.extent, dtype=np.int64).reshape(shape)
        full = tuple(iv.extent for iv in axes)
        body = op.body
        if not isinstance(body, Reduce):
            return np.array(np.broadcast_to(ev(body, env), full), dtype=op.dtype, order="C")
        src = np.broadcast_to(ev(body.source, env), full)
        if body.condition is not None:
            identity = ev(body.reducer.identity(body.dtype), env)
            src = np.where(np.broadcast_to(ev(body.condition, env), full), src, identity)
        red = tuple(range(len(op.axis), len(axes)))
        return np.array(_REDUCERS[body.reducer.name](src, axis=red), dtype=op.dtype, order="C")

    def ev(e: Any, env: dict[Var, np.ndarray]) -> np.ndarray:
        if isinstance(e, Var):
            return env[e]
        if isinstance(e, Const):
            return np.array(e.value, dtype=e.dtype)
        if isinstance(e, Binary):  # also Compare and Logic
            r = _BINARY[e.op](ev(e.a, env), ev(e.b, env))
            keep = isinstance(e, Compare | Logic) or e.op in ("floordiv", "floormod")
            return r if keep else r.astype(e.dtype)
        if isinstance(e, Not):
            return np.logical_not(ev(e.a, env))
        if isinstance(e, Call):
            return _CALLS[e.name](*[ev(a, env) for a in e.args]).astype(e.dtype)
        if isinstance(e, Cast):
            return ev(e.value, env).astype(e.dtype)
        if isinstance(e, Select):
            return np.where(ev(e.cond, env), ev(e.true_value, env), ev(e.false_value, env))
        if isinstance(e, Load):
            arr = value(e.source)
            idx = [np.clip(ev(i, env), 0, n - 1)
                   for i, n in zip(e.indices, arr.shape, strict=True)]
            return arr[tuple(idx)]
        raise TypeError(f"interpreter: unsupported node {type(e).__name__}")

    return value(out)


# ---------------------------------------------------------------------------- running


def run_built(args: list[Tensor], inputs: list[np.ndarray]) -> np.ndarray:
    """Compile ``args`` with the default schedule and run it on ``inputs``."""
    from schedule import build  # the compiler; ImportError until it exists

    out_t = args[-1]
    s = te.create_schedule(out_t)
    mod = build(s, args, target="cpu")
    out = np.zeros(out_t.shape, dtype=out_t.dtype)
    mod(*inputs, out)
    return out


def run_interpreted(args: list[Tensor], inputs: list[np.ndarray]) -> np.ndarray:
    return te_eval(args[-1], dict(zip(args[:-1], inputs, strict=True)))


def assert_matches(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if got.dtype.kind == "f":
        tol = 2e-2 if got.dtype == np.float16 else 1e-4
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=tol, atol=tol / 10)
    else:
        np.testing.assert_array_equal(got, expected)


def rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float32",
         lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    if dtype.startswith("float"):
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    return rng.integers(-8, 8, size=shape, endpoint=True).astype(dtype)


# ---------------------------------------------------------------------------- te-level cases

Made = tuple[list[Tensor], list[np.ndarray], np.ndarray]


@dataclass
class Case:
    id: str
    make: Callable[[np.random.Generator], Made]


def _acc(dtype: str) -> str | None:
    return "int32" if dtype == "int8" else None


def c_matmul(M: int, N: int, K: int, ta: bool, tb: bool, dtype: str,
             rng: np.random.Generator) -> Made:
    A = te.placeholder((K, M) if ta else (M, K), dtype, "A")
    B = te.placeholder((N, K) if tb else (K, N), dtype, "B")
    C = ops.matmul(A, B, ta, tb, out_dtype=_acc(dtype))
    a, b = rand(rng, A.shape, dtype), rand(rng, B.shape, dtype)
    return [A, B, C], [a, b], ref.matmul(a, b, ta, tb, out_dtype=_acc(dtype))


def c_dense(M: int, N: int, K: int, bias: bool, act: str, dtype: str,
            rng: np.random.Generator) -> Made:
    X, W = te.placeholder((M, K), dtype, "X"), te.placeholder((N, K), dtype, "W")
    out_dtype = _acc(dtype) or dtype
    bt = te.placeholder((N,), out_dtype, "bias") if bias else None
    Y = ops.dense(X, W, bt, act, out_dtype=_acc(dtype))
    x, w = rand(rng, X.shape, dtype), rand(rng, W.shape, dtype)
    b = rand(rng, (N,), out_dtype) if bias else None
    args = [X, W, *([bt] if bt is not None else []), Y]
    inputs = [x, w, *([b] if b is not None else [])]
    return args, inputs, ref.dense(x, w, b, act, out_dtype=_acc(dtype))


def c_batch_matmul(Bt: int, M: int, N: int, K: int, tb: bool, rng: np.random.Generator) -> Made:
    A = te.placeholder((Bt, M, K), "float32", "A")
    B = te.placeholder((Bt, N, K) if tb else (Bt, K, N), "float32", "B")
    C = ops.batch_matmul(A, B, tb)
    a, b = rand(rng, A.shape), rand(rng, B.shape)
    return [A, B, C], [a, b], ref.batch_matmul(a, b, tb)


def c_conv(layout: str, N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: Any,
           padding: Any, dilation: Any, groups: int, dtype: str, rng: np.random.Generator) -> Made:
    if layout == "nchw":
        dshape, kshape = (N, C, H, W), (K, C // groups, R, S)
        fn, rfn = ops.conv2d_nchw, ref.conv2d_nchw
    else:
        dshape, kshape = (N, H, W, C), (R, S, C // groups, K)
        fn, rfn = ops.conv2d_nhwc, ref.conv2d_nhwc
    D, Kt = te.placeholder(dshape, dtype, "data"), te.placeholder(kshape, dtype, "kernel")
    out = fn(D, Kt, stride, padding, dilation, groups, out_dtype=_acc(dtype))
    d, k = rand(rng, dshape, dtype), rand(rng, kshape, dtype)
    expected = rfn(d, k, stride, padding, dilation, groups, out_dtype=_acc(dtype))
    return [D, Kt, out], [d, k], expected


def c_depthwise(N: int, C: int, H: int, W: int, mult: int, R: int, S: int, stride: Any,
                padding: Any, dilation: Any, rng: np.random.Generator) -> Made:
    D = te.placeholder((N, C, H, W), "float32", "data")
    Kt = te.placeholder((C, mult, R, S), "float32", "kernel")
    out = ops.depthwise_conv2d_nchw(D, Kt, stride, padding, dilation)
    d, k = rand(rng, D.shape), rand(rng, Kt.shape)
    return [D, Kt, out], [d, k], ref.depthwise_conv2d_nchw(d, k, stride, padding, dilation)


def c_pool(kind: str, shape: tuple[int, ...], window: Any, stride: Any, padding: Any,
           dtype: str, rng: np.random.Generator, include_pad: bool = False) -> Made:
    D = te.placeholder(shape, dtype, "data")
    d = rand(rng, shape, dtype)
    if kind == "max":
        out = ops.max_pool2d(D, window, stride, padding)
        return [D, out], [d], ref.max_pool2d(d, window, stride, padding)
    out = ops.avg_pool2d(D, window, stride, padding, count_include_pad=include_pad)
    return [D, out], [d], ref.avg_pool2d(d, window, stride, padding, include_pad)


def c_global_pool(shape: tuple[int, ...], rng: np.random.Generator) -> Made:
    D = te.placeholder(shape, "float32", "data")
    d = rand(rng, shape)
    return [D, ops.global_avg_pool2d(D)], [d], ref.global_avg_pool2d(d)


def c_rows(kind: str, shape: tuple[int, ...], scale: float, dtype: str,
           rng: np.random.Generator) -> Made:
    X = te.placeholder(shape, dtype, "data")
    x = rand(rng, shape, dtype, -scale, scale)
    if kind == "layer_norm":
        n = shape[-1]
        G, Bt = te.placeholder((n,), dtype, "gamma"), te.placeholder((n,), dtype, "beta")
        g, b = rand(rng, (n,), dtype, 0.5, 1.5), rand(rng, (n,), dtype)
        return [X, G, Bt, ops.layer_norm(X, G, Bt)], [x, g, b], ref.layer_norm(x, g, b)
    fn, rfn = (ops.softmax, ref.softmax) if kind == "softmax" else (ops.log_softmax,
                                                                    ref.log_softmax)
    return [X, fn(X)], [x], rfn(x)


def c_unary(name: str, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> Made:
    X = te.placeholder(shape, dtype, "x")
    x = rand(rng, shape, dtype, -3, 3)
    if name == "clip":
        lo, hi = (-0.5, 0.25) if dtype.startswith("float") else (-3, 2)
        return [X, ops.clip(X, lo, hi)], [x], ref.clip(x, lo, hi)
    return [X, getattr(ops, name)(X)], [x], getattr(ref, name)(x)


def c_binary(name: str, sa: tuple[int, ...], sb: tuple[int, ...] | None, dtype: str,
             rng: np.random.Generator) -> Made:
    A = te.placeholder(sa, dtype, "a")
    a = rand(rng, sa, dtype)
    if sb is None:  # a scalar right-hand side
        scalar = 3 if dtype.startswith("int") else 0.75
        return [A, getattr(ops, name)(A, scalar)], [a], getattr(ref, name)(
            a, np.asarray(scalar, dtype=dtype))
    B = te.placeholder(sb, dtype, "b")
    b = rand(rng, sb, dtype, 0.5, 2.0) if name == "divide" else rand(rng, sb, dtype)
    return [A, B, getattr(ops, name)(A, B)], [a, b], getattr(ref, name)(a, b)


def c_bias_add(shape: tuple[int, ...], axis: int, rng: np.random.Generator) -> Made:
    D = te.placeholder(shape, "float32", "data")
    Bt = te.placeholder((shape[axis],), "float32", "bias")
    d, b = rand(rng, shape), rand(rng, (shape[axis],))
    return [D, Bt, ops.bias_add(D, Bt, axis)], [d, b], ref.bias_add(d, b, axis)


def c_reduce(name: str, shape: tuple[int, ...], axis: Any, keepdims: bool, dtype: str,
             rng: np.random.Generator) -> Made:
    D = te.placeholder(shape, dtype, "data")
    d = rand(rng, shape, dtype)
    out = getattr(ops, name)(D, axis, keepdims)
    return [D, out], [d], getattr(ref, name)(d, axis, keepdims)


def c_layout(name: str, shape: tuple[int, ...], arg: Any, dtype: str,
             rng: np.random.Generator) -> Made:
    D = te.placeholder(shape, dtype, "data")
    d = rand(rng, shape, dtype)
    if name == "pad":
        before, after, value = arg
        return [D, ops.pad(D, before, after, value)], [d], ref.pad(d, before, after, value)
    return [D, getattr(ops, name)(D, arg)], [d], getattr(ref, name)(d, arg)


def c_concat(shapes: list[tuple[int, ...]], axis: int, rng: np.random.Generator) -> Made:
    ts = [te.placeholder(s, "float32", f"t{i}") for i, s in enumerate(shapes)]
    arrays = [rand(rng, s) for s in shapes]
    return [*ts, ops.concatenate(ts, axis)], arrays, ref.concatenate(arrays, axis)


def c_chain(shape: tuple[int, ...], names: list[str], dtype: str,
            rng: np.random.Generator) -> Made:
    X = te.placeholder(shape, dtype, "x")
    operands = [te.placeholder(shape, dtype, f"y{i}") for i, n in enumerate(names)
                if ops.CHAIN_OPS[n][0] == 2]
    out = ops.elementwise_chain(X, names, operands)
    x = rand(rng, shape, dtype, -2, 2)
    ys = [rand(rng, shape, dtype, 0.5, 2.0) for _ in operands]
    return [X, *operands, out], [x, *ys], ref.elementwise_chain(x, names, ys)


def _case(id_: str, fn: Callable[..., Made], *args: Any, **kwargs: Any) -> Case:
    return Case(id_, partial(fn, *args, **kwargs))


TE_CASES = [
    _case("matmul-7x5x3", c_matmul, 7, 5, 3, False, False, "float32"),
    _case("matmul-1x1x1", c_matmul, 1, 1, 1, False, False, "float32"),
    _case("matmul-ta", c_matmul, 13, 11, 17, True, False, "float32"),
    _case("matmul-tb", c_matmul, 13, 11, 17, False, True, "float32"),
    _case("matmul-ta-tb", c_matmul, 5, 3, 2, True, True, "float32"),
    _case("matmul-int8", c_matmul, 7, 9, 31, False, False, "int8"),
    _case("matmul-int32", c_matmul, 6, 5, 4, False, True, "int32"),
    _case("matmul-float16", c_matmul, 8, 3, 5, False, False, "float16"),
    _case("dense-bias", c_dense, 5, 7, 11, True, "none", "float32"),
    _case("dense-relu", c_dense, 3, 2, 13, False, "relu", "float32"),
    _case("dense-gelu", c_dense, 1, 7, 3, True, "gelu", "float32"),
    _case("dense-int8", c_dense, 3, 5, 7, True, "relu", "int8"),
    _case("batch_matmul", c_batch_matmul, 3, 5, 7, 2, False),
    _case("batch_matmul-tb", c_batch_matmul, 2, 1, 3, 5, True),
    _case("nchw-basic", c_conv, "nchw", 1, 3, 7, 7, 5, 3, 3, 1, 0, 1, 1, "float32"),
    _case("nchw-s2p1", c_conv, "nchw", 2, 3, 9, 8, 4, 3, 3, 2, 1, 1, 1, "float32"),
    _case("nchw-dil2", c_conv, "nchw", 1, 2, 9, 11, 3, 3, 3, 1, 2, 2, 1, "float32"),
    _case("nchw-groups", c_conv, "nchw", 1, 4, 6, 5, 6, 3, 2, 1, 1, 1, 2, "float32"),
    _case("nchw-pairs", c_conv, "nchw", 2, 3, 10, 9, 4, 3, 2, (2, 1), (1, 0), (1, 2), 1,
          "float32"),
    _case("nchw-asym-pad", c_conv, "nchw", 1, 2, 5, 6, 3, 3, 3, 1, (0, 1, 2, 3), 1, 1,
          "float32"),
    _case("nchw-1x1", c_conv, "nchw", 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, "float32"),
    _case("nchw-depthwise-groups", c_conv, "nchw", 1, 3, 5, 5, 3, 3, 3, 1, 1, 1, 3,
          "float32"),
    _case("nchw-int8", c_conv, "nchw", 1, 5, 6, 7, 4, 3, 3, 2, 1, 1, 1, "int8"),
    _case("nchw-float16", c_conv, "nchw", 1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, "float16"),
    _case("nhwc-basic", c_conv, "nhwc", 1, 3, 7, 7, 5, 3, 3, 1, 0, 1, 1, "float32"),
    _case("nhwc-s2p1-groups", c_conv, "nhwc", 2, 4, 9, 8, 6, 3, 3, 2, 1, 1, 2, "float32"),
    _case("nhwc-pairs", c_conv, "nhwc", 1, 3, 10, 9, 2, 3, 2, (2, 1), (1, 0), (1, 2), 1,
          "float32"),
    _case("nhwc-int8", c_conv, "nhwc", 1, 3, 5, 5, 2, 1, 3, 1, (0, 1), 1, 1, "int8"),
    _case("depthwise", c_depthwise, 1, 3, 7, 7, 1, 3, 3, 1, 1, 1),
    _case("depthwise-s2-dil2", c_depthwise, 2, 2, 9, 8, 1, 3, 3, 2, 0, 2),
    _case("depthwise-mult2", c_depthwise, 1, 3, 5, 6, 2, 3, 1, (1, 2), (1, 0), 1),
    _case("max_pool-3s2p1", c_pool, "max", (1, 3, 9, 8), 3, 2, 1, "float32"),
    _case("max_pool-2s2", c_pool, "max", (2, 2, 6, 7), 2, 2, 0, "float32"),
    _case("max_pool-pairs", c_pool, "max", (1, 2, 5, 7), (3, 2), (1, 2), (1, 1), "float32"),
    _case("max_pool-int32", c_pool, "max", (1, 2, 5, 5), 3, 1, 1, "int32"),
    _case("max_pool-int8", c_pool, "max", (1, 1, 4, 4), 2, 2, 1, "int8"),
    _case("avg_pool-3s2p1", c_pool, "avg", (1, 3, 9, 8), 3, 2, 1, "float32"),
    _case("avg_pool-include-pad", c_pool, "avg", (1, 3, 9, 8), 3, 2, 1, "float32",
          include_pad=True),
    _case("avg_pool-2s2", c_pool, "avg", (2, 2, 6, 7), 2, 2, 0, "float32"),
    _case("avg_pool-pairs", c_pool, "avg", (1, 2, 5, 7), (3, 2), (1, 2), (1, 1), "float32"),
    _case("global_avg_pool", c_global_pool, (2, 3, 5, 7)),
    _case("softmax", c_rows, "softmax", (3, 7), 5.0, "float32"),
    _case("softmax-1x1", c_rows, "softmax", (1, 1), 5.0, "float32"),
    _case("softmax-large", c_rows, "softmax", (2, 13), 80.0, "float32"),
    _case("softmax-3d", c_rows, "softmax", (2, 3, 5), 3.0, "float32"),
    _case("log_softmax", c_rows, "log_softmax", (3, 7), 5.0, "float32"),
    _case("log_softmax-large", c_rows, "log_softmax", (2, 13), 80.0, "float32"),
    _case("layer_norm", c_rows, "layer_norm", (5, 7), 2.0, "float32"),
    _case("layer_norm-3d", c_rows, "layer_norm", (2, 3, 31), 2.0, "float32"),
    _case("relu", c_unary, "relu", (3, 5), "float32"),
    _case("relu-int32", c_unary, "relu", (7,), "int32"),
    _case("gelu", c_unary, "gelu", (2, 3, 5), "float32"),
    _case("sigmoid", c_unary, "sigmoid", (11,), "float32"),
    _case("tanh", c_unary, "tanh", (3, 3), "float32"),
    _case("clip", c_unary, "clip", (4, 5), "float32"),
    _case("clip-int32", c_unary, "clip", (4, 5), "int32"),
    _case("add", c_binary, "add", (3, 5), (3, 5), "float32"),
    _case("add-broadcast", c_binary, "add", (3, 1, 5), (4, 5), "float32"),
    _case("add-scalar", c_binary, "add", (2, 3), None, "float32"),
    _case("subtract-int32", c_binary, "subtract", (5, 3), (5, 1), "int32"),
    _case("multiply", c_binary, "multiply", (7,), (1,), "float32"),
    _case("multiply-scalar-int32", c_binary, "multiply", (4,), None, "int32"),
    _case("divide", c_binary, "divide", (2, 3), (2, 3), "float32"),
    _case("bias_add-axis1", c_bias_add, (2, 3, 4, 5), 1),
    _case("bias_add-last", c_bias_add, (3, 7), -1),
    _case("reduce_sum-all", c_reduce, "reduce_sum", (3, 4, 5), None, True, "float32"),
    _case("reduce_sum-0d", c_reduce, "reduce_sum", (3, 4), None, False, "float32"),
    _case("reduce_sum-axes", c_reduce, "reduce_sum", (3, 4, 5), (0, 2), False, "float32"),
    _case("reduce_sum-int32", c_reduce, "reduce_sum", (3, 4, 5), -1, True, "int32"),
    _case("reduce_max", c_reduce, "reduce_max", (3, 4, 5), 1, False, "float32"),
    _case("reduce_max-int32", c_reduce, "reduce_max", (6, 5), (0,), True, "int32"),
    _case("transpose-default", c_layout, "transpose", (2, 3, 4), None, "float32"),
    _case("transpose-axes", c_layout, "transpose", (2, 3, 5), (1, 0, 2), "int32"),
    _case("reshape", c_layout, "reshape", (6, 4), (3, 8), "float32"),
    _case("reshape-infer", c_layout, "reshape", (2, 3, 4), (4, -1), "float32"),
    _case("reshape-ones", c_layout, "reshape", (5,), (1, 5, 1), "int32"),
    _case("reshape-flatten", c_layout, "reshape", (2, 1, 3, 5), (30,), "float32"),
    _case("pad", c_layout, "pad", (3, 4), ((1, 0), (2, 3), 0.5), "float32"),
    _case("pad-int32", c_layout, "pad", (2, 2, 3), ((0, 1, 1), (0, 0, 2), -7), "int32"),
    _case("concatenate-0", c_concat, [(2, 3), (1, 3), (4, 3)], 0),
    _case("concatenate-1", c_concat, [(2, 3, 1), (2, 1, 1)], 1),
    _case("concatenate-one", c_concat, [(2, 2)], -1),
    _case("chain", c_chain, (3, 5), ["add", "relu", "mul", "gelu", "sub", "div", "sigmoid",
                                     "tanh", "clip"], "float32"),
    _case("chain-int32", c_chain, (7,), ["add", "mul", "relu", "sub", "clip"], "int32"),
]


def _make(case: Case, seed: int = 0) -> Made:
    return case.make(np.random.default_rng(seed))


@pytest.mark.parametrize("case", TE_CASES, ids=lambda c: c.id)
def test_te_op_matches_reference_interpreted(case: Case) -> None:
    args, inputs, expected = _make(case)
    assert_matches(run_interpreted(args, inputs), expected)


@pytest.mark.parametrize("case", TE_CASES, ids=lambda c: c.id)
def test_te_op_matches_reference_built(case: Case) -> None:
    args, inputs, expected = _make(case)
    assert_matches(run_built(args, inputs), expected)


# ---------------------------------------------------------------------------- registry cases

REGISTRY_CASES: list[tuple[str, dict[str, Any]]] = [
    ("matmul", {"M": 7, "N": 5, "K": 3}),
    ("matmul", {"M": 1, "N": 1, "K": 1}),
    ("matmul", {"M": 13, "N": 17, "K": 19, "transpose_a": True}),
    ("matmul", {"M": 3, "N": 2, "K": 5, "transpose_a": True, "transpose_b": True}),
    ("matmul", {"M": 5, "N": 7, "K": 29, "dtype": "int8"}),
    ("matmul", {"M": 4, "N": 3, "K": 2, "transpose_b": True, "dtype": "int32"}),
    ("matmul", {"M": 8, "N": 4, "K": 6, "dtype": "float16"}),
    ("dense", {"M": 5, "N": 7, "K": 11}),
    ("dense", {"M": 3, "N": 2, "K": 13, "bias": False, "activation": "relu"}),
    ("dense", {"M": 1, "N": 7, "K": 3, "activation": "gelu"}),
    ("dense", {"M": 3, "N": 5, "K": 7, "activation": "relu", "dtype": "int8"}),
    ("batch_matmul", {"B": 3, "M": 5, "N": 7, "K": 2}),
    ("batch_matmul", {"B": 1, "M": 1, "N": 1, "K": 1, "transpose_b": True}),
    ("batch_matmul", {"B": 2, "M": 3, "N": 4, "K": 9, "dtype": "int8"}),
    ("conv2d_nchw", {"N": 1, "C": 3, "H": 7, "W": 7, "K": 5, "R": 3, "S": 3}),
    ("conv2d_nchw", {"N": 2, "C": 3, "H": 9, "W": 8, "K": 4, "R": 3, "S": 3, "stride": 2,
                     "padding": 1}),
    ("conv2d_nchw", {"N": 1, "C": 4, "H": 9, "W": 11, "K": 6, "R": 3, "S": 2,
                     "stride": [2, 1], "padding": [1, 2], "dilation": [2, 1], "groups": 2}),
    ("conv2d_nchw", {"N": 1, "C": 1, "H": 1, "W": 13, "K": 1, "R": 1, "S": 3}),
    ("conv2d_nchw", {"N": 1, "C": 3, "H": 5, "W": 5, "K": 3, "R": 5, "S": 5, "groups": 3}),
    ("conv2d_nchw", {"N": 1, "C": 5, "H": 6, "W": 7, "K": 4, "R": 3, "S": 3, "padding": 1,
                     "dtype": "int8"}),
    ("conv2d_nchw", {"N": 1, "C": 2, "H": 5, "W": 5, "K": 3, "R": 3, "S": 3, "padding": 1,
                     "dtype": "float16"}),
    ("conv2d_nchw", {"N": 1, "C": 3, "H": 6, "W": 6, "K": 4, "R": 3, "S": 3, "padding": 1,
                     "bias": True, "activation": "relu"}),
    ("conv2d_nchw", {"N": 1, "C": 5, "H": 6, "W": 6, "K": 4, "R": 3, "S": 3, "bias": True,
                     "activation": "relu", "dtype": "int8", "requant_shift": 3}),
    ("conv2d_nhwc", {"N": 1, "C": 3, "H": 7, "W": 7, "K": 5, "R": 3, "S": 3}),
    ("conv2d_nhwc", {"N": 2, "C": 4, "H": 9, "W": 8, "K": 6, "R": 3, "S": 3, "stride": 2,
                     "padding": 1, "groups": 2}),
    ("conv2d_nhwc", {"N": 1, "C": 3, "H": 10, "W": 9, "K": 2, "R": 3, "S": 2,
                     "stride": [2, 1], "padding": [1, 0], "dilation": [1, 2]}),
    ("conv2d_nhwc", {"N": 1, "C": 3, "H": 5, "W": 5, "K": 2, "R": 1, "S": 1, "dtype": "int32"}),
    ("conv2d_nhwc", {"N": 1, "C": 3, "H": 5, "W": 5, "K": 6, "R": 3, "S": 3, "bias": True,
                     "activation": "gelu"}),
    ("dense_blocked_int8", {"M": 3, "N": 32, "K": 12}),
    ("conv2d_nchw4c_int8", {"N": 1, "C": 8, "H": 7, "W": 7, "K": 16, "R": 3, "S": 3,
                            "padding": 1}),
    ("conv2d_nchw4c_int8", {"N": 2, "C": 4, "H": 9, "W": 8, "K": 32, "R": 3, "S": 2,
                            "stride": [2, 1], "padding": [1, 0]}),
    ("depthwise_conv2d_nchw", {"N": 1, "C": 3, "H": 7, "W": 7, "R": 3, "S": 3, "padding": 1}),
    ("depthwise_conv2d_nchw", {"N": 2, "C": 2, "H": 9, "W": 8, "R": 3, "S": 3, "stride": 2,
                               "dilation": 2}),
    ("depthwise_conv2d_nchw", {"N": 1, "C": 5, "H": 4, "W": 6, "R": 1, "S": 5,
                               "padding": [0, 2], "dtype": "int8"}),
    ("max_pool2d", {"N": 1, "C": 3, "H": 9, "W": 8, "R": 3, "S": 3, "stride": 2,
                    "padding": 1}),
    ("max_pool2d", {"N": 2, "C": 2, "H": 6, "W": 7, "R": 2, "S": 2, "stride": 2}),
    ("max_pool2d", {"N": 1, "C": 1, "H": 1, "W": 1, "R": 1, "S": 1}),
    ("max_pool2d", {"N": 1, "C": 2, "H": 5, "W": 7, "R": 3, "S": 2, "stride": [1, 2],
                    "padding": [1, 1], "dtype": "int8"}),
    ("avg_pool2d", {"N": 1, "C": 3, "H": 9, "W": 8, "R": 3, "S": 3, "stride": 2,
                    "padding": 1}),
    ("avg_pool2d", {"N": 2, "C": 2, "H": 6, "W": 7, "R": 2, "S": 2, "stride": 2}),
    ("avg_pool2d", {"N": 1, "C": 2, "H": 5, "W": 7, "R": 3, "S": 2, "stride": [1, 2],
                    "padding": [1, 1], "dtype": "float16"}),
    ("softmax", {"M": 3, "N": 7}),
    ("softmax", {"M": 1, "N": 1}),
    ("softmax", {"M": 2, "N": 129, "dtype": "float16"}),
    ("log_softmax", {"M": 3, "N": 7}),
    ("log_softmax", {"M": 1, "N": 1}),
    ("layer_norm", {"M": 5, "N": 7}),
    ("layer_norm", {"M": 1, "N": 1}),
    ("layer_norm", {"M": 2, "N": 257}),
    ("elementwise", {"shape": [3, 5], "ops": ["add"]}),
    ("elementwise", {"shape": [7], "ops": ["relu"]}),
    ("elementwise", {"shape": [1], "ops": ["sigmoid"]}),
    ("elementwise", {"shape": [2, 3, 5], "ops": ["add", "relu", "mul", "gelu", "sub", "div",
                                                 "sigmoid", "tanh", "clip"]}),
    ("elementwise", {"shape": [4, 3], "ops": ["add", "mul", "relu", "sub", "clip"],
                     "dtype": "int32"}),
    ("elementwise", {"shape": [5, 2], "ops": ["gelu", "tanh", "div"], "dtype": "float16"}),
]


def _rid(case: tuple[str, dict[str, Any]]) -> str:
    name, params = case

    def text(v: Any) -> str:
        return "x".join(map(str, v)) if isinstance(v, list) else str(v)

    return name + "-" + "-".join(f"{k}{text(v)}" for k, v in params.items())


def _registry_run(name: str, params: dict[str, Any],
                  runner: Callable[[list[Tensor], list[np.ndarray]], np.ndarray]) -> None:
    spec = ops.get_op(name)
    args = spec.build(params)
    inputs = spec.random_inputs(params, seed=1)
    assert_matches(runner(args, inputs), spec.reference(inputs, params))


@pytest.mark.parametrize("case", REGISTRY_CASES, ids=_rid)
def test_registered_op_matches_reference_interpreted(case: tuple[str, dict[str, Any]]) -> None:
    _registry_run(*case, run_interpreted)


@pytest.mark.parametrize("case", REGISTRY_CASES, ids=_rid)
def test_registered_op_matches_reference_built(case: tuple[str, dict[str, Any]]) -> None:
    _registry_run(*case, run_built)


INLINE_CASES = [c for c in REGISTRY_CASES if c[0] in (
    "conv2d_nchw", "conv2d_nhwc", "depthwise_conv2d_nchw", "max_pool2d", "avg_pool2d",
    "softmax", "dense", "elementwise")]


@pytest.mark.parametrize("case", INLINE_CASES, ids=_rid)
def test_registered_op_with_injective_stages_inlined_built(
        case: tuple[str, dict[str, Any]]) -> None:
    """The pad, bias and activation stages are meant to be inlined by schedules."""
    from schedule import build

    name, params = case
    spec = ops.get_op(name)
    args = spec.build(params)
    s = te.create_schedule(args[-1])
    for op in _ops_of(args[-1])[:-1]:
        if isinstance(op, ComputeOp) and op.is_injective:
            s[op].compute_inline()
    inputs = spec.random_inputs(params, seed=2)
    out = spec.empty_output(params)
    build(s, args, target="cpu")(*inputs, out)
    assert_matches(out, spec.reference(inputs, params))


# ---------------------------------------------------------------------------- registry API

EXPECTED_PARAMS = {
    "matmul": ["M", "N", "K", "transpose_a", "transpose_b", "dtype", "requant_shift"],
    "dense": ["M", "N", "K", "bias", "activation", "dtype", "requant_shift"],
    "batch_matmul": ["B", "M", "N", "K", "transpose_b", "dtype"],
    "conv2d_nchw": ["N", "C", "H", "W", "K", "R", "S", "stride", "padding", "dilation",
                    "groups", "bias", "activation", "dtype", "requant_shift"],
    "conv2d_nhwc": ["N", "C", "H", "W", "K", "R", "S", "stride", "padding", "dilation",
                    "groups", "bias", "activation", "dtype", "requant_shift"],
    "conv2d_nchw4c_int8": ["N", "C", "H", "W", "K", "R", "S", "stride", "padding", "dtype"],
    "dense_blocked_int8": ["M", "N", "K", "dtype"],
    "depthwise_conv2d_nchw": ["N", "C", "H", "W", "R", "S", "stride", "padding", "dilation",
                              "dtype"],
    "max_pool2d": ["N", "C", "H", "W", "R", "S", "stride", "padding", "dtype"],
    "avg_pool2d": ["N", "C", "H", "W", "R", "S", "stride", "padding", "dtype"],
    "softmax": ["M", "N", "dtype"],
    "log_softmax": ["M", "N", "dtype"],
    "layer_norm": ["M", "N", "dtype"],
    "elementwise": ["shape", "ops", "dtype"],
}


def test_registry_holds_exactly_the_design_table() -> None:
    assert ops.list_ops() == sorted(EXPECTED_PARAMS)
    for name, params in EXPECTED_PARAMS.items():
        spec = ops.get_op(name)
        assert spec.name == name
        assert [p.name for p in spec.params] == params
        assert spec.param("dtype").default == ("int8" if name.endswith("_int8") else "float32")
        assert isinstance(spec.description, str) and spec.description


def test_every_registered_op_has_a_case() -> None:
    assert {name for name, _ in REGISTRY_CASES} == set(ops.list_ops())


@pytest.mark.parametrize("bad", ["matmull", "", "MATMUL", None, 3])
def test_unknown_op_lists_the_known_ones(bad: Any) -> None:
    with pytest.raises(KeyError) as info:
        ops.get_op(bad)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "unknown operator" in message
    assert all(name in message for name in ops.list_ops())


def test_normalize_fills_defaults_and_canonicalises() -> None:
    spec = ops.get_op("conv2d_nchw")
    p = spec.normalize({"N": 1, "C": 4, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3,
                        "stride": 2, "padding": (1, 0)})
    assert p == {"N": 1, "C": 4, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3, "stride": [2, 2],
                 "padding": [1, 0], "dilation": [1, 1], "groups": 1, "bias": False,
                 "activation": "none", "dtype": "float32",
                 "requant_shift": -1}
    assert list(p) == EXPECTED_PARAMS["conv2d_nchw"]
    assert ops.get_op("matmul").normalize({"M": np.int64(4), "N": 2, "K": 3}) == {
        "M": 4, "N": 2, "K": 3, "transpose_a": False, "transpose_b": False, "dtype": "float32",
        "requant_shift": -1}
    assert ops.get_op("dense").normalize({"M": 1, "N": 2, "K": 3}) == {
        "M": 1, "N": 2, "K": 3, "bias": True, "activation": "none", "dtype": "float32",
        "requant_shift": -1}


@pytest.mark.parametrize("case", REGISTRY_CASES, ids=_rid)
def test_normalize_is_idempotent_and_json_round_trips(case: tuple[str, dict[str, Any]]) -> None:
    name, params = case
    spec = ops.get_op(name)
    p = spec.normalize(params)
    assert spec.normalize(p) == p
    assert spec.normalize(json.loads(json.dumps(p))) == p
    assert all(type(v) in (int, bool, str, list) for v in p.values())


def test_normalize_does_not_share_default_lists() -> None:
    spec = ops.get_op("max_pool2d")
    p = spec.normalize({"N": 1, "C": 1, "H": 4, "W": 4, "R": 2, "S": 2})
    p["stride"].append(9)
    assert spec.normalize({"N": 1, "C": 1, "H": 4, "W": 4, "R": 2, "S": 2})["stride"] == [1, 1]


MM = {"M": 4, "N": 4, "K": 4}
CONV = {"N": 1, "C": 4, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3}
POOL = {"N": 1, "C": 4, "H": 8, "W": 8, "R": 3, "S": 3}
BAD_PARAMS: list[tuple[str, dict[str, Any], str]] = [
    ("matmul", {"N": 4, "K": 4}, "M"),
    ("matmul", {**MM, "Q": 1}, "Q"),
    ("matmul", {**MM, "M": -1}, "M"),
    ("matmul", {**MM, "N": 0}, "N"),
    ("matmul", {**MM, "K": "12"}, "K"),
    ("matmul", {**MM, "K": 1.5}, "K"),
    ("matmul", {**MM, "K": 4.0}, "K"),
    ("matmul", {**MM, "M": True}, "M"),
    ("matmul", {**MM, "M": None}, "M"),
    ("matmul", {**MM, "M": (1 << 20) + 1}, "M"),
    ("matmul", {"M": 1 << 20, "N": 1 << 20, "K": 1}, "M"),
    ("matmul", {"M": 4, "N": 1 << 12, "K": 1 << 20}, "K"),
    ("matmul", {**MM, "transpose_a": "yes"}, "transpose_a"),
    ("matmul", {**MM, "transpose_b": 1}, "transpose_b"),
    ("matmul", {**MM, "dtype": "float64"}, "dtype"),
    ("matmul", {**MM, "dtype": 32}, "dtype"),
    ("dense", {**MM, "activation": "swish"}, "activation"),
    ("dense", {**MM, "activation": "gelu", "dtype": "int8"}, "activation"),
    ("dense", {**MM, "bias": "true"}, "bias"),
    ("batch_matmul", {"M": 2, "N": 2, "K": 2}, "B"),
    ("batch_matmul", {"B": 1 << 12, "M": 1 << 10, "N": 1 << 10, "K": 1}, "B"),
    ("conv2d_nchw", {**CONV, "groups": 3}, "groups"),
    ("conv2d_nchw", {**CONV, "K": 6, "groups": 4}, "groups"),
    ("conv2d_nchw", {**CONV, "groups": 0}, "groups"),
    ("conv2d_nchw", {**CONV, "activation": "gelu", "dtype": "int8"}, "activation"),
    ("conv2d_nchw", {**CONV, "R": 9}, "R"),
    ("conv2d_nchw", {**CONV, "S": 5, "dilation": [1, 2]}, "S"),
    ("conv2d_nchw", {**CONV, "stride": 0}, "stride"),
    ("conv2d_nchw", {**CONV, "stride": [1, 2, 3]}, "stride"),
    ("conv2d_nchw", {**CONV, "stride": [1]}, "stride"),
    ("conv2d_nchw", {**CONV, "stride": "2"}, "stride"),
    ("conv2d_nchw", {**CONV, "padding": -1}, "padding"),
    ("conv2d_nchw", {**CONV, "padding": [0, -1]}, "padding"),
    ("conv2d_nchw", {**CONV, "dilation": [0, 1]}, "dilation"),
    ("conv2d_nchw", {**CONV, "dilation": [1, 1.5]}, "dilation"),
    ("conv2d_nchw", {**CONV, "padding": 1 << 13}, "padding"),
    ("conv2d_nchw", {**CONV, "H": 1 << 20, "W": 1 << 20, "R": 1, "S": 1}, "H"),
    ("conv2d_nhwc", {**CONV, "N": 1 << 10, "H": 1 << 12, "W": 1 << 12}, "H"),
    ("conv2d_nhwc", {**CONV, "C": 5, "groups": 2}, "groups"),
    ("conv2d_nhwc", {**CONV, "W": 2}, "S"),
    ("depthwise_conv2d_nchw", {**POOL, "H": 2}, "R"),
    ("depthwise_conv2d_nchw", {**POOL, "groups": 2}, "groups"),
    ("max_pool2d", {**POOL, "padding": 3}, "padding"),
    ("max_pool2d", {**POOL, "padding": [0, 3]}, "padding"),
    ("max_pool2d", {**POOL, "dilation": 2}, "dilation"),
    ("avg_pool2d", {**POOL, "W": 2}, "S"),
    ("avg_pool2d", {**POOL, "dtype": "int8"}, "dtype"),
    ("softmax", {"M": 4}, "N"),
    ("softmax", {"M": 4, "N": 4, "dtype": "int32"}, "dtype"),
    ("layer_norm", {"M": 4, "N": -4}, "N"),
    ("elementwise", {"ops": ["relu"]}, "shape"),
    ("elementwise", {"shape": [], "ops": ["relu"]}, "shape"),
    ("elementwise", {"shape": [0], "ops": ["relu"]}, "shape"),
    ("elementwise", {"shape": 5, "ops": ["relu"]}, "shape"),
    ("elementwise", {"shape": ["a"], "ops": ["relu"]}, "shape"),
    ("elementwise", {"shape": [1] * 7, "ops": ["relu"]}, "shape"),
    ("elementwise", {"shape": [1 << 16, 1 << 16], "ops": ["relu"]}, "shape"),
    ("elementwise", {"shape": [4], "ops": []}, "ops"),
    ("elementwise", {"shape": [4], "ops": "relu"}, "ops"),
    ("elementwise", {"shape": [4], "ops": ["foo"]}, "ops"),
    ("elementwise", {"shape": [4], "ops": ["relu"] * 17}, "ops"),
    ("elementwise", {"shape": [4], "ops": ["add", "div"], "dtype": "int32"}, "ops"),
    ("elementwise", {"shape": [4], "ops": ["gelu"], "dtype": "int32"}, "ops"),
]


@pytest.mark.parametrize(("name", "params", "param"), BAD_PARAMS,
                         ids=[f"{n}-{p}-{i}" for i, (n, _, p) in enumerate(BAD_PARAMS)])
def test_bad_params_raise_value_error_naming_the_parameter(name: str, params: dict[str, Any],
                                                           param: str) -> None:
    spec = ops.get_op(name)
    with pytest.raises(ValueError, match=rf"^{name}: parameter '{param}': ") as info:
        spec.normalize(params)
    assert isinstance(info.value, ops.ParamError)
    assert info.value.param == param
    with pytest.raises(ValueError, match=f"'{param}'"):  # every entry point validates
        spec.build(params)


def test_params_must_be_a_mapping() -> None:
    with pytest.raises(ValueError, match="^matmul: .*mapping"):
        ops.get_op("matmul").normalize([("M", 1)])  # type: ignore[arg-type]


def test_parse_strings_reads_cli_values() -> None:
    conv = ops.get_op("conv2d_nchw")
    p = conv.parse_strings({"N": "1", "C": "4", "H": "8", "W": "8", "K": "4", "R": "3",
                            "S": "3", "stride": "2,1", "padding": "[1, 0]", "dilation": "1",
                            "dtype": "int8"})
    assert (p["stride"], p["padding"], p["dilation"], p["dtype"]) == ([2, 1], [1, 0], [1, 1],
                                                                      "int8")
    mm = ops.get_op("matmul").parse_strings({"M": "8", "N": "8", "K": "8", "transpose_a": "true"})
    assert mm["transpose_a"] is True
    ew = ops.get_op("elementwise").parse_strings({"shape": "4x5", "ops": "add,relu"})
    assert (ew["shape"], ew["ops"]) == ([4, 5], ["add", "relu"])
    with pytest.raises(ValueError, match="'M'"):
        ops.get_op("matmul").parse_strings({"M": "eight", "N": "8", "K": "8"})
    with pytest.raises(ValueError, match="'X'"):
        ops.get_op("matmul").parse_strings({"X": "8"})


# ---------------------------------------------------------------------------- JSON schema


def _validate(schema: dict[str, Any], value: Any, path: str = "$") -> list[str]:
    """A tiny JSON-schema validator for the keywords the op schemas use."""
    errors: list[str] = []
    if "oneOf" in schema:
        ok = [s for s in schema["oneOf"] if not _validate(s, value, path)]
        return [] if len(ok) == 1 else [f"{path}: matches {len(ok)} of oneOf"]
    types = {"integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
             "boolean": lambda v: isinstance(v, bool), "string": lambda v: isinstance(v, str),
             "array": lambda v: isinstance(v, list), "object": lambda v: isinstance(v, dict)}
    if "type" in schema and not types[schema["type"]](value):
        return [f"{path}: not {schema['type']}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: not in enum")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: below minimum")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{path}: above maximum")
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", 1 << 30):
            errors.append(f"{path}: wrong length")
        for i, item in enumerate(value):
            errors += _validate(schema.get("items", {}), item, f"{path}[{i}]")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing {key}")
        props = schema.get("properties", {})
        for key, item in value.items():
            if key not in props:
                if schema.get("additionalProperties") is False:
                    errors.append(f"{path}: extra {key}")
                continue
            errors += _validate(props[key], item, f"{path}.{key}")
    return errors


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMS))
def test_json_schema_shape(name: str) -> None:
    spec = ops.get_op(name)
    schema = spec.json_schema()
    assert json.loads(json.dumps(schema)) == schema
    assert schema["type"] == "object" and schema["title"] == name
    assert schema["additionalProperties"] is False
    assert list(schema["properties"]) == EXPECTED_PARAMS[name]
    assert schema["required"] == [p.name for p in spec.params if p.required]
    assert schema["properties"]["dtype"]["default"] == spec.param("dtype").default
    assert spec.param("dtype").default in schema["properties"]["dtype"]["enum"]
    for pname, prop in schema["properties"].items():
        param = spec.param(pname)
        if param.kind == "int":
            lowest = -1 if pname == "requant_shift" else 1  # -1: no requantization
            assert prop["type"] == "integer" and prop["minimum"] >= lowest and "maximum" in prop
        if param.kind == "int_or_pair":
            assert [s["type"] for s in prop["oneOf"]] == ["integer", "array"]
        if not param.required:
            assert prop["default"] == param.default
    assert json.loads(json.dumps(spec.to_dict()))["params"] == schema


def test_json_schema_specific_entries() -> None:
    conv = ops.get_op("conv2d_nchw").json_schema()
    assert conv["required"] == ["N", "C", "H", "W", "K", "R", "S"]
    assert conv["properties"]["padding"]["oneOf"][0]["minimum"] == 0
    assert conv["properties"]["stride"]["oneOf"][1]["minItems"] == 2
    assert conv["properties"]["K"]["maximum"] == ops.MAX_DIM
    dense = ops.get_op("dense").json_schema()["properties"]
    assert dense["activation"] == {"type": "string", "enum": ["none", "relu", "gelu"],
                                   "default": "none",
                                   "description": "activation after the bias"}
    assert dense["bias"]["type"] == "boolean" and dense["bias"]["default"] is True
    ew = ops.get_op("elementwise").json_schema()["properties"]
    assert set(ew["ops"]["items"]["enum"]) >= {"add", "sub", "mul", "div", "relu", "gelu",
                                               "sigmoid", "tanh", "clip"}
    assert ew["shape"]["items"]["type"] == "integer"


@pytest.mark.parametrize("case", REGISTRY_CASES, ids=_rid)
def test_canonical_params_satisfy_the_json_schema(case: tuple[str, dict[str, Any]]) -> None:
    name, params = case
    spec = ops.get_op(name)
    assert _validate(spec.json_schema(), params) == []
    assert _validate(spec.json_schema(), spec.normalize(params)) == []


def test_json_schema_rejects_some_bad_params() -> None:
    schema = ops.get_op("conv2d_nchw").json_schema()
    good = {**CONV, "stride": [1, 2]}
    assert _validate(schema, good) == []
    for bad in ({**CONV, "stride": [1, 2, 3]}, {**CONV, "padding": -1}, {**CONV, "Q": 1},
                {"N": 1}, {**CONV, "dtype": "float64"}, {**CONV, "groups": True}):
        assert _validate(schema, bad), bad


# ---------------------------------------------------------------------------- FLOPs


def test_flops_values() -> None:
    assert ops.get_op("matmul").flops({"M": 3, "N": 5, "K": 7}) == 2 * 3 * 5 * 7
    assert ops.get_op("matmul").flops({"M": 1024, "N": 1024, "K": 1024}) == 2.0 * 1024**3
    assert ops.get_op("batch_matmul").flops({"B": 2, "M": 3, "N": 5, "K": 7}) == 2 * 2 * 105
    dense = ops.get_op("dense")
    assert dense.flops({"M": 2, "N": 3, "K": 4, "bias": False}) == 2 * 2 * 3 * 4
    assert dense.flops({"M": 2, "N": 3, "K": 4}) == 2 * 2 * 3 * 4 + 6
    assert dense.flops({"M": 2, "N": 3, "K": 4, "activation": "relu"}) == 48 + 6 + 6
    conv = ops.get_op("conv2d_nchw")
    # 7x7 input, 3x3 kernel, stride 2, padding 1 -> 4x4 output
    assert conv.flops({"N": 1, "C": 3, "H": 7, "W": 7, "K": 5, "R": 3, "S": 3, "stride": 2,
                       "padding": 1}) == 2 * 5 * 4 * 4 * 3 * 3 * 3
    # groups=2: each output channel reduces over C/groups = 2 channels; 6x4 output
    assert conv.flops({"N": 2, "C": 4, "H": 8, "W": 6, "K": 6, "R": 3, "S": 3, "padding": 1,
                       "stride": [1, 1], "dilation": [1, 1], "groups": 2}) == \
        2 * 2 * 6 * 8 * 6 * 2 * 9
    nhwc = ops.get_op("conv2d_nhwc")
    assert nhwc.flops({**CONV, "dilation": 2}) == 2 * 4 * 4 * 4 * 4 * 9  # 4x4 output
    dw = ops.get_op("depthwise_conv2d_nchw")
    assert dw.flops({**POOL, "padding": 1}) == 2 * 4 * 8 * 8 * 9
    assert ops.get_op("max_pool2d").flops({**POOL, "stride": 2}) == 4 * 3 * 3 * 9  # 3x3 out
    assert ops.get_op("avg_pool2d").flops({**POOL, "stride": 2}) == 4 * 3 * 3 * 10
    assert ops.get_op("elementwise").flops({"shape": [3, 4], "ops": ["add", "relu"]}) == 24
    assert ops.get_op("softmax").flops({"M": 2, "N": 3}) == 5 * 6


@pytest.mark.parametrize("case", REGISTRY_CASES, ids=_rid)
def test_flops_are_positive_floats(case: tuple[str, dict[str, Any]]) -> None:
    flops = ops.get_op(case[0]).flops(case[1])
    assert isinstance(flops, float) and flops > 0


# ---------------------------------------------------------------------------- random inputs


@pytest.mark.parametrize("case", REGISTRY_CASES, ids=_rid)
def test_random_inputs_are_deterministic_and_match_the_args(
        case: tuple[str, dict[str, Any]]) -> None:
    name, params = case
    spec = ops.get_op(name)
    specs = spec.arg_specs(params)
    first, again = spec.random_inputs(params, seed=3), spec.random_inputs(params, seed=3)
    other = spec.random_inputs(params, seed=4)
    assert len(first) == len(specs) - 1
    for a, b, arg in zip(first, again, specs, strict=False):
        assert a.shape == arg.shape and a.dtype == np.dtype(arg.dtype)
        assert a.flags.c_contiguous
        np.testing.assert_array_equal(a, b)
        assert a.min() >= arg.low and a.max() <= arg.high
    if any(a.size > 4 for a in first):
        assert any(not np.array_equal(a, b) for a, b in zip(first, other, strict=True))
    out = spec.empty_output(params)
    assert out.shape == specs[-1].shape and out.dtype == np.dtype(specs[-1].dtype)


def test_random_input_ranges_suit_the_op() -> None:
    ew = ops.get_op("elementwise")
    p = {"shape": [64], "ops": ["div", "mul"]}
    x, divisor, factor = ew.random_inputs(p, seed=0)
    assert divisor.min() >= 0.5 and x.min() < 0
    ln = ops.get_op("layer_norm")
    _, gamma, _ = ln.random_inputs({"M": 2, "N": 64}, seed=0)
    assert gamma.min() > 0


def test_reference_checks_its_inputs() -> None:
    spec = ops.get_op("matmul")
    p = {"M": 2, "N": 3, "K": 4}
    a, b = spec.random_inputs(p)
    with pytest.raises(ValueError, match="2 input arrays"):
        spec.reference([a], p)
    with pytest.raises(ValueError, match="input B"):
        spec.reference([a, b.T], p)
    with pytest.raises(ValueError, match="input A"):
        spec.reference([a.astype(np.float64), b], p)


# ---------------------------------------------------------------------------- references


def naive_conv2d_nchw(data: np.ndarray, kernel: np.ndarray, stride: tuple[int, int],
                      padding: tuple[int, int], dilation: tuple[int, int],
                      groups: int) -> np.ndarray:
    """Seven nested loops, no numpy tricks."""
    N, C, H, W = data.shape
    K, Cg, R, S = kernel.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    OH = (H + 2 * ph - (R - 1) * dh - 1) // sh + 1
    OW = (W + 2 * pw - (S - 1) * dw - 1) // sw + 1
    out = np.zeros((N, K, OH, OW))
    for n in range(N):
        for k in range(K):
            g = k // (K // groups)
            for oh in range(OH):
                for ow in range(OW):
                    acc = 0.0
                    for c in range(Cg):
                        for r in range(R):
                            for s in range(S):
                                h, w = oh * sh - ph + r * dh, ow * sw - pw + s * dw
                                if 0 <= h < H and 0 <= w < W:
                                    acc += data[n, g * Cg + c, h, w] * kernel[k, c, r, s]
                    out[n, k, oh, ow] = acc
    return out


def naive_pool(data: np.ndarray, window: tuple[int, int], stride: tuple[int, int],
               padding: tuple[int, int], kind: str) -> np.ndarray:
    N, C, H, W = data.shape
    (R, S), (sh, sw), (ph, pw) = window, stride, padding
    OH, OW = (H + 2 * ph - R) // sh + 1, (W + 2 * pw - S) // sw + 1
    out = np.zeros((N, C, OH, OW))
    for n, c, oh, ow in np.ndindex(N, C, OH, OW):
        vals = [data[n, c, oh * sh - ph + r, ow * sw - pw + s]
                for r in range(R) for s in range(S)
                if 0 <= oh * sh - ph + r < H and 0 <= ow * sw - pw + s < W]
        out[n, c, oh, ow] = max(vals) if kind == "max" else sum(vals) / len(vals)
    return out


def test_matmul_reference_is_a_times_b() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    np.testing.assert_allclose(ref.matmul(a, b), a @ b)
    np.testing.assert_allclose(ref.matmul(a.T.copy(), b.T.copy(), True, True), a @ b)
    ai = rng.integers(-128, 128, (4, 64)).astype(np.int8)
    bi = rng.integers(-128, 128, (64, 3)).astype(np.int8)
    got = ref.matmul(ai, bi, out_dtype="int32")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ai.astype(np.int64) @ bi.astype(np.int64))
    np.testing.assert_allclose(ref.batch_matmul(a[None], b[None]), (a @ b)[None])


@pytest.mark.parametrize(("stride", "padding", "dilation", "groups"), [
    ((1, 1), (0, 0), (1, 1), 1), ((2, 1), (1, 2), (1, 1), 1), ((1, 2), (2, 1), (2, 1), 2),
    ((3, 2), (1, 1), (1, 2), 4),
])
def test_conv_reference_against_naive_loops(stride: tuple[int, int], padding: tuple[int, int],
                                            dilation: tuple[int, int], groups: int) -> None:
    rng = np.random.default_rng(1)
    data = rng.standard_normal((2, 4, 7, 6))
    kernel = rng.standard_normal((8, 4 // groups, 3, 2))
    expected = naive_conv2d_nchw(data, kernel, stride, padding, dilation, groups)
    got = ref.conv2d_nchw(data, kernel, stride, padding, dilation, groups)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    # NHWC / HWIO is the same computation in another layout
    nhwc = ref.conv2d_nhwc(data.transpose(0, 2, 3, 1), kernel.transpose(2, 3, 1, 0), stride,
                           padding, dilation, groups)
    np.testing.assert_allclose(nhwc.transpose(0, 3, 1, 2), expected, rtol=1e-12, atol=1e-12)


def test_depthwise_reference_is_a_grouped_conv() -> None:
    rng = np.random.default_rng(2)
    data = rng.standard_normal((2, 3, 7, 6))
    for mult in (1, 2):
        kernel = rng.standard_normal((3, mult, 3, 3))
        got = ref.depthwise_conv2d_nchw(data, kernel, 2, 1, 1)
        expected = naive_conv2d_nchw(data, kernel.reshape(3 * mult, 1, 3, 3), (2, 2), (1, 1),
                                     (1, 1), 3)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("window", "stride", "padding"), [
    ((3, 3), (2, 2), (1, 1)), ((2, 3), (1, 2), (0, 1)), ((1, 1), (1, 1), (0, 0)),
])
def test_pool_references_against_naive_loops(window: tuple[int, int], stride: tuple[int, int],
                                             padding: tuple[int, int]) -> None:
    data = np.random.default_rng(3).standard_normal((2, 2, 7, 6))
    np.testing.assert_allclose(ref.max_pool2d(data, window, stride, padding),
                               naive_pool(data, window, stride, padding, "max"))
    np.testing.assert_allclose(ref.avg_pool2d(data, window, stride, padding),
                               naive_pool(data, window, stride, padding, "avg"))
    incl = ref.avg_pool2d(data, window, stride, padding, count_include_pad=True)
    padded = np.pad(data, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    np.testing.assert_allclose(incl, naive_pool(padded, window, stride, (0, 0), "avg"))


def test_normalisation_references() -> None:
    x = np.random.default_rng(4).standard_normal((4, 9))
    sm = ref.softmax(x)
    np.testing.assert_allclose(sm.sum(axis=-1), 1.0)
    np.testing.assert_allclose(sm, np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(ref.softmax(x + 1000.0), sm)  # stable
    np.testing.assert_allclose(ref.log_softmax(x), np.log(sm))
    assert np.isfinite(ref.log_softmax(x * 1000.0)).all()
    ln = ref.layer_norm(x, np.ones(9), np.zeros(9))
    np.testing.assert_allclose(ln.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(ln.var(axis=-1), 1.0, rtol=1e-4)
    np.testing.assert_allclose(ref.layer_norm(x, np.full(9, 2.0), np.full(9, 3.0)), 2 * ln + 3)


def test_elementwise_references() -> None:
    v = np.array([-1.0, 0.0, 1.0, 3.0])
    np.testing.assert_allclose(ref.gelu(v), [-0.15865525393145707, 0.0, 0.8413447460685429,
                                             2.9959502689691896])
    np.testing.assert_allclose(ref.sigmoid(v), [1 / (1 + math.e), 0.5, 1 / (1 + 1 / math.e),
                                                1 / (1 + math.exp(-3))])
    np.testing.assert_array_equal(ref.relu(np.array([-2, 0, 5], np.int32)), [0, 0, 5])
    np.testing.assert_array_equal(ref.clip(v, -0.5, 2), [-0.5, 0, 1, 2])
    y = np.array([2.0, 2.0, 4.0, 0.5])
    np.testing.assert_allclose(ref.elementwise_chain(v, ["add", "relu", "div", "clip"], [y, y]),
                               np.clip(np.maximum(v + y, 0) / y, -1, 1))
    data = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(ref.bias_add(data, np.arange(3.0)),
                               data + np.arange(3.0)[None, :, None])


# ---------------------------------------------------------------------------- graph structure


def _ops_of(t: Tensor) -> list[Any]:
    """Every operation ``t`` depends on, inputs first."""
    seen: dict[int, Any] = {}

    def visit(op: Any) -> None:
        if id(op) in seen:
            return
        for inp in op.input_tensors:
            visit(inp.op)
        seen[id(op)] = op

    visit(t.op)
    return list(seen.values())


def _stages(t: Tensor) -> list[str]:
    return [op.name for op in _ops_of(t) if isinstance(op, ComputeOp)]


@pytest.mark.parametrize("case", REGISTRY_CASES, ids=_rid)
def test_built_args_match_the_declared_args(case: tuple[str, dict[str, Any]]) -> None:
    name, params = case
    spec = ops.get_op(name)
    args, specs = spec.build(params), spec.arg_specs(params)
    assert [(t.name, t.shape, t.dtype) for t in args] == [(a.name, a.shape, a.dtype)
                                                          for a in specs]
    assert all(isinstance(t.op, PlaceholderOp) for t in args[:-1])
    assert isinstance(args[-1].op, ComputeOp)
    placeholders = [op for op in _ops_of(args[-1]) if isinstance(op, PlaceholderOp)]
    assert {id(op) for op in placeholders} == {id(t.op) for t in args[:-1]}
    for op in _ops_of(args[-1]):
        if isinstance(op, ComputeOp):
            category = op.tag.split(",")[0]
            assert category == ("reduction" if isinstance(op.body, Reduce) else "injective")
    te.create_schedule(args[-1])  # the default schedule accepts the graph


def test_conv_pad_stage_only_with_padding() -> None:
    spec = ops.get_op("conv2d_nchw")
    padded = spec.build({**CONV, "padding": 1})[-1]
    assert _stages(padded) == ["pad", "conv"]
    pad_op = _ops_of(padded)[1]
    assert ops.has_tag(pad_op, "pad") and ops.has_tag(pad_op, "injective")
    assert pad_op.shape == (1, 4, 10, 10)
    assert isinstance(pad_op.body, Select)
    assert _stages(spec.build(CONV)[-1]) == ["conv"]
    conv = padded.op
    assert [(a.name, a.extent) for a in conv.reduce_axis] == [("rc", 4), ("ry", 3), ("rx", 3)]
    grouped = spec.build({**CONV, "groups": 2})[-1].op
    assert [a.extent for a in grouped.reduce_axis] == [2, 3, 3]
    nhwc = ops.get_op("conv2d_nhwc").build({**CONV, "padding": [0, 1]})[-1]
    assert _stages(nhwc) == ["pad", "conv"] and _ops_of(nhwc)[1].shape == (1, 8, 10, 4)
    pool = ops.get_op("max_pool2d").build({**POOL, "padding": 1})[-1]
    assert ops.has_tag(pool.op.input_tensors[0], "pad")


def test_multi_stage_names() -> None:
    assert _stages(ops.get_op("dense").build({**MM, "activation": "gelu"})[-1]) == [
        "T_dense", "T_bias_add", "T_gelu"]
    assert _stages(ops.get_op("dense").build({**MM, "bias": False})[-1]) == ["T_dense"]
    assert _stages(ops.get_op("softmax").build({"M": 2, "N": 3})[-1]) == [
        "T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"]
    assert _stages(ops.get_op("log_softmax").build({"M": 2, "N": 3})[-1]) == [
        "T_log_softmax_maxelem", "T_log_softmax_expsum", "T_log_softmax"]
    assert _stages(ops.get_op("layer_norm").build({"M": 2, "N": 3})[-1]) == [
        "T_layer_norm_sum", "T_layer_norm_varsum", "T_layer_norm"]
    assert _stages(ops.get_op("avg_pool2d").build({**POOL, "padding": 1})[-1]) == [
        "pad", "pool_sum", "pool_avg"]
    ew = ops.get_op("elementwise").build({"shape": [4], "ops": ["add", "relu", "mul"]})
    assert [t.name for t in ew] == ["x", "y1", "y2", "T_mul"]
    assert _stages(ew[-1]) == ["T_add", "T_relu", "T_mul"]
    assert te.create_schedule(ew[-1])["T_mul"].op is ew[-1].op


@pytest.mark.parametrize(("build", "shape", "dtype"), [
    (lambda: ops.matmul(te.placeholder((3, 4), "int8"), te.placeholder((4, 5), "int8"),
                        out_dtype="int32"), (3, 5), "int32"),
    (lambda: ops.batch_matmul(te.placeholder((2, 3, 4)), te.placeholder((2, 5, 4)), True),
     (2, 3, 5), "float32"),
    (lambda: ops.conv2d_nchw(te.placeholder((1, 4, 9, 9)), te.placeholder((6, 2, 3, 3)), 2,
                             (0, 1, 2, 3), 1, 2), (1, 6, 5, 6), "float32"),
    (lambda: ops.depthwise_conv2d_nchw(te.placeholder((1, 3, 8, 8), "float16"),
                                       te.placeholder((3, 2, 3, 3), "float16"), 1, 1),
     (1, 6, 8, 8), "float16"),
    (lambda: ops.global_avg_pool2d(te.placeholder((2, 3, 5, 7))), (2, 3, 1, 1), "float32"),
    (lambda: ops.reduce_sum(te.placeholder((2, 3, 4)), (0, -1)), (3,), "float32"),
    (lambda: ops.reduce_max(te.placeholder((2, 3, 4), "int32"), 1, True), (2, 1, 4), "int32"),
    (lambda: ops.reduce_sum(te.placeholder((2, 3))), (), "float32"),
    (lambda: ops.transpose(te.placeholder((2, 3, 4)), (2, 0, 1)), (4, 2, 3), "float32"),
    (lambda: ops.reshape(te.placeholder((2, 3, 4)), (-1, 2)), (12, 2), "float32"),
    (lambda: ops.pad(te.placeholder((2, 3)), (1, 0), (0, 2)), (3, 5), "float32"),
    (lambda: ops.concatenate([te.placeholder((2, 3)), te.placeholder((2, 4))], 1), (2, 7),
     "float32"),
    (lambda: ops.add(te.placeholder((3, 1)), te.placeholder((4,))), (3, 4), "float32"),
    (lambda: ops.softmax(te.placeholder((2, 3, 5), "float16")), (2, 3, 5), "float16"),
])
def test_te_output_shapes_and_dtypes(build: Callable[[], Tensor], shape: tuple[int, ...],
                                     dtype: str) -> None:
    out = build()
    assert (out.shape, out.dtype) == (shape, dtype)


def test_tags() -> None:
    a, b = te.placeholder((3, 4)), te.placeholder((4,))
    assert ops.add(a, a).op.tag == "injective,elemwise"
    assert ops.add(a, b).op.tag == "injective,broadcast"
    assert ops.relu(a).op.tag == "injective,elemwise"
    assert ops.matmul(a, te.placeholder((4, 2))).op.tag == "reduction,matmul"
    assert ops.has_tag(ops.reduce_sum(a, 0), "reduction")
    assert not ops.has_tag(ops.transpose(a), "reduction")


@pytest.mark.parametrize(("build", "match"), [
    (lambda: ops.matmul(te.placeholder((3, 4)), te.placeholder((5, 6))), "K=4"),
    (lambda: ops.matmul(te.placeholder((3, 4)), te.placeholder((4, 6), "int8")), "dtype"),
    (lambda: ops.matmul(te.placeholder((3, 4, 1)), te.placeholder((4, 6))), "2-d"),
    (lambda: ops.dense(te.placeholder((3, 4)), te.placeholder((5, 4)), activation="elu"),
     "activation"),
    (lambda: ops.batch_matmul(te.placeholder((2, 3, 4)), te.placeholder((3, 4, 5))), "match"),
    (lambda: ops.conv2d_nchw(te.placeholder((1, 4, 8, 8)), te.placeholder((6, 4, 3, 3)),
                             groups=2), "C/groups"),
    (lambda: ops.conv2d_nchw(te.placeholder((1, 4, 8, 8)), te.placeholder((6, 1, 3, 3)),
                             groups=4), "divisible"),
    (lambda: ops.conv2d_nchw(te.placeholder((1, 4, 2, 8)), te.placeholder((6, 4, 3, 3))),
     "height"),
    (lambda: ops.conv2d_nhwc(te.placeholder((1, 8, 8, 4)), te.placeholder((3, 3, 4, 2)),
                             stride=0), "stride"),
    (lambda: ops.depthwise_conv2d_nchw(te.placeholder((1, 4, 8, 8)),
                                       te.placeholder((3, 1, 3, 3))), "channels"),
    (lambda: ops.max_pool2d(te.placeholder((1, 1, 8, 8)), 2, 1, 2), "smaller than the window"),
    (lambda: ops.avg_pool2d(te.placeholder((1, 1, 8, 8), "int32"), 2), "float"),
    (lambda: ops.reshape(te.placeholder((2, 3)), (4, 2)), "reshape"),
    (lambda: ops.reshape(te.placeholder((2, 3)), (-1, -1)), "reshape"),
    (lambda: ops.transpose(te.placeholder((2, 3)), (0, 0)), "permutation"),
    (lambda: ops.concatenate([te.placeholder((2, 3)), te.placeholder((3, 4))], 0), "match"),
    (lambda: ops.pad(te.placeholder((2, 3)), (1,)), "pad"),
    (lambda: ops.divide(te.placeholder((2,), "int32"), te.placeholder((2,), "int32")),
     "float"),
    (lambda: ops.gelu(te.placeholder((2,), "int32")), "float"),
    (lambda: ops.add(te.placeholder((2, 3)), te.placeholder((3, 2))), "broadcast"),
    (lambda: ops.bias_add(te.placeholder((2, 3)), te.placeholder((2,))), "bias"),
    (lambda: ops.layer_norm(te.placeholder((2, 3)), te.placeholder((2,)), te.placeholder((3,))),
     "gamma"),
    (lambda: ops.softmax(te.placeholder((2, 3), "int32")), "float"),
    (lambda: ops.reduce_sum(te.placeholder((2, 3)), (0, 0)), "twice"),
    (lambda: ops.reduce_max(te.placeholder((2, 3)), 2), "out of range"),
    (lambda: ops.clip(te.placeholder((2,)), 1.0, 0.0), "a_min"),
    (lambda: ops.elementwise_chain(te.placeholder((2,)), ["add"]), "operand"),
    (lambda: ops.elementwise_chain(te.placeholder((2,)), ["cos"]), "unknown op"),
])
def test_te_ops_reject_bad_arguments(build: Callable[[], Tensor], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build()


# ---------------------------------------------------------------------------- properties

conv_params = st.fixed_dictionaries({
    "N": st.integers(1, 2), "C": st.integers(1, 4), "H": st.integers(1, 9),
    "W": st.integers(1, 9), "K": st.integers(1, 4), "R": st.integers(1, 4),
    "S": st.integers(1, 4), "stride": st.integers(1, 3) | st.lists(st.integers(1, 3),
                                                                   min_size=2, max_size=2),
    "padding": st.integers(0, 2), "dilation": st.integers(1, 2), "groups": st.integers(1, 4),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=conv_params, layout=st.sampled_from(["conv2d_nchw", "conv2d_nhwc"]))
def test_conv_params_either_validate_or_name_the_problem(params: dict[str, Any],
                                                         layout: str) -> None:
    spec = ops.get_op(layout)
    try:
        p = spec.normalize(params)
    except ops.ParamError as err:
        assert err.param in ("groups", "R", "S")
        return
    args = spec.build(p)
    inputs = spec.random_inputs(p, seed=0)
    assert_matches(run_interpreted(args, inputs), spec.reference(inputs, p))


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_reshape_and_transpose_round_trip(shape: list[int], data: st.DataObject) -> None:
    perm = data.draw(st.permutations(range(len(shape))))
    x = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    X = te.placeholder(tuple(shape), "int32", "x")
    t = ops.transpose(X, perm)
    flat = ops.reshape(t, (-1,))
    got = te_eval(flat, {X: x})
    np.testing.assert_array_equal(got, np.transpose(x, perm).reshape(-1))
