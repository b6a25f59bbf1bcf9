"""The code generator's loop passes: partitioning a vectorized loop at its conditions
(padding becomes vector code) and hoisting loop-invariant accumulators into registers.
Every program is checked against numpy; the source is checked for the rewrite."""

from __future__ import annotations

import numpy as np
import pytest

from schedule import Workload, build, kernel_source, ops, te
from schedule.codegen_c import generate_c
from schedule.expr import Compare, Const, Select, Var
from schedule.loop_ir import Buffer, For, Store
from schedule.lower import lower
from schedule.partition import MAX_PIECES, partition_loop
from schedule.vectorize import shuffle_plan
from tests.cpu_support import AVX512_HOST, LANES, needs_avx512

RNG = np.random.default_rng(7)


def _run(wl: Workload, tensors: list, s: te.Schedule) -> str:
    mod = build(s, tensors)
    inputs = [RNG.standard_normal(t.shape).astype("float32") for t in tensors[:-1]]
    (expected,) = wl.reference(inputs)
    out = np.zeros_like(expected)
    mod(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    return mod.source


# ---------------------------------------------------------------------------- partitioning


def _padding_loop(extent: int, lo: int, hi: int) -> For:
    """``out[x] = lo <= x < hi ? data[x - lo] : 0`` for x in 0..extent."""
    x = Var("x")
    data, out = Buffer("data", (extent,), "float32"), Buffer("out", (extent,), "float32")
    inside = (Compare(">=", x, Const(lo, "int32"), "bool")
              & Compare("<", x, Const(hi, "int32"), "bool"))
    value = Select(inside, data.load([x - lo]), Const(0.0, "float32"))
    return For(x, extent, For.VECTORIZED, Store(out, (x,), value))


def test_a_padding_loop_is_cut_where_its_condition_changes():
    pieces = partition_loop(_padding_loop(58, 1, 57))
    assert [int(p.extent.value) for p in pieces] == [1, 56, 1]
    edge, middle, _ = pieces
    assert isinstance(edge.body, Store) and isinstance(edge.body.value, Const)
    assert not isinstance(middle.body.value, Select)  # a plain copy


def test_a_loop_without_conditions_on_its_variable_stays_whole():
    x, y = Var("x"), Var("y")
    buf = Buffer("b", (8,), "float32")
    body = Store(buf, (x,), Select(Compare("<", y, Const(3, "int32"), "bool"),
                                   Const(1.0, "float32"), Const(0.0, "float32")))
    loop = For(x, 8, For.VECTORIZED, body)
    assert partition_loop(loop) == [loop]


def test_a_loop_with_too_many_cuts_stays_whole():
    x = Var("x")
    buf = Buffer("b", (64,), "float32")
    cond = Compare("<", x, Const(1, "int32"), "bool")
    for point in range(2, 2 * MAX_PIECES, 2):
        cond = cond | Compare("==", x, Const(point, "int32"), "bool")
    loop = For(x, 64, For.VECTORIZED,
               Store(buf, (x,), Select(cond, Const(1.0, "float32"), Const(0.0, "float32"))))
    assert partition_loop(loop) == [loop]


@pytest.mark.parametrize("width", [5, 40, 56])
def test_a_vectorized_padding_stage_loads_vectors_and_matches_numpy(width):
    x = te.placeholder((2, 3, width), name="x")
    out = ops.pad(x, [0, 1, 1], [0, 1, 1])
    s = te.create_schedule(out)
    s[out].vectorize(s[out].op.axis[-1])
    mod = build(s, [x, out])
    data = RNG.standard_normal((2, 3, width)).astype("float32")
    result = np.full((2, 5, width + 2), np.nan, np.float32)
    mod(data, result)
    np.testing.assert_array_equal(result, np.pad(data, [(0, 0), (1, 1), (1, 1)]))
    if width >= 16:
        assert f"tt_load_float32x{LANES}(&x[" in mod.source


def test_the_conv_padding_computed_in_the_tile_is_vector_code():
    wl = Workload.op("conv2d_nchw", N=1, C=4, H=10, W=34, K=4, R=3, S=3, padding=1)
    tensors = wl.tensors()
    s = te.create_schedule(tensors[-1:])
    out = s[tensors[-1]]
    pad = next(st for st in s.stages if st.name == "pad")
    n, k, oh, ow = out.op.axis
    pad.compute_at(out, oh)
    pad.vectorize(pad.op.axis[-1])
    source = _run(wl, tensors, s)
    assert f"tt_load_float32x{LANES}(&data[" in source


# ---------------------------------------------------------------------------- hoisting


def _conv_tile_schedule(tensors: list, k_tile: int, vectorize: bool) -> te.Schedule:
    """An accumulator tile of ``k_tile`` channels x one output row, the whole (C, R, S)
    reduction outside the tile (the loops the accumulators are invariant in)."""
    out_tensor = tensors[-1]
    s = te.create_schedule([out_tensor])
    local = s.cache_write(out_tensor, "local")
    n, k, oh, ow = s[out_tensor].op.axis
    ko, ki = s[out_tensor].split(k, factor=k_tile)
    s[out_tensor].reorder(n, ko, oh, ki, ow)
    s[local].compute_at(s[out_tensor], oh)
    cn, ck, coh, cow = s[local].op.axis
    rc, ry, rx = s[local].op.reduce_axis
    s[local].reorder(cn, coh, rc, ry, rx, ck, cow)
    s[local].unroll(ck)
    if vectorize:
        s[local].vectorize(cow)
    return s


@pytest.mark.parametrize("width", [20, 56])
def test_conv_accumulators_live_in_registers_across_the_reduction(width):
    wl = Workload.op("conv2d_nchw", N=1, C=6, H=5, W=width, K=8, R=3, S=3, padding=1)
    tensors = wl.tensors()
    source = _run(wl, tensors, _conv_tile_schedule(tensors, k_tile=4, vectorize=True))
    assert "conv_local_acc0_r0" in source
    loop = source.index("for (int32_t rc = 0")
    assert "conv_local[" not in source[loop:source.index("}", loop)]


def test_scalar_accumulators_are_hoisted_too():
    wl = Workload.op("conv2d_nchw", N=1, C=3, H=4, W=3, K=4, R=3, S=3, padding=1)
    tensors = wl.tensors()
    s = te.create_schedule(tensors[-1:])
    local = s.cache_write(tensors[-1], "local")
    s[local].compute_at(s[tensors[-1]], s[tensors[-1]].op.axis[2])
    cn, ck, coh, cow = s[local].op.axis
    rc, ry, rx = s[local].op.reduce_axis
    cko, cki = s[local].split(ck, factor=2)  # the tile's base moves with cko
    s[local].reorder(cn, coh, cko, rc, ry, rx, cki, cow)
    s[local].unroll(cki)
    s[local].unroll(cow)
    source = _run(wl, tensors, s)
    assert "conv_local_acc0_r0" in source and "tt_float32x" not in source.split("tt_main")[1]


def test_accumulators_under_a_guard_stay_in_memory_and_are_correct():
    wl = Workload.op("matmul", M=7, N=10, K=9)
    tensors = wl.tensors()
    out_tensor = tensors[-1]
    s = te.create_schedule([out_tensor])
    local = s.cache_write(out_tensor, "local")
    i, j = s[out_tensor].op.axis
    jo, ji = s[out_tensor].split(j, factor=4)  # 10 = 4 + 4 + 2: a guarded tail
    s[local].compute_at(s[out_tensor], jo)
    ci, cj = s[local].op.axis
    (kk,) = s[local].op.reduce_axis
    s[local].reorder(ci, kk, cj)
    source = _run(wl, tensors, s)
    assert "_acc0" not in source


# ---------------------------------------------------------------------------- determinism


def _tiled_conv_source(k_tile: int, w_tile: int) -> str:
    """C source of a conv2d with non-dividing register tiles (versioned edge tiles)."""
    wl = Workload.op("conv2d_nchw", N=1, C=16, H=8, W=56, K=32, R=3, S=3, padding=1)
    tensors = wl.tensors()
    out = tensors[-1]
    s = te.create_schedule([out])
    local = s.cache_write(out, "local")
    n, k, oh, ow = s[out].op.axis
    ko, ki = s[out].split(k, factor=16)
    s[out].reorder(n, ko, oh, ki, ow)
    s[local].compute_at(s[out], oh)
    cn, ck, coh, cow = s[local].op.axis
    rc, ry, rx = s[local].op.reduce_axis
    cko, cki = s[local].split(ck, factor=k_tile)
    cwo, cwi = s[local].split(cow, factor=w_tile)
    s[local].reorder(cn, coh, cko, cwo, rc, ry, rx, cki, cwi)
    s[local].unroll(cki)
    s[local].vectorize(cwi)
    pad = next(st for st in s.stages if st.name == "pad")
    pad.compute_at(s[out], oh)
    pad.vectorize(pad.op.axis[-1])
    return generate_c(lower(s, tensors), 64, 2)


def test_code_generation_does_not_depend_on_what_was_generated_before():
    # guards were once tracked by id(): a freed guard's id reused by a new one made the
    # versioning of a later program depend on the programs generated before it
    first = _tiled_conv_source(12, 32)
    _tiled_conv_source(8, 48)
    assert _tiled_conv_source(12, 32) == first


# ---------------------------------------------------------------------------- strided loads


@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("stride", [2, 3, 4])
def test_a_strided_load_plan_reads_only_its_span_and_gathers_every_lane(lanes, stride):
    offsets, steps = shuffle_plan(lanes, stride)
    last = (lanes - 1) * stride
    assert all(o >= 0 and o + lanes - 1 <= last for o in offsets)
    memory = np.arange(last + 1)
    vectors = [memory[o:o + lanes] for o in offsets]
    result = vectors[0]
    for j, indices in enumerate(steps, start=1):
        result = np.concatenate([result, vectors[j]])[indices]
    np.testing.assert_array_equal(result, np.arange(lanes) * stride)


@pytest.mark.parametrize("lanes, stride", [(0, 2), (1, 2), (16, 1), (16, 0), (16, -2)])
def test_a_strided_load_plan_refuses_what_is_not_a_strided_vector(lanes, stride):
    with pytest.raises(ValueError, match="at least 2 lanes and a stride of at least 2"):
        shuffle_plan(lanes, stride)


def _columns_vectorized(wl: Workload) -> str:
    """The source of an NCHW convolution with its reduction outside the output columns,
    which are vectorized (checked against numpy)."""
    tensors = wl.tensors()
    s = te.create_schedule(tensors[-1:])
    out = s[tensors[-1]]
    n, k, oh, ow = out.op.axis
    out.reorder(n, k, oh, *out.op.reduce_axis, ow)
    out.vectorize(ow)
    return _run(wl, tensors, s)


@pytest.mark.parametrize("stride, width", [(2, 33), (2, 56), (4, 61)])
def test_a_strided_conv_input_is_read_by_shuffling_whole_vectors(stride, width):
    source = _columns_vectorized(Workload.op("depthwise_conv2d_nchw", N=1, C=3, H=9, W=width,
                                             R=3, S=3, stride=stride, padding=1))
    assert f"_stride{stride}(&pad[" in source


@pytest.mark.parametrize("stride, width", [(2, 33), (4, 61)])
def test_a_strided_nchw_conv_reads_its_input_phases_as_whole_vectors(stride, width):
    """conv2d_nchw reads a column-strided input through its ``phases`` stage (the columns
    de-interleaved by the stride): the vector of output columns is one contiguous load."""
    source = _columns_vectorized(Workload.op("conv2d_nchw", N=1, C=3, H=9, W=width, K=4, R=3,
                                             S=3, stride=stride, padding=1))
    assert "_stride" not in source and f"tt_load_float32x{LANES}(&phases[" in source


def test_a_strided_read_at_the_end_of_its_buffer_stays_inside_it():
    # out[i] = x[3 i] over the whole of x: the last vector ends at x's last element
    x = te.placeholder((3 * 15 + 1,), name="x")
    out = te.compute((16,), lambda i: x[3 * i] * 2.0, name="out")
    s = te.create_schedule(out)
    s[out].vectorize(s[out].op.axis[0])
    mod = build(s, [x, out])
    assert "_stride3(&x[" in mod.source
    data = RNG.standard_normal(x.shape).astype("float32")
    result = np.zeros(16, np.float32)
    mod(data, result)
    np.testing.assert_array_equal(result, data[::3] * 2)


# ---------------------------------------------------------------------------- masked tails


def _exp_rows(width: int, dtype: str = "float32") -> tuple[list, te.Schedule]:
    x = te.placeholder((3, width), dtype, name="x")
    out = te.compute((3, width), lambda i, j: te.exp(x[i, j]) * 2.0 + x[i, j], name="out")
    s = te.create_schedule(out)
    s[out].vectorize(s[out].op.axis[1])
    return [x, out], s


@pytest.mark.parametrize("width, masked", [(14, 14), (30, 14), (7, 7), (12, 12), (20, None),
                                           (24, None), (17, None)])
def test_a_loop_tail_of_several_pieces_is_one_masked_vector_on_avx512(width, masked):
    # 14 = 8 + 4 + 2 lanes becomes one 16-lane vector with 2 lanes masked off; a tail of
    # one piece (4 of 20, 8 of 24, 1 of 17) stays as it is
    tensors, s = _exp_rows(width)
    source = kernel_source(s, tensors, "cpu -isa=avx512 -cores=2").source
    assert ("_first" in source) == (masked is not None)
    if masked:
        assert f"tt_load_float32x16_first{masked}(&x[" in source
        assert "_mm512_mask_storeu_epi32(&out[" in source
    # targets without mask registers cut the tail in pieces
    assert "_first" not in kernel_source(s, tensors, "cpu -isa=avx2 -cores=2").source


@pytest.mark.parametrize("width", [14, 30, 7])
def test_a_masked_tail_matches_numpy_and_writes_nothing_past_the_output(width):
    tensors, s = _exp_rows(width)
    mod = build(s, tensors)
    assert ("_first" in mod.source) == AVX512_HOST
    data = np.random.default_rng(width).standard_normal((3, width)).astype("float32")
    block = np.full(3 * width + 32, 7.0, np.float32)  # the output, then a guard region
    mod(data, block[:3 * width].reshape(3, width))
    twice_exp = np.exp(data) * 2
    want = twice_exp + data
    # within 2 ulps of exp's term and one of the sum (cancellation makes rtol meaningless)
    tolerance = 2 * np.spacing(np.abs(twice_exp)) + np.spacing(np.abs(want))
    assert np.all(np.abs(block[:3 * width].reshape(3, width) - want) <= tolerance)
    np.testing.assert_array_equal(block[3 * width:], 7.0)


def test_integer_division_is_not_computed_on_masked_off_lanes():
    # the masked-off lanes hold zeros: dividing by them would trap, so the tail is cut
    # in pieces as before
    a = te.placeholder((14,), "int32", name="a")
    b = te.placeholder((14,), "int32", name="b")
    out = te.compute((14,), lambda i: a[i] // b[i] + a[i] % b[i], name="out")
    s = te.create_schedule(out)
    s[out].vectorize(s[out].op.axis[0])
    mod = build(s, [a, b, out])
    assert "_first" not in mod.source
    x = RNG.integers(-100, 100, 14).astype("int32")
    y = RNG.integers(1, 9, 14).astype("int32") * RNG.choice([-1, 1], 14).astype("int32")
    result = np.zeros(14, np.int32)
    mod(x, y, result)
    np.testing.assert_array_equal(result, x // y + x % y)


@needs_avx512
def test_a_stride2_conv_on_14_columns_keeps_masked_accumulators_in_registers():
    # a stride-2 conv's 14 output columns: one masked vector per accumulator, read by
    # masked loads of the input's column phases, loaded into registers before the
    # reduction and stored after
    wl = Workload.op("conv2d_nchw", N=1, C=5, H=27, W=27, K=8, R=3, S=3, stride=2, padding=1)
    tensors = wl.tensors()
    source = _run(wl, tensors, _conv_tile_schedule(tensors, k_tile=4, vectorize=True))
    assert "tt_load_float32x16_first14(&phases[" in source
    assert "conv_local_acc0_r0 = tt_load_float32x16_first14(&conv_local[" in source
    loop = source.index("for (int32_t rc = 0")
    assert "conv_local[" not in source[loop:source.index("}", loop)]


# --------------------------------------------------------------- partial results combined as a tree


def _row_reduction_factored(rows: int, cols: int, factor: int, kind: str):
    """Each row reduced through ``factor`` partial results computed at the row loop (a
    softmax's or layer_norm's pass), their last step a loop over the partials."""
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    reducer = {"sum": te.sum, "max": te.max, "min": te.min}[kind]
    R = te.compute((rows,), lambda i: reducer(A[i, k], axis=k), name="R")
    s = te.create_schedule(R)
    ko, ki = s[R].split(s[R].op.reduce_axis[0], factor=factor)
    rf = s.rfactor(R, ki)
    s[rf].compute_at(s[R], s[R].op.axis[0])
    s[R].parallel(s[R].op.axis[0])
    return s, [A, R]


def _assert_folds_rows(mod, a: np.ndarray, kind: str, atol: float = 1e-4) -> None:
    """``mod`` reduces each row of ``a`` as numpy does: sums to rounding (re-associated),
    max and min exactly."""
    out = np.zeros(a.shape[0], "float32")
    mod(a, out)
    expected = {"sum": a.sum(axis=1), "max": a.max(axis=1), "min": a.min(axis=1)}[kind]
    if kind == "sum":
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=atol)
    else:
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(("cols", "factor", "kind"), [
    (3072, 64, "sum"), (1000, 40, "max"), (1000, 40, "min"), (999, 27, "sum"), (96, 8, "max")])
def test_partial_results_meet_in_a_tree_and_match_numpy(cols: int, factor: int,
                                                        kind: str) -> None:
    """The loop that folds a row's partial results into its output is one call of a helper
    that combines them pairwise (log2(n) dependent steps, not n); sums are re-associated,
    max and min exact."""
    s, args = _row_reduction_factored(6, cols, factor, kind)
    mod = build(s, args)
    assert f"tt_tree_{'add' if kind == 'sum' else kind}_float32_{factor}(&R_rf[" in mod.source
    _assert_folds_rows(mod, np.random.default_rng(cols).standard_normal((6, cols))
                       .astype("float32"), kind)


@pytest.mark.parametrize(("factor", "kind"), [(64, "sum"), (40, "max"), (27, "sum")])
def test_an_unrolled_fold_of_partial_results_is_a_tree_not_a_chain(factor: int,
                                                                   kind: str) -> None:
    """Under auto-unroll the fold of a row's partial results is one statement combining
    them pairwise, not ``factor`` statements each waiting for the one before."""
    s, (A, R) = _row_reduction_factored(5, factor * 37, factor, kind)
    s[R].pragma(s[R].op.axis[0], "auto_unroll_max_step", 512)
    mod = build(s, [A, R])
    body = mod.source[mod.source.index("tt_main("):]
    folds = [line for line in body.splitlines() if line.strip().startswith("R[")]
    assert len(folds) == 2  # the initial value, then one statement folding every part
    assert all(f"R_rf[{k}]" in folds[1] for k in range(factor))
    assert "tt_tree_" not in body
    separator = " + " if kind == "sum" else ", "  # part 0 meets part ceil(n/2) first
    assert f"R_rf[0]{separator}R_rf[{(factor + 1) // 2}]" in folds[1]
    _assert_folds_rows(mod, np.random.default_rng(factor).standard_normal((5, factor * 37))
                       .astype("float32"), kind)


@pytest.mark.parametrize(("cols", "kind"), [(128, "sum"), (3072, "max"), (8192, "sum"),
                                          (1000, "min"), (4099, "max"), (130, "sum")])
def test_a_long_row_folds_into_running_results_read_straight_from_the_row(
        cols: int, kind: str) -> None:
    """A fold of 128 parts or more keeps 64 running results that read the row in place
    (no copy of it on the stack, whatever its length), the parts past the last whole block
    included, and matches numpy."""
    A = te.placeholder((3, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    reducer = {"sum": te.sum, "max": te.max, "min": te.min}[kind]
    R = te.compute((3,), lambda i: reducer(A[i, k], axis=k), name="R")
    mod = build(te.create_schedule(R), [A, R])
    helper = f"tt_tree_{'add' if kind == 'sum' else kind}_float32_{cols}"
    assert f"{helper}(&A[" in mod.source
    definition = mod.source[mod.source.index(f"{helper}(const float* p)"):]
    assert "float t[64];" in definition[:definition.index("return t[0];")]
    a = np.random.default_rng(cols).standard_normal((3, cols)).astype("float32")
    a[1, -1] = 50.0 if kind != "min" else -50.0  # the extreme in the last part: the tail
    _assert_folds_rows(mod, a, kind, atol=1e-3)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_vector_min_and_max_are_one_instruction_with_the_lanewise_meaning(kind: str) -> None:
    """A vector max (min) is the x86 instruction, whose lanes are ``a > b ? a : b`` exactly
    (NaNs included: the second operand), as the lane-by-lane fallback computes them."""
    n, dtype = 1024, "float32"
    A = te.placeholder((n,), dtype, name="A")
    B = te.placeholder((n,), dtype, name="B")
    fn = te.max if kind == "max" else te.min
    C = te.compute((n,), lambda i: fn(A[i], B[i]), name="C")
    s = te.create_schedule(C)
    _, inner = s[C].split(C.op.axis[0], factor=LANES)
    s[C].vectorize(inner)
    mod = build(s, [A, B, C])
    assert f"__builtin_ia32_{kind}ps" in mod.source
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    a[::7], b[::5], a[3::11], b[3::11] = np.nan, np.nan, np.inf, -np.inf
    a[1::13], b[1::13] = 0.0, -0.0
    out = np.empty(n, dtype)
    mod(a, b, out)
    expected = np.where(a > b, a, b) if kind == "max" else np.where(a < b, a, b)
    np.testing.assert_array_equal(out, expected)
    assert np.array_equal(np.signbit(out), np.signbit(expected))


def test_a_factored_row_max_stays_in_vectors_when_its_lanes_fold_unrolled() -> None:
    """The row max of a softmax factored into whole vectors, its fold unrolled into a tree
    of the vectors' lanes: the running maxima are the vector instruction (written lane by
    lane, GCC split them into scalars, loop and all: 2.7x slower) and the rows match."""
    A = te.placeholder((8, 3072), name="A")
    k = te.reduce_axis((0, 3072), name="k")
    R = te.compute((8,), lambda i: te.max(A[i, k], axis=k), name="R")
    s = te.create_schedule(R)
    _, ki = s[R].split(k, factor=2 * LANES)
    rf = s.rfactor(R, ki)
    s[rf].reorder(*s[rf].op.axis[1:], *s[rf].op.reduce_axis, s[rf].op.axis[0])
    s[rf].compute_at(s[R], s[R].op.axis[0])
    s[rf].vectorize(s[rf].op.axis[0])
    s[R].parallel(s[R].op.axis[0])
    s[R].pragma(s[R].op.axis[0], "auto_unroll_max_step", 64)
    mod = build(s, [A, R])
    body = mod.source[mod.source.index("tt_main("):]
    assert "tt_tree_" not in body and "R_rf[1]" in body  # the fold: a tree of the lanes
    assert "__builtin_ia32_maxps" in mod.source
    _assert_folds_rows(mod, np.random.default_rng(3).standard_normal((8, 3072))
                       .astype("float32"), "max")


def test_a_short_fold_or_a_loop_of_another_shape_stays_a_loop() -> None:
    s, args = _row_reduction_factored(4, 64, 4, "sum")
    assert "tt_tree_" not in build(s, args).source  # 4 partials: the loop is as short
    A = te.placeholder((2, 8192), name="A")
    k = te.reduce_axis((0, 8192), name="k")
    R = te.compute((2,), lambda i: te.sum(A[i, k] * 2.0, axis=k), name="R")
    assert "tt_tree_" not in build(te.create_schedule(R), [A, R]).source  # not a plain fold
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    assert "tt_tree_" not in build(te.create_schedule(B), [A, B]).source
