"""Property: any sequence of primitives either fails with a clear ScheduleError or builds a
program whose output matches numpy — never a crash, never a wrong answer."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedule import ScheduleError, build, te

from .helpers import matmul, random_array

PRIMITIVES = ["split", "split_nparts", "reorder", "fuse", "parallel", "vectorize", "unroll",
              "compute_at", "compute_inline", "compute_root", "cache_write", "cache_read",
              "pragma", "rfactor", "storage_align"]


def _apply_random_step(data: st.DataObject, s: te.Schedule) -> None:
    stages = [x for x in s.stages if not x.is_placeholder]
    stage = data.draw(st.sampled_from(stages))
    kind = data.draw(st.sampled_from(PRIMITIVES))
    # mostly current loops, sometimes a stale axis, to exercise the errors
    axes = stage.leaf_iter_vars if data.draw(st.integers(0, 9)) else \
        [*stage.root_iter_vars, *stage.leaf_iter_vars]
    axis = data.draw(st.sampled_from(axes)) if axes else None
    factor = data.draw(st.integers(1, 9))
    if kind == "split":
        stage.split(axis, factor=factor)
    elif kind == "split_nparts":
        stage.split(axis, nparts=factor)
    elif kind == "reorder":
        stage.reorder(*data.draw(st.permutations(stage.leaf_iter_vars)))
    elif kind == "fuse":
        pos = data.draw(st.integers(0, max(len(stage.leaf_iter_vars) - 2, 0)))
        stage.fuse(*stage.leaf_iter_vars[pos:pos + 2])
    elif kind in ("parallel", "vectorize", "unroll"):
        getattr(stage, kind)(axis)
    elif kind == "compute_at":
        target = data.draw(st.sampled_from(stages))
        stage.compute_at(target, data.draw(st.sampled_from(target.leaf_iter_vars)))
    elif kind == "compute_inline":
        stage.compute_inline()
    elif kind == "compute_root":
        stage.compute_root()
    elif kind == "cache_write":
        s.cache_write(stage.op.output, data.draw(st.sampled_from(["local", "global"])))
    elif kind == "cache_read":
        producers = s.producers(stage)
        if producers:
            src = data.draw(st.sampled_from(producers))
            s.cache_read(src.op.output, "local", [stage])
    elif kind == "pragma":
        stage.pragma(axis, "auto_unroll_max_step", data.draw(st.sampled_from([0, 16, 64])))
    elif kind == "rfactor":
        s.rfactor(stage.op.output, axis)
    elif kind == "storage_align":
        stage.storage_align(data.draw(st.sampled_from(stage.op.axis)), 8, factor % 8)


def _run_random_schedule(data: st.DataObject, make, reference) -> None:
    args = make()
    s = te.create_schedule(args[-1])
    for _ in range(data.draw(st.integers(0, 8))):
        try:
            _apply_random_step(data, s)
        except ScheduleError as err:
            assert str(err), "a schedule error must say what is wrong"
    try:
        mod = build(s, args, target="cpu")
    except ScheduleError as err:
        assert str(err)
        return
    rng = np.random.default_rng(0)
    inputs = [random_array(t.shape, t.dtype, rng) for t in args[:-1]]
    out = np.full(args[-1].shape, np.nan, dtype=args[-1].dtype)
    mod(*inputs, out)
    np.testing.assert_allclose(out, reference(*inputs), rtol=1e-4, atol=1e-4,
                               err_msg=f"steps: {s.steps}")


SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(st.data(), st.integers(1, 13), st.integers(1, 19), st.integers(1, 11))
def test_random_schedules_on_matmul(data, m, n, k):
    _run_random_schedule(data, lambda: list(matmul(m, n, k)), lambda a, b: a @ b)


def conv2d(n=1, c=3, h=7, w=6, k=4, r=3, stride=2, pad=1):
    X = te.placeholder((n, c, h, w), name="X")
    W = te.placeholder((k, c, r, r), name="W")
    hp, wp = h + 2 * pad, w + 2 * pad
    P = te.compute((n, c, hp, wp), lambda b, ch, y, x: te.if_then_else(
        te.all(y >= pad, y < h + pad, x >= pad, x < w + pad), X[b, ch, y - pad, x - pad], 0.0),
        name="pad")
    oh, ow = (hp - r) // stride + 1, (wp - r) // stride + 1
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, r), name="ry")
    rx = te.reduce_axis((0, r), name="rx")
    Y = te.compute((n, k, oh, ow), lambda b, o, y, x: te.sum(
        P[b, rc, y * stride + ry, x * stride + rx] * W[o, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv")
    return [X, W, Y]


def conv2d_reference(x, w, stride=2, pad=1):
    n, c, h, wd = x.shape
    k, _, r, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - r) // stride + 1
    out = np.zeros((n, k, oh, ow), dtype=np.float64)
    for ry in range(r):
        for rx in range(r):
            patch = xp[:, :, ry:ry + stride * oh:stride, rx:rx + stride * ow:stride]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, ry, rx])
    return out


@SETTINGS
@given(st.data())
def test_random_schedules_on_conv2d(data):
    _run_random_schedule(data, conv2d, conv2d_reference)


def softmax(m=5, n=23):
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    M = te.compute((m,), lambda i: te.max(A[i, k], axis=k), name="M")
    E = te.compute((m, n), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    k2 = te.reduce_axis((0, n), name="k2")
    S = te.compute((m,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    O = te.compute((m, n), lambda i, j: E[i, j] / S[i], name="O")  # noqa: E741
    return [A, O]


def softmax_reference(a):
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@SETTINGS
@given(st.data())
def test_random_schedules_on_softmax(data):
    _run_random_schedule(data, softmax, softmax_reference)
