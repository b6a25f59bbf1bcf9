"""Health (no token needed: up or down; details for admins) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from db import DatabaseError

from ..auth import AuthError, Principal
from ..deps import get_state, reader
from ..metrics import CONTENT_TYPE
from ..schemas import Health
from ..strict import StrictRoute
from .responses import errors

router = APIRouter(route_class=StrictRoute, tags=["health"])


async def _is_admin(request: Request) -> bool:
    """Whether the request carries an admin token (any request, with auth off). A missing,
    bad or unverifiable token (the database may be down) only means: not an admin."""
    state = get_state(request)
    if not state.settings.auth:
        return True
    header = request.headers.get("authorization")
    if not header:
        return False
    try:
        principal = await run_in_threadpool(state.tokens.authenticate, header)
    except (AuthError, DatabaseError):
        return False
    return principal.has("admin")


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(request: Request, response: Response) -> dict[str, Any]:
    """Whether the server and its database answer (``ok`` or ``down``). Needs no token;
    with an admin token, why the database is down and how many jobs run here."""
    state = get_state(request)
    try:
        await run_in_threadpool(state.db.count_records, job_id="")
        problem = None
    except DatabaseError as err:
        problem = str(err)
        response.status_code = 503
    health: dict[str, Any] = {"status": "ok" if problem is None else "degraded",
                              "database": "ok" if problem is None else "down",
                              "jobs_active": None}
    if await _is_admin(request):  # details (the database URL, say) for admins only
        health["database"] = problem or "ok"
        health["jobs_active"] = state.executor.active if state.executor is not None else 0
    return health


@router.get("/metrics", responses={**errors(), 200: {"content": {CONTENT_TYPE: {}},
                                                     "description": "Prometheus text"}})
def metrics(request: Request, _: Principal = reader) -> Response:
    """Prometheus metrics: jobs by status, trials measured, errors by kind, batches and
    candidates measured here, request latency by route."""
    state = get_state(request)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
