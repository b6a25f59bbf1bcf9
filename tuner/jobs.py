"""Jobs: submit a specification, run it, resume it after a crash or a cancel, cancel it.

A job lives in the database (``db.Job``): its spec, status and progress. Any process can
run a queued job; ``resume`` requeues a failed or cancelled job, or a ``running`` one whose
process stopped reporting (killed), and runs it again from its records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from db import Database, Job, JobStateError

from .progress import TuneResult
from .runner import EventCallback, JobRunner, is_stale
from .spec import JobSpec


def submit_job(db: Database, spec: JobSpec | Mapping[str, Any], *,
               owner: str | None = None, job_id: str | None = None) -> Job:
    """Store a new job (status ``queued``); ``spec`` is validated first (``SpecError``)."""
    spec = spec if isinstance(spec, JobSpec) else JobSpec.from_json(spec)
    return db.create_job(spec.to_json(), owner=owner, job_id=job_id)


def run_job(db: Database, job_id: str, pool: Any = None,
            on_event: EventCallback | None = None) -> TuneResult:
    """Run the queued job ``job_id`` to its end in this process."""
    return JobRunner(db, job_id, pool, on_event).run()


def requeue_job(db: Database, job_id: str, *, force: bool = False) -> Job:
    """Make a stopped job runnable again: failed, cancelled, or running but stale (its
    process died). A running job that is still alive needs ``force``."""
    job = db.get_job(job_id)
    if job.status == "queued":
        return job
    if job.status == "succeeded":
        raise JobStateError(f"job {job_id} already succeeded; nothing to resume")
    if job.status == "running" and not force and not is_stale(job):
        raise JobStateError(f"job {job_id} is running and reported progress recently; "
                            "if its process is really gone, resume with --force")
    return db.update_job(job_id, status="queued", error="")


def resume_job(db: Database, job_id: str, pool: Any = None,
               on_event: EventCallback | None = None, *, force: bool = False) -> TuneResult:
    """Requeue the job if needed and run it on from its records: no measured candidate is
    measured again."""
    requeue_job(db, job_id, force=force)
    return run_job(db, job_id, pool, on_event)


def cancel_job(db: Database, job_id: str) -> Job:
    """Cancel a queued or running job; a running one stops at its next batch boundary,
    keeping everything measured. Cancelling a finished job raises ``JobStateError``."""
    job = db.get_job(job_id)
    if job.status == "cancelled":
        return job
    return db.update_job(job_id, status="cancelled")
