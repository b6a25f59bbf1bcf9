"""Feature extraction on hand-made programs with known answers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cost_model import (
    FEATURE_NAMES,
    N_FEATURES,
    N_PROGRAM_FEATURES,
    extract_features,
    program_features,
)
from schedule import Workload, lower, te

COL = {name: i for i, name in enumerate(FEATURE_NAMES)}


def value(row: np.ndarray, name: str) -> float:
    """A feature back in linear units (features are log2(1 + x))."""
    return float(np.exp2(np.float64(row[COL[name]])) - 1.0)


def assert_feature(row: np.ndarray, name: str, expected: float) -> None:
    assert value(row, name) == pytest.approx(expected, rel=1e-4, abs=1e-4), name


def add_program(rows: int = 64, cols: int = 16):
    A = te.placeholder((rows, cols), "float32", name="A")
    B = te.placeholder((rows, cols), "float32", name="B")
    C = te.compute((rows, cols), lambda i, j: A[i, j] + B[i, j], name="C")
    return A, B, C


def matmul(n: int):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def features_of(s: te.Schedule, args) -> np.ndarray:
    rows = extract_features(lower(s, list(args)))
    assert rows.dtype == np.float32 and rows.shape[1] == N_FEATURES
    assert np.isfinite(rows).all()
    return rows


def test_vectorized_and_parallel_loops_give_their_lengths() -> None:
    A, B, C = add_program(64, 16)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    s[C].parallel(i)
    s[C].vectorize(j)
    (row,) = features_of(s, [A, B, C])
    assert_feature(row, "vec_len", 16)
    assert_feature(row, "vec_num", 1)
    assert_feature(row, "par_prod", 64)
    assert_feature(row, "par_num", 1)
    assert_feature(row, "par_depth", 0)
    assert_feature(row, "par_task_iters", 16)
    assert_feature(row, "vec_contiguous", 3)  # A, B and C advance by one element per lane
    assert_feature(row, "vec_gather", 0)
    assert_feature(row, "simd_lanes", 16)
    assert_feature(row, "vec_explicit", 1)


@pytest.mark.parametrize("block, contiguous", [(16, True), (2, False)])
def test_a_read_contiguous_within_blocks_is_vector_loads(block: int, contiguous: bool) -> None:
    """``W[j // b, j % b]`` (a weight packed in panels of ``b``) advances by one element per
    lane within a block: with blocks of 16, a vector of 48 lanes is three vector loads,
    not a gather (a dense layer's best register tiles were estimated 16x too slow); with
    blocks of 2 it is a gather."""
    W = te.placeholder((96 // block, block), "float32", name="W")
    C = te.compute((96,), lambda j: W[j // block, j % block] * 2.0, name="C")
    s = te.create_schedule(C)
    _, inner = s[C].split(s[C].op.axis[0], factor=48)
    s[C].vectorize(inner)
    (row,) = features_of(s, [W, C])
    assert_feature(row, "vec_contiguous", 2 if contiguous else 1)
    assert_feature(row, "vec_gather", 0 if contiguous else 1)


def test_gpu_thread_bindings_give_their_extents() -> None:
    A, B, C = add_program(64, 16)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    s[C].bind(i, "blockIdx.x")
    s[C].bind(j, "threadIdx.x")
    (row,) = features_of(s, [A, B, C])
    assert_feature(row, "gpu_blocks", 64)
    assert_feature(row, "gpu_threads", 16)
    assert_feature(row, "par_prod", 0)


def test_plain_loops_have_no_annotations() -> None:
    A, B, C = add_program(8, 4)
    (row,) = features_of(te.create_schedule(C), [A, B, C])
    for name in ("vec_len", "par_prod", "gpu_blocks", "gpu_threads", "guards", "is_alloc"):
        assert_feature(row, name, 0)
    assert_feature(row, "unroll_copies", 1)
    assert_feature(row, "num_loops", 2)
    assert_feature(row, "inner_extent_0", 4)
    assert_feature(row, "inner_extent_1", 8)


def test_byte_counts_of_a_small_elementwise_program() -> None:
    A, B, C = add_program(8, 16)  # 8 x 16 float32 = 512 bytes = 8 cache lines per tensor
    (row,) = features_of(te.create_schedule(C), [A, B, C])
    assert_feature(row, "float_addsub", 128)
    assert_feature(row, "outer_prod", 128)
    # three buffers of equal size: ordered by name, C (the store) last
    for k in range(3):
        assert_feature(row, f"buf{k}_bytes", 512)
        assert_feature(row, f"buf{k}_unique_bytes", 512)
        assert_feature(row, f"buf{k}_unique_lines", 8)
        assert_feature(row, f"buf{k}_stride_inner", 1)
        assert_feature(row, f"buf{k}_reuse_none", 1)
    assert_feature(row, "buf0_read", 1)
    assert_feature(row, "buf1_read", 1)
    assert_feature(row, "buf2_write", 1)
    assert_feature(row, "buf3_bytes", 0)  # empty slots are zero
    assert_feature(row, "footprint_bytes", 3 * 512)
    assert_feature(row, "ai_curve_9", 128 / (3 * 512))  # whole program: 128 adds, 1536 bytes


def test_matmul_flops_reuse_and_strides() -> None:
    A, B, C = matmul(16)
    rows = features_of(te.create_schedule(C), [A, B, C])
    assert rows.shape[0] == 2  # the init store and the update store
    init, update = rows
    assert_feature(init, "float_ops", 0)
    assert_feature(init, "outer_prod", 256)
    assert_feature(update, "float_mad", 16**3)
    assert_feature(update, "float_ops", 2 * 16**3)
    assert_feature(update, "float_addsub", 0)
    assert_feature(update, "float_mul", 0)
    assert_feature(update, "outer_prod", 16**3)
    assert_feature(update, "inner_reduce_0", 1)  # k does not index C
    assert_feature(update, "inner_reduce_1", 0)
    assert_feature(update, "prog_float_ops", 2 * 16**3)
    assert_feature(update, "prog_sites", 2)
    # the largest buffer slot is C (read and written each iteration: 2 x 4096 x 4 bytes),
    # reused across k at a distance of one iteration
    assert_feature(update, "buf0_read_write", 1)
    assert_feature(update, "buf0_bytes", 2 * 4 * 16**3)
    assert_feature(update, "buf0_reuse_loop", 1)
    assert_feature(update, "buf0_reuse_ct", 16)
    assert_feature(update, "buf0_reuse_dis_iter", 1)
    assert_feature(update, "buf0_stride_inner", 0)
    # A[i, k] (slot 1 by name) is reused across j, 16 iterations apart; B[k, j] walks a
    # column: stride 16 elements in the innermost loop
    assert_feature(update, "buf1_reuse_ct", 16)
    assert_feature(update, "buf1_reuse_dis_iter", 16)
    assert_feature(update, "buf1_stride_inner", 1)
    assert_feature(update, "buf2_stride_inner", 16)
    assert_feature(update, "buf2_unique_bytes", 16 * 16 * 4)


def test_unrolled_copies_are_one_row_with_the_unroll_factor() -> None:
    A, B, C = add_program(8, 16)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=4)
    s[C].unroll(ji)
    func = lower(s, [A, B, C])
    assert str(func).count("C[") == 4  # lowering expanded the copies
    (row,) = extract_features(func)
    assert_feature(row, "unroll_copies", 4)
    assert_feature(row, "float_addsub", 128)  # totals still count every copy
    assert_feature(row, "outer_prod", 128)
    assert_feature(row, "buf2_unique_bytes", 512)  # the copies' constants widen the footprint
    assert_feature(row, "vec_slp", 1)  # 4 consecutive copies: the C compiler packs them


def test_both_lowering_forms_give_the_same_rows() -> None:
    """lower(unroll=False) keeps unrolled loops as loops (cheaper, what the search
    featurizes); its iterations count as the copies the full form has."""
    A, B, C = matmul(32)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=4)
    jo, ji = s[C].split(j, factor=8)
    (k,) = s[C].op.reduce_axis
    s[C].reorder(io, jo, k, ii, ji)
    s[C].unroll(ii)
    s[C].pragma(io, "auto_unroll_max_step", 8)  # unrolls ji (8 statements), not more
    full = extract_features(lower(s, [A, B, C]))
    compact_func = lower(s, [A, B, C], unroll=False)
    assert "unrolled" in str(compact_func)
    compact = extract_features(compact_func)
    assert full.shape == compact.shape
    int_ops = [COL[n] for n in ("int_addsub", "int_mul")]  # constants fold in the copies
    keep = np.setdiff1d(np.arange(N_FEATURES), int_ops)
    np.testing.assert_allclose(full[:, keep], compact[:, keep], rtol=1e-5, atol=1e-5)
    update = compact[np.argmax(compact[:, COL["float_ops"]])]
    assert_feature(update, "unroll_copies", 32)
    assert_feature(update, "auto_unroll_max_step", 8)


def test_register_accumulator_and_allocation() -> None:
    A, B, C = matmul(32)
    s = te.create_schedule(C)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=4)
    jo, ji = s[C].split(j, factor=16)
    s[C].reorder(io, jo, ii, ji)
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    s[CL].reorder(ck, ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    rows = features_of(s, [A, B, C])
    update = rows[np.argmax(rows[:, COL["float_ops"]])]
    assert_feature(update, "unroll_copies", 4)
    assert_feature(update, "vec_len", 16)
    assert_feature(update, "alloc_bytes", 4 * 16 * 4)  # the 4 x 16 accumulator tile
    assert_feature(update, "alloc_count", 8 * 2)  # allocated once per (io, jo) tile
    assert_feature(update, "is_alloc", 1)
    assert_feature(update, "acc_registers", 4)  # four vector accumulators
    slots = {round(value(update, f"buf{k}_local")): k for k in range(3)}
    local = slots[1]
    assert_feature(update, f"buf{local}_register", 1)
    assert_feature(update, f"buf{local}_read_write", 1)


def test_guarded_tail_and_nested_buffers_are_featurized() -> None:
    A, B, C = add_program(10, 10)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=4)  # 10 = 4 + 4 + 2: a guarded tail
    rows = features_of(s, [A, B, C])
    executed = sum(value(r, "outer_prod") for r in rows)
    assert executed >= 100
    assert max(value(r, "guards") for r in rows) >= 1 or len(rows) > 1


@pytest.mark.parametrize(("op", "params"), [
    ("conv2d_nchw", dict(N=1, C=4, H=8, W=8, K=8, R=3, S=3, padding=1)),
    ("depthwise_conv2d_nchw", dict(N=1, C=4, H=8, W=8, R=3, S=3, padding=1, stride=2)),
    ("softmax", dict(M=4, N=20)),
    ("layer_norm", dict(M=4, N=20)),
    ("max_pool2d", dict(N=1, C=4, H=8, W=8, R=2, S=2, stride=2)),
    ("dense", dict(M=8, N=8, K=8, activation="gelu")),
])
def test_every_operator_gives_finite_features(op: str, params: dict) -> None:
    args = Workload.op(op, **params).tensors()
    rows = features_of(te.create_schedule(args[-1]), args)
    assert rows.shape[0] >= 1
    if op in ("softmax", "dense"):
        assert max(value(r, "float_math") for r in rows) > 0  # exp / erf


def test_extraction_is_deterministic() -> None:
    A, B, C = matmul(24)
    s = te.create_schedule(C)
    io, ii = s[C].split(s[C].op.axis[0], factor=8)
    s[C].unroll(ii)
    first = extract_features(lower(s, [A, B, C]))
    again = extract_features(lower(s, [A, B, C]))
    np.testing.assert_array_equal(first, again)
    replayed = te.create_schedule(matmul(24)[2]).replay(s.steps)
    args = [replayed[name].op.output for name in ("A", "B", "C")]
    np.testing.assert_array_equal(first, extract_features(lower(replayed, args)))


def test_program_features_aggregate_rows() -> None:
    A, B, C = matmul(16)
    rows = features_of(te.create_schedule(C), [A, B, C])
    vec = program_features(rows)
    assert vec.shape == (N_PROGRAM_FEATURES,)
    np.testing.assert_array_equal(vec[:N_FEATURES], rows[1])  # the update: most float work
    summed = vec[N_FEATURES + COL["outer_prod"]]
    assert np.exp2(np.float64(summed)) - 1 == pytest.approx(256 + 16**3, rel=1e-4)
    assert program_features(np.zeros((0, N_FEATURES), np.float32)).shape == vec.shape


def test_every_feature_is_documented() -> None:
    assert len(set(FEATURE_NAMES)) == N_FEATURES
    doc = (Path(__file__).resolve().parents[2] / "cost_model" / "FEATURES.md").read_text()
    documented = set(re.findall(r"`([a-z0-9_{}]+)`", doc))
    missing = []
    for name in FEATURE_NAMES:
        generic = re.sub(r"^buf\d_", "buf{k}_", name)
        generic = re.sub(r"_\d$", "_{n}", generic)
        if name not in documented and generic not in documented:
            missing.append(name)
    assert not missing, f"features missing from FEATURES.md: {missing}"



def test_gpu_programs_show_their_threads_and_shared_memory() -> None:
    from tests.schedule.test_gpu import tiled_matmul

    s, args = tiled_matmul()
    rows = extract_features(lower(s, args, unroll=False))
    assert max(value(r, "prog_shared_bytes") for r in rows) == pytest.approx(2 * 256 * 4)
    assert max(value(r, "gpu_threads") for r in rows) == pytest.approx(128)
    assert max(value(r, "gpu_vthreads") for r in rows) == pytest.approx(2)
    assert max(value(r, f"buf{k}_shared") for r in rows for k in range(5)) == 1.0
    A, B, C = matmul(32)
    cpu = extract_features(lower(te.create_schedule(C), [A, B, C], unroll=False))
    assert max(value(r, "prog_shared_bytes") for r in cpu) == 0.0


def test_prefetch_hints_are_counted_in_both_lowering_forms() -> None:
    """A row pass fetching the next row ahead: one hint per element it reads (24 rows of
    200), the same whether its loop is kept or unrolled; none in a program without."""
    from tests.schedule.test_prefetch import row_exp

    s, A, mx, E = row_exp()
    plain = extract_features(lower(s, [A, E], unroll=False))
    assert all(value(r, "prog_prefetches") == 0 for r in plain)
    s[mx].prefetch(A, 1)
    (k,) = s[mx].op.reduce_axis
    _, ki = s[mx].split(k, factor=8)
    s[mx].unroll(ki)
    for unroll in (False, True):
        rows = extract_features(lower(s, [A, E], unroll=unroll))
        assert all(value(r, "prog_prefetches") == pytest.approx(24 * 200) for r in rows)
