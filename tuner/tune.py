"""``tune()``: the one-call Python entry point (DESIGN.md's public interface)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from db import Database
from schedule import Target, Workload
from workers import MeasureSettings

from .jobs import run_job, submit_job
from .progress import TuneResult
from .runner import EventCallback
from .spec import JobSpec, TaskSpec


def open_database(db: Database | str | None) -> Database:
    """A Database object from one, a URL / path, or None (the embedded default)."""
    return db if isinstance(db, Database) else Database(db)


def tune(workloads: Workload | Sequence[Workload], target: Target | str = "cpu",
         trials: int = 64, *,
         db: Database | str | None = None, pool: Any = None,
         weights: Sequence[float] | None = None, on_event: EventCallback | None = None,
         measure: MeasureSettings | None = None, owner: str | None = None,
         **options: Any) -> TuneResult:
    """Tune ``workloads`` on ``target`` with a total budget of ``trials`` measured
    candidates; every measurement goes to ``db`` as it is made, under a new job.

    ``options`` are :class:`JobSpec` fields: ``batch_size``, ``time_budget_s``,
    ``early_stop``, ``scheduler`` (gradient | round-robin), ``policy`` (sketch | random),
    ``cost_model`` (xgb | sklearn | analytic | random), ``reconfirm``, ``seed``.
    ``pool``: a ``workers`` pool (default: a local pool on this machine, closed at the end).
    """
    if isinstance(workloads, Workload):
        workloads = [workloads]
    weights = list(weights) if weights is not None else [1.0] * len(workloads)
    if len(weights) != len(workloads):
        raise ValueError(f"{len(weights)} weights for {len(workloads)} workloads")
    spec = JobSpec(tuple(TaskSpec(w, float(x)) for w, x in zip(workloads, weights, strict=True)),
                   target, trials, **({'measure': measure} if measure else {}), **options)
    database = open_database(db)
    job = submit_job(database, spec, owner=owner)
    return run_job(database, job.id, pool, on_event, spec=spec)
