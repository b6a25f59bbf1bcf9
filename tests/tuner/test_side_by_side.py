"""The end-of-job comparison of a task's leaders, round by round (tuner.side_by_side)."""

from __future__ import annotations

import pytest

from tuner.side_by_side import MARGIN, compare
from workers import ErrorKind, MeasureResult


def _ran(ms: float, disturbed: bool = False, noise: float = 1.02) -> MeasureResult:
    return MeasureResult([ms * 1e-3] * 3, ErrorKind.NONE, noise=noise, disturbed=disturbed)


FAILED = MeasureResult([], ErrorKind.RUNTIME_ERROR, "it crashed")


def test_programs_rank_by_their_median_ratio_to_the_record_leader_in_each_round() -> None:
    # the machine's speed changes from round to round; the ratios do not
    rounds = [[_ran(2.0), _ran(1.0), _ran(3.0)],
              [_ran(4.0), _ran(2.2), _ran(6.0)],
              [_ran(1.0), _ran(0.5), _ran(1.4)]]
    result = compare(rounds)
    assert result.winner == 1
    assert result.standings == pytest.approx([1.0, 0.5, 1.5])
    assert result.figures[1] == pytest.approx([1e-3, 2.2e-3, 0.5e-3])
    assert result.outranked() == [(0, pytest.approx(2.0)), (2, pytest.approx(3.0))]


def test_the_record_leader_stays_unless_beaten_by_more_than_the_margin() -> None:
    close = 1.0 / MARGIN + 0.001
    assert compare([[_ran(1.0), _ran(close)]]).winner == 0
    assert compare([[_ran(1.0), _ran(close - 0.01)]]).winner == 1


def test_the_programs_slower_than_the_winner_by_more_than_the_margin_are_outranked() -> None:
    result = compare([[_ran(2.0), _ran(1.0), _ran(1.5)]])
    assert result.winner == 1
    assert result.outranked() == [(0, pytest.approx(2.0)), (2, pytest.approx(1.5))]
    result = compare([[_ran(3.0), _ran(2.0), _ran(1.0)]])
    assert result.outranked() == [(0, pytest.approx(3.0)), (1, pytest.approx(2.0))]
    result = compare([[_ran(1.0), _ran(0.9), _ran(0.905)]])  # the third: within the margin
    assert result.winner == 1 and result.outranked() == [(0, pytest.approx(1 / 0.9))]


def test_a_round_with_a_disturbed_or_failed_leader_compares_nothing() -> None:
    rounds = [[_ran(1.0, disturbed=True, noise=1.8), _ran(0.4)],
              [FAILED, _ran(0.4)],
              [_ran(1.0), _ran(1.2)]]
    result = compare(rounds)
    assert result.winner == 0 and result.standings == pytest.approx([1.0, 1.2])
    assert result.figures[1] == pytest.approx([0.4e-3, 0.4e-3, 1.2e-3])  # quiet figures
    assert result.noise == [1.02, 1.02]  # the disturbed figure counts for nothing
    assert result.compared == 1
    # one compared round of three: no verdict outlives the job on its word
    assert compare([*rounds[:2], [_ran(1.0), _ran(2.0)]]).outranked() == []
    assert compare([[_ran(1.0, disturbed=True), _ran(0.4)]]) is None


def test_a_program_that_could_not_be_compared_holds_back_those_behind_it() -> None:
    rounds = [[_ran(1.0), FAILED, _ran(0.5)]] * 3
    result = compare(rounds)
    assert result.standings == [1.0, None, pytest.approx(0.5)]
    assert result.winner == 0 and result.outranked() == []
