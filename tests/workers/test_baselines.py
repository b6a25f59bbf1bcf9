"""Baselines measured on the device: numpy and torch run the workload in a sandbox with
the target's core count (torch's outputs checked like a kernel's), the peak is a rate
measured by multiply-add chains; inputs the device cannot measure are refused up front."""

from __future__ import annotations

import pytest

from schedule import Workload, host_cpu_target, te
from workers import (
    CpuDevice,
    ErrorKind,
    LocalPool,
    MeasureInput,
    MeasureInputError,
    MeasureSettings,
    ProgramTextError,
    program_text,
)
from workers.baselines import peak_source

SETTINGS = MeasureSettings(repeat=2, min_repeat_ms=5)
CONV = Workload.op("conv2d_nchw", N=1, C=8, H=16, W=16, K=8, R=3, S=3, padding=1)
MATMUL = Workload.op("matmul", M=64, N=64, K=64)


@pytest.fixture(scope="module")
def pool():
    with LocalPool(SETTINGS, build_workers=1) as pool:
        yield pool


def _dag() -> Workload:
    a = te.placeholder((64,), "float32", name="a")
    b = te.compute((64,), lambda i: a[i] * te.const(2.0, "float32"), name="b")
    return Workload.from_tensors([b], name="double")


def test_libraries_and_the_peak_are_timed_on_the_device(pool: LocalPool) -> None:
    target = host_cpu_target()
    inputs = [MeasureInput(w, target, [], lib) for w in (MATMUL, CONV)
              for lib in ("numpy", "torch", "peak")]
    results = pool.measure(inputs)
    for inp, result in zip(inputs, results, strict=True):
        assert result.error_kind is ErrorKind.NONE, (inp.library, result.error_msg)
        assert len(result.costs) == SETTINGS.repeat and result.median_cost > 0
        assert result.device.startswith("cpu@")
    peaks = [inp.workload.flops / r.median_cost for inp, r in zip(inputs, results, strict=True)
             if inp.library == "peak"]
    # one rate of the target, whatever the workload (within the noise of two runs)
    assert 0.5 < peaks[0] / peaks[1] < 2.0
    for inp, result in zip(inputs, results, strict=True):  # nothing runs faster than the peak
        if inp.library != "peak":
            peak = next(r for i, r in zip(inputs, results, strict=True)
                        if i.library == "peak" and i.workload == inp.workload)
            assert result.median_cost > peak.median_cost


def test_a_workload_a_library_lacks_is_an_error_result(pool: LocalPool) -> None:
    target = host_cpu_target()
    dag = _dag()
    numpy, torch = pool.measure([MeasureInput(dag, target, [], "numpy"),
                                 MeasureInput(Workload.op("elementwise", shape=[64], ops=["relu"]),
                                              target, [], "torch")])
    assert numpy.error_kind is ErrorKind.RUNTIME_ERROR and "no counterpart" in numpy.error_msg
    assert torch.error_kind is ErrorKind.RUNTIME_ERROR and "no torch counterpart" in \
        torch.error_msg


def test_baseline_inputs_round_trip_and_bad_ones_are_refused(pool: LocalPool) -> None:
    inp = MeasureInput(MATMUL, "cpu", [], "numpy")
    assert MeasureInput.from_json(inp.to_json()).library == "numpy"
    assert "library" not in MeasureInput(MATMUL, "cpu", []).to_json()  # the format is kept
    with pytest.raises(MeasureInputError, match="unknown baseline library 'mkl'"):
        MeasureInput(MATMUL, "cpu", [], "mkl")
    with pytest.raises(MeasureInputError, match="'library' must be a string"):
        MeasureInput.from_json({**inp.to_json(), "library": 3})

    class NoBaselines(CpuDevice):
        baselines = ()

    with LocalPool(SETTINGS, devices=[NoBaselines()], build_workers=1) as other, \
            pytest.raises(MeasureInputError, match="do not measure the numpy baseline"):
        other.measure([inp])


def test_the_peak_kernel_follows_the_targets_vector_width() -> None:
    wide = peak_source(host_cpu_target().with_options(isa="avx512"))
    narrow = peak_source(host_cpu_target().with_options(isa="generic"))
    assert "vector_size(64)" in wide and "#define CHAINS 16" in wide
    assert "vector_size(" in narrow and "#define CHAINS 12" in narrow


def test_program_text_is_made_in_a_sandbox() -> None:
    steps = [["split", "T_matmul", "i", 8], ["parallel", "T_matmul", "i.outer"]]
    text = program_text(MATMUL.to_json(), str(host_cpu_target()), steps)
    assert text["loop_ir"].startswith("func main(A: float32[64, 64]")
    assert "parallel" in text["loop_ir"] and "tt_main" in text["source"]
    with pytest.raises(ProgramTextError, match="cannot be lowered: ScheduleError"):
        program_text(MATMUL.to_json(), "cpu", [["split", "T_matmul", "nope", 8]])
    with pytest.raises(ProgramTextError, match="not bound to GPU threads"):
        program_text(MATMUL.to_json(), "cuda -arch=sm_80", [])
    gpu_steps = [["bind", "T_matmul", "i", "blockIdx.x"], ["bind", "T_matmul", "j",
                                                           "threadIdx.x"]]
    text = program_text(MATMUL.to_json(), "cuda -arch=sm_80", gpu_steps)
    assert "threadIdx.x" in text["loop_ir"] and '__global__ void' in text["source"]
