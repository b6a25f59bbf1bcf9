"""Tuning a whole model: its tasks as one job, and the best the database knows of them.

``tune_model(model, target, trials)`` extracts the model's tasks with the build pipeline
(``model_tasks``: the same keys ``compile`` looks up), and tunes them as one job whose
task weights are their occurrences: the gradient task scheduler spends trials where
weight x latency drops fastest, and the job's progress carries the model's estimated
end-to-end latency (the weighted sum of the tasks' best latencies) after every batch.
Candidates are timed with the caches flushed (``spec.MODEL_MEASURE``), as the kernels run
inside the model, unless the caller gives ``measure``.

``model_best(db, job_id)`` answers, for a model's job, each task's best record on the job's
target (from any job: what ``compile`` would use) and the estimated end-to-end latency.
The estimate covers the tuned kernels only: fused groups that run on numpy (no lowering)
and the executor's own overhead are not in it.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from typing import Any

from db import Database

from .jobs import run_job, submit_job
from .model_compile import load_model
from .model_import import ModelTasks, display_name
from .progress import TuneResult
from .runner import EventCallback
from .spec import JobSpec, ModelInfo, SpecError, TaskSpec
from .tune import open_database


def model_job_tasks(model: Any, target: Any = "cpu", opt_level: int = 3) -> ModelTasks:
    """The tasks of ``model`` (a path, ONNX model or ``ir.Module``), extracted in this
    process (for the user's own files; uploads go through ``import_model_tasks``)."""
    from ir import Module, astext, extract_tasks

    module = load_model(model)
    if isinstance(model, Module):
        name, data = "module", astext(model).encode()
    elif isinstance(model, str | os.PathLike):
        name, data = display_name(os.fspath(model)), Path(model).read_bytes()
    else:
        name, data = "model.onnx", model.SerializeToString()
    tasks = extract_tasks(module, target, opt_level)
    if not tasks:
        raise SpecError("the model has no tunable task (no fused function of it has a "
                        "tensor-expression lowering)")
    return ModelTasks(ModelInfo(name, hashlib.sha256(data).hexdigest()),
                      tuple(TaskSpec(t.workload, float(t.weight)) for t in tasks))


def budget_warning(spec: JobSpec) -> str | None:
    """A warning when the trial budget cannot give every task its first batch (the tasks
    left out keep the default schedule, and the model has no estimate)."""
    tasks = len(spec.merged_tasks())
    if spec.trials >= tasks * spec.batch_size:
        return None
    return (f"{spec.trials} trials cannot give each of the {tasks} tasks a first batch of "
            f"{spec.batch_size}: the tasks of least weight x roofline time stay untuned; "
            f"raise --trials to at least {tasks * spec.batch_size} or lower --batch-size")


def tune_model(model: Any, target: Any = "cpu", trials: int = 64, *,
               db: Database | str | None = None, pool: Any = None,
               on_event: EventCallback | None = None, owner: str | None = None,
               **options: Any) -> TuneResult:
    """Tune every task of ``model`` on ``target`` as one job with ``trials`` measured
    candidates in all (``options``: ``JobSpec`` fields, as for ``tune``)."""
    found = model_job_tasks(model, target)
    spec = JobSpec(found.tasks, target, trials, model=found.info, **options)
    warning = budget_warning(spec)
    if warning:
        warnings.warn(warning, UserWarning, stacklevel=2)
    database = open_database(db)
    job = submit_job(database, spec, owner=owner)
    return run_job(database, job.id, pool, on_event, spec=spec)


def model_best(db: Database, job_id: str) -> dict[str, Any]:
    """Per task of the model job ``job_id``: its best record on the job's target; and the
    model's estimated end-to-end latency (None while a task has no record). ``SpecError``
    when the job is not a model's."""
    job = db.jobs.get(job_id)
    spec = JobSpec.from_json(job.spec)
    if spec.model is None:
        raise SpecError(f"job {job_id} tunes single workloads, not a model")
    target = str(spec.target)
    tasks, missing = [], []
    for task in spec.merged_tasks():
        key, weight = task.workload.key, task.weight
        found = db.best(key, target)
        record = found.records[0] if found.records else None
        latency = record.median_cost if record is not None else None
        if latency is None:
            missing.append(key)
        flops = task.workload.flops
        tasks.append({
            "workload_key": key, "name": task.workload.name, "weight": weight,
            "flops": flops, "best_latency_s": latency,
            "best_gflops": flops / latency / 1e9 if latency and flops else None,
            "weighted_latency_s": weight * latency if latency is not None else None,
            "job_id": record.job_id if record is not None else None,
            "steps": record.steps if record is not None else None})
    estimate = None if missing else sum(t["weighted_latency_s"] for t in tasks)
    return {"job_id": job.id, "status": job.status, "target": target,
            "model": spec.model.to_json(), "estimated_latency_s": estimate,
            "missing": missing, "tasks": tasks,
            "estimate_curve": job.progress.get("estimate_curve", [])}
