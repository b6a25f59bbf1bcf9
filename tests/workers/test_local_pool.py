"""The local pool on a batch where good candidates are mixed with every kind of bad one:
each good one is timed and checked, each bad one gets its error kind, the batch finishes
and the pool goes on."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from schedule import Workload, te
from tests.workers.faults import SLOW_LOAD_S, FaultyCpuDevice
from workers import (
    CpuDevice,
    ErrorKind,
    LocalBuilder,
    LocalPool,
    MeasureInput,
    MeasureInputError,
    MeasureResult,
    MeasureSettings,
)

MATMUL = {"op": "matmul", "params": {"M": 64, "N": 64, "K": 64}}
TILED = [["split", "T_matmul", "i", 8], ["split", "T_matmul", "j", 16],
         ["reorder", "T_matmul", ["i.outer", "j.outer", "i.inner", "k", "j.inner"]],
         ["parallel", "T_matmul", "i.outer"], ["vectorize", "T_matmul", "j.inner"]]
SPLIT = [["split", "T_matmul", "j", 16], ["vectorize", "T_matmul", "j.inner"]]
SETTINGS = MeasureSettings(min_repeat_ms=10, run_timeout=1.0, compile_timeout=4.0,
                           load_timeout=20.0)


def _relu_add() -> dict:
    a = te.placeholder((256,), "float32", name="a")
    b = te.placeholder((256,), "float32", name="b")
    c = te.compute((256,), lambda i: te.max(a[i] + b[i], te.const(0.0, "float32")), name="c")
    return Workload.from_tensors([c], name="relu_add").to_json()


def fault(name: str) -> MeasureInput:
    return MeasureInput(MATMUL, "cpu", [["fault", name]])


# (input, expected error kind, a piece of the expected message)
BATCH = [
    (MeasureInput(MATMUL, "cpu", []), ErrorKind.NONE, ""),
    (fault("segfault"), ErrorKind.RUNTIME_ERROR, "SIGSEGV"),
    (MeasureInput(MATMUL, "cpu", SPLIT), ErrorKind.NONE, ""),
    (MeasureInput(MATMUL, "cpu", [["split", "T_matmul", "zz", 4]]),
     ErrorKind.INVALID_SCHEDULE, "no axis named 'zz'"),
    (fault("hang"), ErrorKind.RUN_TIMEOUT, "did not finish within 1 s"),
    (fault("compile_error"), ErrorKind.COMPILE_ERROR, "C compilation failed"),
    (fault("abort"), ErrorKind.RUNTIME_ERROR, "SIGABRT"),
    (fault("slow_build"), ErrorKind.COMPILE_TIMEOUT, "did not finish within 4 s"),
    (fault("garble"), ErrorKind.RUNTIME_ERROR, "garbled"),
    (fault("nothing"), ErrorKind.WRONG_ANSWER, "differs from the reference"),
    (fault("bad_library"), ErrorKind.RUNTIME_ERROR, "OSError"),
    (fault("slow_load"), ErrorKind.NONE, ""),
    (MeasureInput(MATMUL, "cpu", TILED), ErrorKind.NONE, ""),
    (MeasureInput(_relu_add(), "cpu", []), ErrorKind.NONE, ""),
    (MeasureInput(MATMUL, "cpu", SPLIT), ErrorKind.NONE, ""),
]


@pytest.fixture(scope="module")
def pool() -> Iterator[LocalPool]:
    with LocalPool(SETTINGS, devices=[FaultyCpuDevice()], build_workers=2) as p:
        yield p


@pytest.fixture(scope="module")
def batch(pool: LocalPool) -> tuple[list[MeasureResult], list[int], float]:
    seen: list[int] = []
    start = time.monotonic()
    results = pool.measure([inp for inp, _, _ in BATCH],
                           callback=lambda n, result: seen.append(n))
    return results, seen, time.monotonic() - start


def test_every_candidate_gets_its_error_kind(batch) -> None:
    results, seen, seconds = batch
    got = [(r.error_kind, r.error_msg) for r in results]
    for (inp, kind, message), (got_kind, got_message) in zip(BATCH, got, strict=True):
        assert got_kind == kind, (inp.steps, got_message)
        assert message in got_message
    assert sorted(seen) == list(range(len(BATCH)))
    assert seconds < 60


def test_good_candidates_are_timed_and_carry_provenance(batch) -> None:
    results, _, _ = batch
    for (_, kind, _), result in zip(BATCH, results, strict=True):
        if kind is not ErrorKind.NONE:
            continue
        # On a busy machine the figure is the thirds of the short repeats that ran alone.
        expected = 3 if result.unpreempted else SETTINGS.repeat
        assert len(result.costs) == expected, result
        assert all(0 < c < 0.1 for c in result.costs)
        prov = result.provenance
        assert prov.host and prov.device_model and prov.compiler.startswith(("gcc", "cc"))
        assert prov.target.startswith("cpu -isa=")
        assert any(flag.startswith("-march") for flag in prov.flags) or prov.flags == []
        assert prov.settings == SETTINGS.timing()
        assert result.device.startswith("cpu@") and result.timestamp > 1.6e9
        assert result.build_s >= 0 and result.run_s > 0


def test_the_run_timeout_does_not_count_the_loading(batch) -> None:
    results, _, _ = batch
    slow_load = results[11]
    assert slow_load.ok and slow_load.run_s > SLOW_LOAD_S > SETTINGS.run_timeout


def test_invalid_schedules_never_reach_the_device(batch) -> None:
    invalid = batch[0][3]
    assert invalid.device == "" and invalid.run_s == 0 and invalid.costs == []


def test_the_pool_goes_on_after_the_bad_batch(pool: LocalPool, batch) -> None:
    [again] = pool.measure([MeasureInput(MATMUL, "cpu", TILED)])
    assert again.ok
    assert pool.measure([]) == []


@pytest.mark.parametrize(("inp", "message"), [
    (MeasureInput(MATMUL, "tpu", []), "measure input 1: unknown target kind 'tpu'"),
    (MeasureInput(MATMUL, "cpu -isa=avx9", []), "measure input 1: unknown cpu isa 'avx9'"),
    (MeasureInput(MATMUL, "cuda -arch=sm_80", []),
     "measure input 1: no device of this pool serves target 'cuda -arch=sm_80' "
     "\\(devices: cpu@"),
    (MeasureInput({"op": "matmull", "params": {}}, "cpu", []),
     "measure input 1: unknown operator 'matmull'"),
    (MeasureInput({"op": "matmul", "params": {"M": -1, "N": 1, "K": 1}}, "cpu", []),
     "measure input 1: matmul: parameter 'M'"),
])
def test_bad_inputs_are_rejected_before_anything_runs(pool: LocalPool, inp: MeasureInput,
                                                      message: str) -> None:
    with pytest.raises(MeasureInputError, match=message):
        pool.measure([MeasureInput(MATMUL, "cpu", []), inp])


def test_a_measure_input_document_is_not_a_measure_input(pool: LocalPool) -> None:
    with pytest.raises(MeasureInputError, match="use MeasureInput.from_json"):
        pool.measure([{"workload": MATMUL, "target": "cpu", "steps": []}])  # type: ignore[list-item]


def test_the_builder_builds_equal_candidates_once_and_kills_slow_compiles() -> None:
    unique = {"op": "matmul", "params": {"M": 37, "N": 41, "K": 43}}
    builder = LocalBuilder(max_workers=2, compile_timeout=30.0)
    try:
        a = MeasureInput(MATMUL, "cpu -isa=avx2 -cores=1", SPLIT)
        first, second = builder.build([a, a])
        builder.compile_timeout = 0.05
        [slow] = builder.build([MeasureInput(unique, "cpu", TILED)])
    finally:
        builder.close()
    assert first is second
    assert first.ok and first.library.startswith(b"\x7fELF")
    assert slow.error_kind is ErrorKind.COMPILE_TIMEOUT
    assert "took longer than 0.05 s" in slow.error_msg


def test_cache_flush_and_no_check() -> None:
    settings = MeasureSettings(flush_bytes=4 << 20, min_repeat_ms=0, repeat=4, check=False)
    with LocalPool(settings, build_workers=1) as pool:
        [result] = pool.measure([MeasureInput(MATMUL, "cpu", TILED)])
    # On a busy machine the figure is the thirds of the short repeats that ran alone.
    assert result.ok and len(result.costs) == (3 if result.unpreempted else 4), result
    assert result.provenance.settings["flush_bytes"] == 4 << 20
    assert result.provenance.settings["check"] is False


class CrashingReferenceDevice(CpuDevice):
    """The CPU device with a reference computation that segfaults (as a hostile workload's
    reference could)."""

    reference_job = "tests.workers.faults:segfault_job"


def test_a_crashing_reference_is_the_workloads_error_not_the_runners() -> None:
    with LocalPool(SETTINGS, devices=[CrashingReferenceDevice()], build_workers=1) as pool:
        results = pool.measure([MeasureInput(MATMUL, "cpu", []),
                                MeasureInput(MATMUL, "cpu", SPLIT)])
        assert [r.error_kind for r in results] == [ErrorKind.RUNTIME_ERROR] * 2
        assert all("reference outputs could not be computed" in r.error_msg
                   and "SIGSEGV" in r.error_msg and r.workload_error for r in results)
    with LocalPool(SETTINGS, build_workers=1) as pool:  # and this process goes on
        [fine] = pool.measure([MeasureInput(MATMUL, "cpu", SPLIT)])
        assert fine.error_kind is ErrorKind.NONE


def test_the_reference_is_computed_in_the_sandbox_not_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the reference was computed in the runner process")

    monkeypatch.setattr(Workload, "reference", refuse)
    with LocalPool(SETTINGS, build_workers=1) as pool:
        [result] = pool.measure([MeasureInput(_relu_add(), "cpu", [])])
    assert result.error_kind is ErrorKind.NONE, result.error_msg


@pytest.mark.parametrize(("target", "message"), [
    ("cpu -cores=1000000", "cores"),
    (f"cpu -cores={os.cpu_count() + 1}", "no device of this pool serves"),
])
def test_targets_asking_for_more_cores_than_there_are_are_refused(
        pool: LocalPool, target: str, message: str) -> None:
    with pytest.raises(MeasureInputError, match=message):
        pool.measure([MeasureInput(MATMUL, target, [])])
