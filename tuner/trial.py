"""A trial: one candidate of one task measured on the job's target — the typed value that
travels from the search policy through the pool to the database.

``Trial.record`` is where a measurement becomes a database record (JSON from here on),
and :func:`past_measurement` where a record becomes what a policy learns from. A record
carries, besides the measurement and its provenance, the origin of its program
(``measure.origin``: how the search made it), so a later job can rebuild the program
inside its own search population (warm start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from db import Record
from schedule import Steps, Target, Workload
from search import Candidate, PastMeasurement
from workers import MeasureInput, MeasureResult

#: How long an error message a record keeps.
MAX_ERROR_CHARS = 4000


@dataclass(frozen=True)
class Trial:
    """Candidate ``candidate`` of task number ``task`` (its ``workload``) on ``target``;
    ``reconfirm`` marks a re-measurement of a known program at the end of a job; ``looks``:
    the repeats of each measurement of it when it was measured more than once before its
    record was stored (``second_look``)."""

    task: int
    workload: Workload
    target: Target
    candidate: Candidate
    reconfirm: bool = False
    looks: tuple[tuple[float, ...], ...] = ()

    @property
    def input(self) -> MeasureInput:
        return MeasureInput(self.workload, self.target, self.candidate.steps)

    @property
    def origin(self) -> dict[str, Any] | None:
        return {"reconfirm": True} if self.reconfirm else self.candidate.origin

    def record(self, result: MeasureResult, job_id: str | None) -> Record:
        """The database record of this trial's measurement."""
        prov = result.provenance
        measure: dict[str, Any] = dict(prov.settings)
        if prov.node:  # the Ray node that timed it
            measure["node"] = prov.node
        if self.origin is not None:
            measure["origin"] = self.origin
        if self.looks:
            measure["looks"] = [list(look) for look in self.looks]
        if result.ok:
            measure["noise"] = result.noise
            if result.disturbed:
                measure["disturbed"] = True
            if result.unpreempted:  # short repeats of a busy machine, not the settings'
                measure["unpreempted"] = result.unpreempted
        return Record(
            workload_key=self.workload.key,
            workload=self.workload.to_json(),
            target=str(self.target),
            steps=self.candidate.steps.to_json(),
            costs=list(result.costs) if result.ok else [],
            error_kind=result.error_kind.value,
            error_msg=result.error_msg[:MAX_ERROR_CHARS],
            timestamp=result.timestamp,
            device_model=prov.device_model,
            toolchain=prov.compiler,
            flags=" ".join(prov.flags),
            host=prov.host,
            build_s=result.build_s,
            run_s=result.run_s,
            flops=self.workload.flops,
            measure=measure,
            job_id=job_id,
        )


def past_measurement(record: Record, steps: Steps) -> PastMeasurement:
    """What a search policy learns from a stored record (``steps``: its steps, parsed)."""
    origin = record.measure.get("origin") if isinstance(record.measure, dict) else None
    return PastMeasurement(steps, record.median_cost if record.ok else None,
                           origin if isinstance(origin, dict) else None)


def is_disturbed(record: Record) -> bool:
    """The record's figure was taken while other work slowed the machine (its device said
    so even after re-measuring): too slow, and not to be learnt from."""
    return isinstance(record.measure, dict) and record.measure.get("disturbed") is True


def is_reconfirmation(record: Record) -> bool:
    origin = record.measure.get("origin")
    return isinstance(origin, dict) and bool(origin.get("reconfirm"))
