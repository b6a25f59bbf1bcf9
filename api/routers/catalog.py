"""What can be tuned and what is known: registered operators with the JSON schemas of
their parameters, and the workloads in the database with their record counts and best."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from db import NotFoundError
from schedule import ops

from ..auth import Principal
from ..deps import get_state, reader
from ..schemas import OpInfo, WorkloadSummary
from ..strict import StrictRoute
from .responses import errors

router = APIRouter(route_class=StrictRoute, prefix="/v1", tags=["catalog"])


def _op_info(name: str) -> dict[str, Any]:
    schema = ops.get_op(name).json_schema()
    return {"name": name, "description": schema.get("description", ""), "params_schema": schema}


@router.get("/ops", response_model=list[OpInfo], responses=errors())
def list_ops(_: Principal = reader) -> list[dict[str, Any]]:
    """Registered operators, each with the JSON schema of its ``params``."""
    return [_op_info(name) for name in ops.list_ops()]


@router.get("/ops/{name}", response_model=OpInfo, responses=errors(404))
def get_op(name: str, _: Principal = reader) -> dict[str, Any]:
    """One registered operator."""
    if name not in ops.list_ops():
        raise NotFoundError(f"unknown operator {name!r}; known operators: "
                            f"{', '.join(ops.list_ops())}")
    return _op_info(name)


@router.get("/workloads", response_model=list[WorkloadSummary], responses=errors(422))
def workloads(request: Request, _: Principal = reader,
              workload_key: str | None = Query(None, max_length=128),
              target: str | None = Query(None, max_length=512),
              limit: int = Query(100, ge=1, le=1000),
              offset: int = Query(0, ge=0, le=10**9)) -> list[dict[str, Any]]:
    """Known (workload, target) pairs: record counts and the best latency and GFLOP/s."""
    summaries = get_state(request).db.summaries(workload_key=workload_key, target=target,
                                                limit=limit, offset=offset)
    return [{"workload_key": s.workload_key, "target": s.target, "records": s.records,
             "ok_records": s.ok_records, "best_latency_s": s.best_cost,
             "best_gflops": s.best_gflops, "first_seen": s.first_seen,
             "last_seen": s.last_seen} for s in summaries]
