"""The tuning loop of one job: the task scheduler picks a task, its search policy proposes a
batch, the pool builds and times it, every result is committed to the database as it
arrives, the cost model learns from the batch, and the job's progress is stored.

The database is the source of truth, so a job is resumable at any moment: a restarted run
reads the job's records back (trials done, best so far, programs never to measure again)
and goes on. Cancelling is a status change in the database, seen at the next batch.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import statistics
import time
from collections.abc import Callable
from typing import Any

from db import Database, Job, JobStateError, Record
from search import SearchTask, SketchPolicy, make_policy
from workers import LocalPool, MeasureInput, MeasureResult, Pool

from .progress import TaskProgress, TimeSplit, TuneResult
from .records import measurement_record, past_measurement
from .scheduler import TaskScheduler
from .spec import JobSpec

log = logging.getLogger(__name__)

#: How many of the best earlier records (other jobs, same workload and target) a task
#: learns from when it starts.
WARM_START_RECORDS = 512
#: A running job whose progress is older than this is presumed dead (its process killed).
HEARTBEAT_STALE_S = 60.0
_HEARTBEAT_S = 5.0

Event = dict[str, Any]
EventCallback = Callable[[Event], None]


class JobCancelled(Exception):
    """Raised inside the loop when the job was cancelled (seen at a batch boundary)."""


def _is_reconfirmation(record: Record) -> bool:
    origin = record.measure.get("origin")
    return isinstance(origin, dict) and bool(origin.get("reconfirm"))


class JobRunner:
    """Runs the job ``job_id`` of ``db`` on ``pool`` to its end (or its cancellation)."""

    def __init__(self, db: Database, job_id: str, pool: Pool | None = None,
                 on_event: EventCallback | None = None):
        self.db = db
        self.job_id = job_id
        self.spec = JobSpec.from_json(db.get_job(job_id).spec)
        self._own_pool = pool is None
        self.pool = pool if pool is not None else LocalPool(self.spec.measure)
        self.on_event = on_event
        self.seconds = TimeSplit()
        self.tasks: list[TaskProgress] = []
        self.policies: list[SketchPolicy] = []
        self._beat = 0.0

    # ------------------------------------------------------------------ set-up
    def _prepare(self, previous: Job) -> None:
        self.seconds = TimeSplit.from_json(previous.progress.get("seconds"))
        merged: dict[str, TaskProgress] = {}
        for task in self.spec.tasks:  # identical workloads are one task: weights add up
            key = task.workload.key
            if key in merged:
                merged[key].weight += task.weight
            else:
                merged[key] = TaskProgress(task.workload, key, task.weight, task.workload.flops)
        self.tasks = list(merged.values())
        for n, task in enumerate(self.tasks):
            start = time.perf_counter()
            policy = make_policy(SearchTask(task.workload, self.spec.target), self.spec.policy,
                                 self.spec.cost_model, seed=self.spec.seed + n)
            self.seconds.search += time.perf_counter() - start
            self.policies.append(policy)
            self._warm_start(task, policy)

    def _warm_start(self, task: TaskProgress, policy: SketchPolicy) -> None:
        """Learn from this job's own records (a resumed job) and the best records of other
        jobs for this workload on this exact target."""
        start = time.perf_counter()
        own = list(self.db.iter_records(job_id=self.job_id, workload_key=task.key,
                                        target=self.spec.target))
        others = [r for r in self.db.query_records(
            workload_key=task.key, target=self.spec.target, ok=True, order="cost",
            limit=WARM_START_RECORDS) if r.job_id != self.job_id]
        self.seconds.database += time.perf_counter() - start
        seen: set[str] = set()
        for record in own:
            key = record.canonical("steps")
            if _is_reconfirmation(record) or key in seen:
                continue
            seen.add(key)
            task.observe(record.steps, record.median_cost, record.error_kind)
        if own:
            task.state = "tuning"
            task.curve.append((task.trials, task.best_cost))
        for record in others:
            if record.median_cost is not None and record.median_cost < task.best_cost:
                task.best_cost, task.best_steps = record.median_cost, record.steps
        start = time.perf_counter()
        policy.warm_start([past_measurement(r) for r in own + others])
        self.seconds.search += time.perf_counter() - start

    # ------------------------------------------------------------------ the loop
    def run(self) -> TuneResult:
        job = self.db.get_job(self.job_id)
        if job.status != "queued":
            raise JobStateError(f"job {self.job_id} is {job.status}; only a queued job can run "
                                "(resume it first)")
        self.db.update_job(self.job_id, status="running", progress={
            **job.progress, "heartbeat": time.time(), "runner": this_process()})
        wall = time.perf_counter()
        status, error = "succeeded", ""
        try:
            self._prepare(job)
            self._loop(wall)
            self._reconfirm()
        except JobCancelled:
            status = "cancelled"
        except Exception as err:  # the job fails with the reason; what was measured stays
            log.exception("job %s failed", self.job_id)
            status, error = "failed", f"{type(err).__name__}: {err}"
        finally:
            if self._own_pool:
                self.pool.close()
        self.seconds.total += time.perf_counter() - wall
        for task in self.tasks:
            if task.trials and not task.errors.get("none"):
                task.state = "no_valid_candidate"
            elif task.state in ("tuning", "pending") and task.trials:
                task.state = "done"
        self._finish(status, error)
        result = TuneResult(self.job_id, self.spec.target, status, self.tasks, self.seconds,
                            error)
        self._emit({"type": "done", **result.to_json()})
        return result

    def _trials_done(self) -> int:
        return sum(task.trials for task in self.tasks)

    def _loop(self, wall: float) -> None:
        spec = self.spec
        scheduler = TaskScheduler([t.weight for t in self.tasks], spec.scheduler, seed=spec.seed)
        for n, task in enumerate(self.tasks):
            if task.trials:
                scheduler.record(n, task.trials, task.best_cost)
            if spec.early_stop and task.since_improvement >= spec.early_stop:
                scheduler.retire(n)
        elapsed_before = self.seconds.total
        while self._trials_done() < spec.trials:
            # The time budget is checked once something was measured: a job always has a result.
            if spec.time_budget_s is not None and self._trials_done() and \
                    elapsed_before + time.perf_counter() - wall >= spec.time_budget_s:
                break
            n = scheduler.next_task()
            if n is None:
                break
            task = self.tasks[n]
            size = min(spec.batch_size, spec.trials - self._trials_done())
            start = time.perf_counter()
            candidates = self.policies[n].propose(size)
            self.seconds.search += time.perf_counter() - start
            if not candidates:  # the task's space is exhausted
                scheduler.retire(n)
                continue
            task.state = "tuning"
            results = self._measure(n, candidates)
            start = time.perf_counter()
            self.policies[n].update([c.steps for c in candidates],
                                    [r.costs if r.ok else [] for r in results])
            self.seconds.search += time.perf_counter() - start
            task.curve.append((task.trials, task.best_cost))
            scheduler.record(n, len(candidates), task.best_cost)
            if spec.early_stop and task.since_improvement >= spec.early_stop:
                scheduler.retire(n)
            self._save_progress(force=True)
            self._emit({"type": "batch", "task": task.key, "batch": len(candidates),
                        **self._progress_json()})
            self._check_cancelled()

    def _measure(self, n: int, candidates: list[Any]) -> list[MeasureResult]:
        task, policy = self.tasks[n], self.policies[n]
        inputs = [MeasureInput(task.workload.to_json(), self.spec.target, c.steps)
                  for c in candidates]

        def store(i: int, result: MeasureResult) -> None:
            origin = candidates[i].origin(policy.sketches)
            self._store(task, inputs[i], result, origin)
            task.observe(inputs[i].steps, _cost(result), result.error_kind.value)
            self._save_progress()

        start = time.perf_counter()
        db_before = self.seconds.database
        results = self.pool.measure(inputs, store)
        self.seconds.measure += time.perf_counter() - start - (self.seconds.database - db_before)
        self.seconds.build += sum(r.build_s for r in results)
        self.seconds.run += sum(r.run_s for r in results)
        return results

    def _store(self, task: TaskProgress, inp: MeasureInput, result: MeasureResult,
               origin: dict[str, Any]) -> None:
        record = measurement_record(inp, result, workload_key=task.key, flops=task.flops,
                                    job_id=self.job_id, origin=origin)
        start = time.perf_counter()
        self.db.add_records([record])
        self.seconds.database += time.perf_counter() - start

    # ------------------------------------------------------------------ the end
    def _reconfirm(self) -> None:
        """Measure each task's few best programs again; report the best confirmed one."""
        if self.spec.reconfirm:
            for task in self.tasks:
                self._reconfirm_task(task)
                self._check_cancelled()

    def _reconfirm_task(self, task: TaskProgress) -> None:
        top = self.db.query_records(workload_key=task.key, target=self.spec.target,
                                    ok=True, order="cost", limit=self.spec.reconfirm * 4)
        picks: dict[str, Record] = {}
        for record in top:
            picks.setdefault(record.canonical("steps"), record)
        chosen = list(picks.values())[: self.spec.reconfirm]
        if not chosen:
            return
        inputs = [MeasureInput(task.workload.to_json(), self.spec.target, r.steps)
                  for r in chosen]

        def store(i: int, result: MeasureResult) -> None:
            self._store(task, inputs[i], result, {"reconfirm": True})

        start = time.perf_counter()
        results = self.pool.measure(inputs, store)
        self.seconds.measure += time.perf_counter() - start
        confirmed = [(statistics.median(r.costs), inp.steps)
                     for inp, r in zip(inputs, results, strict=True) if r.ok and r.costs]
        if confirmed:
            task.best_cost, task.best_steps = min(confirmed, key=lambda c: c[0])
            task.confirmed = True
            task.curve.append((task.trials, task.best_cost))

    def _finish(self, status: str, error: str) -> None:
        try:
            self._save_progress(force=True, status=status, error=error)
        except JobStateError:  # cancelled meanwhile: keep that status, store the progress
            self._save_progress(force=True)

    # ------------------------------------------------------------------ helpers
    def _progress_json(self) -> dict[str, Any]:
        return {"trials": self._trials_done(), "trial_budget": self.spec.trials,
                "seconds": self.seconds.to_json(), "heartbeat": time.time(),
                "runner": this_process(),
                "tasks": [task.to_json() for task in self.tasks]}

    def _save_progress(self, force: bool = False, status: str | None = None,
                       error: str | None = None) -> None:
        """Store the progress (at most every few seconds unless ``force``): it is also the
        heartbeat that tells a resuming process whether this one is still alive."""
        now = time.monotonic()
        if not force and now - self._beat < _HEARTBEAT_S:
            return
        self._beat = now
        start = time.perf_counter()
        self.db.update_job(self.job_id, status=status, progress=self._progress_json(),
                           error=error)
        self.seconds.database += time.perf_counter() - start

    def _check_cancelled(self) -> None:
        if self.db.get_job(self.job_id).status == "cancelled":
            raise JobCancelled

    def _emit(self, event: Event) -> None:
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a broken listener must not break the job
                log.exception("progress listener failed")


