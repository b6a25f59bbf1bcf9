"""Loop tightening (schedule.tighten): a loop ends where every later iteration's effects
are guarded off, and the programs it shortens still compute the reference."""

from __future__ import annotations

import numpy as np

from schedule import build, te
from schedule.expr import Var
from schedule.loop_ir import Buffer, For, IfThenElse, Seq, Store
from schedule.lower import lower
from schedule.tighten import live_extent


def _guarded_tail(then_only: bool = True) -> For:
    """``for v in 0..8: for u in 0..24: if v*24 + u + 960 < 1024: out[...] = 0`` (the last
    tile of 1024 columns in groups of 24 after 960), optionally beside an unguarded store."""
    v, u = Var("v", "int32"), Var("u", "int32")
    out = Buffer("out", (1024,), "float32")
    store = Store(out, [v * 24 + u + 960], 0.0)
    body = For(u, 24, For.SERIAL, IfThenElse(v * 24 + u + 960 < 1024, store))
    if not then_only:
        body = Seq([body, Store(out, [v], 1.0)])
    return For(v, 8, For.SERIAL, body)


def test_a_loop_whose_later_iterations_are_all_guarded_off_ends_early():
    # 64 columns are left: groups 0, 1 and 2 (48..63 partly); 3..7 store nothing
    assert live_extent(_guarded_tail(), {}) == 3


def test_a_loop_with_an_unguarded_effect_keeps_its_extent():
    assert live_extent(_guarded_tail(then_only=False), {}) is None


def test_a_vectorized_or_thread_bound_loop_keeps_its_extent():
    loop = _guarded_tail()
    for kind in (For.VECTORIZED, "threadIdx.x"):
        assert live_extent(For(loop.var, 8, kind, loop.body), {}) is None


def test_both_branches_of_a_versioned_body_count():
    v, u = Var("v", "int32"), Var("u", "int32")
    out = Buffer("out", (1024,), "float32")
    fast = For(u, 24, For.SERIAL, Store(out, [v * 24 + u], 0.0))
    slow = For(u, 24, For.SERIAL, IfThenElse(v * 24 + u < 64, Store(out, [v * 24 + u], 0.0)))
    # full groups while v * 24 < 41 (v < 2); the partial group v = 2; nothing from 3 on
    loop = For(v, 8, For.SERIAL, IfThenElse(v * 24 < 41, fast, slow))
    assert live_extent(loop, {}) == 3


def test_the_last_tile_of_a_non_dividing_split_runs_only_its_live_groups():
    A = te.placeholder((8, 64), name="A")
    B = te.compute((8, 64), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B)
    jo, ji = s[B].split(s[B].op.axis[1], factor=40)  # tiles of 40: the last holds 24
    jio, jii = s[B].split(ji, factor=8)  # 5 groups of 8 per tile; the last tile uses 3
    s[B].reorder(jo, s[B].op.axis[0], jio, jii)
    text = str(lower(s, [A, B]))
    assert "for j.inner.outer in 0..5" in text  # the full tile
    assert "for j.inner.outer in 0..3" in text  # the last one, tightened
    a = np.random.default_rng(0).standard_normal((8, 64), dtype=np.float32)
    out = np.zeros((8, 64), np.float32)
    build(s, [A, B])(a, out)
    np.testing.assert_array_equal(out, a * 2)
