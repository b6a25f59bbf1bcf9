"""Hand-written CPU schedules (``op_schedules``) for every operator of ``schedule.ops``.

Each test builds a schedule, runs it on odd shapes (primes, 1s, tiles that do not divide)
and compares with the op's numpy reference, then checks in the generated C that the
schedule took effect: an OpenMP parallel loop, vector code, and for the register-tiled
ops (matmul, dense, batch_matmul, convolutions, pooling, row reductions) that the
accumulator tile was promoted to vector registers (``<tile>_r0`` variables, no
``<tile>[`` array accesses on the main path).

The tests at the end are regression tests for compiler bugs found while writing these
schedules (a vectorized select that read both sides, loops of one iteration blocking
register promotion, fused loops whose index did not simplify back).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from schedule import build, ops, te
from schedule.ops import reference as ref

from . import op_schedules as S
from .helpers import random_array

PARALLEL = "#pragma omp parallel for"
# a vector type in a statement, or a masked vector store (a loop's last lanes on AVX-512)
_VECTOR_USE = re.compile(r"^(?!typedef|static inline).*(tt_(float32|int32)x\d+|_mask_storeu_)",
                         re.MULTILINE)
_GATHER = re.compile(r"\(\(tt_float32x\d+\)\{[^0}]")  # a vector built lane by lane


def has_vector_code(source: str) -> bool:
    """Vector types used in the kernel body (not only declared)."""
    return _VECTOR_USE.search(source) is not None


def promoted(source: str, buf: str) -> bool:
    """``buf`` (a ``local`` tile) lives in variables ``buf_r0, ...`` on the main path: no
    access to it as an array (a versioned edge tile gets its own buffer, ``buf_1``)."""
    return f"{buf}_r0" in source and f"{buf}[" not in source


def run_spec(name: str, params: dict[str, Any], schedule_fn: Callable[..., te.Schedule],
             rtol: float = 1e-4, atol: float = 1e-4, **kwargs: Any) -> str:
    """Build the registered op ``name`` with ``schedule_fn(args, **kwargs)``, compare with its
    reference on its random inputs; returns the C source."""
    spec = ops.get_op(name)
    p = spec.normalize(params)
    args = spec.build(p)
    mod = build(schedule_fn(args, **kwargs), args)
    inputs = spec.random_inputs(p, seed=0)
    out = spec.empty_output(p)
    mod(*inputs, out)
    np.testing.assert_allclose(out, spec.reference(inputs, p), rtol=rtol, atol=atol)
    return mod.source


def run_te(args: Sequence[te.Tensor], s: te.Schedule, reference: Callable[..., np.ndarray],
           rtol: float = 1e-4, atol: float = 1e-4) -> str:
    """Build ``s`` over ``args`` (inputs then the output), compare with ``reference(*inputs)``;
    returns the C source."""
    mod = build(s, args)
    rng = np.random.default_rng(0)
    inputs = [random_array(t.shape, t.dtype, rng) for t in args[:-1]]
    out = np.zeros(args[-1].shape, args[-1].dtype)
    mod(*inputs, out)
    expected = reference(*inputs)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out, expected, rtol=rtol, atol=atol)
    return mod.source


def assert_parallel_vector(source: str) -> None:
    assert PARALLEL in source
    assert has_vector_code(source)


# ---------------------------------------------------------------------------- linear algebra


@pytest.mark.parametrize("M, N, K", [(37, 53, 19), (64, 64, 32), (1, 17, 3)])
def test_matmul_gemm_tile(M, N, K):
    src = run_spec("matmul", {"M": M, "N": N, "K": K}, S.schedule_matmul)
    if N > 32:  # more than one column panel (a loop of one iteration is no loop)
        assert PARALLEL in src
    assert has_vector_code(src)
    assert "B_global[" in src  # the packed column panel
    if M > 8:  # at least one full 8-row tile: the accumulators live in registers
        assert promoted(src, "T_matmul_local")


def test_matmul_transpose_a_gemm_tile():
    src = run_spec("matmul", {"M": 16, "N": 40, "K": 7, "transpose_a": True},
                   S.schedule_matmul, transpose_a=True)
    assert_parallel_vector(src)
    assert promoted(src, "T_matmul_local")


@pytest.mark.parametrize("M, N, K", [(13, 8, 32), (8, 4, 21)])
def test_matmul_transpose_b_dot_tile(M, N, K):
    src = run_spec("matmul", {"M": M, "N": N, "K": K, "transpose_b": True},
                   S.schedule_matmul, transpose_b=True)
    assert_parallel_vector(src)
    assert "T_matmul_rf_local" in src  # the factored reduction, one vector per output
    if K % S.LANES == 0:  # no lane-dependent tail in the reduction
        assert promoted(src, "T_matmul_rf_local")


def test_matmul_both_transposed():
    src = run_spec("matmul", {"M": 24, "N": 40, "K": 9, "transpose_a": True,
                              "transpose_b": True}, S.schedule_matmul,
                   transpose_a=True, transpose_b=True)
    assert_parallel_vector(src)
    assert promoted(src, "T_matmul_local")


def test_matmul_int8_accumulates_in_int32_registers():
    src = run_spec("matmul", {"M": 16, "N": 40, "K": 23, "dtype": "int8"}, S.schedule_matmul,
                   rtol=0, atol=0)
    assert PARALLEL in src
    assert "tt_int32x" in src
    assert promoted(src, "T_matmul_local")


@pytest.mark.parametrize("params", [
    {"M": 13, "N": 8, "K": 32, "activation": "relu"},
    {"M": 8, "N": 8, "K": 19, "activation": "gelu"},
    {"M": 8, "N": 12, "K": 16},
    {"M": 1, "N": 12, "K": 40, "bias": False},
], ids=["relu-edge-tiles", "gelu-k-tail", "bias", "plain-m1"])
def test_dense(params):
    src = run_spec("dense", params, S.schedule_dense)
    assert_parallel_vector(src)
    if params.get("activation", "none") != "none":
        assert "T_bias_add[" not in src  # the epilogue is inlined into the output
    if params["K"] % S.LANES == 0 and params["M"] >= 4:
        assert promoted(src, "T_dense_rf_local")


@pytest.mark.parametrize("transpose_b", [False, True])
def test_batch_matmul(transpose_b):
    shape = {"B": 3, "M": 4, "N": 12, "K": 32} if transpose_b else \
        {"B": 3, "M": 13, "N": 40, "K": 11}
    src = run_spec("batch_matmul", {**shape, "transpose_b": transpose_b},
                   S.schedule_batch_matmul, transpose_b=transpose_b)
    assert_parallel_vector(src)
    tile = "T_batch_matmul_rf_local" if transpose_b else "T_batch_matmul_local"
    assert promoted(src, tile)


# ---------------------------------------------------------------------------- convolution

CONV_CASES = {
    "3x3-pad1": {"N": 1, "C": 3, "H": 10, "W": 40, "K": 12, "R": 3, "S": 3, "padding": 1},
    "stride-dilation-groups": {"N": 2, "C": 4, "H": 11, "W": 17, "K": 6, "R": 3, "S": 2,
                               "stride": 2, "padding": (1, 0), "dilation": (1, 2),
                               "groups": 2},
    "1x1-pad": {"N": 1, "C": 5, "H": 7, "W": 9, "K": 7, "R": 1, "S": 1, "padding": (1, 0)},
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv2d_nchw(case):
    params = CONV_CASES[case]
    src = run_spec("conv2d_nchw", params, S.schedule_conv2d_nchw)
    assert_parallel_vector(src)
    if case == "3x3-pad1":
        assert promoted(src, "conv_local")
        assert re.search(r"float pad\[\d+\]", src)  # an output row's padded rows, on the stack


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv2d_nhwc(case):
    params = dict(CONV_CASES[case])
    if case != "stride-dilation-groups":
        params["K"] = 48  # output channels are the vector axis: a full and an edge tile
    src = run_spec("conv2d_nhwc", params, S.schedule_conv2d_nhwc)
    assert_parallel_vector(src)
    if params.get("groups", 1) == 1:
        assert "pad[" not in src  # inlined: its condition does not depend on the lane
        assert promoted(src, "conv_local")


@pytest.mark.parametrize("params", [
    {"N": 1, "C": 5, "H": 13, "W": 19, "R": 3, "S": 3, "padding": 1},
    {"N": 2, "C": 3, "H": 13, "W": 40, "R": 3, "S": 2, "stride": 2, "padding": (0, 1),
     "dilation": 2},
], ids=["3x3-pad1", "stride-dilation"])
def test_depthwise_conv2d_nchw(params):
    src = run_spec("depthwise_conv2d_nchw", params, S.schedule_depthwise_conv2d_nchw)
    assert_parallel_vector(src)
    assert promoted(src, "depthwise_conv_local")


def test_depthwise_conv2d_with_channel_multiplier():
    data = te.placeholder((1, 3, 9, 21), name="data")
    kernel = te.placeholder((3, 2, 3, 3), name="kernel")
    out = ops.depthwise_conv2d_nchw(data, kernel, padding=1)
    args = [data, kernel, out]
    src = run_te(args, S.schedule_depthwise_conv2d_nchw(args),
                 lambda d, k: ref.depthwise_conv2d_nchw(d, k, padding=1))
    assert_parallel_vector(src)
    assert promoted(src, "depthwise_conv_local")


# ---------------------------------------------------------------------------- pooling

POOL_CASES = {
    "3x3-s1-pad1": {"N": 1, "C": 3, "H": 12, "W": 40, "R": 3, "S": 3, "padding": 1},
    "2x3-s2": {"N": 2, "C": 3, "H": 11, "W": 13, "R": 2, "S": 3, "stride": 2,
               "padding": (1, 1)},
}


@pytest.mark.parametrize("case", list(POOL_CASES))
def test_max_pool2d(case):
    src = run_spec("max_pool2d", POOL_CASES[case], S.schedule_max_pool2d, rtol=0, atol=0)
    assert_parallel_vector(src)
    if case == "3x3-s1-pad1":
        assert promoted(src, "pool_max_local")


@pytest.mark.parametrize("case", list(POOL_CASES))
def test_avg_pool2d(case):
    src = run_spec("avg_pool2d", POOL_CASES[case], S.schedule_avg_pool2d)
    assert_parallel_vector(src)
    assert "pool_sum[" not in src  # the sums go from registers to the division
    if case == "3x3-s1-pad1":
        assert promoted(src, "pool_sum_local")


@pytest.mark.parametrize("shape", [(2, 5, 9, 13), (1, 3, 1, 1)])
def test_global_avg_pool2d(shape):
    data = te.placeholder(shape, name="data")
    out = ops.global_avg_pool2d(data)
    args = [data, out]
    src = run_te(args, S.schedule_global_avg_pool2d(args), ref.global_avg_pool2d)
    assert PARALLEL in src
    if shape[2] * shape[3] > S.LANES:
        assert has_vector_code(src)
        assert "global_pool_sum_rf_local" in src  # rfactor: partial sums per lane


# ---------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize("M, N", [(7, 100), (4, 64)])
def test_softmax(M, N):
    src = run_spec("softmax", {"M": M, "N": N}, S.schedule_softmax)
    assert_parallel_vector(src)
    if N % S.LANES == 0:
        assert promoted(src, "T_softmax_maxelem_rf_local")
        assert promoted(src, "T_softmax_expsum_rf_local")


def test_softmax_3d_rows():
    x = te.placeholder((2, 3, 37), name="x")
    out = ops.softmax(x)
    src = run_te([x, out], S.schedule_softmax([x, out]), ref.softmax)
    assert_parallel_vector(src)


@pytest.mark.parametrize("M, N", [(7, 100), (5, 32)])
def test_log_softmax(M, N):
    src = run_spec("log_softmax", {"M": M, "N": N}, S.schedule_log_softmax)
    assert_parallel_vector(src)
    if N % S.LANES == 0:
        assert promoted(src, "T_log_softmax_expsum_rf_local")


@pytest.mark.parametrize("M, N", [(3, 5), (2, 48)])
def test_layer_norm(M, N):
    src = run_spec("layer_norm", {"M": M, "N": N}, S.schedule_layer_norm)
    assert_parallel_vector(src)
    if N % S.LANES == 0:
        assert promoted(src, "T_layer_norm_varsum_rf_local")


# ---------------------------------------------------------------------------- element-wise


@pytest.mark.parametrize("name", ["add", "divide"])  # all four ops: the chain test below
def test_binary_broadcast(name):
    a = te.placeholder((4, 1, 40), name="a")
    b = te.placeholder((3, 40), name="b")
    out = getattr(ops, name)(a, b)
    src = run_te([a, b, out], S.schedule_injective([a, b, out]), getattr(ref, name))
    assert_parallel_vector(src)


def test_binary_with_scalar_on_a_1d_tensor():
    x = te.placeholder((1000,), name="x")
    out = ops.divide(ops.multiply(x, 3.0), 2.0)
    src = run_te([x, out], S.schedule_injective([x, out]), lambda v: v * 3.0 / 2.0)
    assert_parallel_vector(src)
    assert "T_multiply[" not in src


@pytest.mark.parametrize("name", ["gelu", "clip"])  # all five ops: the chain test below
def test_unary(name):
    x = te.placeholder((3, 5, 37), name="x")
    if name == "clip":
        out = ops.clip(x, -0.5, 0.7)
        reference = lambda v: ref.clip(v, -0.5, 0.7)  # noqa: E731
    else:
        out = getattr(ops, name)(x)
        reference = getattr(ref, name)
    src = run_te([x, out], S.schedule_injective([x, out]), reference, rtol=1e-5, atol=1e-6)
    assert_parallel_vector(src)


@pytest.mark.parametrize("dtype, chain", [
    ("float32", ["add", "relu", "mul", "gelu", "sub", "sigmoid", "div", "tanh", "clip"]),
    ("int32", ["add", "relu", "mul", "sub", "clip"]),
])
def test_elementwise_chain_is_fused(dtype, chain):
    src = run_spec("elementwise", {"shape": [3, 7, 48], "ops": chain, "dtype": dtype},
                   S.schedule_injective, rtol=1e-5, atol=1e-5)
    assert_parallel_vector(src)
    for op in chain[:-1]:  # every intermediate stage inlined into the output
        assert f"T_{op}[" not in src


@pytest.mark.parametrize("shape, axis", [((2, 6, 5, 7), 1), ((9, 70), -1)])
def test_bias_add(shape, axis):
    x = te.placeholder(shape, name="x")
    bias = te.placeholder((shape[axis],), name="bias")
    out = ops.bias_add(x, bias, axis=axis)
    src = run_te([x, bias, out], S.schedule_injective([x, bias, out]),
                 lambda v, b: ref.bias_add(v, b, axis))
    assert_parallel_vector(src)


# ---------------------------------------------------------------------------- reductions


@pytest.mark.parametrize("fn, shape, axis, keepdims", [
    ("sum", (7, 100), 1, False),            # rows: rfactor by lanes, rows in parallel
    ("max", (7, 64), -1, True),
    ("sum", (2, 16, 9, 13), (2, 3), True),  # planes of NCHW
    ("max", (5, 7, 3, 40), (0, 2), False),  # last axis kept: register tile of columns
    ("sum", (37, 50), 0, True),
    ("sum", (3, 5, 67), None, False),       # everything: parallel chunks x lanes
], ids=["rows", "rows-keepdims", "planes", "outer-axes", "columns", "all"])
def test_reduce(fn, shape, axis, keepdims):
    x = te.placeholder(shape, name="x")
    op, reference = (ops.reduce_sum, ref.reduce_sum) if fn == "sum" else \
        (ops.reduce_max, ref.reduce_max)
    out = op(x, axis=axis, keepdims=keepdims)
    src = run_te([x, out], S.schedule_reduce([x, out]),
                 lambda v: reference(v, axis, keepdims), rtol=1e-4, atol=1e-4)
    assert_parallel_vector(src)
    name = f"T_reduce_{fn}"
    if axis in (1, -1) and shape[-1] % S.LANES == 0:
        assert promoted(src, f"{name}_rf_local")
    if axis in ((0, 2), 0):
        assert promoted(src, f"{name}_local")
    if axis is None:
        assert f"{name}_rf_rf_local" in src  # two rfactor levels


# ---------------------------------------------------------------------------- layout


@pytest.mark.parametrize("shape, axes", [
    ((37, 50), None),
    ((3, 17, 4, 20), (0, 2, 3, 1)),
    ((3, 17, 4, 20), (1, 0, 2, 3)),
])
def test_transpose(shape, axes):
    x = te.placeholder(shape, name="x")
    out = ops.transpose(x, axes)
    src = run_te([x, out], S.schedule_transpose([x, out], axes),
                 lambda v: ref.transpose(v, axes))
    assert_parallel_vector(src)
    if axes is not None and axes[-1] == len(shape) - 1:
        assert not _GATHER.search(src)  # the last axis stays: contiguous vectors


@pytest.mark.parametrize("shape, newshape", [((7, 3, 40), (21, -1))])
def test_reshape(shape, newshape):
    x = te.placeholder(shape, name="x")
    out = ops.reshape(x, newshape)
    src = run_te([x, out], S.schedule_injective([x, out]),
                 lambda v: ref.reshape(v, out.shape))
    assert_parallel_vector(src)


@pytest.mark.parametrize("shape, before, after, value", [
    ((7, 37), [0, 3], [0, 12], 1.5),                  # along the vector axis: chunks
    ((2, 3, 11, 37), [0, 0, 1, 3], [0, 0, 2, 0], 0.0),  # NCHW: rows padded too
], ids=["last-axis", "nchw"])
def test_pad(shape, before, after, value):
    x = te.placeholder(shape, name="x")
    out = ops.pad(x, before, after, value)
    src = run_te([x, out], S.schedule_select([x, out]),
                 lambda v: ref.pad(v, before, after, value))
    assert PARALLEL in src
    if len(shape) == 2:  # the chunks inside the row are plain vector copies, no select
        assert has_vector_code(src) and "select" not in src


@pytest.mark.parametrize("shapes, axis", [
    ([(5, 33), (2, 33), (4, 33)], 0),
    ([(5, 16), (5, 21)], 1),
])
def test_concatenate(shapes, axis):
    xs = [te.placeholder(shape, name=f"x{i}") for i, shape in enumerate(shapes)]
    out = ops.concatenate(xs, axis)
    args = [*xs, out]
    src = run_te(args, S.schedule_select(args), lambda *v: ref.concatenate(v, axis))
    assert PARALLEL in src
    if axis == 1:  # along the vector axis: each chunk copies from one input
        assert has_vector_code(src) and "select" not in src


# ---------------------------------------------------------------------------- known limits


def test_single_panel_gemm_tile_is_promoted():
    from schedule.examples import matmul_schedule

    s, args = matmul_schedule(16, 32, 8, rows=4, cols=32)
    assert promoted(build(s, args).source, "C_local")


def test_fused_elementwise_loop_is_vectorized():
    x = te.placeholder((6, 5, 8), name="x")
    out = ops.relu(x)
    s = te.create_schedule(out)
    fused = s[out].fuse(*s[out].op.axis)
    _, inner = s[out].split(fused, factor=S.LANES)
    s[out].vectorize(inner)
    src = run_te([x, out], s, ref.relu)
    assert has_vector_code(src)


_GUARDED_PAD = """
import ctypes, mmap
import numpy as np
from schedule import build, ops, te

# pad the rows (H) of NHWC data, vectorized along the channels: the select's condition
# (the row is inside the input) does not depend on the lane; its load reads row h - 1
x = te.placeholder((1, 4, 2, 16), name="x")
out = ops.pad(x, [0, 1, 0, 0], [0, 1, 0, 0])
s = te.create_schedule(out)
s[out].vectorize(s[out].op.axis[-1])
mod = build(s, [x, out])
# the input at the start of a page whose preceding page is unreadable
page = mmap.PAGESIZE
buf = mmap.mmap(-1, 2 * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(base), page, 0) == 0
data = np.frombuffer(buf, np.float32, count=128, offset=page).reshape(1, 4, 2, 16)
data[:] = 1.0
result = np.zeros((1, 6, 2, 16), np.float32)
mod(data, result)
assert np.array_equal(result, np.pad(data, [(0, 0), (1, 1), (0, 0), (0, 0)]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect guard page")
def test_vectorized_select_loads_only_the_chosen_side():
    proc = subprocess.run([sys.executable, "-c", _GUARDED_PAD], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
