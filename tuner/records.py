"""Turning measurements into database records, and records back into what a search policy
learns from (``PastMeasurement``).

A record carries, besides the measurement and its provenance, the origin of its program
(``measure.origin``: the sketch name and decision values the search made it from), so a
later job can rebuild the program inside its own search population (warm start).
"""

from __future__ import annotations

from typing import Any

from db import Record
from search import PastMeasurement
from workers import MeasureInput, MeasureResult


def measurement_record(inp: MeasureInput, result: MeasureResult, *, workload_key: str,
                       flops: float | None, job_id: str | None,
                       origin: dict[str, Any] | None) -> Record:
    """The database record of one measured candidate."""
    prov = result.provenance
    measure: dict[str, Any] = dict(prov.settings)
    if prov.node:  # the Ray node that timed it
        measure["node"] = prov.node
    if origin is not None:
        measure["origin"] = origin
    return Record(
        workload_key=workload_key,
        workload=inp.workload,
        target=inp.target,
        steps=inp.steps,
        costs=list(result.costs) if result.ok else [],
        error_kind=result.error_kind.value,
        error_msg=result.error_msg[:4000],
        timestamp=result.timestamp,
        device_model=prov.device_model,
        toolchain=prov.compiler,
        flags=" ".join(prov.flags),
        host=prov.host,
        build_s=result.build_s,
        run_s=result.run_s,
        flops=flops,
        measure=measure,
        job_id=job_id,
    )


def past_measurement(record: Record) -> PastMeasurement:
    """What a search policy learns from a stored record."""
    origin = record.measure.get("origin") if isinstance(record.measure, dict) else None
    return PastMeasurement(record.steps, list(record.costs) if record.ok else [],
                           origin if isinstance(origin, dict) else None)
