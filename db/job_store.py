"""Tuning jobs in the database: create, update (status changes checked against the job
lifecycle, atomically), get and list. A mixin of :class:`db.Database`.

Lifecycle::

    queued -> running -> succeeded
       |         |-----> failed    -> queued (resume)
       |         |-----> cancelled -> queued (resume)
       |         '-----> queued    (requeued, e.g. its worker was lost)
       '--> cancelled | failed

A status change is a compare-and-set in SQL, so two processes racing to change the same
job cannot both succeed with incompatible changes.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update

from .engine import Store
from .errors import DatabaseError, JobStateError, NotFoundError
from .models import Job as JobRow
from .records import MAX_JOB_ID_LEN, MAX_NAME_LEN, canonical_json

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


def _json_object(name: str, value: Any) -> str:
    if not isinstance(value, Mapping):
        raise DatabaseError(f"job {name} must be a JSON object, got {type(value).__name__}")
    try:
        return canonical_json(dict(value))
    except (TypeError, ValueError) as exc:
        raise DatabaseError(f"job {name} is not representable as JSON ({exc})") from None


def _check_status(status: str) -> None:
    if status not in JOB_STATUSES:
        raise JobStateError(f"unknown job status {status!r}; one of {', '.join(JOB_STATUSES)}")


_JOBS = JobRow.__table__


def _job(row: Any) -> Job:
    return Job(
        id=row.id,
        status=row.status,
        spec=json.loads(row.spec_json),
        progress=json.loads(row.progress_json),
        owner=row.owner,
        error=row.error,
        created_at=row.created_at,
        updated_at=row.updated_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


class JobStore(Store):
    """Job operations of :class:`db.Database`."""

    def create_job(
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
            "id": job_id, "status": "queued", "spec_json": _json_object("spec", spec),
            "progress_json": "{}", "owner": owner, "error": "", "created_at": now,
            "updated_at": now, "started_at": None, "finished_at": None,
        }
        with self._write() as conn:
            if conn.execute(select(JobRow.id).where(JobRow.id == job_id)).first():
                raise DatabaseError(f"job {job_id} already exists")
            conn.execute(_JOBS.insert(), row)
        return self.get_job(job_id)

    def get_job(self, job_id: str) -> Job:
        """The job ``job_id``; raises :class:`~db.errors.NotFoundError` if there is none."""
        with self._read() as conn:
            row = conn.execute(select(_JOBS).where(JobRow.id == job_id)).first()
        if row is None:
            raise NotFoundError(f"no job {job_id!r}")
        return _job(row)

    def update_job(
        self,
        job_id: str,
        *,
        status: str | None = None,
        progress: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> Job:
        """Change a job's status, replace its progress JSON and/or set its error message.

        A status change not allowed from the job's current status (see the module
        docstring) raises :class:`~db.errors.JobStateError`; setting the current status
        again is allowed (to update progress alongside). ``started_at`` is set the first
        time a job runs; ``finished_at`` when it ends, and cleared if it is requeued.
        """
        now = time.time()
        values: dict[str, Any] = {"updated_at": now}
        if progress is not None:
            values["progress_json"] = _json_object("progress", progress)
        if error is not None:
            values["error"] = str(error)
        statement = update(JobRow).where(JobRow.id == job_id)
        if status is not None:
            _check_status(status)
            sources = [s for s, targets in TRANSITIONS.items() if status in targets] + [status]
            statement = statement.where(JobRow.status.in_(sources))
            values["status"] = status
            if status == "running":
                values["started_at"] = func.coalesce(JobRow.started_at, now)
            values["finished_at"] = now if status in TERMINAL_STATUSES else None
        with self._write() as conn:
            changed = conn.execute(statement.values(**values)).rowcount
            if changed == 0:
                row = conn.execute(select(JobRow.status).where(JobRow.id == job_id)).first()
                if row is None:
                    raise NotFoundError(f"no job {job_id!r}")
                raise JobStateError(f"job {job_id} is {row[0]}; it cannot become {status}")
        return self.get_job(job_id)

    def list_jobs(
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
        with self._read() as conn:
            return [_job(row) for row in conn.execute(statement)]
