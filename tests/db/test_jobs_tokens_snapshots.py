"""Jobs (lifecycle, progress, listing), API tokens (only hashes stored) and cost-model
snapshots, on both backends."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from db import Database, DatabaseError, JobStateError, NotFoundError


def test_job_lifecycle(db: Database) -> None:
    job = db.create_job({"workloads": ["mm"], "trials": 100}, owner="ana")
    assert job.status == "queued" and job.owner == "ana" and job.progress == {}
    assert job.spec == {"workloads": ["mm"], "trials": 100}
    assert job.started_at is None and job.finished_at is None
    assert db.get_job(job.id) == job

    running = db.update_job(job.id, status="running", progress={"trials_done": 10})
    assert running.status == "running" and running.progress == {"trials_done": 10}
    assert running.started_at is not None and running.updated_at >= job.updated_at
    more = db.update_job(job.id, status="running", progress={"trials_done": 50})
    assert more.started_at == running.started_at  # not reset by a progress update
    done = db.update_job(job.id, status="succeeded")
    assert done.finished_at is not None and done.progress == {"trials_done": 50}

    with pytest.raises(JobStateError, match=f"job {job.id} is succeeded; it cannot become running"):
        db.update_job(job.id, status="running")
    with pytest.raises(JobStateError, match="unknown job status 'paused'"):
        db.update_job(job.id, status="paused")
    with pytest.raises(NotFoundError, match="no job 'missing'"):
        db.update_job("missing", status="running")
    with pytest.raises(NotFoundError, match="no job 'missing'"):
        db.get_job("missing")


def test_failed_job_resumes_and_errors_are_kept(db: Database) -> None:
    job = db.create_job({}, job_id="fixed-id")
    assert job.id == "fixed-id"
    with pytest.raises(DatabaseError, match="job fixed-id already exists"):
        db.create_job({}, job_id="fixed-id")
    db.update_job(job.id, status="running")
    failed = db.update_job(job.id, status="failed", error="device lost")
    assert (failed.status, failed.error) == ("failed", "device lost")
    requeued = db.update_job(job.id, status="queued")
    assert requeued.finished_at is None and requeued.started_at is not None
    cancelled = db.update_job(job.id, status="cancelled")
    assert cancelled.finished_at is not None
    with pytest.raises(DatabaseError, match="job spec must be a JSON object"):
        db.create_job([1, 2])  # type: ignore[arg-type]
    with pytest.raises(DatabaseError, match="job progress is not representable as JSON"):
        db.update_job(job.id, progress={"x": object()})


def test_list_jobs(db: Database) -> None:
    ids = [db.create_job({"n": i}, owner="ana" if i % 2 else "bo").id for i in range(6)]
    db.update_job(ids[0], status="running")
    db.update_job(ids[1], status="cancelled")
    listed = db.list_jobs()
    assert {j.id for j in listed} == set(ids)
    assert [j.created_at for j in listed] == sorted((j.created_at for j in listed), reverse=True)
    assert [j.id for j in db.list_jobs(status="running")] == [ids[0]]
    assert {j.id for j in db.list_jobs(status=["running", "cancelled"])} == {ids[0], ids[1]}
    assert {j.id for j in db.list_jobs(owner="ana")} == {ids[1], ids[3], ids[5]}
    assert len(db.list_jobs(limit=4)) == 4 and len(db.list_jobs(limit=4, offset=4)) == 2
    with pytest.raises(JobStateError):
        db.list_jobs(status="weird")


def test_tokens_store_only_hashes(db: Database) -> None:
    secret, info = db.create_token("ana", name="laptop")
    assert secret.startswith("tt_") and len(secret) > 40
    assert db.verify_token(secret) == info
    assert db.verify_token(secret + "x") is None and db.verify_token("nope") is None
    with db._read() as conn:
        rows = conn.execute(text("SELECT * FROM api_tokens")).mappings().all()
    assert len(rows) == 1
    stored = " ".join(str(v) for v in rows[0].values())
    assert secret not in stored and secret[3:] not in stored
    assert rows[0]["token_hash"] == hashlib.sha256(secret.encode()).hexdigest()

    other_secret, other = db.create_token("bo")
    assert [t.id for t in db.list_tokens()] == [info.id, other.id]
    assert [t.id for t in db.list_tokens(owner="bo")] == [other.id]
    revoked = db.revoke_token(info.id)
    assert revoked.revoked_at is not None and not revoked.active
    assert db.revoke_token(info.id).revoked_at == revoked.revoked_at  # idempotent
    assert db.verify_token(secret) is None and db.verify_token(other_secret) == other
    assert [t.id for t in db.list_tokens()] == [other.id]
    assert len(db.list_tokens(include_revoked=True)) == 2
    with pytest.raises(NotFoundError):
        db.revoke_token("missing")
    with pytest.raises(DatabaseError, match="token owner"):
        db.create_token("")


def test_cost_model_snapshots(db: Database) -> None:
    assert db.latest_snapshot("task-1", "cpu") is None
    blob = bytes(range(256)) * 100
    first = db.save_snapshot("task-1", "cpu", blob, {"format": "xgboost", "n": 10})
    second = db.save_snapshot("task-1", "cpu", b"newer")
    db.save_snapshot("task-1", "cuda -arch=sm_90", b"gpu model")
    db.save_snapshot("task-2", "cpu", b"other task")
    latest = db.latest_snapshot("task-1", "cpu")
    assert latest is not None and latest.id == second > first
    assert (latest.data, latest.meta) == (b"newer", {})
    assert db.latest_snapshot("task-1", "cuda -arch=sm_90").data == b"gpu model"  # type: ignore[union-attr]
    with pytest.raises(DatabaseError, match="snapshot data must be bytes"):
        db.save_snapshot("t", "cpu", "text")  # type: ignore[arg-type]
    # the big blob comes back byte for byte
    with db._read() as conn:
        data = conn.execute(
            text("SELECT data FROM cost_model_snapshots WHERE id = :i"), {"i": first}
        ).scalar_one()
    assert bytes(data) == blob
