"""``Steps``, the immutable schedule value, and ``make_schedule``: JSON round trips,
equality with the JSON list, keys, and clear errors for malformed steps."""

from __future__ import annotations

import json

import pytest

from schedule import ScheduleError, Steps, Workload, make_schedule

WL = Workload.op("matmul", M=16, N=16, K=16)
SPLIT = [["split", "T_matmul", "i", 4], ["reorder", "T_matmul", ["i.inner", "i.outer"]]]


def test_steps_round_trip_through_json_and_equal_their_list() -> None:
    steps = Steps(SPLIT)
    again = Steps.from_json(json.loads(json.dumps(steps.to_json())))
    assert again == steps and steps == SPLIT and hash(again) == hash(steps)
    assert steps.key == json.dumps(SPLIT, separators=(",", ":"))
    assert Steps.of(steps) is steps and steps[:1] == SPLIT[:1]


def test_make_schedule_replays_steps_and_tuples_alike() -> None:
    s, _ = make_schedule(WL, Steps(SPLIT))
    t, _ = make_schedule(WL, SPLIT)
    assert s.steps == t.steps == SPLIT


@pytest.mark.parametrize(("doc", "message"), [
    ({"split": 1}, "steps must be a list"),
    ([["split", "T_matmul", "i", {"factor": 4}]], "step 0: a step holds only"),
    ([[]], "step 0 must be a list starting with the step's name"),
    ([[3, "x"]], "step 0 must be a list starting with the step's name"),
])
def test_malformed_steps_are_a_clear_error(doc: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Steps.from_json(doc)


def test_cache_steps_replay_with_and_without_an_axis_order() -> None:
    transposed = [["cache_read", "B", "global", ["T_matmul"], [1, 0]],
                  ["cache_write", "T_matmul", "local", [1, 0]]]
    s, _ = make_schedule(WL, transposed)
    assert s.steps == transposed
    with pytest.raises(ScheduleError, match="cache_write takes 2 or 3 arguments, got 4"):
        make_schedule(WL, [["cache_write", "T_matmul", "local", [1, 0], "x"]])
    with pytest.raises(ScheduleError, match="not a permutation"):
        make_schedule(WL, [["cache_write", "T_matmul", "local", [1, 1]]])


def test_make_schedule_names_the_step_that_does_not_apply() -> None:
    with pytest.raises(ScheduleError, match="step 1"):
        make_schedule(WL, [["split", "T_matmul", "i", 4], ["split", "T_matmul", "zz", 2]])
    with pytest.raises(ScheduleError, match="steps must be a list"):
        make_schedule(WL, "split")  # type: ignore[arg-type]
