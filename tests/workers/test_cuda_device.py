"""The ``cuda`` device plugin: GPU programs compiled by nvcc into cubins on the building
node (no GPU needed: tested wherever nvcc is), checked against the target's register limit,
and run on an NVIDIA GPU in the device's sandbox (tested where a GPU is; skipped, saying
why, elsewhere), where a kernel that faults is a result and the device goes on."""

from __future__ import annotations

import pytest

from schedule import Steps, Target, Workload, compile_cuda, cuda_missing, make_schedule
from schedule.gpu_build import LaunchPlan
from tests.gpu_support import cuda_target, needs_cuda, needs_nvcc
from tests.schedule.test_gpu import tiled_matmul
from tests.workers.test_opencl_device import _fallback_steps
from workers import CudaDevice, ErrorKind, LocalPool, MeasureInput, MeasureSettings
from workers import cuda as cuda_mod
from workers.cluster import worker_command
from workers.device import BuildResult

MATMUL = Workload.op("matmul", M=64, N=48, K=32)
MATMUL_128 = Workload.op("matmul", M=128, N=128, K=128)


def _tiled_steps() -> Steps:
    """The tiled GEMM schedule (shared memory, virtual threads) of ``MATMUL_128``."""
    s, _ = tiled_matmul(tensors=make_schedule(MATMUL_128)[1])
    return Steps(s.steps)


@needs_nvcc
def test_a_build_is_a_cubin_with_each_kernels_resources() -> None:
    inp = MeasureInput(MATMUL, "cuda -arch=sm_90", _fallback_steps(MATMUL))
    built = CudaDevice.build(inp, 120.0)
    assert built.ok, built.error_msg
    assert built.library.startswith(b"\x7fELF")  # a cubin is an ELF image
    plan = LaunchPlan.from_json(built.signature["plan"])
    (kernel,) = plan.kernels
    registers, spills, shared = built.signature["resources"][kernel.name]
    assert 0 < registers <= 255 and spills == 0 and shared == 0
    assert "-arch=sm_90" in built.flags and "release" in built.flags[0]


@needs_nvcc
def test_a_kernel_over_the_targets_register_limit_is_an_invalid_schedule() -> None:
    """The tiled GEMM keeps a 2x2 accumulator tile per virtual thread and both tiles'
    operands in registers: more than 16 a thread."""
    inp = MeasureInput(MATMUL_128, "cuda -arch=sm_80 -registers-per-thread=16", _tiled_steps())
    built = CudaDevice.build(inp, 120.0)
    assert built.error_kind is ErrorKind.INVALID_SCHEDULE
    assert "registers per thread; the target allows 16" in built.error_msg
    assert CudaDevice.build(MeasureInput(MATMUL_128, "cuda -arch=sm_80", _tiled_steps()),
                            120.0).ok


def test_an_unbound_program_is_refused_before_nvcc_runs() -> None:
    unbound = Steps(make_schedule(MATMUL)[0].steps)
    built = CudaDevice.build(MeasureInput(MATMUL, "cuda -arch=sm_90", unbound), 120.0)
    assert built.error_kind is ErrorKind.INVALID_SCHEDULE
    assert "not bound to GPU threads" in built.error_msg


