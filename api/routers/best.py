"""Best-schedule queries: one workload, or a batch of workloads for a compiler building a
whole model. Targets are canonicalised (``cpu`` means this machine's CPU)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from db import MATCH_LEVELS, Database, NotFoundError
from schedule import Target
from tuner import SpecError

from ..auth import Principal
from ..deps import get_state, reader
from ..schemas import BestAnswer, BestBatchAnswer, BestBatchRequest
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
