"""Each schedule primitive gives correct code (checked against numpy) or a clear error."""

import numpy as np
import pytest

from schedule import ScheduleError, build, lower, te

from .helpers import check, matmul, run


def mm_ref(a, b):
    return a @ b


# ---------------------------------------------------------------------------- correct programs


@pytest.mark.parametrize("factor", [1, 3, 7, 8, 64])
def test_split_with_dividing_and_non_dividing_factors(factor):
    A, B, C = matmul(37, 29, 13)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=factor)
    jo, ji = s[C].split(j, nparts=4)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=5)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    check(s, [A, B, C], mm_ref)


def test_nested_non_dividing_splits_do_not_double_count():
    A, B, C = matmul(10, 10, 23)
    s = te.create_schedule(C)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=7)
    kio, kii = s[C].split(ki, factor=3)
    check(s, [A, B, C], mm_ref)


def test_fuse_parallel_vectorize_unroll():
    A, B, C = matmul(33, 40, 17)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    jo, ji = s[C].split(j, factor=20)
    s[C].reorder(i, jo, k, ji)
    f = s[C].fuse(i, jo)
    s[C].parallel(f)
    s[C].vectorize(ji)
    ko, ki = s[C].split(k, factor=4)
    s[C].unroll(ki)
    check(s, [A, B, C], mm_ref)


def test_register_tile_with_cache_write_and_packed_cache_read():
    from schedule.examples import matmul_schedule

    for M, N, K, rows, cols in [(64, 64, 64, 8, 32), (50, 70, 9, 6, 32), (1, 17, 3, 4, 16)]:
        s, args = matmul_schedule(M, N, K, rows=rows, cols=cols)
        check(s, args, mm_ref)
        s, args = matmul_schedule(M, N, K, rows=rows, cols=cols, k_block=4)
        check(s, args, mm_ref)


def test_register_tile_is_promoted_to_vector_variables():
    from schedule.examples import matmul_schedule

    s, args = matmul_schedule(64, 64, 64, rows=4, cols=32)
    source = build(s, args).source
    assert "C_local_r7" in source  # 4 rows x 2 vectors of 16 lanes
    assert "C_local[" not in source


def test_compute_at_with_strides_dilation_and_padding():
    # conv1d-like: Y[o] = sum_r X[o*2 + r*3 - 2] over a padded input stage computed at Y
    X = te.placeholder((40,), name="X")
    P = te.compute((44,), lambda p: te.if_then_else(te.all(p >= 2, p < 42), X[p - 2], 0.0),
                   name="P")
    r = te.reduce_axis((0, 3), name="r")
    Y = te.compute((19,), lambda o: te.sum(P[o * 2 + r * 3] * 1.0, axis=r), name="Y")

    def ref(x):
        p = np.pad(x, 2)
        return np.array([sum(p[o * 2 + rr * 3] for rr in range(3)) for o in range(19)])

    s = te.create_schedule(Y)
    oo, oi = s[Y].split(s[Y].op.axis[0], factor=4)
    s[P].compute_at(s[Y], oo)
    check(s, [X, Y], ref)
    s2 = te.create_schedule(Y)
    s2[P].compute_inline()
    check(s2, [X, Y], ref)
    assert "P" not in str(lower(s2, [X, Y])).split("{", 1)[1].replace("func", "")


