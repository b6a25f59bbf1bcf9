"""Best-schedule queries: one workload, or a batch of workloads for a compiler building a
whole model. Targets are canonicalised (``cpu`` means this machine's CPU)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from db import MATCH_LEVELS, Database, NotFoundError
from schedule import Target
from tuner import SpecError
from workers import ProgramTextError, program_text

from ..auth import Principal
from ..deps import get_state, reader
from ..schemas import BestAnswer, BestBatchAnswer, BestBatchRequest, BestProgram
from ..strict import StrictRoute
from ..views import best_entry
from .responses import errors

router = APIRouter(route_class=StrictRoute, prefix="/v1", tags=["best"])


def canonical_target(text: str) -> str:
    """The canonical string of a target; SpecError (422) naming the problem."""
    try:
        return Target.parse(text).canonical
    except (TypeError, ValueError) as err:
        raise SpecError(f"target: {err}") from None


def _fallback(level: str | None) -> str | bool:
    if level is None or level == "exact":
        return False
    if level not in MATCH_LEVELS:
        raise SpecError(f"fallback: unknown {level!r}; one of {', '.join(MATCH_LEVELS)}")
    return level


def _answer(db: Database, key: str, target: str, k: int, fallback: str | bool
            ) -> dict[str, Any] | None:
    result = db.best(key, target, k, fallback=fallback)  # type: ignore[arg-type]
    if not result.records:
        return None
    return {"workload_key": key, "target": target, "match": result.match,
            "results": [best_entry(r) for r in result.records]}


@router.get("/best", response_model=BestAnswer, responses=errors(404, 422))
async def best(request: Request, _: Principal = reader,
         workload_key: str = Query(..., min_length=1, max_length=128),
         target: str = Query(..., min_length=1, max_length=512),
         k: int = Query(1, ge=1, le=100),
         fallback: str | None = Query(None, description="widest match level allowed: "
                                      + " | ".join(MATCH_LEVELS))) -> JSONResponse:
    """The k best error-free schedules of a workload on a target: steps, latency, GFLOP/s
    and when they were measured. 404 when nothing is known.

    The hot path of compilers: the query (an index probe of a few hundred microseconds)
    runs on the event loop, without a thread hand-off."""
    canonical = canonical_target(target)
    answer = _answer(get_state(request).db, workload_key, canonical, k, _fallback(fallback))
    if answer is None:
        raise NotFoundError(f"no error-free record of workload {workload_key} on target "
                            f"{canonical!r}" + ("" if fallback else
                                                " (fallback=same_isa widens the search)"))
    return JSONResponse(answer)


_PROGRAMS: OrderedDict[str, dict[str, str]] = OrderedDict()  # record id -> its text
_PROGRAMS_KEPT = 64
_PROGRAMS_LOCK = threading.Lock()
#: Programs lowered at once (each in a sandbox process of its own); a request that finds
#: them busy for a second is answered 503 rather than holding a server thread.
_LOWERING = threading.BoundedSemaphore(2)
_LOWERING_WAIT_S = 1.0


def _program_text(record: Any) -> dict[str, str]:
    """The record's program as text (lowered in a sandbox; remembered by measurement id,
    since a record never changes). Raises ``ProgramTextError``, or 503 when busy."""
    with _PROGRAMS_LOCK:
        text = _PROGRAMS.get(record.measurement_id)
    if text is not None:
        return text
    if not _LOWERING.acquire(timeout=_LOWERING_WAIT_S):
        raise HTTPException(503, "busy lowering other programs; try again shortly",
                            headers={"Retry-After": "5"})
    try:
        text = program_text(record.workload, record.target, record.steps)
    finally:
        _LOWERING.release()
    with _PROGRAMS_LOCK:
        _PROGRAMS[record.measurement_id] = text
        while len(_PROGRAMS) > _PROGRAMS_KEPT:
            _PROGRAMS.popitem(last=False)
    return text


@router.get("/best/program", response_model=BestProgram, responses=errors(404, 422, 503))
def best_program(request: Request, _: Principal = reader,
                 workload_key: str = Query(..., min_length=1, max_length=128),
                 target: str = Query(..., min_length=1, max_length=512)) -> dict[str, Any]:
    """The best error-free program of a workload on a target as people read it: its
    steps, its loop IR and its generated source (made in a sandbox). 404 when nothing is
    known; 422 when the program cannot be lowered (e.g. a target without code
    generation)."""
    canonical = canonical_target(target)
    result = get_state(request).db.best(workload_key, canonical, 1, fallback=False)
    if not result.records:
        raise NotFoundError(f"no error-free record of workload {workload_key} on target "
                            f"{canonical!r}")
    record = result.records[0]
    try:
        text = _program_text(record)
    except ProgramTextError as err:
        raise SpecError(str(err)) from None
    return {"workload_key": workload_key, "target": canonical,
            "record_id": record.measurement_id, "latency_s": record.median_cost,
            "steps": record.steps, **text}


@router.post("/best:batch", response_model=BestBatchAnswer, responses=errors(400, 413, 422))
def best_batch(body: BestBatchRequest, request: Request, _: Principal = reader
               ) -> dict[str, Any]:
    """The best schedules of many workloads on one target; keys with nothing known are
    listed in ``missing``."""
    canonical = canonical_target(body.target)
    fallback = _fallback(body.fallback)
    db = get_state(request).db
    results: dict[str, Any] = {}
    missing = []
    for key in dict.fromkeys(body.workload_keys):
        answer = _answer(db, key, canonical, body.k, fallback)
        if answer is None:
            missing.append(key)
        else:
            results[key] = answer
    return {"target": canonical, "results": results, "missing": missing}