def test_a_device_serves_its_own_architecture_and_counts_as_a_ray_gpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_mod, "nvidia_gpus",
                        lambda: (("9.0", "NVIDIA H100 80GB HBM3"), ("8.0", "NVIDIA A100")))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert CudaDevice.count_here() == 2
    first, second = CudaDevice.for_slot("", 0), CudaDevice.for_slot("", 1)
    try:
        assert first.serves(Target.parse("cuda -arch=sm_90"))
        assert not first.serves(Target.parse("cuda -arch=sm_80"))
        assert not first.serves(Target.parse("opencl -device=pocl"))
        assert second.serves(Target.parse("cuda -arch=sm_80"))
        assert first.model == "NVIDIA H100 80GB HBM3" and first.id.startswith("cuda-0@")
    finally:
        first.close()
        second.close()
    # a Ray actor holding one GPU sees it as ordinal 0, whatever its slot on the node
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert cuda_mod.visible_gpu(1) == (0, 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert cuda_mod.visible_gpu(1) == (1, 0)


def test_ray_reserves_a_gpu_device_with_num_gpus_on_nodes_that_advertise_them() -> None:
    pytest.importorskip("ray")
    from workers.ray_pool import actor_resources

    assert actor_resources("GPU") == {"num_gpus": 1}
    assert actor_resources("cpu-measure") == {"resources": {"cpu-measure": 1}}
    command = worker_command("head:6379", {"GPU": 2, "cpu-measure": 1})
    assert "--num-gpus=2" in command and '--resources={"cpu-measure": 1}' in command


@needs_nvcc
@pytest.mark.skipif(not cuda_missing(), reason="a CUDA device is present here")
def test_without_a_gpu_a_run_is_a_lost_device_not_a_candidates_fault() -> None:
    device = CudaDevice()
    try:
        inp = MeasureInput(MATMUL, "cuda -arch=sm_90", _fallback_steps(MATMUL))
        built = CudaDevice.build(inp, 120.0)
        result = device.run(built, inp, MeasureSettings(repeat=1))
        assert result.error_kind is ErrorKind.DEVICE_LOST
        assert "no CUDA driver" in result.error_msg or "no device" in result.error_msg
        assert not device.is_alive()
    finally:
        device.close()


# ------------------------------------------------------------------- on a GPU, when one is lent


@pytest.fixture(scope="module")
def gpu_pool():
    with LocalPool(MeasureSettings(repeat=2), devices=[CudaDevice()], build_workers=1) as p:
        yield p


@needs_cuda
def test_a_gpu_program_runs_checked_and_timed_on_the_gpu(gpu_pool: LocalPool) -> None:
    target = str(cuda_target())
    inputs = [MeasureInput(MATMUL, target, _fallback_steps(MATMUL)),
              MeasureInput(MATMUL_128, target, _tiled_steps())]
    for result in gpu_pool.measure(inputs):
        assert result.ok, result.error_msg
        assert len(result.costs) == 2 and all(0 < c < 0.1 for c in result.costs)
        assert result.device.startswith("cuda-0@")
        assert result.provenance.device_model.startswith("NVIDIA")


@needs_cuda
def test_a_kernel_that_faults_is_a_runtime_error_and_the_device_goes_on() -> None:
    """A kernel with the candidate's name and parameters that writes to an illegal address:
    its context is lost, so the sandbox is replaced and the device checked."""
    target = cuda_target()
    inp = MeasureInput(MATMUL, str(target), _fallback_steps(MATMUL))
    good = CudaDevice.build(inp, 120.0)
    (kernel,) = LaunchPlan.from_json(good.signature["plan"]).kernels
    params = ", ".join(f"float* p{i}" for i in range(len(kernel.params)))
    source = (f'extern "C" __global__ void {kernel.name}({params}) '
              "{ *((volatile float*)0x8) = 1.0f; }")
    faulty = BuildResult(ErrorKind.NONE, "", 0.0, compile_cuda(source, target.arch).cubin,
                         good.signature, good.compiler)
    device = CudaDevice()
    try:
        result = device.run(faulty, inp, MeasureSettings(repeat=1))
        assert result.error_kind is ErrorKind.RUNTIME_ERROR
        assert "faulted on the device" in result.error_msg
        assert "checked after it and answers" in result.error_msg
        after = device.run(BuildResult(ErrorKind.NONE, "", 0.0, good.library,
                                       good.signature, good.compiler), inp,
                           MeasureSettings(repeat=1))
        assert after.ok, after.error_msg  # and the next candidate runs
    finally:
        device.close()
