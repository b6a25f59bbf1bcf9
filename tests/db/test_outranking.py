"""Outranked records on both backends: the best query and distill pass over them, the
records themselves stay, and malformed verdicts store nothing."""

from __future__ import annotations

import pytest

from db import Database, Outranking, Record, RecordError
from tests.db.helpers import TARGET, key, record


def _ids(db: Database, *records: dict) -> list[str]:
    db.add_records(records)
    return [Record.from_dict(r).measurement_id for r in records]


def test_the_best_query_and_distill_pass_over_outranked_records(db: Database) -> None:
    fast_moment, slow_moment, other = (
        record("mm", [1.0e-3], steps=[["split", "C", "i", 8]], timestamp=1e9 + 1),
        record("mm", [1.2e-3], steps=[["split", "C", "i", 16]], timestamp=1e9 + 2),
        record("mm", [1.5e-3], steps=[["split", "C", "i", 4]], timestamp=1e9 + 3),
    )
    loser, winner, third = _ids(db, fast_moment, slow_moment, other)
    assert db.best(key("mm"), TARGET).best.measurement_id == loser
    verdict = Outranking(loser, winner, 1.15, job_id="job-1")
    assert db.outrank([verdict]) == 1
    assert [r.measurement_id for r in db.best(key("mm"), TARGET, k=5).records] == [winner, third]
    assert [r.measurement_id for r in db.distill(5)] == [winner, third]
    assert db.count_records() == 3  # the record itself stays
    assert db.outranked([loser, winner]) == {loser: verdict}
    # again, or with another verdict on the same record: the first one stays
    assert db.outrank([verdict, Outranking(loser, third, 1.3)]) == 0
    assert db.outranked([loser])[loser].by_measurement_id == winner


def test_a_later_look_at_an_outranked_program_counts_again(db: Database) -> None:
    loser, winner = _ids(db, record("mm", [1.0e-3], steps=[["split", "C", "i", 8]]),
                         record("mm", [1.2e-3], steps=[["split", "C", "i", 16]]))
    db.outrank([Outranking(loser, winner, 1.2)])
    (again,) = _ids(db, record("mm", [1.1e-3], steps=[["split", "C", "i", 8]], timestamp=2e9))
    assert db.best(key("mm"), TARGET).best.measurement_id == again


@pytest.mark.parametrize("change, message", [
    (dict(ratio=1.0), "ratio must be a finite number above 1"),
    (dict(ratio=float("nan")), "ratio must be a finite number above 1"),
    (dict(by_measurement_id="0" * 64), "no outranking record with measurement id"),
    (dict(measurement_id="f" * 64), "no record with measurement id"),
    (dict(job_id="j" * 65), "job_id is longer than 64"),
    ("self", "cannot outrank itself"),
    ("failed", "is a failed measurement"),
    ("other workload", "different workloads or targets"),
])
def test_a_malformed_verdict_stores_nothing(db: Database, change, message: str) -> None:
    loser, winner = _ids(db, record("mm", [1.0e-3]), record("mm", [1.2e-3], timestamp=2e9))
    good = Outranking(loser, winner, 1.2)
    if change == "self":
        bad = Outranking(loser, loser, 1.2)
    elif change == "failed":
        (failed,) = _ids(db, record("mm", error_kind="runtime_error", timestamp=3e9))
        bad = Outranking(loser, failed, 1.2)
    elif change == "other workload":
        (elsewhere,) = _ids(db, record("conv", [2e-3]))
        bad = Outranking(elsewhere, winner, 1.2)
    else:
        bad = Outranking(**{"measurement_id": loser, "by_measurement_id": winner,
                            "ratio": 1.2, **change})
    with pytest.raises(RecordError, match=message):
        db.outrank([good, bad])
    assert db.outranked([loser]) == {}
    assert db.best(key("mm"), TARGET).best.measurement_id == loser
    assert db.outrank([]) == 0
