"""GPU lowering and code generation: OpenCL programs run on PoCL (an OpenCL driver for the
CPU) and are checked against numpy; the CUDA versions of the same schedules compile with
nvcc for sm_80 and sm_90 within those architectures' limits. No GPU is needed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from schedule import Target, ops, te
from schedule.build import build
from schedule.gpu_build import LaunchPlan, compile_cuda, gpu_source
from schedule.gpu_schedules import fallback_gpu_schedule
from schedule.schedule import ScheduleError
from tests.gpu_support import (
    POCL,
    cuda_translation_unit,
    needs_gxx,
    needs_nvcc,
    needs_pocl,
    run_on_cuda_emulator,
)
from tests.schedule.helpers import matmul
from tests.schedule.test_ops import REGISTRY_CASES


def tiled_matmul(M: int = 128, N: int = 128, K: int = 128, vthreads: int = 2,
                 k_tile: int = 8, fetch_width: int = 1, tensors: list[te.Tensor] | None = None):
    """The classic GPU GEMM schedule: 32x32 output tiles per block, a 2x2 register tile per
    thread (times ``vthreads`` interleaved rows), both inputs staged in shared memory per
    step of ``k_tile`` along k, fetched cooperatively by the block's 16x8 threads, each
    copying ``fetch_width`` neighbours per step. ``tensors``: a matmul's (A, B, C) to
    schedule (a workload's, say) instead of new ones of M x K by K x N."""
    A, B, C = tensors or matmul(M, N, K)
    s = te.create_schedule(C)
    CL = s.cache_write(C, "local")
    AA = s.cache_read(A, "shared", [CL])
    BB = s.cache_read(B, "shared", [CL])
    i, j = s[C].op.axis
    bi, ii = s[C].split(i, factor=32)
    bj, jj = s[C].split(j, factor=32)
    vi, ii = s[C].split(ii, nparts=vthreads)
    ti, ii = s[C].split(ii, nparts=8)
    tj, jj = s[C].split(jj, nparts=16)
    s[C].reorder(bi, bj, vi, ti, tj, ii, jj)
    s[C].bind(bi, "blockIdx.y")
    s[C].bind(bj, "blockIdx.x")
    s[C].bind(vi, "vthread")
    s[C].bind(ti, "threadIdx.y")
    s[C].bind(tj, "threadIdx.x")
    s[CL].compute_at(s[C], tj)
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=k_tile)
    ci, cj = s[CL].op.axis
    s[CL].reorder(ko, ki, ci, cj)
    for T in (AA, BB):
        s[T].compute_at(s[CL], ko)
        fused, vector = s[T].split(s[T].fuse(*s[T].op.axis), factor=fetch_width)
        fo, fi = s[T].split(fused, factor=16)
        fo, fy = s[T].split(fo, factor=8)
        s[T].bind(fi, "threadIdx.x")
        s[T].bind(fy, "threadIdx.y")
        if fetch_width > 1:
            s[T].vectorize(vector)
    return s, [A, B, C]


def _run(s: te.Schedule, args: list[te.Tensor], inputs: list[np.ndarray]) -> np.ndarray:
    out = np.zeros(args[-1].shape, args[-1].dtype)
    build(s, args, POCL)(*inputs, out)
    return out


@needs_pocl
def test_tiled_matmul_with_shared_memory_and_virtual_threads_matches_numpy() -> None:
    s, args = tiled_matmul()
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((128, 128)).astype("float32") for _ in range(2))
    np.testing.assert_allclose(_run(s, args, [a, b]), a @ b, rtol=1e-4, atol=1e-4)

    src = gpu_source(s, args, POCL)
    (kernel,) = src.plan.kernels
    assert kernel.grid == (4, 4, 1) and kernel.block == (16, 8, 1)
    text = src.source
    assert "__local float A_shared[256] __attribute__((aligned(16)));" in text
    assert "__local float B_shared[256] __attribute__((aligned(16)));" in text
    # a barrier before the fills (the k loop overwrites them) and one after
    assert text.count("barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);") == 2
    # the per-thread 2x2 accumulator tile, one copy per virtual thread
    assert "float C_local[8];" in text


