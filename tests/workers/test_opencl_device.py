"""The ``opencl`` device plugin: GPU programs built as OpenCL C, compiled by the driver and
run in the device's sandbox (PoCL here), checked against numpy and timed with profiling
events; what it refuses or catches is a result with its kind, the device going on."""

from __future__ import annotations

import pytest

from schedule import Steps, Target, Workload, fallback_gpu_schedule, make_schedule
from tests.gpu_support import POCL, needs_pocl
from workers import ErrorKind, LocalPool, MeasureInput, MeasureSettings, OpenCLDevice
from workers.device import BuildResult

pytestmark = needs_pocl

MATMUL = Workload.op("matmul", M=64, N=48, K=32)


def _fallback_steps(workload: Workload) -> Steps:
    _, args = make_schedule(workload)
    return Steps(fallback_gpu_schedule(args[-1]).steps)


@pytest.fixture(scope="module")
def pool():
    with LocalPool(MeasureSettings(repeat=2), devices=[OpenCLDevice()], build_workers=1) as p:
        yield p


def test_a_gpu_program_runs_checked_and_timed_on_pocl(pool: LocalPool) -> None:
    [result] = pool.measure([MeasureInput(MATMUL, POCL, _fallback_steps(MATMUL))])
    assert result.ok, result.error_msg
    assert len(result.costs) == 2 and all(c > 0 for c in result.costs)
    assert result.device.startswith("opencl-pocl@")
    assert "PoCL on CPU" in result.provenance.device_model


def test_what_the_device_refuses_or_catches(pool: LocalPool) -> None:
    unbound = Steps(make_schedule(MATMUL)[0].steps)
    [result] = pool.measure([MeasureInput(MATMUL, POCL, unbound)])
    assert result.error_kind is ErrorKind.INVALID_SCHEDULE
    assert "not bound to GPU threads" in result.error_msg

    device = OpenCLDevice()
    try:
        inp = MeasureInput(MATMUL, POCL, _fallback_steps(MATMUL))
        good = OpenCLDevice.build(inp, 30.0)
        broken = BuildResult(ErrorKind.NONE, "", 0.0, b"__kernel void oops( {",
                             good.signature, good.compiler)
        result = device.run(broken, inp, MeasureSettings(repeat=1))
        assert result.error_kind is ErrorKind.COMPILE_ERROR
        assert "OpenCL compilation failed" in result.error_msg
        wrong = good.library.decode().replace("= 0.0f;", "= 1.0f;", 1).encode()
        result = device.run(BuildResult(ErrorKind.NONE, "", 0.0, wrong, good.signature,
                                        good.compiler), inp, MeasureSettings(repeat=1))
        assert result.error_kind is ErrorKind.WRONG_ANSWER
        result = device.run(good, inp, MeasureSettings(repeat=1))  # and it goes on
        assert result.ok, result.error_msg
    finally:
        device.close()


def test_the_device_serves_opencl_targets_of_its_platform() -> None:
    device = OpenCLDevice()
    try:
        assert device.serves(Target.parse(POCL))
        assert not device.serves(Target.parse("opencl -device=nvidia"))
        assert not device.serves(Target.parse("cpu"))
        assert OpenCLDevice.count_here() >= 1
    finally:
        device.close()


def test_a_worker_advertises_its_opencl_devices_as_ray_resources() -> None:
    from workers import node_resources

    assert node_resources(["opencl"]) == {"opencl": OpenCLDevice.count_here()}
