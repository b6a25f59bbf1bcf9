"""Tuning records: list with filters and pagination, export as a JSON-lines stream, import
a JSON-lines body (admin)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from db import ERROR_KINDS, Database

from ..auth import Principal
from ..deps import admin, get_state, reader
from ..schemas import ImportResult, RecordPage
from ..strict import StrictRoute
from .responses import errors

router = APIRouter(route_class=StrictRoute, prefix="/v1/records", tags=["records"])
NDJSON = "application/x-ndjson"


def _filters(workload_key: str | None, target: str | None, job_id: str | None,
             error_kind: str | None, ok: bool | None) -> dict[str, Any]:
    given = {"workload_key": workload_key, "target": target, "job_id": job_id,
             "error_kind": error_kind, "ok": ok}
    return {name: value for name, value in given.items() if value is not None}


@router.get("", response_model=RecordPage, responses=errors(422))
def list_records(request: Request, _: Principal = reader,
                 workload_key: str | None = Query(None, max_length=128),
                 target: str | None = Query(None, max_length=512),
                 job_id: str | None = Query(None, max_length=128),
                 error_kind: Literal[ERROR_KINDS] | None = None,  # type: ignore[valid-type]
                 ok: bool | None = Query(None, description="only error-free (true) or "
                                         "failed (false) records"),
                 order: Literal["id", "timestamp", "cost"] = "id",
                 limit: int = Query(100, ge=1, le=1000),
                 offset: int = Query(0, ge=0, le=10**9)) -> dict[str, Any]:
    """One page of the records matching every filter given, and how many match in all. A
    record the best query passes over says why (``outranked``: the record whose program
    was faster side by side, how many times slower this one was, and the job that found
    it)."""
    db: Database = get_state(request).db
    filters = _filters(workload_key, target, job_id, error_kind, ok)
    records = db.query_records(**filters, order=order, limit=limit, offset=offset)
    verdicts = db.outranked(r.measurement_id for r in records)
    page = []
    for record in records:
        data = record.to_dict()
        verdict = verdicts.get(record.measurement_id)
        if verdict is not None:
            data["outranked"] = {"by": verdict.by_measurement_id, "ratio": verdict.ratio,
                                 "job_id": verdict.job_id}
        page.append(data)
    return {"total": db.count_records(**filters), "limit": limit, "offset": offset,
            "records": page}


@router.get("/export", responses={**errors(422), 200: {
    "content": {NDJSON: {}}, "description": "one record (db/FORMAT.md) a line"}})
def export(request: Request, _: Principal = reader,
           workload_key: str | None = Query(None, max_length=128),
           target: str | None = Query(None, max_length=512),
           job_id: str | None = Query(None, max_length=128)) -> StreamingResponse:
    """Every matching record as JSON lines, streamed in storage order (importable with
    ``POST /v1/records/import`` or ``tensortune records import``)."""
    db: Database = get_state(request).db
    filters = _filters(workload_key, target, job_id, None, None)
    # The query runs (and its errors become a status) here, before the first byte is sent:
    # once the 200 headers are out, a failure could only cut the body short.
    records = db.iter_records(**filters)
    first = next(records, None)

    def lines() -> Iterator[str]:
        if first is None:
            return
        yield first.to_json() + "\n"
        for record in records:
            yield record.to_json() + "\n"

    disposition = 'attachment; filename="records.jsonl"'
    return StreamingResponse(lines(), media_type=NDJSON,
                             headers={"Content-Disposition": disposition})


@router.post("/import", response_model=ImportResult, responses=errors(400, 409, 413, 422),
             openapi_extra={"requestBody": {"required": True, "content": {
                 NDJSON: {"schema": {"type": "string"}}}}})
async def import_records(request: Request, _: Principal = admin,
                         skip_bad_lines: bool = Query(False, description="import the good "
                                                      "lines, report the bad")
                         ) -> dict[str, Any]:
    """Add the records of a JSON-lines body in one transaction; records already stored are
    not added again. A malformed line rejects the whole body (422 with every bad line)
    unless ``skip_bad_lines``."""
    body = await request.body()
    source = io.BytesIO(body)
    source.name = "request body"  # type: ignore[attr-defined]
    db: Database = get_state(request).db
    report = await run_in_threadpool(db.import_jsonl, source, skip_bad_lines=skip_bad_lines)
    return report.to_dict()