@needs_pocl
def test_virtual_threads_and_non_dividing_tiles_stay_correct() -> None:
    """Four virtual threads over a matrix whose sizes divide none of the tiles: guarded
    edges, with the shared fills still reached by every thread (their extents divide)."""
    s, args = tiled_matmul(M=96, N=64, K=40, vthreads=4)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((96, 40)).astype("float32")
    b = rng.standard_normal((40, 64)).astype("float32")
    np.testing.assert_allclose(_run(s, args, [a, b]), a @ b, rtol=1e-4, atol=1e-4)


@needs_pocl
def test_a_cooperative_fetch_of_contiguous_aligned_elements_is_a_vector_copy() -> None:
    """A's tile spans whole rows of A (the k tile is all of K): each thread's 4 elements
    are contiguous and aligned in both arrays, one float4. B's tile rows are 32 of 64
    columns, read through ``(t * 4 + lane) // 32`` and ``(t * 4 + lane) % 32``: the 4 lanes
    never cross a row's end, so they are contiguous too, one float4."""
    s, args = tiled_matmul(M=64, N=64, K=32, k_tile=32, fetch_width=4)
    cuda = gpu_source(s, args, "cuda -arch=sm_80").source
    assert cuda.count("*(float4*)(A_shared + ") == 1 and cuda.count("*(float4*)(B_shared + ") == 1
    assert "__shared__ __align__(16) float A_shared[1024];" in cuda
    opencl = gpu_source(s, args, POCL).source
    assert opencl.count("vstore4(vload4(0, A + ") == 1
    assert opencl.count("vstore4(vload4(0, B + ") == 1
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 32)).astype("float32")
    b = rng.standard_normal((32, 64)).astype("float32")
    np.testing.assert_allclose(_run(s, args, [a, b]), a @ b, rtol=1e-4, atol=1e-4)


@needs_pocl
def test_a_fetch_whose_lanes_would_cross_a_row_end_stays_a_loop() -> None:
    """A's tile rows are the k tile, 6 long: 4 lanes from a multiple of 4 may cross a
    row's end, so A's fetch stays element by element (and correct); B's rows are 32."""
    s, args = tiled_matmul(M=64, N=64, K=12, k_tile=6, fetch_width=4)
    opencl = gpu_source(s, args, POCL).source
    assert "vload4(0, A + " not in opencl and "vload4(0, B + " in opencl
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 12)).astype("float32")
    b = rng.standard_normal((12, 64)).astype("float32")
    np.testing.assert_allclose(_run(s, args, [a, b]), a @ b, rtol=1e-4, atol=1e-4)


def _cases() -> list[tuple[str, dict[str, Any]]]:
    return [c for c in REGISTRY_CASES if c[1].get("dtype") != "float16"]


@needs_gxx
@pytest.mark.parametrize("case", list({name: (name, params) for name, params in
                                       reversed(_cases())}.values()),
                         ids=lambda c: f"{c[0]}-{sorted(c[1].items())}")
def test_every_registered_op_as_cuda_matches_numpy_on_the_emulator(
        case: tuple[str, dict[str, Any]]) -> None:
    """The first case of each registered op, its CUDA source run on the CPU emulation of
    CUDA (the CUDA spelling of math, types and launches checked where no GPU is lent)."""
    name, params = case
    spec = ops.get_op(name)
    args = spec.build(params)
    program = gpu_source(fallback_gpu_schedule(args[-1]), args, "cuda -arch=sm_80")
    inputs = spec.random_inputs(params)
    (out,) = run_on_cuda_emulator(program, inputs)
    np.testing.assert_allclose(out, spec.reference(inputs, params), rtol=1e-4, atol=1e-4)


