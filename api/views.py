"""Turning database objects (jobs, records) into the JSON the API returns."""

from __future__ import annotations

from typing import Any

from db import Job, Record
from schedule import Workload


def _pending_tasks(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Task entries of a job that has no progress yet, from its spec (a job stored before
    its progress held them). A workload this version no longer accepts (e.g. a DAG past
    today's limits) is shown as an invalid task, never an error of the whole view."""
    tasks: dict[str, dict[str, Any]] = {}
    for n, entry in enumerate(spec.get("workloads", [])):
        try:
            workload = Workload.from_json(entry["workload"])
            key = workload.key
        except (ValueError, TypeError, KeyError, RecursionError) as err:
            tasks[f"invalid-{n}"] = {
                "workload_key": "", "name": f"invalid workload {n}", "workload": {},
                "weight": 0.0, "flops": 0.0, "state": "invalid", "trials": 0, "valid": 0,
                "errors": {}, "best_latency_s": None, "best_gflops": None,
                "confirmed": False, "curve": [], "error": str(err)[:500]}
            continue
        if key in tasks:
            tasks[key]["weight"] += entry.get("weight", 1.0)
            continue
        tasks[key] = {
            "workload_key": key, "name": repr(workload), "workload": workload.to_json(),
            "weight": entry.get("weight", 1.0), "flops": workload.flops, "state": "pending",
            "trials": 0, "valid": 0, "errors": {}, "best_latency_s": None, "best_gflops": None,
            "confirmed": False, "curve": [],
        }
    return list(tasks.values())


_TITLES: dict[str, str] = {}
_MAX_TITLES = 4096


def workload_title(key: str, workload: dict[str, Any]) -> str:
    """``Workload.title()`` of a task's workload (remembered by key: a DAG is costly to
    parse, and job lists show the same tasks again and again)."""
    title = _TITLES.get(key)
    if title is None:
        try:
            title = Workload.from_json(workload).title()
        except (ValueError, TypeError, KeyError, RecursionError):
            title = f"invalid workload {key[:8]}"
        if len(_TITLES) >= _MAX_TITLES:
            _TITLES.clear()
        _TITLES[key] = title
    return title


def _with_titles(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**task, "title": workload_title(task["workload_key"], task["workload"])
             if task.get("workload") else task["name"]} for task in tasks]


def job_view(job: Job, *, with_spec: bool = False, with_curves: bool = True) -> dict[str, Any]:
    """A job as ``schemas.JobView``."""
    progress = job.progress
    tasks = _with_titles(progress.get("tasks") or _pending_tasks(job.spec))
    if not with_curves:
        tasks = [{**task, "curve": []} for task in tasks]
    view: dict[str, Any] = {
        "id": job.id, "status": job.status, "owner": job.owner, "error": job.error,
        "target": job.spec.get("target", ""), "trials": progress.get("trials", 0),
        "trial_budget": job.spec.get("trials", 0), "created_at": job.created_at,
        "updated_at": job.updated_at, "started_at": job.started_at,
        "finished_at": job.finished_at, "url": f"/v1/jobs/{job.id}",
        "events_url": f"/v1/jobs/{job.id}/events", "tasks": tasks,
        "model": job.spec.get("model"),
        "estimated_latency_s": progress.get("estimated_latency_s"),
        "estimate_curve": progress.get("estimate_curve", []) if with_curves else [],
        "seconds": progress.get("seconds", {}),
    }
    if with_spec:
        view["spec"] = job.spec
    return view


def best_entry(record: Record) -> dict[str, Any]:
    """A record as ``schemas.BestEntry``."""
    latency = record.median_cost
    flops = record.flops
    return {
        "steps": record.steps, "latency_s": latency,
        "gflops": flops / latency / 1e9 if flops and latency else None,
        "costs": list(record.costs), "measured_at": record.timestamp,
        "device_model": record.device_model, "toolchain": record.toolchain,
        "target": record.target, "job_id": record.job_id,
    }


def trials_view(job: Job, records: list[Record]) -> dict[str, Any]:
    """Every measurement of a job, per task in the job's order, as ``schemas.JobTrials``:
    trial ``n`` is the task's n-th measured candidate; a re-measurement of a best program
    at the end (``reconfirm``) carries the count of trials before it."""
    tasks = _with_titles(job.progress.get("tasks") or _pending_tasks(job.spec))
    trials: dict[str, list[dict[str, Any]]] = {t["workload_key"]: [] for t in tasks}
    counts: dict[str, int] = dict.fromkeys(trials, 0)
    for record in records:
        if record.workload_key not in trials:
            continue
        reconfirm = bool(record.measure.get("origin", {}).get("reconfirm"))
        if not reconfirm:
            counts[record.workload_key] += 1
        trials[record.workload_key].append({
            "n": counts[record.workload_key], "latency_s": record.median_cost,
            "error_kind": record.error_kind, "error": record.error_msg[:200],
            "reconfirm": reconfirm, "disturbed": bool(record.measure.get("disturbed")),
        })
    return {"job_id": job.id, "status": job.status, "tasks": [
        {"workload_key": t["workload_key"], "title": t["title"], "flops": t["flops"],
         "trials": trials[t["workload_key"]]} for t in tasks]}
