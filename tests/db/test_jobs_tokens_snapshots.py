"""Jobs (lifecycle, progress, listing), API tokens (only hashes stored) and cost-model
snapshots, on both backends."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from db import Database, DatabaseError, JobStateError, NotFoundError


def test_job_lifecycle(db: Database) -> None:
    job = db.jobs.create({"workloads": ["mm"], "trials": 100}, owner="ana")
    assert job.status == "queued" and job.owner == "ana" and job.progress == {}
    assert job.spec == {"workloads": ["mm"], "trials": 100}
    assert job.started_at is None and job.finished_at is None
    assert db.jobs.get(job.id) == job

    running = db.jobs.update(job.id, status="running", progress={"trials_done": 10})
    assert running.status == "running" and running.progress == {"trials_done": 10}
    assert running.started_at is not None and running.updated_at >= job.updated_at
    more = db.jobs.update(job.id, status="running", progress={"trials_done": 50})
    assert more.started_at == running.started_at  # not reset by a progress update
    done = db.jobs.update(job.id, status="succeeded")
    assert done.finished_at is not None and done.progress == {"trials_done": 50}

    with pytest.raises(JobStateError, match=f"job {job.id} is succeeded; it cannot become running"):
        db.jobs.update(job.id, status="running")
    with pytest.raises(JobStateError, match="unknown job status 'paused'"):
        db.jobs.update(job.id, status="paused")
    with pytest.raises(NotFoundError, match="no job 'missing'"):
        db.jobs.update("missing", status="running")
    with pytest.raises(NotFoundError, match="no job 'missing'"):
        db.jobs.get("missing")


def test_failed_job_resumes_and_errors_are_kept(db: Database) -> None:
    job = db.jobs.create({}, job_id="fixed-id")
    assert job.id == "fixed-id"
    with pytest.raises(DatabaseError, match="job fixed-id already exists"):
        db.jobs.create({}, job_id="fixed-id")
    db.jobs.update(job.id, status="running")
    failed = db.jobs.update(job.id, status="failed", error="device lost")
    assert (failed.status, failed.error) == ("failed", "device lost")
    requeued = db.jobs.update(job.id, status="queued")
    assert requeued.finished_at is None and requeued.started_at is not None
    cancelled = db.jobs.update(job.id, status="cancelled")
    assert cancelled.finished_at is not None
    with pytest.raises(DatabaseError, match="job spec must be a JSON object"):
        db.jobs.create([1, 2])  # type: ignore[arg-type]
    with pytest.raises(DatabaseError, match="job progress is not representable as JSON"):
        db.jobs.update(job.id, progress={"x": object()})


def test_list_jobs(db: Database) -> None:
    ids = [db.jobs.create({"n": i}, owner="ana" if i % 2 else "bo").id for i in range(6)]
    db.jobs.update(ids[0], status="running")
    db.jobs.update(ids[1], status="cancelled")
    listed = db.jobs.list()
    assert {j.id for j in listed} == set(ids)
    assert [j.created_at for j in listed] == sorted((j.created_at for j in listed), reverse=True)
    assert [j.id for j in db.jobs.list(status="running")] == [ids[0]]
    assert {j.id for j in db.jobs.list(status=["running", "cancelled"])} == {ids[0], ids[1]}
    assert {j.id for j in db.jobs.list(owner="ana")} == {ids[1], ids[3], ids[5]}
    assert len(db.jobs.list(limit=4)) == 4 and len(db.jobs.list(limit=4, offset=4)) == 2
    with pytest.raises(JobStateError):
        db.jobs.list(status="weird")


def test_tokens_store_only_hashes(db: Database) -> None:
    secret, info = db.tokens.create("ana", name="laptop")
    assert secret.startswith("tt_") and len(secret) > 40
    assert db.tokens.verify(secret) == info
    assert db.tokens.verify(secret + "x") is None and db.tokens.verify("nope") is None
    with db.connector.read() as conn:
        rows = conn.execute(text("SELECT * FROM api_tokens")).mappings().all()
    assert len(rows) == 1
    stored = " ".join(str(v) for v in rows[0].values())
    assert secret not in stored and secret[3:] not in stored
    assert rows[0]["token_hash"] == hashlib.sha256(secret.encode()).hexdigest()

    other_secret, other = db.tokens.create("bo")
    assert [t.id for t in db.tokens.list()] == [info.id, other.id]
    assert [t.id for t in db.tokens.list(owner="bo")] == [other.id]
    revoked = db.tokens.revoke(info.id)
    assert revoked.revoked_at is not None and not revoked.active
    assert db.tokens.revoke(info.id).revoked_at == revoked.revoked_at  # idempotent
    assert db.tokens.verify(secret) is None and db.tokens.verify(other_secret) == other
    assert [t.id for t in db.tokens.list()] == [other.id]
    assert len(db.tokens.list(include_revoked=True)) == 2
    with pytest.raises(NotFoundError):
        db.tokens.revoke("missing")
    with pytest.raises(DatabaseError, match="token owner"):
        db.tokens.create("")


def test_cost_model_snapshots(db: Database) -> None:
    assert db.snapshots.latest("task-1", "cpu") is None
    blob = bytes(range(256)) * 100
    first = db.snapshots.save("task-1", "cpu", blob, {"format": "xgboost", "n": 10})
    second = db.snapshots.save("task-1", "cpu", b"newer")
    db.snapshots.save("task-1", "cuda -arch=sm_90", b"gpu model")
    db.snapshots.save("task-2", "cpu", b"other task")
    latest = db.snapshots.latest("task-1", "cpu")
    assert latest is not None and latest.id == second > first
    assert (latest.data, latest.meta) == (b"newer", {})
    assert db.snapshots.latest("task-1", "cuda -arch=sm_90").data == b"gpu model"  # type: ignore[union-attr]
    with pytest.raises(DatabaseError, match="snapshot data must be bytes"):
        db.snapshots.save("t", "cpu", "text")  # type: ignore[arg-type]
    # the big blob comes back byte for byte
    with db.connector.read() as conn:
        data = conn.execute(
            text("SELECT data FROM cost_model_snapshots WHERE id = :i"), {"i": first}
        ).scalar_one()
    assert bytes(data) == blob