@needs_pocl
@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c[0]}-{sorted(c[1].items())}")
def test_every_registered_op_runs_on_opencl_with_the_fallback_schedule(
        case: tuple[str, dict[str, Any]]) -> None:
    name, params = case
    spec = ops.get_op(name)
    args = spec.build(params)
    s = fallback_gpu_schedule(args[-1])
    inputs = spec.random_inputs(params)
    out = spec.empty_output(params)
    build(s, args, POCL)(*inputs, out)
    expected = spec.reference(inputs, params)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_stages_computed_at_the_root_become_kernels_in_order() -> None:
    spec = ops.get_op("softmax")
    args = spec.build({"M": 4, "N": 33})
    src = gpu_source(fallback_gpu_schedule(args[-1]), args, POCL)
    assert len(src.plan.kernels) >= 3  # row max, exponentials/sum, normalisation
    assert src.plan.temporaries  # the intermediate stages live in global buffers
    assert LaunchPlan.from_json(src.plan.to_json()) == src.plan
    with pytest.raises(ValueError, match="malformed launch plan"):
        LaunchPlan.from_json({"kernels": [{"name": "k", "grid": [1, 1], "block": [1, 1, 1],
                                           "params": []}], "temporaries": []})


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cuda_programs_compile_within_the_architecture_limits(arch: str) -> None:
    target = Target.parse(f"cuda -arch={arch}")
    sources = []
    s, args = tiled_matmul()
    sources.append(gpu_source(s, args, target, name="tiled_matmul").source)
    s, args = tiled_matmul(M=64, N=64, K=32, k_tile=32, fetch_width=4)
    sources.append(gpu_source(s, args, target, name="vector_fetch").source)
    for cols, threads in ((1000, 64), (96, 96), (100, 8), (1000, 256), (2000, 1024)):
        s, args = row_reduction(4, cols, threads)
        sources.append(gpu_source(s, args, target, name=f"row_sum_{cols}_{threads}").source)
    for rows in (12, 10):
        sources.append(gpu_source(*rows_on_threads(rows), target,
                                  name=f"rows_on_threads_{rows}").source)
    for i, (name, params) in enumerate(_cases()):
        spec = ops.get_op(name)
        op_args = spec.build(params)
        sources.append(gpu_source(fallback_gpu_schedule(op_args[-1]), op_args, target,
                                  name=f"{name}_{i}").source)
    binary = compile_cuda(cuda_translation_unit(sources), arch)
    assert binary.cubin
    assert "tiled_matmul_kernel0" in binary.resources
    assert len(binary.resources) >= len(sources)
    for kernel, res in binary.resources.items():
        assert res.registers <= target.registers_per_thread, kernel
        assert res.shared_bytes <= target.shared_memory_bytes, kernel
        assert res.spill_bytes == 0, kernel
    assert binary.resources["tiled_matmul_kernel0"].shared_bytes == 2048


def row_reduction(rows: int, cols: int, threads: int, kind: str = "sum"):
    """One row per block, its elements reduced by ``threads`` threads together: each
    takes every ``threads``-th element, then the partial results meet in a tree."""
    A = te.placeholder((rows, cols), "float32", name="A")
    k = te.reduce_axis((0, cols), name="k")
    reducer = te.sum if kind == "sum" else te.max
    R = te.compute((rows,), lambda i: reducer(A[i, k], axis=k), name="R")
    s = te.create_schedule(R)
    (i,) = s[R].op.axis
    ko, lane = s[R].split(s[R].op.reduce_axis[0], factor=threads)
    s[R].reorder(i, lane, ko)
    s[R].bind(i, "blockIdx.x")
    s[R].bind(lane, "threadIdx.x")
    return s, [A, R]


@needs_pocl
@pytest.mark.parametrize(("cols", "threads", "kind"), [
    (1000, 64, "sum"), (333, 100, "max"), (7, 32, "sum"), (64, 1, "max"), (96, 96, "sum")])
def test_a_cross_thread_reduction_matches_numpy(cols: int, threads: int, kind: str) -> None:
    s, args = row_reduction(5, cols, threads, kind)
    a = np.random.default_rng(2).standard_normal((5, cols)).astype("float32")
    expected = a.sum(axis=1) if kind == "sum" else a.max(axis=1)
    np.testing.assert_allclose(_run(s, args, [a]), expected, rtol=1e-4, atol=1e-4)


