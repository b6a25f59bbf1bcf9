"""The ``vta`` device plugin: candidates built by the vta code generator and run on the
simulator in the device's sandbox, checked against numpy, reported as simulated time with
the cycles and the GEMM core's utilisation; what the device refuses or catches (an invalid
schedule, an unsupported workload, a wrong answer, a deadlocking program), each a result
with its kind, the device going on."""

from __future__ import annotations

from dataclasses import replace

import pytest

from schedule import Workload, vta
from workers import (
    ErrorKind,
    LocalPool,
    MeasureInput,
    MeasureSettings,
    VtaDevice,
    program_text,
    simulated_facts,
)

DENSE = Workload.op("dense", M=16, N=64, K=64, dtype="int8", bias=False, requant_shift=7)
CONFIG = vta.VtaConfig()
COMPUTE = vta.VtaCompute(DENSE, CONFIG)
GOOD = [list(s) for s in COMPUTE.template_steps(vta.Template(8, 2, 2, 2, "m"))]
SETTINGS = MeasureSettings(repeat=1)


@pytest.fixture(scope="module")
def pool():
    with LocalPool(SETTINGS, devices=[VtaDevice()], build_workers=1) as p:
        yield p


def test_a_candidate_runs_on_the_simulated_device_and_says_so(pool: LocalPool) -> None:
    [result] = pool.measure([MeasureInput(DENSE, "vta", GOOD)])
    assert result.ok and result.error_msg == ""
    facts = simulated_facts(result.provenance.settings)
    assert facts is not None and facts["clock_mhz"] == 100.0
    assert result.costs == [pytest.approx(facts["cycles"] / 100e6)]
    ideal = 16 * 64 * 64 / CONFIG.macs_per_cycle
    assert facts["mac_utilization"] == pytest.approx(ideal / facts["cycles"], abs=1e-4)
    assert "simulated" in result.provenance.device_model
    assert result.device.startswith("vta-sim@")


def test_the_ultra96_preset_runs_the_same_program_faster() -> None:
    with LocalPool(SETTINGS, devices=[VtaDevice(preset="ultra96")], build_workers=1) as p:
        [fast] = p.measure([MeasureInput(DENSE, "vta", GOOD)])
    with LocalPool(SETTINGS, devices=[VtaDevice()], build_workers=1) as p:
        [slow] = p.measure([MeasureInput(DENSE, "vta", GOOD)])
    assert fast.ok and slow.ok and fast.costs[0] < slow.costs[0] / 3
    assert "ultra96 333 MHz" in fast.provenance.device_model
    with pytest.raises(ValueError, match="unknown vta board preset"):
        VtaDevice(preset="zynq9000")


def test_invalid_and_unsupported_candidates_are_invalid_schedules(pool: LocalPool) -> None:
    big = Workload.op("dense", M=1, N=1024, K=1024, dtype="int8", bias=False,
                      requant_shift=7)
    too_big = [list(s) for s in vta.VtaCompute(big, CONFIG).template_steps(
        vta.Template(1, 64, 64))]
    float_dense = Workload.op("dense", M=16, N=64, K=64)
    results = pool.measure([MeasureInput(DENSE, "vta", []), MeasureInput(big, "vta", too_big),
                            MeasureInput(float_dense, "vta", []),
                            MeasureInput(DENSE, "vta", GOOD)])
    assert [r.error_kind for r in results] == [ErrorKind.INVALID_SCHEDULE] * 3 + [
        ErrorKind.NONE]
    assert "wgt buffer holds 1024 entries" in results[1].error_msg
    assert "not supported on vta" in results[2].error_msg


def _build(steps: list) -> tuple:
    inp = MeasureInput(DENSE, "vta", steps).parsed()
    return inp, VtaDevice.build(inp, 30.0)


def test_a_wrong_program_is_a_wrong_answer_and_a_deadlock_an_error() -> None:
    device = VtaDevice()
    try:
        inp, build = _build(GOOD)
        program = vta.VtaProgram.from_json(build.library)
        no_shift = [i for i in program.instructions
                    if not (isinstance(i, vta.Alu) and i.op == "shr")]
        wrong = replace(build, library=replace(program, instructions=no_shift).dumps())
        result = device.run(wrong, inp, SETTINGS)
        assert result.error_kind is ErrorKind.WRONG_ANSWER
        assert "differs from the reference" in result.error_msg
        no_push = [replace(i, deps=replace(i.deps, push_next=False, push_prev=False))
                   for i in program.instructions]
        stuck = replace(build, library=replace(program, instructions=no_push).dumps())
        result = device.run(stuck, inp, SETTINGS)
        assert result.error_kind is ErrorKind.RUNTIME_ERROR and "deadlock" in result.error_msg
        assert device.run(build, inp, SETTINGS).ok  # the device goes on
    finally:
        device.close()


def test_the_program_text_of_a_vta_record_is_its_loops_and_instructions() -> None:
    text = program_text(DENSE.to_json(), "vta", GOOD)
    assert "tensorized" in text["loop_ir"] and "allocate C: int32" in text["loop_ir"]
    assert text["source"].startswith("vta program:") and "GEMM" in text["source"]


def test_a_board_needs_an_address_and_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        VtaDevice(board="no-port", key=b"k" * 32)
    monkeypatch.delenv("TENSORTUNE_DEVICE_KEY_FILE", raising=False)
    with pytest.raises(ValueError, match="no key"):
        VtaDevice(board="127.0.0.1:9")


def test_a_program_past_the_instruction_limit_is_an_invalid_schedule(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from schedule.vta import codegen

    monkeypatch.setattr(codegen, "MAX_PROGRAM", 20)
    with pytest.raises(vta.VtaCodegenError, match="exceed 20 instructions; choose larger"):
        vta.compile_workload(DENSE, COMPUTE.template_steps(vta.Template()), CONFIG)
