"""Tuning jobs in the database: create, update (status changes checked against the job
lifecycle, atomically), get and list. Reached as ``Database(url).jobs``.

Lifecycle::

    queued -> running -> succeeded
       |         |-----> failed    -> queued (resume)
       |         |-----> cancelled -> queued (resume)
       |         '-----> queued    (requeued by hand)
       '--> cancelled | failed

A status change is a compare-and-set in SQL, so two processes racing to change the same
job cannot both succeed with incompatible changes. A process runs a job only after
``claim`` made it the job's ``runner`` (one UPDATE: queued -> running, or a running job
taken over exactly as its claimer last saw it); its progress writes name that runner, so a
process that lost its job (taken over after its heartbeat went stale) learns it at once.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update

from .engine import StoreBase
from .errors import DatabaseError, JobStateError, NotFoundError
from .models import JobRow
from .records import MAX_JOB_ID_LEN, MAX_NAME_LEN, json_object_text

JOB_STATUSES: tuple[str, ...] = ("queued", "running", "succeeded", "failed", "cancelled")
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})
#: status -> the statuses it may change to.
TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "cancelled", "failed"}),
    "running": frozenset({"succeeded", "failed", "cancelled", "queued"}),
    "succeeded": frozenset(),
    "failed": frozenset({"queued"}),
    "cancelled": frozenset({"queued"}),
}


@dataclass(frozen=True, slots=True)
class Job:
    """A tuning job as stored. ``spec`` and ``progress`` are JSON objects whose contents
    belong to the tuner; times are seconds since the epoch."""

    id: str
    status: str
    spec: dict[str, Any]
    progress: dict[str, Any]
    owner: str | None
    error: str
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    runner: str | None = None


class JobTakenOver(JobStateError):
    """The job is no longer this runner's: another process claimed it."""


def _check_status(status: str) -> None:
    if status not in JOB_STATUSES:
        raise JobStateError(f"unknown job status {status!r}; one of {', '.join(JOB_STATUSES)}")


_JOBS = JobRow.__table__


def _job(row: Any) -> Job:
    columns = dict(row._mapping)
    spec, progress = columns.pop("spec_json"), columns.pop("progress_json")
    return Job(spec=json.loads(spec), progress=json.loads(progress), **columns)