def test_a_cross_thread_reduction_is_a_tree_of_barriers_in_shared_memory() -> None:
    s, args = row_reduction(4, 1000, 64)
    text = gpu_source(s, args, POCL).source
    assert "__local float R_red[64]" in text and "float R_partial[1];" in text
    assert text.count("barrier(") == 7  # after the partials, then one per level
    assert "if ((threadIdx_x == 0))" in text
    # on CUDA too where a row's threads are not whole warps nor a power of two below one
    text = gpu_source(*row_reduction(4, 1000, 100), "cuda -arch=sm_80").source
    assert text.count("__syncthreads();") == 8 and "shfl" not in text


def test_a_cuda_reduction_within_a_warp_is_shuffles_in_registers() -> None:
    """Eight threads per row: three shuffles within groups of eight lanes, the first after
    a warp sync (every thread initialised the output lane 0 folds into); no shared memory,
    no block barrier."""
    text = gpu_source(*row_reduction(4, 100, 8), "cuda -arch=sm_80").source
    assert "__shared__" not in text and "__syncthreads" not in text
    assert [f"tt_shfl_down_float32_w8{fenced}(R_partial[0], {offset})" in text
            for offset, fenced in ((4, "_fenced"), (2, ""), (1, ""))] == [True] * 3
    assert "(0xffffffffu >> 24) << (lane & ~7u);" in text
    assert text.index("__syncwarp(group);") < text.index("__shfl_down_sync(group, x, offset, 8)")


def test_a_cuda_reduction_across_warps_meets_once_in_shared_memory() -> None:
    """256 threads: each warp shuffles its 32 partials down to one, the 8 warp totals meet
    in shared memory behind one barrier, and the first warp shuffles them down."""
    text = gpu_source(*row_reduction(4, 1000, 256), "cuda -arch=sm_80").source
    assert "__shared__ __align__(16) float R_red[8];" in text
    assert text.count("__syncthreads();") == 1 and "__syncwarp" not in text
    assert text.count("tt_shfl_down_float32_w32(") == 5 + 1  # 5 calls and the helper
    assert text.count("tt_shfl_down_float32_w8(") == 3 + 1
    assert "R_red[(threadIdx_x / 32)] = R_partial[0];" in text
    assert "((threadIdx_x < 8) ? R_red[threadIdx_x] : 0.0f)" in text


@needs_gxx
@pytest.mark.parametrize(("cols", "threads", "kind"), [
    (100, 8, "max"), (7, 32, "sum"), (1000, 256, "sum"), (3000, 1024, "max"), (500, 96, "sum"),
    (333, 100, "max")])
def test_cuda_cross_thread_reductions_match_numpy_on_the_emulator(cols: int, threads: int,
                                                                   kind: str) -> None:
    """The CUDA-only shuffle forms (and a tree, 100 threads) run on the CPU emulation of
    CUDA (tests/cuda_emulator): within a warp, across warps (3 of them: their totals
    padded to 4), a row narrower than a warp."""
    s, args = row_reduction(5, cols, threads, kind)
    a = np.random.default_rng(7).standard_normal((5, cols)).astype("float32")
    (out,) = run_on_cuda_emulator(gpu_source(s, args, "cuda -arch=sm_80"), [a])
    expected = a.sum(axis=1) if kind == "sum" else a.max(axis=1)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@needs_gxx
def test_rows_on_threads_y_reduce_by_shuffles_on_the_emulator() -> None:
    """Ten rows, four per block: the last block's two idle rows skip the reduction."""
    a = np.random.default_rng(8).standard_normal((10, 300)).astype("float32")
    (out,) = run_on_cuda_emulator(gpu_source(*rows_on_threads(10), "cuda -arch=sm_90"), [a])
    np.testing.assert_allclose(out, a.max(axis=1))


@needs_gxx
def test_shared_memory_tiles_and_float4_fetches_match_numpy_on_the_emulator() -> None:
    s, args = tiled_matmul(M=64, N=64, K=32, k_tile=32, fetch_width=4)
    a, b = (np.random.default_rng(i).standard_normal(shape).astype("float32")
            for i, shape in ((1, (64, 32)), (2, (32, 64))))
    (out,) = run_on_cuda_emulator(gpu_source(s, args, "cuda -arch=sm_80"), [a, b])
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_rows_whose_last_block_is_partial_reduce_by_shuffles_on_cuda() -> None:
    """The rows on threadIdx.y that the block barriers refuse (some threads would skip
    them) are whole warps on CUDA, each reducing its row without a block barrier."""
    text = gpu_source(*rows_on_threads(10), "cuda -arch=sm_90").source
    assert "__syncthreads" not in text and "tt_shfl_down_float32_w32_fenced" in text