def test_compute_at_region_is_the_tile_not_the_tensor():
    X = te.placeholder((64, 64), name="X")
    Y = te.compute((64, 64), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = te.compute((64, 64), lambda i, j: Y[i, j] + 1.0, name="Z")
    s = te.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(s[Z].op.axis[0], s[Z].op.axis[1], 8, 16)
    s[Y].compute_at(s[Z], jo)
    text = str(lower(s, [X, Z]))
    assert "allocate Y: float32[8, 16]" in text
    check(s, [X, Z], lambda x: x * 2 + 1)


def test_compute_at_edge_tiles_are_guarded():
    X = te.placeholder((30, 30), name="X")
    Y = te.compute((30, 30), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = te.compute((30, 30), lambda i, j: Y[i, j] + 1.0, name="Z")
    s = te.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(s[Z].op.axis[0], s[Z].op.axis[1], 8, 16)
    s[Z].vectorize(ji)
    s[Y].compute_at(s[Z], jo)
    s[Y].vectorize(s[Y].op.axis[1])
    check(s, [X, Z], lambda x: x * 2 + 1)


def test_compute_root_after_compute_at():
    X = te.placeholder((12,), name="X")
    Y = te.compute((12,), lambda i: X[i] * 2.0, name="Y")
    Z = te.compute((12,), lambda i: Y[i] + 1.0, name="Z")
    s = te.create_schedule(Z)
    s[Y].compute_at(s[Z], s[Z].op.axis[0])
    s[Y].compute_root()
    check(s, [X, Z], lambda x: x * 2 + 1)


def test_cache_read_shared_between_readers_and_local_scope():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((16, 16), lambda i, j: A[j, i] * B[i, j], name="C")
    s = te.create_schedule(C)
    AL = s.cache_read(A, "local", [B, C])
    s[B].compute_inline()
    io, ii = s[C].split(s[C].op.axis[0], factor=4)
    del AL
    check(s, [A, C], lambda a: a.T * (a + 1))


def test_rfactor_of_a_long_reduction():
    A = te.placeholder((3, 1000), name="A")
    k = te.reduce_axis((0, 1000), name="k")
    S = te.compute((3,), lambda i: te.sum(A[i, k], axis=k), name="S")
    s = te.create_schedule(S)
    ko, ki = s[S].split(s[S].op.reduce_axis[0], factor=16)
    SF = s.rfactor(S, ki)
    s[SF].vectorize(s[SF].op.axis[0])
    s[SF].reorder(s[SF].op.axis[1], s[SF].op.reduce_axis[0], s[SF].op.axis[0])
    check(s, [A, S], lambda a: a.sum(axis=1), rtol=1e-4, atol=1e-3)
    # a non-dividing factor: the factored stage guards the tail
    s2 = te.create_schedule(S)
    ko, ki = s2[S].split(s2[S].op.reduce_axis[0], factor=7)
    s2.rfactor(S, ko, factor_axis=1)
    check(s2, [A, S], lambda a: a.sum(axis=1), rtol=1e-4, atol=1e-3)


def test_pragma_auto_unroll_and_explicit_unroll():
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    s[C].pragma(i, "auto_unroll_max_step", 64)
    text = str(lower(s, [A, B, C]))
    assert "for k" not in text  # k (8) x j (8) = 64 steps: unrolled
    check(s, [A, B, C], mm_ref)


def test_auto_unroll_on_a_one_iteration_loop_governs_the_loops_inside():
    """A cache stage computed at its consumer's tile has outer loops of one iteration; the
    search puts its unroll pragma on the outermost of them, which lowering drops: the pragma
    must pass to the loops inside, not vanish with it."""
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=4)
    s[CL].compute_at(s[C], io)
    ci, cj = s[CL].op.axis
    cio, cii = s[CL].split(ci, factor=4)  # cio: one iteration per consumer tile
    (k,) = s[CL].op.reduce_axis
    s[CL].reorder(cio, k, cii, cj)
    s[CL].pragma(cio, "auto_unroll_max_step", 32)
    text = str(lower(s, [A, B, C]))
    assert "C_local[3, 7] = C_local[3, 7] + " in text  # the 4 x 8 tile unrolled
    assert "for k in 0..8" in text  # 8 x 4 x 8 = 256 steps: over the limit, kept
    check(s, [A, B, C], mm_ref)

    s[CL].pragma(cio, "auto_unroll_max_step", 0)
    assert "C_local[3, 7]" not in str(lower(s, [A, B, C]))  # without it: loops


def test_storage_align_pads_rows_and_stays_correct():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 3.0, name="B")
    C = te.compute((16, 16), lambda i, j: B[j, i], name="C")
    s = te.create_schedule(C)
    s[B].storage_align(s[B].op.axis[1], 16, 1)
    func = lower(s, [A, C])
    (buf,) = [b for b in _buffers(func) if b.name == "B"]
    assert buf.strides == (17, 1)
    check(s, [A, C], lambda a: (a * 3).T)


def _buffers(func):
    from schedule.loop_ir import Allocate, walk_stmts

    return [st.buffer for st in walk_stmts(func.body) if isinstance(st, Allocate)]


