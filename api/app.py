"""The application factory: ``create_app(settings)`` wires the database, the shared
measurement pool, the job executor, the routers, the error handlers and the middleware."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from db import (
    Database,
    DatabaseError,
    DatabaseUnavailableError,
    ImportFileError,
    JobStateError,
    NotFoundError,
    RecordError,
    SchemaError,
    WorkloadConflictError,
)
from tuner import SharedPool, SpecError, __version__

from .auth import AuthError, TokenCache
from .events import EventHub
from .executor import JobExecutor
from .metrics import Metrics
from .middleware import BodyLimit, RequestTimer
from .routers import best, catalog, dashboard, health, jobs, models, records, tokens
from .settings import Settings, is_loopback
from .state import ServiceState
from .strict import validation_error
from .submissions import RateLimited, SubmissionGuard


def _error(status: int, detail: Any, **headers: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers or None)


def _install_error_handlers(app: FastAPI) -> None:
    """Expected failures become 4xx (or 503 when the database is down) with a message."""

    @app.exception_handler(AuthError)
    async def auth_error(_: Request, err: AuthError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else {}
        return _error(err.status, str(err), **headers)

    @app.exception_handler(RateLimited)
    async def rate_limited(_: Request, err: RateLimited) -> JSONResponse:
        return _error(429, str(err), **{"Retry-After": str(max(1, round(err.retry_after)))})

    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]

    @app.exception_handler(SpecError)
    async def spec_error(_: Request, err: SpecError) -> JSONResponse:
        return _error(422, str(err))

    @app.exception_handler(DatabaseError)
    async def database_error(_: Request, err: DatabaseError) -> JSONResponse:
        if isinstance(err, ImportFileError):
            return JSONResponse({"detail": str(err), "report": err.report.to_dict()},
                                status_code=422)
        status = 400
        for kind, code in ((NotFoundError, 404), (JobStateError, 409),
                           (WorkloadConflictError, 409), (RecordError, 422),
                           (DatabaseUnavailableError, 503), (SchemaError, 503)):
            if isinstance(err, kind):
                status = code
                break
        return _error(status, str(err))


def create_app(settings: Settings | None = None) -> FastAPI:
    """The tensortune REST API and dashboard, configured by ``settings`` (default: from
    the environment). Jobs start running when the app starts (its lifespan)."""
    settings = settings or Settings()
    if not settings.auth and not is_loopback(settings.host):
        raise ValueError(f"authentication is off: the server may bind to a loopback address "
                         f"only, not {settings.host!r}")
    database = Database(settings.db_url)
    hub = EventHub()
    metrics = Metrics(database)
    executor = None
    if settings.run_jobs:
        executor = JobExecutor(database, SharedPool.for_cluster(settings.ray_address), hub,
                               settings.max_running_jobs, on_batch=metrics.batch)
    state = ServiceState(settings, database, hub, executor,
                         SubmissionGuard(settings.submit_rate_per_minute,
                                         settings.dedupe_window_s), metrics,
                         TokenCache(database, settings.token_cache_s),
                         threading.BoundedSemaphore(settings.max_model_imports))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if executor is not None:
            executor.start()
        try:
            yield
        finally:
            if executor is not None:
                executor.stop()

    app = FastAPI(title="tensortune", version=__version__, lifespan=lifespan,
                  description="Auto-scheduling and tuning service for tensor programs: "
                              "submit tuning jobs, watch them converge, query the best "
                              "schedules.")
    app.state.service = state
    _install_error_handlers(app)
    # models first: its upload route takes the multipart posts to /v1/jobs
    for module in (models, jobs, best, records, catalog, tokens, health, dashboard):
        app.include_router(module.router)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes,
                       import_limit=settings.max_import_bytes,
                       model_limit=settings.max_model_bytes)
    app.add_middleware(RequestTimer, metrics=metrics)
    return app