def rows_on_threads(rows: int):
    """Four rows per block on threadIdx.y, each reduced by 32 threads along x."""
    A = te.placeholder((rows, 300), "float32", name="A")
    k = te.reduce_axis((0, 300), name="k")
    R = te.compute((rows,), lambda i: te.max(A[i, k], axis=k), name="R")
    s = te.create_schedule(R)
    block, row = s[R].split(s[R].op.axis[0], factor=4)
    ko, lane = s[R].split(s[R].op.reduce_axis[0], factor=32)
    s[R].reorder(block, row, lane, ko)
    s[R].bind(block, "blockIdx.x")
    s[R].bind(row, "threadIdx.y")
    s[R].bind(lane, "threadIdx.x")
    return s, [A, R]


@needs_pocl
def test_rows_on_other_thread_axes_reduce_side_by_side() -> None:
    """A row of partials per y in the shared array; rows that do not fill the last block
    would leave its threads out of the barriers, which is refused."""
    s, args = rows_on_threads(12)
    assert "__local float R_red[128]" in gpu_source(s, args, POCL).source
    a = np.random.default_rng(5).standard_normal((12, 300)).astype("float32")
    np.testing.assert_allclose(_run(s, args, [a]), a.max(axis=1))
    with pytest.raises(ScheduleError, match="barrier .* blockIdx_x \\* 4 \\+ threadIdx_y < 10"):
        gpu_source(*rows_on_threads(10), POCL)


def test_a_cross_thread_reduction_inside_virtual_threads_is_refused() -> None:
    s, args = row_reduction(4, 100, 32)
    rows_on_vthreads = [[*step[:3], "vthread"] if step[:1] == ["bind"]
                        and step[3] == "blockIdx.x" else step for step in s.steps]
    s = te.create_schedule(args[-1]).replay(rows_on_vthreads)
    with pytest.raises(ScheduleError, match="cross-thread reduction over threadIdx.x .* "
                                            "inside loops bound to vthread"):
        gpu_source(s, args, POCL)


# ---------------------------------------------------------------------------- invalid schedules


def test_a_stage_not_bound_to_threads_is_refused() -> None:
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C)
    with pytest.raises(ScheduleError, match="C is not bound to GPU threads"):
        gpu_source(s, [A, B, C], POCL)


def test_an_accumulation_shared_by_threads_is_a_race() -> None:
    """A shared accumulator computed inside the threads' loop, but not split among them:
    every thread would add into every element at once."""
    A, B, C = matmul(8, 16, 64)
    s = te.create_schedule(C)
    CS = s.cache_write(C, "shared")
    i, j = s[C].op.axis
    s[C].bind(i, "blockIdx.x")
    s[C].bind(j, "threadIdx.x")
    s[CS].compute_at(s[C], j)
    with pytest.raises(ScheduleError, match="threads race on C_shared.*bound to threadIdx.x"):
        gpu_source(s, [A, B, C], POCL)
    with pytest.raises(ScheduleError, match="reduction axis: only threadIdx"):
        s[CS].bind(s[CS].op.reduce_axis[0], "blockIdx.y")


def test_a_per_thread_buffer_filled_across_threads_is_refused() -> None:
    s, args = tiled_matmul()
    C = args[-1]
    CL = next(st for st in s.stages if st.name == "C.local")
    s[CL].bind(s[CL].op.axis[1], "threadIdx.z")
    with pytest.raises(ScheduleError, match="C.local is a per-thread buffer"):
        gpu_source(s, [*args[:2], C], POCL)


