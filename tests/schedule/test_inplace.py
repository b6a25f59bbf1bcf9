"""Intermediates kept in the output they become (``schedule.inplace``): placed where every
condition holds, left in their own buffer where one fails, numpy's results either way."""

from __future__ import annotations

import numpy as np
import pytest

from schedule import build, te


def _row_softmax(rows: int = 4, cols: int = 64):
    """exp, its row sum and the normalised output, all computed per row of the output."""
    A = te.placeholder((rows, cols), name="A")
    E = te.compute((rows, cols), lambda i, j: te.exp(A[i, j]), name="E")
    k = te.reduce_axis((0, cols), name="k")
    S = te.compute((rows,), lambda i: te.sum(E[i, k], axis=k), name="S")
    Out = te.compute((rows, cols), lambda i, j: E[i, j] / S[i], name="O")
    return A, E, S, Out


def _softmax_reference(a: np.ndarray) -> np.ndarray:
    e = np.exp(a)
    return e / e.sum(axis=1, keepdims=True)


def _random(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype("float32")


def test_a_row_intermediate_lives_in_the_output_row_it_becomes() -> None:
    A, E, S, Out = _row_softmax()
    s = te.create_schedule(Out)
    s[E].compute_at(s[Out], Out.op.axis[0])
    s[S].compute_at(s[Out], Out.op.axis[0])
    jo, ji = s[Out].split(Out.op.axis[1], factor=16)
    s[Out].vectorize(ji)
    s[Out].parallel(Out.op.axis[0])
    mod = build(s, [A, Out])
    assert "float E[" not in mod.source and "E[" not in mod.source.replace("_E[", "")
    assert "O[((i * 64)" in mod.source or "O[(i * 64)" in mod.source
    a, out = _random(4, 64), np.zeros((4, 64), "float32")
    mod(a, out)
    np.testing.assert_allclose(out, _softmax_reference(a), rtol=1e-5)


def test_a_whole_intermediate_at_the_root_lives_in_the_output() -> None:
    A = te.placeholder((8, 24), name="A")
    B = te.compute((8, 24), lambda i, j: A[i, j] * 2.0, name="B")
    Out = te.compute((8, 24), lambda i, j: te.max(B[i, j], 0.0), name="O")
    s = te.create_schedule(Out)
    mod = build(s, [A, Out])
    assert "float* restrict B" not in mod.source and "B[" not in mod.source
    a, out = _random(8, 24), np.zeros((8, 24), "float32")
    mod(a, out)
    np.testing.assert_array_equal(out, np.maximum(a * 2.0, 0.0))


def _assert_kept_apart(mod, buffer: str) -> None:
    assert f"float {buffer}[" in mod.source or f"float* restrict {buffer} =" in mod.source


def test_a_read_of_another_element_keeps_the_intermediate_apart() -> None:
    """Out reads B at two indices (j and j + 1): only a store reading the one element it
    overwrites qualifies."""
    A = te.placeholder((4, 33), name="A")
    B = te.compute((4, 33), lambda i, j: A[i, j] + 1.0, name="B")
    Out = te.compute((4, 32), lambda i, j: B[i, j] * B[i, j + 1], name="O")
    s = te.create_schedule(Out)
    s[B].compute_at(s[Out], Out.op.axis[0])
    mod = build(s, [A, Out])
    _assert_kept_apart(mod, "B")
    a, out = _random(4, 33), np.zeros((4, 32), "float32")
    mod(a, out)
    b = a + 1.0
    np.testing.assert_allclose(out, b[:, :-1] * b[:, 1:], rtol=1e-6)


def test_an_intermediate_read_after_the_output_is_written_stays_apart() -> None:
    """Two outputs read B; the second runs after the first overwrote it in place."""
    A = te.placeholder((6, 16), name="A")
    B = te.compute((6, 16), lambda i, j: A[i, j] * 3.0, name="B")
    Out = te.compute((6, 16), lambda i, j: B[i, j] + 1.0, name="O")
    P = te.compute((6, 16), lambda i, j: B[i, j] - 1.0, name="P")
    s = te.create_schedule([Out, P])
    mod = build(s, [A, Out, P])
    _assert_kept_apart(mod, "B")
    a = _random(6, 16)
    out, other = np.zeros_like(a), np.zeros_like(a)
    mod(a, out, other)
    np.testing.assert_allclose(out, a * 3.0 + 1.0, rtol=1e-6)
    np.testing.assert_allclose(other, a * 3.0 - 1.0, rtol=1e-6)


def test_an_output_covering_part_of_the_intermediate_or_read_later_keeps_it_apart() -> None:
    A = te.placeholder((4, 64), name="A")
    B = te.compute((4, 64), lambda i, j: A[i, j] + 2.0, name="B")
    Out = te.compute((4, 32), lambda i, j: B[i, j] * 0.5, name="O")  # half of each row of B
    mod = build(te.create_schedule(Out), [A, Out])
    _assert_kept_apart(mod, "B")
    a, out = _random(4, 64), np.zeros((4, 32), "float32")
    mod(a, out)
    np.testing.assert_allclose(out, (a[:, :32] + 2.0) * 0.5, rtol=1e-6)

    # the store target is itself read (a later stage reads it): not an output only
    A, E, S, Out = _row_softmax(3, 48)
    Q = te.compute((3, 48), lambda i, j: Out[i, j] * 2.0, name="Q")
    s = te.create_schedule(Q)
    s[E].compute_at(s[Out], Out.op.axis[0])
    s[S].compute_at(s[Out], Out.op.axis[0])
    mod = build(s, [A, Q])
    _assert_kept_apart(mod, "E")
    a, out = _random(3, 48), np.zeros((3, 48), "float32")
    mod(a, out)
    np.testing.assert_allclose(out, _softmax_reference(a) * 2.0, rtol=1e-5)


def test_two_intermediates_of_one_output_do_not_share_its_place() -> None:
    """The inner one is placed; the outer one then finds its producer storing there too."""
    A = te.placeholder((4, 32), name="A")
    E = te.compute((4, 32), lambda i, j: te.exp(A[i, j]), name="E")
    F = te.compute((4, 32), lambda i, j: A[i, j] * 4.0, name="F")
    Out = te.compute((4, 32), lambda i, j: E[i, j] - F[i, j], name="O")
    s = te.create_schedule(Out)
    s[E].compute_at(s[Out], Out.op.axis[0])
    s[F].compute_at(s[Out], Out.op.axis[0])
    mod = build(s, [A, Out])
    assert ("float E[" in mod.source) != ("float F[" in mod.source)  # one of them placed
    a, out = _random(4, 32), np.zeros((4, 32), "float32")
    mod(a, out)
    np.testing.assert_allclose(out, np.exp(a) - a * 4.0, rtol=1e-5, atol=1e-6)


def test_an_unrolled_output_loop_overwrites_the_intermediate_piece_by_piece() -> None:
    """The output's row loop unrolled: several stores, each a piece of the row, together
    covering the intermediate once."""
    A, E, S, Out = _row_softmax(5, 64)
    s = te.create_schedule(Out)
    s[E].compute_at(s[Out], Out.op.axis[0])
    s[S].compute_at(s[Out], Out.op.axis[0])
    jo, ji = s[Out].split(Out.op.axis[1], factor=16)
    s[Out].unroll(jo)
    s[Out].vectorize(ji)
    mod = build(s, [A, Out])
    assert "float E[" not in mod.source
    assert all(f"O[((i * 64) + {k})]" in mod.source for k in (16, 32, 48))
    a, out = _random(5, 64), np.zeros((5, 64), "float32")
    mod(a, out)
    np.testing.assert_allclose(out, _softmax_reference(a), rtol=1e-5)


@pytest.mark.parametrize(("cols", "factor"), [(100, 16), (1000, 16), (33, 8), (20, 16)])
def test_a_row_the_split_does_not_divide_is_placed_through_its_guarded_tail(
        cols: int, factor: int) -> None:
    """The output row's split leaves a guarded tail (``if outer * f < ...`` / ``else if
    inner + ... < cols``): the branches bound the loops, main part and tail together cover
    the row once, and the intermediate is placed."""
    A, E, S, Out = _row_softmax(3, cols)
    s = te.create_schedule(Out)
    s[E].compute_at(s[Out], Out.op.axis[0])
    s[S].compute_at(s[Out], Out.op.axis[0])
    _, ei = s[E].split(E.op.axis[1], factor=factor)
    s[E].vectorize(ei)
    _, ji = s[Out].split(Out.op.axis[1], factor=factor)
    s[Out].vectorize(ji)
    mod = build(s, [A, Out])
    assert "float E[" not in mod.source
    a, out = _random(3, cols), np.zeros((3, cols), "float32")
    mod(a, out)
    np.testing.assert_allclose(out, _softmax_reference(a), rtol=1e-5)
