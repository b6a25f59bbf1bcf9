"""Jobs: submit, list, get, cancel, and stream progress as server-sent events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from db import JOB_STATUSES, Job
from tuner import JobSpec, SpecError, cancel_job, submit_job

from ..auth import AuthError, Principal
from ..deps import get_state, reader, submitter
from ..schemas import (
    MODEL_UPLOAD_DOC,
    JobCreated,
    JobList,
    JobRequest,
    JobTrials,
    JobView,
)
from ..state import ServiceState
from ..strict import StrictRoute
from ..submissions import spec_digest
from ..views import job_view, trials_view
from .responses import errors

router = APIRouter(route_class=StrictRoute, prefix="/v1/jobs", tags=["jobs"])
TERMINAL = ("succeeded", "failed", "cancelled")
#: How often an event stream looks for news of a job not running in this server.
POLL_S = 0.25


def check_limits(state: ServiceState, spec: JobSpec) -> None:
    """422 for a job over this server's limits (trials, timeouts, measure settings)."""
    settings = state.settings
    if spec.trials > settings.max_trials:
        raise SpecError(f"trials: {spec.trials} is over this server's limit of "
                        f"{settings.max_trials}")
    m = spec.measure
    for name in ("compile_timeout", "run_timeout", "load_timeout"):
        if getattr(m, name) > settings.max_timeout_s:
            raise SpecError(f"measure.{name}: at most {settings.max_timeout_s} s on this server")
    if spec.time_budget_s is not None and spec.time_budget_s > 7 * 24 * 3600:
        raise SpecError("time_budget_s: at most a week")
    if m.min_repeat_ms > 10_000 or m.repeat > 100 or m.number > 1_000_000:
        raise SpecError("measure: at most repeat=100, number=1000000, min_repeat_ms=10000")
    if m.flush_bytes > 1 << 30:
        raise SpecError("measure.flush_bytes: at most 1 GiB")


@router.post("", status_code=202, response_model=JobCreated, openapi_extra=MODEL_UPLOAD_DOC,
             responses={**errors(400, 413, 422, 429, 503), 200: {
                 "model": JobCreated, "description": "a repeated submission: the existing job"}})
def submit(body: JobRequest, request: Request, response: Response,
           principal: Principal = submitter,
           idempotency_key: str | None = Header(None, max_length=200)) -> dict[str, Any]:
    """Submit a tuning job; it runs in the background. A repeat (same spec by the same
    token within the dedupe window, or the same ``Idempotency-Key``) returns the existing
    job with status 200.

    A ``multipart/form-data`` request instead uploads a model: a ``model`` file (ONNX) and
    a ``spec`` field (JSON: ``target``, ``trials`` and the other options, no workloads).
    The model is imported in a sandbox process and its tasks are tuned as one job."""
    state = get_state(request)
    spec = JobSpec.from_json(body.model_dump(exclude_none=True))
    check_limits(state, spec)
    digest = spec_digest(spec.to_json())
    who = principal.token_id or principal.owner
    existing = repeat_or_admit(state, who, digest, idempotency_key)
    if existing is not None:
        response.status_code = 200
        return existing
    return create_job(state, principal, spec, who, digest, idempotency_key, response)


def repeat_or_admit(state: ServiceState, who: str, digest: str,
                    idempotency_key: str | None) -> dict[str, Any] | None:
    """The existing job of an identical earlier submission (as ``JobCreated``), or None
    once this submission is admitted by the rate limit (429 otherwise)."""
    existing = state.guard.repeat_of(who, digest, idempotency_key)
    if existing is not None:
        return created_view(state.db.jobs.get(existing), duplicate=True)
    state.guard.admit(who)
    return None


def create_job(state: ServiceState, principal: Principal, spec: JobSpec, who: str,
               digest: str, idempotency_key: str | None, response: Response
               ) -> dict[str, Any]:
    """Store the job, remember its submission, and start it (when this server runs jobs)."""
    job = submit_job(state.db, spec, owner=principal.owner)
    state.guard.remember(who, digest, idempotency_key, job.id)
    if state.executor is not None:
        state.executor.submit(job.id, spec)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return created_view(job)


def created_view(job: Job, duplicate: bool = False) -> dict[str, Any]:
    return {"id": job.id, "url": f"/v1/jobs/{job.id}", "events_url": f"/v1/jobs/{job.id}/events",
            "status": job.status, "duplicate": duplicate}