def test_multi_stage_softmax_with_compute_at():
    A = te.placeholder((5, 37), name="A")
    k = te.reduce_axis((0, 37), name="k")
    M = te.compute((5,), lambda i: te.max(A[i, k], axis=k), name="M")
    E = te.compute((5, 37), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    k2 = te.reduce_axis((0, 37), name="k2")
    S = te.compute((5,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    O = te.compute((5, 37), lambda i, j: E[i, j] / S[i], name="O")  # noqa: E741
    s = te.create_schedule(O)
    i, j = s[O].op.axis
    s[O].parallel(i)
    jo, ji = s[O].split(j, factor=16)
    s[O].vectorize(ji)
    for st in (M, E, S):
        s[st].compute_at(s[O], i)

    def ref(a):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    check(s, [A, O], ref)


def test_several_outputs():
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((6,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule([B, C])
    a, b, c = run(s, [A, B, C])
    np.testing.assert_allclose(b, a + 1)
    np.testing.assert_allclose(c, (a + 1) * 2)


# ---------------------------------------------------------------------------- errors


def test_compute_at_into_a_stage_that_does_not_consume_it():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: A[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: B[i] + C[i], name="D")
    s = te.create_schedule(D)
    with pytest.raises(ScheduleError, match="compute_at on stage B: C does not consume B"):
        s[B].compute_at(s[C], s[C].op.axis[0])


def test_vectorize_or_parallel_on_a_reduction_axis():
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C)
    (k,) = s[C].op.reduce_axis
    with pytest.raises(ScheduleError, match="vectorize on stage C: axis k is a reduction axis"):
        s[C].vectorize(k)
    with pytest.raises(ScheduleError, match="parallel on stage C: axis k is a reduction"):
        s[C].parallel(k)


def test_reusing_a_split_away_axis():
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    s[C].split(i, factor=2)
    with pytest.raises(ScheduleError, match="split on stage C: axis i was already split"):
        s[C].split(i, factor=2)


def test_reorder_with_a_foreign_axis():
    A, B, C = matmul(8, 8, 8)
    D = te.compute((8, 8), lambda i, j: C[i, j] + 1.0, name="D")
    s = te.create_schedule(D)
    with pytest.raises(ScheduleError, match="reorder on stage C: axis i does not belong"):
        s[C].reorder(s[D].op.axis[0], s[C].op.axis[1])


def test_other_invalid_primitives():
    A, B, C = matmul(8, 8, 8)
    D = te.compute((8, 8), lambda i, j: C[i, j] + 1.0, name="D")
    s = te.create_schedule(D)
    i, j = s[D].op.axis
    with pytest.raises(ScheduleError, match="adjacent"):
        s[D].fuse(j, i)
    with pytest.raises(ScheduleError, match="reduction cannot be inlined"):
        s[C].compute_inline()
    with pytest.raises(ScheduleError, match="output stage cannot be inlined"):
        s[D].compute_inline()
    with pytest.raises(ScheduleError, match="positive integer"):
        s[D].split(i, factor=0)
    with pytest.raises(ScheduleError, match="exactly one of"):
        s[D].split(i, factor=2, nparts=2)
    with pytest.raises(ScheduleError, match="unknown pragma"):
        s[D].pragma(i, "bogus", 1)
    with pytest.raises(ScheduleError, match="input placeholder"):
        s[A].split(s[C].op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match="unknown scope"):
        s.cache_read(A, "texture", [C])
    with pytest.raises(ScheduleError, match="does not read it"):
        s.cache_read(A, "local", [D])
    s[D].split(i, factor=2)
    with pytest.raises(ScheduleError, match="before any other primitive"):
        s.cache_write(D, "local")
    with pytest.raises(ScheduleError, match="unknown thread tag"):
        s[D].bind(j, "warpIdx.x")


def test_compute_at_then_splitting_the_target_axis_is_reported_at_lowering():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C)
    (i,) = s[C].op.axis
    s[B].compute_at(s[C], i)
    s[C].split(i, factor=2)
    with pytest.raises(ScheduleError, match="split or fused afterwards"):
        lower(s, [A, C])


def test_producer_read_outside_its_compute_at_loop():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: B[i] + C[i], name="D")
    s = te.create_schedule(D)
    s[B].compute_at(s[C], s[C].op.axis[0])
    with pytest.raises(ScheduleError, match="D also reads it outside that loop"):
        lower(s, [A, D])


def test_nested_parallel_and_gpu_bindings_are_rejected_on_cpu():
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    s[C].parallel(i)
    s[C].parallel(j)
    with pytest.raises(ScheduleError, match="nested inside another parallel"):
        build(s, [A, B, C])
    s2 = te.create_schedule(C)
    s2[C].bind(s2[C].op.axis[0], "blockIdx.x")
    s2[C].bind(s2[C].op.axis[1], "vthread")
    assert s2.steps[-1] == ["bind", "C", "j", "vthread"]
    with pytest.raises(ScheduleError, match="needs a GPU target"):
        build(s2, [A, B, C])


def test_tensorize_matches_a_declared_intrinsic_or_explains_why_not():
    a = te.placeholder((16,), "int8", name="a")
    w = te.placeholder((16, 16), "int8", name="w")
    r = te.reduce_axis((0, 16), name="r")
    out = te.compute((16,), lambda o: te.sum(te.cast("int32", a[r]) * te.cast("int32", w[o, r]),
                                             axis=r), name="gemv")
    intrin = te.decl_tensor_intrin(out, "test_gemv_16x16")
    X = te.placeholder((4, 64), "int8", name="X")
    W = te.placeholder((32, 64), "int8", name="W")
    k = te.reduce_axis((0, 64), name="k")
    Y = te.compute((4, 32), lambda i, j: te.sum(te.cast("int32", X[i, k]) *
                                                te.cast("int32", W[j, k]), axis=k), name="Y")
    s = te.create_schedule(Y)
    i, j = s[Y].op.axis
    jo, ji = s[Y].split(j, factor=16)
    ko, ki = s[Y].split(s[Y].op.reduce_axis[0], factor=16)
    s[Y].reorder(i, jo, ko, ji, ki)
    s[Y].tensorize(ji, intrin)
    assert s.steps[-1] == ["tensorize", "Y", "j.inner", "test_gemv_16x16"]
    with pytest.raises(ScheduleError, match="no CPU code generation"):
        build(s, [X, W, Y])
    s2 = te.create_schedule(Y)
    with pytest.raises(ScheduleError, match="extents"):
        s2[Y].tensorize(s2[Y].op.axis[1], intrin)
    with pytest.raises(ScheduleError, match="no tensor intrinsic named 'nope'"):
        s2[Y].tensorize(s2[Y].op.axis[1], "nope")
    # the same shape with a different computation does not match
    Z = te.compute((4, 32), lambda i, j: te.sum(te.cast("int32", X[i, k]) +
                                                te.cast("int32", W[j, k]), axis=k), name="Z")
    s3 = te.create_schedule(Z)
    jo, ji = s3[Z].split(s3[Z].op.axis[1], factor=16)
    ko, ki = s3[Z].split(s3[Z].op.reduce_axis[0], factor=16)
    s3[Z].reorder(s3[Z].op.axis[0], jo, ko, ji, ki)
    with pytest.raises(ScheduleError, match="does not match intrinsic"):
        s3[Z].tensorize(ji, intrin)


def test_arguments_are_checked_at_call_time():
    A, B, C = matmul(4, 3, 2)
    mod = build(te.create_schedule(C), [A, B, C])
    a, b, c = (np.zeros((4, 2), "float32"), np.zeros((2, 3), "float32"),
               np.zeros((4, 3), "float32"))
    with pytest.raises(TypeError, match="takes 3 arrays"):
        mod(a, b)
    with pytest.raises(TypeError, match="argument A must have dtype float32, got float64"):
        mod(a.astype("float64"), b, c)
    with pytest.raises(ValueError, match=r"argument B must have shape \[2, 3\], got \[3, 2\]"):
        mod(a, b.T.copy(), c)
    with pytest.raises(ValueError, match="C-contiguous"):
        mod(a, b, np.zeros((3, 4), "float32").T)


def test_output_overlapping_an_input_is_refused():
    X = te.placeholder((6,), name="X")
    Y = te.compute((6,), lambda i: X[i] + 1.0, name="Y")
    mod = build(te.create_schedule(Y), [X, Y])
    x = np.zeros(6, "float32")
    with pytest.raises(ValueError, match="output Y overlaps argument X"):
        mod(x, x)


def test_arrays_passed_again_are_checked_again_for_what_can_change_in_place():
    """A module holds the last call's arrays with their addresses; the same arrays passed
    again skip only what cannot change (addresses, overlap): new contents are read, and a
    shape, dtype or flag changed in place is still refused."""
    X = te.placeholder((6,), name="X")
    Y = te.compute((6,), lambda i: X[i] + 1.0, name="Y")
    mod = build(te.create_schedule(Y), [X, Y])
    x, y = np.zeros(6, "float32"), np.zeros(6, "float32")
    mod(x, y)
    x[:] = np.arange(6)
    mod(x, y)
    np.testing.assert_array_equal(y, np.arange(6) + 1.0)
    with pytest.raises(ValueError, match="cannot resize"):
        x.resize(12)  # held by the module: its buffer cannot move
    x.shape = (2, 3)
    with pytest.raises(ValueError, match=r"argument X must have shape \[6\], got \[2, 3\]"):
        mod(x, y)
    x.shape = (6,)
    x.dtype = "int32"
    with pytest.raises(TypeError, match="argument X must have dtype float32, got int32"):
        mod(x, y)
    x.dtype = "float32"
    y.flags.writeable = False
    with pytest.raises(ValueError, match="output Y is read-only"):
        mod(x, y)
    y.flags.writeable = True
    with pytest.raises(ValueError, match="output Y overlaps argument X"):
        mod(x, x)  # other arrays than the held ones: checked whole
    mod(x, y)
    np.testing.assert_array_equal(y, np.arange(6) + 1.0)


def test_missing_arguments_are_named():
    A, B, C = matmul(4, 3, 2)
    s = te.create_schedule(C)
    with pytest.raises(ScheduleError, match="output C must be one of the arguments"):
        lower(s, [A, B])
    with pytest.raises(ScheduleError, match="input B is read but is not one of the arguments"):
        lower(s, [A, C])


def test_builds_are_cached_by_content():
    A, B, C = matmul(5, 6, 7)
    s = te.create_schedule(C)
    s[C].split(s[C].op.axis[0], factor=3)
    first = build(s, [A, B, C])
    again = build(s, [A, B, C])
    assert again.library_path == first.library_path
    assert again.build_seconds == 0.0


def test_native_timing_loop():
    A, B, C = matmul(64, 64, 64)
    mod = build(te.create_schedule(C), [A, B, C])
    a, b = np.ones((64, 64), "float32"), np.ones((64, 64), "float32")
    c = np.zeros((64, 64), "float32")
    costs = mod.time(a, b, c, number=2, repeat=3, min_repeat_ms=5, flush_bytes=1 << 20)
    assert len(costs) == 3 and all(0 < t < 1 for t in costs)
    np.testing.assert_allclose(c, a @ b)  # the timed calls computed the real result
    with pytest.raises(ValueError, match="repeat must be between"):
        mod.time(a, b, c, repeat=0)


def test_a_kernel_loads_elsewhere_from_its_library_and_signature(tmp_path):
    import json
    import shutil

    from schedule import KernelSignature, load_module

    A, B, C = matmul(6, 5, 4)
    mod = build(te.create_schedule(C), [A, B, C])
    copy = tmp_path / "kernel.so"
    shutil.copy(mod.library_path, copy)
    sig = KernelSignature.from_json(json.loads(json.dumps(mod.signature.to_json())))
    other = load_module(copy, sig)
    a, b = np.random.rand(6, 4).astype("float32"), np.random.rand(4, 5).astype("float32")
    c = np.zeros((6, 5), "float32")
    other(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    with pytest.raises(ValueError, match="malformed kernel signature"):
        KernelSignature.from_json({"entry": "x"})


def test_compile_timeout_is_its_own_error():
    import uuid

    from schedule import CompileTimeout, compile_source

    fresh = f"/* {uuid.uuid4()} */ int f(void) {{ return 0; }}\n"  # never in the cache
    with pytest.raises(CompileTimeout, match="longer than"):
        compile_source(fresh, [], timeout=0.0001)


def test_cache_read_of_a_cache_written_stage():
    A, B, C = matmul(12, 10, 8)
    D = te.compute((12, 10), lambda i, j: C[i, j] * 2.0, name="D")
    s = te.create_schedule(D)
    s.cache_write(C, "local")
    CR = s.cache_read(C, "local", [D])
    assert s.producers(s[D]) == [s[CR]]  # D now reads the cache, not C
    s[CR].compute_at(s[D], s[D].op.axis[0])
    check(s, [A, B, D], lambda a, b: (a @ b) * 2)


def test_cache_stages_in_another_axis_order_transpose_and_stay_correct():
    """A cache_read with an axis order is a transposed copy its readers index alike; a
    cache_write with one accumulates with its axes in that order (vectorized along the
    axis put last) and the copy-out writes the original layout; the steps replay."""
    A, B, C = matmul(24, 20, 12)
    s = te.create_schedule(C)
    BT = s.cache_read(B, "global", [C], axis_order=[1, 0])
    CL = s.cache_write(C, "local", axis_order=[1, 0])
    assert BT.shape == (20, 12) and CL.shape == (20, 24)
    j, i = s[CL].op.axis
    assert (j.name, i.name) == ("j", "i")
    jo, ji = s[C].split(s[C].op.axis[1], factor=5)
    s[C].reorder(jo, s[C].op.axis[0], ji)
    s[CL].compute_at(s[C], s[C].op.axis[0])
    s[CL].reorder(*s[CL].op.axis[:1], *s[CL].op.reduce_axis, s[CL].op.axis[1])
    s[CL].vectorize(s[CL].op.axis[1])
    text = str(lower(s, [A, B, C]))
    assert "allocate B_global: float32[20, 12]" in text
    assert "allocate C_local: float32[5, 1]" in text  # one row's 5 columns, columns first
    check(s, [A, B, C], mm_ref)
    assert s.steps[:2] == [["cache_read", "B", "global", ["C"], [1, 0]],
                           ["cache_write", "C", "local", [1, 0]]]
    replayed = te.create_schedule(C)
    replayed.cache_read(B, "global", [C])  # without an order, the step keeps its old form
    assert replayed.steps == [["cache_read", "B", "global", ["C"]]]


@pytest.mark.parametrize("order", [[0, 0], [1], [0, 2], [0.0, 1], [0, "1"], 1, "10"])
def test_a_cache_axis_order_that_is_no_permutation_is_refused(order):
    A, B, C = matmul(4, 4, 4)
    s = te.create_schedule(C)
    with pytest.raises(ScheduleError, match="not a permutation of its 2 dimensions"):
        s.cache_read(B, "global", [C], axis_order=order)
    with pytest.raises(ScheduleError, match="not a permutation of its 2 dimensions"):
        s.cache_write(C, "local", axis_order=order)


def test_unrolled_loop_around_an_attached_stage():
    # found by the random-schedule search: unrolling repeats the attached buffer
    A, B, C = matmul(7, 5, 3)
    s = te.create_schedule(C)
    CL = s.cache_write(C, "local")
    s[CL].split(s[CL].op.axis[0], factor=1)
    s[CL].compute_at(s[C], s[C].op.axis[0])
    s[C].unroll(s[C].op.axis[0])
    check(s, [A, B, C], mm_ref)


def test_large_buffer_inside_a_parallel_loop_goes_to_the_heap():
    X = te.placeholder((4, 300, 300), name="X")
    Y = te.compute((4, 300, 300), lambda b, i, j: X[b, i, j] * 2.0, name="Y")
    Z = te.compute((4, 300, 300), lambda b, i, j: Y[b, j, i] + 1.0, name="Z")
    s = te.create_schedule(Z)
    s[Z].parallel(s[Z].op.axis[0])
    s[Y].compute_at(s[Z], s[Z].op.axis[0])  # 300x300 floats per iteration: 360 KB
    # on a page boundary (schedule.buffers), its size a whole number of pages
    assert "aligned_alloc(4096, 360448)" in build(s, [X, Z]).source
    check(s, [X, Z], lambda x: (x * 2).transpose(0, 2, 1) + 1)