def test_a_barrier_in_divergent_code_is_refused() -> None:
    """The block has 16 threads along x but the shared fill is inside the output stage's
    narrower x loop: not every thread would reach the barrier."""
    A, B, C = matmul(64, 64, 64)
    s = te.create_schedule(C)
    AA = s.cache_read(A, "shared", [C])
    i, j = s[C].op.axis
    bi, ii = s[C].split(i, factor=8)
    s[C].bind(bi, "blockIdx.x")
    tj, jj = s[C].split(j, nparts=8)
    s[C].bind(tj, "threadIdx.x")
    s[C].reorder(bi, tj, ii, jj)
    s[AA].compute_at(s[C], tj)
    fo, fi = s[AA].split(s[AA].fuse(*s[AA].op.axis), factor=16)
    s[AA].bind(fi, "threadIdx.x")
    with pytest.raises(ScheduleError, match="barrier .* not every thread of the block"):
        gpu_source(s, [A, B, C], POCL)


def test_over_the_targets_limits_is_refused() -> None:
    s, args = tiled_matmul()
    with pytest.raises(ScheduleError, match="128 threads per block .* allows 64"):
        gpu_source(s, args, "opencl -device=pocl -max-threads-per-block=64")
    with pytest.raises(ScheduleError, match="2048 bytes of shared memory .* allows 1024"):
        gpu_source(s, args, "cuda -arch=sm_80 -shared-memory-bytes=1024")


def test_cpu_annotations_are_refused_on_a_gpu() -> None:
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C)
    i, j = s[C].op.axis
    s[C].parallel(i)
    s[C].bind(j, "threadIdx.x")
    with pytest.raises(ScheduleError, match="parallel, a cpu annotation"):
        gpu_source(s, [A, B, C], POCL)


def test_gpu_bindings_are_refused_on_a_cpu() -> None:
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C)
    s[C].bind(s[C].op.axis[0], "blockIdx.x")
    with pytest.raises(ScheduleError, match="needs a GPU target"):
        build(s, [A, B, C], "cpu")


def test_opencl_targets_parse_and_check_their_options() -> None:
    t = Target.parse("opencl -device=pocl -max-threads-per-block=256")
    assert str(t) == "opencl -device=pocl -max-threads-per-block=256"
    assert t.is_gpu and t.max_threads_per_block == 256 and t.shared_memory_bytes == 49152
    assert Target.parse(str(t)) == t
    with pytest.raises(ValueError, match="bad opencl device"):
        Target.parse("opencl -device=Po;CL")
    with pytest.raises(ValueError, match="registers-per-thread=8: must be in 16..255"):
        Target.parse("cuda -arch=sm_90 -registers-per-thread=8")


def test_bad_input_to_the_gpu_entry_points_is_one_clear_error() -> None:
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = fallback_gpu_schedule(B)
    with pytest.raises(ValueError, match="is not a GPU target"):
        gpu_source(s, [A, B], "cpu")
    wide = te.compute((1000,), lambda i: A[0] * 2.0, name="W")
    s3 = te.create_schedule(wide)
    s3[wide].bind(s3[wide].op.axis[0], "vthread")
    with pytest.raises(ScheduleError, match="1000 virtual threads; at most 64"):
        gpu_source(s3, [A, wide], POCL)


@needs_pocl
def test_an_opencl_module_refuses_wrong_arrays_and_unknown_devices() -> None:
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = fallback_gpu_schedule(B)
    mod = build(s, [A, B], POCL)
    with pytest.raises(TypeError, match="takes 2 arrays"):
        mod(np.zeros(8, "float32"))
    with pytest.raises(TypeError, match="must have dtype float32"):
        mod(np.zeros(8, "float64"), np.zeros(8, "float32"))
    with pytest.raises(ValueError, match="must have shape \\[8\\]"):
        mod(np.zeros(8, "float32"), np.zeros(4, "float32"))
    with pytest.raises(RuntimeError, match="no OpenCL platform for device 'nvidia'"):
        build(s, [A, B], "opencl -device=nvidia")


@needs_nvcc
def test_cuda_source_nvcc_rejects_is_a_build_error() -> None:
    from schedule import BuildError

    with pytest.raises(BuildError, match="CUDA compilation failed"):
        compile_cuda('extern "C" __global__ void broken( {', "sm_80")
