"""Models: tuning a whole model from an upload, and the best known of a model's tasks.

``POST /v1/jobs`` with ``multipart/form-data`` (a ``model`` file and a ``spec`` field of job
options) is served here: this route matches only that content type, so JSON submissions
reach the jobs router. The upload is size-limited (``max_model_bytes``, before any handler
runs) and never held in memory whole (starlette spools it to a temporary file; it is hashed
and copied in chunks), never parsed in the server: ``tuner.import_model_tasks`` parses and
fuses it in a sandbox process (at most ``max_model_imports`` at once) and hands back declarative
workloads. ``GET /v1/models/{job_id}/best`` gives each task's best record and the model's
estimated end-to-end latency.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.routing import Match
from starlette.types import Scope

from schedule import Target
from tuner import (
    JobSpec,
    ModelImportError,
    SpecError,
    file_sha256,
    import_model_tasks,
    model_best,
)
from workers import SandboxError

from ..auth import Principal
from ..deps import get_state, reader, submitter
from ..middleware import is_multipart
from ..schemas import JobCreated, JobOptions, ModelBest
from ..strict import StrictRoute, loads_strict
from ..submissions import RateLimited, spec_digest
from .jobs import check_limits, create_job, repeat_or_admit
from .responses import errors


class ModelUploadRoute(StrictRoute):
    """A route that matches multipart/form-data requests only."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        return (match, child) if is_multipart(scope) else (Match.NONE, {})


router = APIRouter(route_class=StrictRoute, tags=["models"])


def _invalid(field: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"type": "value_error", "loc": ("body", field),
                                    "msg": message}])


def _options(text: Any) -> dict[str, Any]:
    """The ``spec`` form field as validated job options."""
    if not isinstance(text, str):
        raise _invalid("spec", 'required: a JSON object of job options, e.g. '
                               '{"target": "cpu", "trials": 256}')
    data = loads_strict(text.encode())
    try:
        return JobOptions.model_validate(data).model_dump(exclude_none=True)
    except ValidationError as err:
        raise RequestValidationError([{**e, "loc": ("body", "spec", *e["loc"])}
                                      for e in err.errors(include_input=False)]) from None


async def _open_upload(request: Request) -> tuple[FormData, UploadFile, dict[str, Any]]:
    """The form (close it after), its model file part and its validated job options."""
    try:
        form = await request.form(max_files=1, max_fields=1)
    except Exception as err:  # malformed multipart: starlette raises its own error types
        raise _invalid("model", f"malformed multipart body: {err}") from None
    try:
        upload = form.get("model")
        if not isinstance(upload, UploadFile):
            raise _invalid("model", "required: the ONNX model as a file part named 'model'")
        if not upload.size:
            raise _invalid("model", "the model file is empty")
        return form, upload, _options(form.get("spec"))
    except BaseException:
        await form.close()
        raise


def _hash_upload(upload: UploadFile) -> str:
    upload.file.seek(0)
    digest = file_sha256(upload.file)
    upload.file.seek(0)
    return digest


async def submit_model(request: Request, response: Response, principal: Principal = submitter,
                       idempotency_key: str | None = Header(None, max_length=200)
                       ) -> dict[str, Any]:
    """Tune an uploaded model (documented with ``POST /v1/jobs``)."""
    form, upload, options = await _open_upload(request)
    try:
        return await _submit_upload(request, response, principal, idempotency_key, upload,
                                    options)
    finally:
        await form.close()


async def _submit_upload(request: Request, response: Response, principal: Principal,
                         idempotency_key: str | None, upload: UploadFile,
                         options: dict[str, Any]) -> dict[str, Any]:
    state = get_state(request)
    settings = state.settings
    try:
        target = Target.parse(options["target"])
    except (TypeError, ValueError) as err:
        raise SpecError(f"target: {err}") from None
    if options["trials"] > settings.max_trials:
        raise SpecError(f"trials: {options['trials']} is over this server's limit of "
                        f"{settings.max_trials}")
    who = principal.token_id or principal.owner
    sha256 = await run_in_threadpool(_hash_upload, upload)
    digest = spec_digest({"model_sha256": sha256, **options})
    existing = await run_in_threadpool(repeat_or_admit, state, who, digest, idempotency_key)
    if existing is not None:
        response.status_code = 200
        return existing
    if not state.model_imports.acquire(blocking=False):
        raise RateLimited(f"{settings.max_model_imports} model uploads are being imported; "
                          "retry shortly", 10.0)
    try:
        found = await run_in_threadpool(import_model_tasks, upload.file,
                                        upload.filename or "model.onnx", target,
                                        timeout=settings.model_import_timeout_s,
                                        sha256=sha256)
    except ModelImportError as err:
        raise SpecError(f"model: {err}") from None
    except SandboxError as err:
        raise HTTPException(503, f"the server cannot import models now: {err}",
                            headers={"Retry-After": "30"}) from None
    finally:
        state.model_imports.release()
    spec = JobSpec.from_options(found.tasks, {**options, "model": found.info.to_json()})
    check_limits(state, spec)
    return await run_in_threadpool(create_job, state, principal, spec, who, digest,
                                   idempotency_key, response)


router.add_api_route("/v1/jobs", submit_model, methods=["POST"], status_code=202,
                     include_in_schema=False, response_model=JobCreated,
                     route_class_override=ModelUploadRoute)


@router.get("/v1/models/{job_id}/best", response_model=ModelBest, responses=errors(404, 422))
def best(job_id: str, request: Request, _: Principal = reader) -> dict[str, Any]:
    """For a model's job: each task's best record on the job's target (from any job: what
    `tensortune compile` uses), the model's estimated end-to-end latency in its tuned
    kernels (the weighted sum), and the job's estimate after each batch."""
    return model_best(get_state(request).db, job_id)