class JobStore(StoreBase):
    """The tuning jobs of a database: ``create``, ``claim`` (to run one), ``get``,
    ``update``, ``list``."""

    def create(
        self,
        spec: Mapping[str, Any],
        *,
        owner: str | None = None,
        job_id: str | None = None,
    ) -> Job:
        """Store a new job in status ``queued``; ``job_id`` defaults to a random UUID (hex).
        A ``job_id`` already in use raises :class:`~db.errors.DatabaseError`."""
        job_id = job_id if job_id is not None else uuid.uuid4().hex
        if not isinstance(job_id, str) or not job_id or len(job_id) > MAX_JOB_ID_LEN:
            raise DatabaseError(f"job id must be 1..{MAX_JOB_ID_LEN} characters, got {job_id!r}")
        if owner is not None and len(owner) > MAX_NAME_LEN:
            raise DatabaseError(f"job owner longer than {MAX_NAME_LEN} characters")
        now = time.time()
        row = {
            "id": job_id, "status": "queued", "spec_json": json_object_text("job spec", spec),
            "progress_json": "{}", "owner": owner, "error": "", "created_at": now,
            "updated_at": now, "started_at": None, "finished_at": None, "runner": None,
        }
        with self.connector.write() as conn:
            if conn.execute(select(JobRow.id).where(JobRow.id == job_id)).first():
                raise DatabaseError(f"job {job_id} already exists")
            conn.execute(_JOBS.insert(), row)
        return self.get(job_id)

    def get(self, job_id: str) -> Job:
        """The job ``job_id``; raises :class:`~db.errors.NotFoundError` if there is none."""
        with self.connector.read() as conn:
            row = conn.execute(select(_JOBS).where(JobRow.id == job_id)).first()
        if row is None:
            raise NotFoundError(f"no job {job_id!r}")
        return _job(row)

    def claim(self, job_id: str, runner: str, *, expect: Job | None = None,
              progress: Mapping[str, Any] | None = None) -> Job:
        """Make ``runner`` the job's runner and its status ``running``, in one statement.

        Without ``expect`` only a queued job is claimed. With ``expect`` (a running job
        whose runner is presumed dead), the job is taken over only if it is still exactly
        as the caller saw it (same status, runner and last update), so of two processes
        taking over the same job one wins. Otherwise raises :class:`JobStateError`.
        ``progress`` replaces the progress JSON at the same time.
        """
        if not runner or len(runner) > MAX_NAME_LEN:
            raise DatabaseError(f"a job runner must be 1..{MAX_NAME_LEN} characters")
        now = time.time()
        values: dict[str, Any] = {
            "status": "running", "runner": runner, "updated_at": now, "finished_at": None,
            "started_at": func.coalesce(JobRow.started_at, now)}
        if progress is not None:
            values["progress_json"] = json_object_text("job progress", progress)
        statement = update(JobRow).where(JobRow.id == job_id)
        if expect is None:
            statement = statement.where(JobRow.status == "queued")
        else:
            statement = statement.where(
                JobRow.status == expect.status, JobRow.updated_at == expect.updated_at,
                JobRow.runner.is_(None) if expect.runner is None
                else JobRow.runner == expect.runner)
        with self.connector.write() as conn:
            if conn.execute(statement.values(**values)).rowcount == 0:
                current = self._status(conn, job_id)
                raise JobStateError(
                    f"job {job_id} is {current}; only a queued job can be claimed "
                    "(resume it first)" if expect is None else
                    f"job {job_id} changed since it was seen (now {current}): another "
                    "process took it")
        return self.get(job_id)

    @staticmethod
    def _status(conn: Any, job_id: str) -> str:
        row = conn.execute(select(JobRow.status).where(JobRow.id == job_id)).first()
        if row is None:
            raise NotFoundError(f"no job {job_id!r}")
        return str(row[0])

    def update(
        self,
        job_id: str,
        *,
        status: str | None = None,
        progress: Mapping[str, Any] | None = None,
        error: str | None = None,
        runner: str | None = None,
    ) -> Job:
        """Change a job's status, replace its progress JSON and/or set its error message.

        A status change not allowed from the job's current status (see the module
        docstring) raises :class:`~db.errors.JobStateError`; setting the current status
        again is allowed (to update progress alongside). ``started_at`` is set the first
        time a job runs; ``finished_at`` when it ends, and cleared if it is requeued.
        With ``runner``, the change is made only while that process is the job's runner
        (else :class:`JobTakenOver`). A requeued job has no runner any more.
        """
        now = time.time()
        values: dict[str, Any] = {"updated_at": now}
        if progress is not None:
            values["progress_json"] = json_object_text("job progress", progress)
        if error is not None:
            values["error"] = str(error)
        statement = update(JobRow).where(JobRow.id == job_id)
        if runner is not None:
            statement = statement.where(JobRow.runner == runner)
        if status == "queued":
            values["runner"] = None
        if status is not None:
            _check_status(status)
            sources = [s for s, targets in TRANSITIONS.items() if status in targets] + [status]
            statement = statement.where(JobRow.status.in_(sources))
            values["status"] = status
            if status == "running":
                values["started_at"] = func.coalesce(JobRow.started_at, now)
            values["finished_at"] = now if status in TERMINAL_STATUSES else None
        with self.connector.write() as conn:
            changed = conn.execute(statement.values(**values)).rowcount
            if changed == 0:
                current = self._status(conn, job_id)
                if runner is not None and conn.execute(select(JobRow.runner).where(
                        JobRow.id == job_id)).scalar_one() != runner:
                    raise JobTakenOver(f"job {job_id} is no longer run by {runner}: another "
                                       "process claimed it")
                raise JobStateError(f"job {job_id} is {current}; it cannot become {status}")
        return self.get(job_id)

    def list(
        self,
        *,
        status: str | Sequence[str] | None = None,
        owner: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
    ) -> list[Job]:
        """Jobs, newest first, optionally only those with the given status(es) or owner."""
        statement = select(_JOBS)
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            for name in statuses:
                _check_status(name)
            statement = statement.where(JobRow.status.in_(statuses))
        if owner is not None:
            statement = statement.where(JobRow.owner == owner)
        statement = statement.order_by(JobRow.created_at.desc(), JobRow.id.desc()).offset(offset)
        if limit is not None:
            statement = statement.limit(limit)
        with self.connector.read() as conn:
            return [_job(row) for row in conn.execute(statement)]
