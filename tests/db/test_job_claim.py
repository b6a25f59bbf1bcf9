"""The atomic job claim: of two processes only one runs a job, a takeover succeeds only on
the job exactly as it was seen, and a runner that lost its job is told at its next write.
Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import pytest

from db import Database, DatabaseError, JobStateError, JobTakenOver


def _queued(db: Database):
    return db.jobs.create({"workloads": [], "target": "cpu", "trials": 1})


def test_a_queued_job_is_claimed_once_however_many_race_for_it(db_url: str) -> None:
    job = _queued(Database(db_url))
    wins, losses = [], []
    barrier = threading.Barrier(6)

    def race(n: int) -> None:
        database = Database(db_url)
        barrier.wait()
        try:
            wins.append(database.jobs.claim(job.id, f"runner-{n}"))
        except JobStateError:
            losses.append(n)
        finally:
            database.close()

    threads = [threading.Thread(target=race, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1 and len(losses) == 5
    assert Database(db_url).jobs.get(job.id).runner == wins[0].runner
    assert wins[0].status == "running"


def test_claiming_a_running_job_without_seeing_it_fails(db: Database) -> None:
    job = _queued(db)
    db.jobs.claim(job.id, "first")
    with pytest.raises(JobStateError, match="only a queued job"):
        db.jobs.claim(job.id, "second")


def test_a_takeover_wins_only_on_the_job_as_it_was_seen(db: Database) -> None:
    job = _queued(db)
    seen = db.jobs.claim(job.id, "dead-runner")
    taken = db.jobs.claim(job.id, "second", expect=seen, progress={"runner_deaths": 1})
    assert taken.runner == "second" and taken.progress == {"runner_deaths": 1}
    with pytest.raises(JobStateError, match="another process took it"):
        db.jobs.claim(job.id, "third", expect=seen)  # what it saw is gone


def test_the_old_runner_learns_it_lost_the_job_at_its_next_write(db: Database) -> None:
    job = _queued(db)
    seen = db.jobs.claim(job.id, "slow-runner")
    db.jobs.claim(job.id, "new-runner", expect=seen)
    with pytest.raises(JobTakenOver):
        db.jobs.update(job.id, progress={"trials": 4}, runner="slow-runner")
    with pytest.raises(JobTakenOver):
        db.jobs.update(job.id, status="succeeded", runner="slow-runner")
    done = db.jobs.update(job.id, status="succeeded", runner="new-runner")
    assert done.status == "succeeded" and done.runner == "new-runner"


def test_a_requeued_job_has_no_runner(db: Database) -> None:
    job = _queued(db)
    db.jobs.claim(job.id, "a")
    db.jobs.update(job.id, status="cancelled")
    requeued = db.jobs.update(job.id, status="queued")
    assert requeued.runner is None
    assert db.jobs.claim(job.id, "b").runner == "b"


def test_a_claim_needs_a_runner_name(db: Database) -> None:
    job = _queued(db)
    for runner in ("", "x" * 300):
        with pytest.raises(DatabaseError, match="runner must be"):
            db.jobs.claim(job.id, runner)
    assert db.jobs.get(job.id).status == "queued"