@router.get("", response_model=JobList, responses=errors(422))
def list_jobs(request: Request, _: Principal = reader,
              status: str | None = Query(None, description=" | ".join(JOB_STATUSES)),
              owner: str | None = Query(None, max_length=255),
              limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=10**9),
              curves: bool = Query(False, description="include best-so-far curves")
              ) -> dict[str, Any]:
    """Jobs, newest first (without curves unless asked)."""
    if status is not None and status not in JOB_STATUSES:
        raise SpecError(f"status: unknown {status!r}; one of {', '.join(JOB_STATUSES)}")
    jobs = get_state(request).db.jobs.list(status=status, owner=owner, limit=limit,
                                           offset=offset)
    return {"jobs": [job_view(j, with_curves=curves) for j in jobs], "limit": limit,
            "offset": offset}


@router.get("/{job_id}", response_model=JobView, responses=errors(404))
def get_job(job_id: str, request: Request, _: Principal = reader) -> dict[str, Any]:
    """A job: status, and per workload its key, progress, best so far, error counts and
    best-so-far curve."""
    return job_view(get_state(request).db.jobs.get(job_id), with_spec=True)


@router.get("/{job_id}/trials", response_model=JobTrials, responses=errors(404))
def get_trials(job_id: str, request: Request, _: Principal = reader) -> dict[str, Any]:
    """Every measured trial of a job, per workload, in measurement order: latency or
    error kind, and whether it re-measured a best program (``reconfirm``)."""
    db = get_state(request).db
    job = db.jobs.get(job_id)
    return trials_view(job, db.query_records(job_id=job_id, order="id", limit=None))


@router.delete("/{job_id}", response_model=JobView, responses=errors(404, 409))
def cancel(job_id: str, request: Request, principal: Principal = submitter) -> dict[str, Any]:
    """Cancel a queued or running job (a running one stops after its current batch; what
    it measured is kept). Submitters may cancel their own jobs, admins any job."""
    db = get_state(request).db
    job = db.jobs.get(job_id)
    if not principal.has("admin") and job.owner != principal.owner:
        raise AuthError(403, f"job {job_id} belongs to another owner; only an admin may "
                             "cancel it")
    return job_view(cancel_job(db, job_id), with_spec=True)


def _sse(n: int, event: dict[str, Any]) -> str:
    data = json.dumps(event)
    return f"id: {n}\nevent: {event.get('type', 'message')}\ndata: {data}\n\n"


def _final(job: Job) -> dict[str, Any]:
    return {"type": "done", "job_id": job.id, "status": job.status, "error": job.error,
            **{k: v for k, v in job.progress.items() if k != "heartbeat"}}


async def _stream(state: ServiceState, request: Request, job: Job) -> AsyncIterator[str]:
    n = 0
    seen_beat = job.progress.get("heartbeat")
    while True:
        events, live = state.hub.read(job.id, n)
        for event in events:
            n += 1
            yield _sse(n, event)
            if event.get("type") == "done":
                return
        if not live and not events:
            job = await run_in_threadpool(state.db.jobs.get, job.id)
            if job.status in TERMINAL and not state.hub.read(job.id, n)[0]:
                yield _sse(n + 1, _final(job))
                return
            beat = job.progress.get("heartbeat")
            if job.status == "running" and beat != seen_beat:
                seen_beat = beat  # run by another process: relay its stored progress
                n += 1
                yield _sse(n, {"type": "batch", "job_id": job.id, **job.progress})
        if await request.is_disconnected():
            return
        await asyncio.sleep(POLL_S)


@router.get("/{job_id}/events", responses={**errors(404), 200: {
    "content": {"text/event-stream": {}},
    "description": "server-sent events: `batch` after each measured batch, then `done`"}})
async def events(job_id: str, request: Request, _: Principal = reader) -> StreamingResponse:
    """Progress as server-sent events: one ``batch`` event per measured batch (the job's
    whole progress), then a final ``done`` event; the stream then ends. A job that already
    ended gets its ``done`` event at once."""
    state = get_state(request)
    job = await run_in_threadpool(state.db.jobs.get, job_id)
    return StreamingResponse(_stream(state, request, job), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
