"""Measure inputs, settings and results are plain JSON and reject malformed documents."""

from __future__ import annotations

import json

import pytest

from workers import (
    ErrorKind,
    MeasureInput,
    MeasureInputError,
    MeasureResult,
    MeasureSettings,
    Provenance,
)

WORKLOAD = {"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}


def test_error_kinds_are_exactly_the_documented_ones() -> None:
    assert [k.value for k in ErrorKind] == [
        "none", "invalid_schedule", "compile_error", "compile_timeout", "runtime_error",
        "run_timeout", "wrong_answer", "device_lost"]
    assert [k.value for k in ErrorKind if k.is_infrastructure] == ["device_lost"]


def test_measure_input_round_trips_through_json_text() -> None:
    inp = MeasureInput(WORKLOAD, "cpu", [["split", "T_matmul", "i", 4]])
    again = MeasureInput.from_json(json.loads(json.dumps(inp.to_json())))
    assert again == inp
    assert again.steps == [["split", "T_matmul", "i", 4]]


def test_measure_result_round_trips_with_provenance() -> None:
    result = MeasureResult(
        [1e-3, 1.1e-3], ErrorKind.NONE, "", build_s=0.5, run_s=0.25, device="cpu@h",
        timestamp=1.7e9,
        provenance=Provenance("h", "node1", "AMD EPYC", "cpu -isa=avx512 -cores=2",
                              "gcc 12.2.0", ["-march=x86-64-v4"],
                              MeasureSettings().timing()))
    doc = json.loads(json.dumps(result.to_json()))
    assert doc["error_kind"] == "none"
    again = MeasureResult.from_json(doc)
    assert again == result
    assert again.provenance.compiler == "gcc 12.2.0"
    assert again.mean_cost == pytest.approx(1.05e-3)
    assert MeasureResult([], "run_timeout").mean_cost == float("inf")


def test_settings_round_trip_and_validate() -> None:
    settings = MeasureSettings(number=2, repeat=5, min_repeat_ms=0, flush_bytes=1 << 20)
    assert MeasureSettings.from_json(json.loads(json.dumps(settings.to_json()))) == settings
    with pytest.raises(ValueError, match="repeat must be"):
        MeasureSettings(repeat=0)
    with pytest.raises(ValueError, match="run_timeout must be a positive"):
        MeasureSettings(run_timeout=float("nan"))
    with pytest.raises(ValueError, match=r"unexpected field\(s\) \['speed'\]"):
        MeasureSettings.from_json({"speed": 1})
    for bad in (-1, 6, 2**31, True, 1.5):
        with pytest.raises(ValueError, match=r"remeasure must be an integer in 0\.\.5"):
            MeasureSettings(remeasure=bad)
    for bad in (0.5, float("nan"), float("inf"), "1.3", True):
        with pytest.raises(ValueError, match="noise_tolerance must be a number >= 1"):
            MeasureSettings(noise_tolerance=bad)


def test_a_result_s_noise_must_be_a_finite_number_of_at_least_1() -> None:
    doc = MeasureResult([1e-3], "none", noise=1.4, disturbed=True).to_json()
    assert MeasureResult.from_json(doc).noise == 1.4
    for bad in (0.9, float("inf"), float("nan"), "2", None):
        with pytest.raises(ValueError, match="'noise' must be a finite number >= 1"):
            MeasureResult.from_json({**doc, "noise": bad})


def test_a_result_s_unpreempted_count_must_be_a_non_negative_integer() -> None:
    doc = MeasureResult([1e-3] * 6, "none", unpreempted=6).to_json()
    assert MeasureResult.from_json(doc).unpreempted == 6
    assert MeasureResult.from_json({k: v for k, v in doc.items()
                                    if k != "unpreempted"}).unpreempted == 0
    for bad in (-1, 2.0, "6", True, None, float("nan")):
        with pytest.raises(ValueError, match="'unpreempted' must be a non-negative integer"):
            MeasureResult.from_json({**doc, "unpreempted": bad})


@pytest.mark.parametrize(("doc", "message"), [
    ([1, 2], "measure input must be a JSON object, got list"),
    ({"workload": WORKLOAD, "target": "cpu"}, r"missing field\(s\) \['steps'\]"),
    ({"workload": WORKLOAD, "target": "cpu", "steps": [], "job": 1},
     r"unexpected field\(s\) \['job'\]"),
    ({"workload": "matmul", "target": "cpu", "steps": []}, "'workload' must be a JSON object"),
    ({"workload": WORKLOAD, "target": "", "steps": []}, "'target' must be a non-empty"),
    ({"workload": WORKLOAD, "target": "cpu", "steps": {}}, "'steps' must be a list"),
    ({"workload": WORKLOAD, "target": "cpu", "steps": [[1, 2]]},
     "step 0 must be a list starting with the step's name"),
])
def test_malformed_measure_input_is_a_clear_error(doc: object, message: str) -> None:
    with pytest.raises(MeasureInputError, match=message):
        MeasureInput.from_json(doc)


def test_malformed_measure_result_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown error_kind 'segfault'"):
        MeasureResult.from_json({"costs": [], "error_kind": "segfault"})
    with pytest.raises(ValueError, match="'costs' must be a list of numbers"):
        MeasureResult.from_json({"costs": ["fast"], "error_kind": "none"})
