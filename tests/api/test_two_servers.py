"""Two servers on one PostgreSQL database, as an operator runs them: both take up the queued
jobs, and the running ones a dead server left, when they start; every job is run by one of
them only (its trials exactly its budget, no program measured twice)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from db import Database
from tests.db.backends import fresh_url
from tuner import submit_job

from .conftest import TINY_JOB, start_server, stop_server

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
JOBS = 6
STALE = 2


def _tuned_steps(db: Database, job_id: str) -> list[str]:
    return [r.canonical("steps") for r in db.iter_records(job_id=job_id)
            if not (r.measure.get("origin") or {}).get("reconfirm")]


def test_two_servers_on_one_database_never_run_a_job_twice(tmp_path: Path) -> None:
    with fresh_url("postgresql", tmp_path) as url:
        db = Database(url)
        jobs = [submit_job(db, {**TINY_JOB, "seed": n}, owner="someone").id
                for n in range(JOBS)]
        for job_id in jobs[:STALE]:  # left running by a server that died long ago
            db.jobs.claim(job_id, "a-dead-server", progress={"heartbeat": 1.0})
            with db.connector.write() as conn:
                conn.execute(text("UPDATE jobs SET updated_at = 1.0 WHERE id = :id"),
                             {"id": job_id})
        servers = []
        starting = [threading.Thread(target=lambda name=name: servers.append(start_server(
            tmp_path / name, {"TENSORTUNE_DB_URL": url}))) for name in ("a", "b")]
        try:
            for thread in starting:  # at once: both find the same jobs to take up
                thread.start()
            for thread in starting:
                thread.join()
            assert len(servers) == 2, "a server did not start"
            deadline = time.monotonic() + 600
            while any(db.jobs.get(j).status in ("queued", "running") for j in jobs):
                assert time.monotonic() < deadline, "the jobs did not finish"
                time.sleep(0.5)
        finally:
            for server in servers:
                stop_server(server)
        for job_id in jobs:
            job = db.jobs.get(job_id)
            assert job.status == "succeeded", job.error
            steps = _tuned_steps(db, job_id)
            assert len(steps) == len(set(steps)) == TINY_JOB["trials"], job_id
        db.close()
