"""The GPU sketches (cuda, opencl): the structure each workload gets, programs sampled from
them computing the right answer on PoCL, and 50 sampled programs of each sketch compiling
with nvcc within the sm_80 and sm_90 limits."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from schedule import Target, Workload, build, compile_cuda, gpu_source, make_schedule, te
from search import SearchTask, make_policy
from search.rules import generate_sketches
from tests.gpu_support import (
    POCL,
    cuda_translation_unit,
    needs_gxx,
    needs_nvcc,
    needs_pocl,
    run_on_cuda_emulator,
)


def _row_sums(rows: int, cols: int) -> Workload:
    A = te.placeholder((rows, cols), "float32", name="A")
    k = te.reduce_axis((0, cols), name="k")
    return Workload.from_tensors(te.compute((rows,), lambda i: te.sum(A[i, k], axis=k),
                                            name="row_sum"), name="row_sum")


WORKLOADS = {
    "matmul": Workload.op("matmul", M=96, N=80, K=40),
    "batch_matmul": Workload.op("batch_matmul", B=2, M=32, N=48, K=24),
    "conv2d": Workload.op("conv2d_nchw", N=1, C=8, H=14, W=14, K=16, R=3, S=3, padding=1),
    "depthwise": Workload.op("depthwise_conv2d_nchw", N=1, C=16, H=14, W=14, R=3, S=3,
                             padding=1),
    "dense_relu": Workload.op("dense", M=16, N=48, K=64, activation="relu"),
    "softmax": Workload.op("softmax", M=16, N=100),
    "layer_norm": Workload.op("layer_norm", M=8, N=96),
    "sum": _row_sums(32, 200),
}


def _programs(workload: Workload, target: str, n: int, seed: int = 0) -> list:
    policy = make_policy(SearchTask(workload, target), "random", seed=seed)
    return policy.propose(n)


def test_stages_with_reuse_get_the_gpu_multi_level_tiling() -> None:
    def names(key: str) -> list[str]:
        return [sk.name for sk in generate_sketches(SearchTask(WORKLOADS[key], POCL))]

    (mm,) = names("matmul")
    assert "cache_write T_matmul" in mm and "gpu_tile T_matmul.local" in mm
    (dense,) = names("dense_relu")  # the reduction accumulates in registers under the relu
    assert "gpu_tile T_dense SSSRRSRS@T_relu" in dense and "cache_write" not in dense
    assert [n for n in names("softmax") if "gpu_tile" in n] == []
    # the cpu keeps its own rules (a workload this small may also run serially)
    assert any("parallel" in step[0] for cand in _programs(WORKLOADS["matmul"], "cpu", 8)
               for step in cand.steps.to_json())


def test_a_tiled_program_binds_blocks_virtual_threads_and_threads_and_stages_inputs() -> None:
    (cand,) = _programs(WORKLOADS["matmul"], POCL, 1)
    steps = cand.steps.to_json()
    tags = {step[3] for step in steps if step[0] == "bind"}
    assert {"blockIdx.x", "vthread", "threadIdx.x"} <= tags
    assert sum(1 for step in steps if step[:1] == ["cache_read"] and step[2] == "shared") == 2
    s, args = make_schedule(WORKLOADS["matmul"], cand.steps)
    source = gpu_source(s, args, POCL).source
    assert "__local float" in source and "barrier(CLK_LOCAL_MEM_FENCE" in source


@needs_pocl
@pytest.mark.parametrize("key", list(WORKLOADS))
def test_sampled_gpu_programs_compute_the_reference_on_pocl(key: str) -> None:
    workload = WORKLOADS[key]
    inputs = workload.random_inputs(0)
    (expected,) = workload.reference(inputs)
    for cand in _programs(workload, POCL, 3, seed=1):
        s, args = make_schedule(workload, cand.steps)
        out = np.zeros_like(expected)
        build(s, args, POCL)(*inputs, out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4,
                                   err_msg=str(cand.steps.to_json()))


@needs_nvcc
@pytest.mark.slow
def test_fifty_sampled_programs_of_each_sketch_compile_within_the_limits() -> None:
    """About 700 kernels: one nvcc run per sketch and architecture, two at a time."""
    jobs = []
    for arch in ("sm_80", "sm_90"):
        target = Target.parse(f"cuda -arch={arch}")
        for key in ("matmul", "batch_matmul", "conv2d", "depthwise", "softmax",
                    "layer_norm", "sum"):
            workload = WORKLOADS[key]
            sources = []
            for i, cand in enumerate(_programs(workload, str(target), 50)):
                s, args = make_schedule(workload, cand.steps)
                sources.append(gpu_source(s, args, target, name=f"{key}_{i}").source)
            jobs.append((target, len(sources), cuda_translation_unit(sources)))
    with ThreadPoolExecutor(max_workers=2) as pool:
        binaries = list(pool.map(lambda job: compile_cuda(job[2], job[0].arch), jobs))
    for (target, count, _), binary in zip(jobs, binaries, strict=True):
        assert len(binary.resources) >= count
        for kernel, res in binary.resources.items():
            assert res.registers <= target.registers_per_thread, kernel
            assert res.shared_bytes <= target.shared_memory_bytes, kernel


@needs_pocl
@pytest.mark.parametrize("key", ["softmax", "layer_norm", "sum"])
def test_every_sketch_of_a_row_reduction_computes_the_reference(key: str) -> None:
    """Their sketches reduce each row with a block's threads together (cross-thread, with
    one or more rows per block) or one thread per row; programs of each are right."""
    workload = WORKLOADS[key]
    task = SearchTask(workload, POCL)
    sketches = generate_sketches(task)
    assert any("cross_thread" in sk.name for sk in sketches)
    policy = make_policy(task, "random", seed=3)
    inputs = workload.random_inputs(0)
    (expected,) = workload.reference(inputs)
    seen, rows = set(), set()
    for cand in policy.propose(24):  # built: the first of each sketch, and of several rows
        several = max((v for k, v in cand.decisions.items() if k.startswith("rows:")),
                      default=1)
        if cand.sketch in seen and (several == 1 or max(rows, default=1) > 1):
            continue
        seen.add(cand.sketch)
        rows.add(several)
        s, args = make_schedule(workload, cand.steps)
        out = np.zeros_like(expected)
        build(s, args, POCL)(*inputs, out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4,
                                   err_msg=cand.sketch_name)
    assert len(seen) == len(sketches)
    assert max(rows) > 1  # several outputs per block (threadIdx.y) were among them


@needs_gxx
@pytest.mark.parametrize("key", ["softmax", "layer_norm", "sum"])
def test_cross_thread_sketches_on_cuda_compute_the_reference_on_the_emulator(key: str) -> None:
    """On CUDA a cross-thread sketch reduces with warp shuffles (see
    ``schedule.gpu_lower._warp_reduce``); a program of each such sketch, run on the CPU
    emulation of CUDA (tests/cuda_emulator), computes the reference."""
    workload = WORKLOADS[key]
    target = Target.parse("cuda -arch=sm_80")
    policy = make_policy(SearchTask(workload, target), "random", seed=4)
    inputs = workload.random_inputs(0)
    (expected,) = workload.reference(inputs)
    seen: set[str] = set()
    for cand in policy.propose(16):
        if "cross_thread" not in cand.sketch_name or cand.sketch in seen:
            continue
        seen.add(cand.sketch)
        s, args = make_schedule(workload, cand.steps)
        program = gpu_source(s, args, target)
        (out,) = run_on_cuda_emulator(program, inputs)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4,
                                   err_msg=cand.sketch_name)
    assert seen