def _cost(result: MeasureResult) -> float | None:
    return statistics.median(result.costs) if result.ok and result.costs else None


def this_process() -> dict[str, Any]:
    """Who runs a job, stored with its progress: host, process id and PID namespace."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pidns": _pid_namespace()}


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def runner_is_gone(runner: Any) -> bool:
    """Whether the process that ran a job is known to have exited: it ran on this host, in
    this PID namespace, and its process id no longer exists. A runner elsewhere (or one
    that cannot be checked) is judged by its heartbeat alone."""
    here = this_process()
    if not isinstance(runner, dict) or any(runner.get(k) != here[k] for k in ("host", "pidns")):
        return False
    pid = runner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive but not ours to signal, or unknowable
        return False
    return False


def is_stale(job: Job, now: float | None = None) -> bool:
    """Whether a ``running`` job has stopped reporting: its process on this machine has
    exited, or its heartbeat is older than ``HEARTBEAT_STALE_S`` (a process elsewhere)."""
    if runner_is_gone(job.progress.get("runner")):
        return True
    beat = job.progress.get("heartbeat", job.updated_at)
    if not isinstance(beat, int | float) or math.isnan(beat):
        beat = job.updated_at
    return (now or time.time()) - max(beat, job.updated_at) > HEARTBEAT_STALE_S
