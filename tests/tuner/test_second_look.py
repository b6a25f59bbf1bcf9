"""Which figure a program's record keeps from its looks (tuner.second_look)."""

from __future__ import annotations

import pytest

from tuner.second_look import agree, settle, worth_a_look
from workers import ErrorKind, MeasureResult, Provenance


def _result(*costs: float, noise: float = 1.0, **kwargs) -> MeasureResult:
    return MeasureResult(list(costs), ErrorKind.NONE, run_s=1.0, noise=noise, **kwargs)


def test_looks_agree_within_ten_percent_or_the_noise_either_saw():
    assert agree(_result(1.0), _result(1.09))
    assert not agree(_result(1.0), _result(1.2))
    assert agree(_result(1.0, noise=1.25), _result(1.2))


def test_one_look_is_kept_as_it_is():
    first = _result(2.0, 2.0)
    assert settle([first]) is first


def test_two_agreeing_looks_keep_every_repeat():
    settled = settle([_result(1.0, 1.0), _result(1.05, 1.05, noise=1.03)])
    assert settled.costs == [1.0, 1.0, 1.05, 1.05]
    assert settled.run_s == 2.0 and settled.noise == 1.03


def test_two_disagreeing_looks_keep_the_slower_and_three_the_middle():
    assert settle([_result(1.0), _result(2.0)]).costs == [2.0]
    assert settle([_result(2.0), _result(1.0)]).costs == [2.0]  # whichever look it was
    assert settle([_result(0.5), _result(1.0), _result(1.1)]).costs == [1.0]
    assert settle([_result(3.0), _result(1.0), _result(1.1)]).costs == [1.1]


@pytest.mark.parametrize("result, worth", [
    (_result(1.0), True),
    (_result(1.0, disturbed=True), False),
    (MeasureResult([], ErrorKind.RUNTIME_ERROR), False),
    (_result(1.0, provenance=Provenance(settings={"simulated": True})), False),
])
def test_only_a_quiet_timed_figure_is_worth_another_look(result, worth):
    assert worth_a_look(result) is worth
