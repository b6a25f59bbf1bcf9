"""The CUDA driver binding, ``CudaModule`` and the cuda device's run path against a test
double of the driver library (``fake_libcuda.c``), on machines without a GPU.

The double keeps memory on the host and runs no GPU code, so this checks what a GPU is not
needed for: that every driver call receives its arguments as the C API declares them
(devices, attributes, allocations, copies, the launch's grid, block and parameter array,
events), that a refused image is a build error, that a sticky fault comes back as a fault
and the device's sandbox is replaced and checked, and that a program's outputs are compared
(the double computes nothing, so a real candidate is a wrong answer). Whether the kernels
compute the right thing on a GPU is tests/schedule/test_cuda.py's, where one is lent.

The double is loaded as ``libcuda.so.1`` through ``LD_LIBRARY_PATH``, which the loader
reads at start-up: the checks run in a child Python (``scenario``), and the sandbox the
device starts from it inherits the variable.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.gpu_support import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
ADD_ONE = 'extern "C" __global__ void add_one(float* A) { A[threadIdx.x] += 1.0f; }'


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fake-cuda")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(folder / "libcuda.so.1"),
                    str(Path(__file__).with_name("fake_libcuda.c"))], check=True)
    return folder


@needs_nvcc
def test_the_driver_binding_and_the_cuda_device_against_a_driver_double(
        fake_driver: Path) -> None:
    log = fake_driver / "calls.log"
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_driver), "FAKE_CUDA_LOG": str(log),
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c",
         "from tests.workers.test_cuda_driver_double import scenario; scenario()"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "scenario passed"
    launches = log.read_text().splitlines()
    assert "launch add_one grid 1 1 1 block 32 1 1" in launches
    assert "launch tiled_kernel0 grid 4 4 1 block 16 8 1" in launches
    assert "launch fault grid 1 1 1 block 32 1 1" in launches


def scenario() -> None:
    """The checks, in a process whose libcuda.so.1 is the double."""
    from schedule import (
        BuildError,
        CudaError,
        CudaModule,
        KernelSignature,
        LaunchPlan,
        Steps,
        Workload,
        build,
        compile_cuda,
        cuda_missing,
        make_schedule,
    )
    from schedule.build import ArgSpec
    from schedule.cuda_driver import DeviceInfo, driver
    from schedule.gpu_build import KernelLaunch
    from tests.schedule.test_gpu import tiled_matmul
    from workers import CudaDevice, ErrorKind, MeasureInput, MeasureSettings
    from workers.device import BuildResult

    assert cuda_missing() == "", cuda_missing()
    assert driver().device_info(0) == DeviceInfo(
        0, "Fake GPU (test double)", "sm_90", 1024, 49152, 65536, 32, 132, 50 << 20)

    # the parameter array reaches the kernel; the arrays go there and come back
    signature = KernelSignature("tt_add_one", (ArgSpec("A", (32,), "float32", True),))
    plan = LaunchPlan((KernelLaunch("add_one", (1, 1, 1), (32, 1, 1), ("A",)),), ())
    cubin = compile_cuda(ADD_ONE, "sm_90").cubin
    mod = CudaModule(signature, plan, cubin)
    out = np.arange(32, dtype="float32")
    mod(out)
    np.testing.assert_array_equal(out, np.arange(32, dtype="float32") + 1)
    costs = mod.time(out, number=2, repeat=3, min_repeat_ms=1)
    assert len(costs) == 3 and all(c > 0 for c in costs), costs
    mod.close()
    try:
        CudaModule(signature, plan, b"not a cubin")
        raise AssertionError("an image that is not a cubin was loaded")
    except BuildError as err:
        assert "CUDA_ERROR_INVALID_IMAGE" in str(err) and "Fake GPU" in str(err), err

    # a whole schedule: its kernels launched with the plan's grid and block
    s, args = tiled_matmul()
    tiled = build(s, args, "cuda -arch=sm_90", name="tiled")
    a = np.ones((128, 128), "float32")
    tiled(a, a, np.zeros((128, 128), "float32"))
    tiled.close()

    # the device: a candidate runs in the sandbox, timed and compared (the double computes
    # nothing: a wrong answer); a fault replaces the sandbox and the device is checked
    workload = Workload.op("matmul", M=128, N=128, K=128)
    steps = Steps(tiled_matmul(tensors=make_schedule(workload)[1])[0].steps)
    inp = MeasureInput(workload, "cuda -arch=sm_90", steps)
    built = CudaDevice.build(inp, 120.0)
    assert built.ok, built.error_msg
    device = CudaDevice()
    try:
        settings = MeasureSettings(repeat=2)
        result = device.run(built, inp, settings)
        assert result.error_kind is ErrorKind.WRONG_ANSWER, result
        assert len(result.costs) == 2 and all(c > 0 for c in result.costs), result
        faulty_plan = {**built.signature["plan"], "kernels": [
            {**built.signature["plan"]["kernels"][0], "name": "fault"}]}
        faulty = BuildResult(ErrorKind.NONE, "", 0.0, built.library,
                             {**built.signature, "plan": faulty_plan}, built.compiler)
        result = device.run(faulty, inp, settings)
        assert result.error_kind is ErrorKind.RUNTIME_ERROR, result
        assert "faulted on the device" in result.error_msg, result.error_msg
        assert "CUDA_ERROR_ILLEGAL_ADDRESS" in result.error_msg, result.error_msg
        assert "checked after it and answers" in result.error_msg, result.error_msg
        assert device.run(built, inp, settings).error_kind is ErrorKind.WRONG_ANSWER
    finally:
        device.close()

    # in this process, a fault is sticky: every later call fails
    fault_plan = LaunchPlan((KernelLaunch("fault", (1, 1, 1), (32, 1, 1), ("A",)),), ())
    mod = CudaModule(signature, fault_plan, cubin)
    try:
        mod(out)
        raise AssertionError("the fault was not reported")
    except CudaError as err:
        assert err.sticky and err.name == "CUDA_ERROR_ILLEGAL_ADDRESS", err
    print("scenario passed")
