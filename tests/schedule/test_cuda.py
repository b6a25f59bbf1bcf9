"""CUDA programs run on an NVIDIA GPU through the driver, checked against numpy: the same
schedules the OpenCL tests run on PoCL (shared-memory staging, virtual threads, vector
fetches, cross-thread reductions, every registered op). They skip, saying why, where no GPU
is; what needs none (the error without a driver) runs everywhere else."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from schedule import (
    BuildError,
    CudaModule,
    CudaUnavailable,
    KernelSignature,
    LaunchPlan,
    build,
    compile_cuda,
    cuda_missing,
    fallback_gpu_schedule,
    ops,
    te,
)
from schedule.build import ArgSpec
from schedule.gpu_build import KernelLaunch
from tests.gpu_support import cuda_target, needs_cuda
from tests.schedule.test_gpu import _cases, row_reduction, rows_on_threads, tiled_matmul


def _run(s: te.Schedule, args: list[te.Tensor], inputs: list[np.ndarray]) -> np.ndarray:
    out = np.zeros(args[-1].shape, args[-1].dtype)
    mod = build(s, args, cuda_target())
    try:
        mod(*inputs, out)
    finally:
        mod.close()
    return out


def _random(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


@pytest.mark.skipif(not cuda_missing(), reason="a CUDA device is present here")
def test_without_a_cuda_device_building_for_one_says_why() -> None:
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises((CudaUnavailable, BuildError),
                       match="no CUDA driver|found no device|nvcc not found"):
        build(fallback_gpu_schedule(B), [A, B], "cuda -arch=sm_90")


@needs_cuda
@pytest.mark.parametrize(("shape", "vthreads"), [((128, 128, 128), 2), ((96, 64, 40), 4)])
def test_tiled_matmul_with_shared_memory_and_virtual_threads_matches_numpy(
        shape: tuple[int, int, int], vthreads: int) -> None:
    M, N, K = shape
    s, args = tiled_matmul(M, N, K, vthreads=vthreads)
    a, b = _random(M, K, seed=1), _random(K, N, seed=2)
    np.testing.assert_allclose(_run(s, args, [a, b]), a @ b, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_a_vector_fetch_through_float4_matches_numpy() -> None:
    s, args = tiled_matmul(M=64, N=64, K=32, k_tile=32, fetch_width=4)
    a, b = _random(64, 32, seed=3), _random(32, 64, seed=4)
    np.testing.assert_allclose(_run(s, args, [a, b]), a @ b, rtol=1e-4, atol=1e-4)


@needs_cuda
@pytest.mark.parametrize(("cols", "threads", "kind"), [
    (1000, 64, "sum"), (333, 100, "max"), (7, 32, "sum"), (96, 96, "sum"), (100, 8, "max"),
    (1000, 256, "sum"), (3000, 1024, "max")])
def test_a_cross_thread_reduction_matches_numpy(cols: int, threads: int, kind: str) -> None:
    """Tree reductions (threads not a power of two) and warp shuffles (within a warp, and
    across warps through shared memory)."""
    s, args = row_reduction(5, cols, threads, kind)
    a = _random(5, cols, seed=5)
    expected = a.sum(axis=1) if kind == "sum" else a.max(axis=1)
    np.testing.assert_allclose(_run(s, args, [a]), expected, rtol=1e-4, atol=1e-4)
    for rows in (12, 10):  # 10: the last block's rows on threadIdx.y partly idle
        s, args = rows_on_threads(rows)
        a = _random(rows, 300, seed=6)
        np.testing.assert_allclose(_run(s, args, [a]), a.max(axis=1))


@needs_cuda
@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c[0]}-{sorted(c[1].items())}")
def test_every_registered_op_runs_on_cuda_with_the_fallback_schedule(
        case: tuple[str, dict[str, Any]]) -> None:
    name, params = case
    spec = ops.get_op(name)
    args = spec.build(params)
    inputs = spec.random_inputs(params)
    out = spec.empty_output(params)
    mod = build(fallback_gpu_schedule(args[-1]), args, cuda_target())
    try:
        mod(*inputs, out)
    finally:
        mod.close()
    np.testing.assert_allclose(out, spec.reference(inputs, params), rtol=1e-4, atol=1e-4)


@needs_cuda
def test_timing_gives_device_seconds_per_call() -> None:
    s, args = tiled_matmul(256, 256, 256)
    mod = build(s, args, cuda_target())
    try:
        a, b = _random(256, 256, seed=7), _random(256, 256, seed=8)
        costs = mod.time(a, b, np.zeros((256, 256), "float32"), number=2, repeat=3,
                         min_repeat_ms=1)
    finally:
        mod.close()
    assert len(costs) == 3 and all(0 < c < 0.1 for c in costs)


@needs_cuda
def test_a_cubin_for_another_architecture_is_refused_by_the_driver() -> None:
    """SASS runs only on its own major architecture: the driver refuses it, as a build
    error naming the device."""
    device_arch = cuda_target().arch
    other = "sm_75" if not device_arch.startswith("sm_7") else "sm_80"
    source = 'extern "C" __global__ void add_one(float* A) { A[threadIdx.x] += 1.0f; }'
    binary = compile_cuda(source, other)
    signature = KernelSignature("tt_add_one", (ArgSpec("A", (32,), "float32", True),))
    plan = LaunchPlan((KernelLaunch("add_one", (1, 1, 1), (32, 1, 1), ("A",)),), ())
    with pytest.raises(BuildError, match="the CUDA driver refused the program"):
        CudaModule(signature, plan, binary.cubin)
    good = CudaModule(signature, plan, compile_cuda(source, device_arch).cubin)
    try:
        out = np.arange(32, dtype="float32")
        good(out)
        np.testing.assert_array_equal(out, np.arange(32, dtype="float32") + 1)
    finally:
        good.close()
