"""Health (no token needed) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from db import DatabaseError

from ..auth import Principal
from ..deps import get_state, reader
from ..metrics import CONTENT_TYPE
from ..schemas import Health
from .responses import errors

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(request: Request, response: Response) -> dict[str, Any]:
    """Whether the server and its database answer. Needs no token."""
    state = get_state(request)
    try:
        await run_in_threadpool(state.db.count_records, job_id="")
        database = "ok"
    except DatabaseError as err:
        database = str(err)
        response.status_code = 503
    active = state.executor.active if state.executor is not None else 0
    return {"status": "ok" if database == "ok" else "degraded", "database": database,
            "jobs_active": active}


@router.get("/metrics", responses={**errors(), 200: {"content": {CONTENT_TYPE: {}},
                                                     "description": "Prometheus text"}})
def metrics(request: Request, _: Principal = reader) -> Response:
    """Prometheus metrics: jobs by status, trials measured, errors by kind, batches and
    candidates measured here, request latency by route."""
    state = get_state(request)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
