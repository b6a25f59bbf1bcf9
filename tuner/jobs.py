"""Jobs: submit a specification, run it, resume it after a crash or a cancel, cancel it.

A job lives in the database (``db.Job``): its spec, status and progress. Any process can
run a queued job (claiming it atomically); ``resume`` requeues a failed or cancelled job,
or takes over a ``running`` one whose runner stopped reporting (killed), and runs it on
from its records.
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
    return db.jobs.create(spec.to_json(), owner=owner, job_id=job_id)


def run_job(db: Database, job_id: str, pool: Any = None,
            on_event: EventCallback | None = None, *, spec: JobSpec | None = None) -> TuneResult:
    """Run the queued job ``job_id`` to its end in this process (``spec``: its
    specification, when the caller holds it already)."""
    return JobRunner(db, job_id, pool, on_event, spec=spec).run()


def requeue_job(db: Database, job_id: str) -> Job:
    """Make a failed or cancelled job runnable again (``queued``; a queued one stays so).
    Its count of runner deaths starts again: a person decided to try once more."""
    job = db.jobs.get(job_id)
    if job.status == "queued":
        return job
    if job.status == "succeeded":
        raise JobStateError(f"job {job_id} already succeeded; nothing to resume")
    if job.status == "running":
        raise JobStateError(f"job {job_id} is running; resume_job takes it over if its "
                            "runner is gone")
    return db.jobs.update(job_id, status="queued", error="",
                          progress={**job.progress, "runner_deaths": 0})


def resume_job(db: Database, job_id: str, pool: Any = None,
               on_event: EventCallback | None = None, *, force: bool = False,
               spec: JobSpec | None = None) -> TuneResult:
    """Run a stopped job on from its records (no measured candidate is measured again): a
    failed or cancelled one, or a running one whose runner stopped reporting (taken over
    atomically: if another process takes it first, ``JobStateError``). A running job that
    reported progress recently is taken over only with ``force``."""
    job = db.jobs.get(job_id)
    if job.status != "running":
        requeue_job(db, job_id)
        return run_job(db, job_id, pool, on_event, spec=spec)
    if not force and not is_stale(job):
        raise JobStateError(f"job {job_id} is running and reported progress recently; "
                            "if its process is really gone, resume with --force")
    return JobRunner(db, job_id, pool, on_event, spec=spec).run(take_over=job, forced=force)


def cancel_job(db: Database, job_id: str) -> Job:
    """Cancel a queued or running job; a running one stops at its next batch boundary,
    keeping everything measured. Cancelling a finished job raises ``JobStateError``."""
    job = db.jobs.get(job_id)
    if job.status == "cancelled":
        return job
    return db.jobs.update(job_id, status="cancelled")
