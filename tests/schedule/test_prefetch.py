"""The ``prefetch`` primitive: a pass computed at a loop fetches its inputs that many
iterations ahead; the hints change no result, and misuse is a clear ScheduleError."""

import numpy as np
import pytest

from schedule import ScheduleError, build, lower, te
from schedule.codegen_c import generate_c
from schedule.gpu_build import gpu_source
from schedule.vta.codegen import VtaCodegenError, generate
from schedule.vta.config import VtaConfig


def row_exp(M: int = 24, N: int = 200):
    """exp(A - rowmax(A)) with the row maximum computed at the output's row loop."""
    A = te.placeholder((M, N), name="A")
    k = te.reduce_axis((0, N), name="k")
    mx = te.compute((M,), lambda i: te.max(A[i, k], axis=k), name="mx")
    E = te.compute((M, N), lambda i, j: te.exp(A[i, j] - mx[i]), name="E")
    s = te.create_schedule(E)
    s[mx].compute_at(s[E], s[E].op.axis[0])
    return s, A, mx, E


def expected(a: np.ndarray) -> np.ndarray:
    return np.exp(a - a.max(axis=1, keepdims=True))


def run_row_exp(s, A, E) -> None:
    a = np.random.default_rng(0).standard_normal(A.shape).astype("float32")
    out = np.zeros(E.shape, "float32")
    mod = build(s, [A, E])
    mod(a, out)
    np.testing.assert_allclose(out, expected(a), rtol=1e-5)
    return mod


def test_a_pass_at_the_row_loop_prefetches_the_next_row_and_stays_correct():
    s, A, mx, E = row_exp()
    s[mx].prefetch(A, 1)
    s[E].parallel(s[E].op.axis[0])
    text = str(lower(s, [A, E]))
    assert "prefetch A[i + 1, k]" in text
    mod = run_row_exp(s, A, E)
    assert "__builtin_prefetch(&A[" in mod.source


def test_the_distance_reaches_that_many_iterations_ahead():
    s, A, mx, E = row_exp()
    s[mx].prefetch(A, 3)
    assert "prefetch A[i + 3, k]" in str(lower(s, [A, E]))
    run_row_exp(s, A, E)


def test_a_vectorized_pass_prefetches_once_per_vector():
    s, A, _, E = row_exp(M=8, N=64)
    Ex = te.compute(E.shape, lambda i, j: te.exp(A[i, j] * 2.0), name="Ex")
    out = te.compute(E.shape, lambda i, j: E[i, j] + Ex[i, j], name="out")
    s = te.create_schedule(out)
    s[E].compute_inline()
    s[E.op.input_tensors[1]].compute_at(s[out], s[out].op.axis[0])  # the row maximum
    s[Ex].compute_at(s[out], s[out].op.axis[0])
    s[Ex].vectorize(s[Ex].op.axis[1])
    s[Ex].prefetch(A, 1)
    func = lower(s, [A, out])
    source = generate_c(func, vector_bytes=64, threads=1)  # 16 lanes: 64 floats, 4 vectors
    assert source.count("__builtin_prefetch") == 4
    assert generate_c(func, vector_bytes=32, threads=1).count("__builtin_prefetch") == 8
    a = np.random.default_rng(1).standard_normal(A.shape).astype("float32")
    result = np.zeros(out.shape, "float32")
    build(s, [A, out])(a, result)
    np.testing.assert_allclose(result, expected(a) + np.exp(a * 2), rtol=1e-5)


def test_the_loop_looked_ahead_in_is_the_first_outward_that_runs_more_than_once():
    A = te.placeholder((16, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    total = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="total")
    s = te.create_schedule(total)
    ko, ki = s[total].split(k, factor=16)
    partial = s.rfactor(total, ki)
    s[partial].compute_at(s[total], s[total].op.axis[0])  # its own row loop: one iteration
    s[partial].prefetch(A, 1)
    assert "prefetch A[i + 1," in str(lower(s, [A, total]))
    a = np.random.default_rng(2).standard_normal(A.shape).astype("float32")
    out = np.zeros(16, "float32")
    build(s, [A, total])(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5)


def test_prefetch_steps_replay_to_the_same_program():
    s, A, mx, E = row_exp()
    s[mx].prefetch(A, 2)
    assert s.steps[-1] == ["prefetch", "mx", "A", 2]
    again, A2, _, E2 = row_exp()
    again.replay(s.steps[1:])  # after the compute_at both schedules share
    assert build(again, [A2, E2]).source == build(s, [A, E]).source


def test_bad_prefetches_are_clear_errors_and_one_without_a_moving_read_makes_no_hint():
    s, A, mx, E = row_exp()
    with pytest.raises(ScheduleError, match="mx is not an input"):
        s[E].prefetch(mx, 1)
    for distance in (0, 9, True, 1.5):
        with pytest.raises(ScheduleError, match="distance must be an integer in 1..8"):
            s[mx].prefetch(A, distance)
    with pytest.raises(ScheduleError, match="input placeholder"):
        s[A].prefetch(A, 1)

    s, A, mx, E = row_exp()
    s[E].prefetch(A, 1)
    with pytest.raises(ScheduleError, match="computed at the root"):
        lower(s, [A, E])

    B = te.placeholder((4,), name="B")
    out = te.compute((24, 200), lambda i, j: A[i, j] * B[2], name="out")
    inner = te.compute((24, 200), lambda i, j: out[i, j] + 1.0, name="inner")
    s = te.create_schedule(inner)
    s[out].compute_at(s[inner], s[inner].op.axis[1])  # every iteration reads the same B[2]
    s[out].prefetch(B, 1)
    assert "prefetch" not in str(lower(s, [A, B, inner]))  # nothing ahead to fetch

    C = te.placeholder((24, 200), name="C")
    _, A, mx, E = row_exp()
    shifted = te.compute(E.shape, lambda i, j: E[i, j] + C[i, j], name="shifted")
    s = te.create_schedule(shifted)
    s[E].compute_inline()
    s[mx].compute_at(s[shifted], s[shifted].op.axis[0])
    s[mx].prefetch(C, 1)
    with pytest.raises(ScheduleError, match="prefetch of C on stage mx: it reads nothing"):
        lower(s, [A, C, shifted])


def test_gpu_and_vta_programs_refuse_prefetch():
    s, A, mx, E = row_exp()
    s[mx].prefetch(A, 1)
    i, j = s[E].op.axis
    s[E].bind(i, "blockIdx.x")
    s[E].bind(j, "threadIdx.x")
    with pytest.raises(ScheduleError, match="CPU schedule primitive"):
        gpu_source(s, [A, E], "cuda -arch=sm_80")
    with pytest.raises(VtaCodegenError, match="CPU schedule primitive"):
        generate(lower(s, [A, E], unroll=False), VtaConfig())
