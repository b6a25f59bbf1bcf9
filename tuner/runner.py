"""The tuning loop of one job: the task scheduler picks a task, its search policy proposes a
batch, the pool builds and times it, and each measured trial goes through the job's measure
callbacks (records committed as they arrive, the policy notified, progress stored). A
result that would make its program the task's best is measured again first
(``second_look``): on a shared machine the fastest single figure is mostly the luckiest.

The tasks of a job share what they learn (``JobSpec.share_across_tasks``): one cost model
trained on all their measurements (labels normalised per task), and before each round a
task's search is given the other tasks' best programs to adapt. A job
whose tasks have no records to learn from yet starts from the newest cost model a job of
the same policy and cost model left for this target (``db.snapshots``); each job leaves the
model of its most-measured task there when it ends.

The database is the source of truth, so a job is resumable at any moment: a restarted run
reads the job's records back (trials done, best so far, programs never to measure again)
and goes on. Cancelling is a status change in the database, seen at the next batch.

A runner claims its job atomically (``db.jobs.claim``): of two processes (two servers on
one database) only one runs a job. While it runs, a heartbeat thread refreshes the claim
every few seconds, whatever the job is doing (waiting for a shared pool, building, training
a model), so a live runner is never taken for dead; one that lost its job anyway (its
process was frozen past the stale limit) stops before its next record. A job whose runner
died ``MAX_RUNNER_DEATHS`` times in a row without measuring anything in between is marked
failed instead of being taken over again: something in it kills its runner. (Heartbeats
compare times of different hosts: their clocks must agree within the stale limit.)
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cost_model import CostModel
from db import Database, DatabaseError, Job, JobStateError, JobTakenOver, Outranking, Record
from schedule import Steps
from search import Candidate, SearchPolicy, SearchTask, make_policy, make_task_model
from workers import (
    LocalPool,
    MeasureInput,
    MeasureInputError,
    MeasureResult,
    Pool,
    RayAccessError,
    simulated_facts,
)

from . import side_by_side
from .callbacks import MeasureCallback, default_callbacks
from .progress import TaskProgress, TimeSplit, TuneResult, estimated_latency
from .scheduler import TaskScheduler, roofline_seconds
from .second_look import agree, settle, tolerance, worth_a_look
from .spec import JobSpec
from .trial import Trial, is_disturbed, is_reconfirmation, past_measurement

log = logging.getLogger(__name__)

#: How many of the best earlier records (other jobs, same workload and target) a task
#: learns from when it starts.
WARM_START_RECORDS = 512
#: How many other tasks' best programs a task's search is given before each round (a
#: job may have hundreds of tasks; each suggestion is rebuilt in the task's space).
MAX_SUGGESTIONS = 16
#: A running job whose progress is older than this is presumed dead (its process killed).
HEARTBEAT_STALE_S = 60.0
_HEARTBEAT_S = 5.0
#: Consecutive runner deaths without progress after which a job is failed, not taken over.
MAX_RUNNER_DEATHS = 2

Event = dict[str, Any]
EventCallback = Callable[[Event], None]


class JobCancelled(Exception):
    """Raised inside the loop when the job was cancelled (seen at a batch boundary)."""


class JobRunner:
    """Runs the job ``job_id`` of ``db`` on ``pool`` to its end (or its cancellation).

    ``spec``: the job's specification when the caller holds it already (it is read from
    the database otherwise); ``callbacks``: what happens to measured trials (default:
    :func:`~tuner.callbacks.default_callbacks`).
    """

    def __init__(self, db: Database, job_id: str, pool: Pool | None = None,
                 on_event: EventCallback | None = None, *, spec: JobSpec | None = None,
                 callbacks: Sequence[MeasureCallback] | None = None):
        self.db = db
        self.job_id = job_id
        self.spec = spec if spec is not None else JobSpec.from_json(db.jobs.get(job_id).spec)
        self._own_pool = pool is None
        self.pool = pool if pool is not None else LocalPool(self.spec.measure)
        self.on_event = on_event
        self.callbacks = list(callbacks) if callbacks is not None else default_callbacks()
        self.seconds = TimeSplit()
        self.tasks: list[TaskProgress] = []
        self.policies: list[SearchPolicy | None] = []  # None: the task's space failed
        self.shared_model: CostModel | None = None  # the tasks' one model (share_across_tasks)
        self.runner_id = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:12]}"[-255:]
        self._runner_deaths = 0
        self._trials_at_claim = 0
        self._previous_runner: Any = None
        self._lost = threading.Event()  # set when another process claimed the job
        self._beat = 0.0
        self.estimate_curve: list[list[float]] = []  # [trials, estimated latency] per batch

    # ------------------------------------------------------------------ set-up
    def _prepare(self, previous: Job) -> None:
        self.seconds = TimeSplit.from_json(previous.progress.get("seconds"))
        self.estimate_curve = _curve(previous.progress.get("estimate_curve"))
        self.tasks = [TaskProgress(t.workload, t.workload.key, t.weight, t.workload.flops)
                      for t in self.spec.merged_tasks()]  # identical workloads are one task
        measured = {t.get("workload_key"): t.get("baselines")
                    for t in previous.progress.get("tasks", []) if isinstance(t, dict)}
        for task in self.tasks:
            if isinstance(measured.get(task.key), dict):
                task.baselines = dict(measured[task.key])
        sharing = (self.spec.share_across_tasks and len(self.tasks) > 1
                   and self.spec.cost_model != "random")
        for n, task in enumerate(self.tasks):
            start = time.perf_counter()
            try:
                search_task = SearchTask(task.workload, self.spec.target)
                if sharing and self.shared_model is None:
                    self.shared_model = make_task_model(search_task, self.spec.cost_model)
                policy = make_policy(search_task, self.spec.policy, self.spec.cost_model,
                                     seed=self.spec.seed + n, shared_model=self.shared_model)
            except Exception as err:  # one task's space: the job goes on with the others
                log.exception("job %s: no search space for workload %s", self.job_id, task.key)
                task.state = "rejected"
                task.error = f"its search space cannot be built: {type(err).__name__}: {err}"
                policy = None
            self.seconds.search += time.perf_counter() - start
            self.policies.append(policy)
            if policy is not None:
                self._warm_start(task, policy)

    def _measure_baselines(self) -> None:
        """Measure what the tasks are compared with (``spec.baselines``) on the job's
        devices, once per job (a resumed job keeps its figures); stored in the progress,
        not as records. The peak is measured once: a rate of the target, not of a task."""
        wanted = [(n, lib) for n, task in enumerate(self.tasks) for lib in self.spec.baselines
                  if lib not in task.baselines and (lib == "peak" or task.workload.op_name)]
        peak = next(((n, lib) for n, lib in wanted if lib == "peak" and self.tasks[n].flops),
                    None)
        asked = [(n, lib) for n, lib in wanted if lib != "peak"] + ([peak] if peak else [])
        if not asked:
            return
        start = time.perf_counter()
        try:
            results = self.pool.measure([MeasureInput(self.tasks[n].workload, self.spec.target,
                                                      [], lib) for n, lib in asked])
        except MeasureInputError as err:  # the pool's devices measure no such baseline
            log.info("job %s: no baselines: %s", self.job_id, err)
            return
        finally:
            self.seconds.measure += time.perf_counter() - start
        for (n, lib), result in zip(asked, results, strict=True):
            entry = {"latency_s": result.median_cost, "error": result.error_msg[:300]}
            if lib != "peak":
                self.tasks[n].baselines[lib] = entry
                continue
            rate = self.tasks[n].flops / result.median_cost if result.median_cost else None
            for task in self.tasks:
                if "peak" not in task.baselines:
                    task.baselines["peak"] = {
                        "latency_s": task.flops / rate if rate and task.flops else None,
                        "error": entry["error"] or ("" if task.flops else "no FLOPs counted")}
        self.save_progress(force=True)

    def _warm_start(self, task: TaskProgress, policy: SearchPolicy) -> None:
        """Learn from this job's own records (a resumed job) and the best records of other
        jobs for this workload on this exact target."""
        start = time.perf_counter()
        target = str(self.spec.target)
        own = _schedulable(self.db.iter_records(job_id=self.job_id, workload_key=task.key,
                                                target=target))
        others = [(r, steps) for r, steps in _schedulable(self.db.query_records(
            workload_key=task.key, target=target, ok=True, order="cost",
            limit=WARM_START_RECORDS)) if r.job_id != self.job_id]
        self.seconds.database += time.perf_counter() - start
        seen: set[str] = set()
        for record, steps in own:
            if is_reconfirmation(record) or steps.key in seen:
                continue
            seen.add(steps.key)
            task.observe(steps, record.median_cost, record.error_kind,
                         record.measure.get("noise", 1.0), is_disturbed(record),
                         simulated_facts(record.measure),
                         bool(record.measure.get("unpreempted")))
        if own:
            task.state = "tuning"
            task.curve.append((task.trials, task.best_cost))
        outranked = self.db.outranked(r.measurement_id for r, _ in others)
        for record, steps in others:
            if record.measurement_id in outranked:  # slower side by side: not the best
                continue
            if record.median_cost is not None and record.median_cost < task.best_cost:
                task.best_cost, task.best_steps = record.median_cost, steps
                task.best_facts = simulated_facts(record.measure) or {}
        start = time.perf_counter()
        if own or others:
            policy.warm_start([past_measurement(r, steps) for r, steps in own + others
                               if not is_disturbed(r)])
            disturbed = [(r, steps) for r, steps in own + others if is_disturbed(r)]
            policy.notify_disturbed([Candidate(steps) for _, steps in disturbed],
                                    [r.median_cost for r, _ in disturbed])
        else:
            self._start_from_snapshot(task, policy)
        self.seconds.search += time.perf_counter() - start

    @property
    def _snapshot_name(self) -> str:
        return f"{self.spec.policy}/{self.spec.cost_model}"

    def _start_from_snapshot(self, task: TaskProgress, policy: SearchPolicy) -> None:
        """Guide a task with no records yet by the cost model another job left (unless the
        job's shared model already learned from other tasks' records)."""
        if self.shared_model is not None and self.shared_model.num_samples:
            return
        snapshot = self.db.snapshots.latest(self._snapshot_name, str(self.spec.target))
        if snapshot is None:
            return
        try:
            policy.import_model(snapshot.data)
        except ValueError as err:  # made by another version, say: start from scratch
            log.warning("job %s: cost-model snapshot %d not used: %s", self.job_id,
                        snapshot.id, err)
            return
        log.info("job %s: task %s starts from cost-model snapshot %d (of workload %s)",
                 self.job_id, task.key, snapshot.id, snapshot.meta.get("workload_key"))

    def _save_snapshot(self) -> None:
        """Leave the model of the most-measured task for later jobs on this target (best
        effort: a job's measurements matter more than its snapshot)."""
        ranked = sorted(((t, p) for t, p in zip(self.tasks, self.policies, strict=True)
                         if p is not None), key=lambda pair: -pair[0].trials)
        if not ranked:
            return
        task, policy = ranked[0]
        try:
            data = policy.export_model()
            if data is not None:
                self.db.snapshots.save(self._snapshot_name, str(self.spec.target), data,
                                       {"workload_key": task.key, "job_id": self.job_id,
                                        "trials": task.trials})
        except (DatabaseError, ValueError) as err:
            log.warning("job %s: no cost-model snapshot left: %s", self.job_id, err)

    # ------------------------------------------------------------------ the loop
    def _claim(self, take_over: Job | None) -> Job:
        """Make this runner the job's runner: a queued job, or (``take_over``) a running
        one exactly as it was seen, whose runner is presumed dead."""
        if take_over is None:
            job = self.db.jobs.get(self.job_id)
            if job.status != "queued":
                raise JobStateError(f"job {self.job_id} is {job.status}; only a queued job "
                                    "can run (resume it first)")
        else:
            job = take_over
        progress = job.progress
        deaths = 0
        if take_over is not None:  # its runner died: in a row, unless it measured since
            stalled = progress.get("trials", 0) <= progress.get("trials_at_claim", 0)
            deaths = (int(progress.get("runner_deaths", 0)) if stalled else 0) + 1
        self._runner_deaths = deaths
        self._trials_at_claim = progress.get("trials", 0)
        self._previous_runner = progress.get("runner")
        return self.db.jobs.claim(self.job_id, self.runner_id, expect=take_over, progress={
            **progress, "heartbeat": time.time(), "runner": this_process(),
            "runner_deaths": deaths, "trials_at_claim": self._trials_at_claim})

    def _keep_claim(self, stop: threading.Event) -> None:
        """The heartbeat thread: refresh the claim until ``stop``; note a lost job."""
        while not stop.wait(_HEARTBEAT_S):
            if time.monotonic() - self._beat < _HEARTBEAT_S:
                continue  # a progress write refreshed the claim already
            try:
                self.db.jobs.update(self.job_id, runner=self.runner_id)
            except JobTakenOver:
                self._lost.set()
                return
            except DatabaseError as err:  # the loop meets it too; keep trying meanwhile
                log.warning("job %s: heartbeat not stored: %s", self.job_id, err)

    def check_still_mine(self) -> None:
        """Raise :class:`db.JobTakenOver` if another process claimed this job."""
        if self._lost.is_set():
            raise JobTakenOver(f"job {self.job_id} was claimed by another process while "
                               f"{self.runner_id} ran it")

    def run(self, take_over: Job | None = None, *, forced: bool = False) -> TuneResult:
        """Run the queued job, or take over ``take_over`` (the job, running, as last seen)
        from a runner presumed dead; ``forced``: the user asked for it (no death limit)."""
        try:
            job = self._claim(take_over)
            if self._runner_deaths >= MAX_RUNNER_DEATHS and not forced:
                return self._give_up()
        except BaseException:
            if self._own_pool:
                self.pool.close()
            raise
        wall = time.perf_counter()
        status, error = "succeeded", ""
        stop_beating = threading.Event()
        heartbeat = threading.Thread(target=self._keep_claim, args=(stop_beating,),
                                     name=f"tensortune-heartbeat-{self.job_id[:8]}", daemon=True)
        heartbeat.start()
        try:
            self._prepare(job)
            self._measure_baselines()
            self._loop(wall)
            self._save_snapshot()
            self._reconfirm()
        except JobCancelled:
            status = "cancelled"
        except JobTakenOver as err:  # another process runs it now: leave everything to it
            log.warning("job %s: %s", self.job_id, err)
            status, error = "taken_over", str(err)
        except DatabaseError as err:  # e.g. a full disk: what was committed stays
            log.error("job %s: the database failed: %s", self.job_id, err)
            status, error = "failed", f"storage error: {err}"
        except RayAccessError as err:  # the cluster went away: resumable once it is back
            log.error("job %s: %s", self.job_id, err)
            status, error = "failed", f"measurement cluster lost: {err}"
        except Exception as err:  # the job fails with the reason; what was measured stays
            log.exception("job %s failed", self.job_id)
            status, error = "failed", f"{type(err).__name__}: {err}"
        finally:
            stop_beating.set()
            heartbeat.join()
            if self._own_pool:
                self.pool.close()
        self.seconds.total += time.perf_counter() - wall
        for task in self.tasks:
            if task.state == "rejected":
                continue
            if task.trials and not task.errors.get("none"):
                task.state = "no_valid_candidate"
            elif task.state in ("tuning", "pending") and task.trials:
                task.state = "done"
        if status == "succeeded" and self.tasks and all(t.state == "rejected"
                                                         for t in self.tasks):
            status, error = "failed", f"every workload was rejected: {self.tasks[0].error}"
        if status != "taken_over":
            error = self._finish(status, error)
        result = TuneResult(self.job_id, str(self.spec.target), status, self.tasks,
                            self.seconds, error)
        self.emit({"type": "done", **result.to_json()})
        return result

    def _give_up(self) -> TuneResult:
        error = (f"its runner process died {self._runner_deaths} times while running it "
                 f"(last: {self._previous_runner or 'unknown'}); not resumed again: resume "
                 "it by hand (`tensortune jobs resume`) to try once more")
        log.error("job %s: %s", self.job_id, error)
        self.db.jobs.update(self.job_id, status="failed", error=error, runner=self.runner_id)
        if self._own_pool:
            self.pool.close()
        result = TuneResult(self.job_id, str(self.spec.target), "failed", [], TimeSplit(), error)
        self.emit({"type": "done", **result.to_json()})
        return result

    def _trials_done(self) -> int:
        return sum(task.trials for task in self.tasks)

    def _loop(self, wall: float) -> None:
        spec = self.spec
        scheduler = TaskScheduler([t.weight for t in self.tasks], spec.scheduler, seed=spec.seed,
                                  costs=[roofline_seconds(t.workload) for t in self.tasks])
        for n, task in enumerate(self.tasks):
            if task.trials:
                scheduler.record(n, task.trials, task.best_cost)
            if self.policies[n] is None or \
                    (spec.early_stop and task.since_improvement >= spec.early_stop):
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
            for other, gain in zip(self.tasks, scheduler.expected_gains(), strict=True):
                other.expected_gain_s = gain
            task = self.tasks[n]
            task.chosen_because = scheduler.reason
            size = min(spec.batch_size, spec.trials - self._trials_done())
            start = time.perf_counter()
            if spec.share_across_tasks:
                self.policies[n].suggest(self._suggestions(n))
            candidates = self.policies[n].propose(size)
            self.seconds.search += time.perf_counter() - start
            if not candidates:  # the task's space is exhausted
                scheduler.retire(n)
                continue
            task.state = "tuning"
            results = self.measure([Trial(n, task.workload, spec.target, c)
                                    for c in candidates])
            scheduler.record(n, len(candidates), task.best_cost)
            estimate = estimated_latency(self.tasks)
            if estimate is not None:
                self.estimate_curve.append([self._trials_done(), estimate])
            rejected = next((r for r in results if r.workload_error), None)
            if rejected is not None:  # no candidate of this workload can ever pass
                task.state, task.error = "rejected", rejected.error_msg
                log.warning("job %s: workload %s rejected: %s", self.job_id, task.key,
                            rejected.error_msg)
                scheduler.retire(n)
            elif spec.early_stop and task.since_improvement >= spec.early_stop:
                scheduler.retire(n)
            self._check_cancelled()

    def _suggestions(self, n: int) -> list[Candidate]:
        """The best program of each of the (at most ``MAX_SUGGESTIONS``) other tasks most
        like task ``n``: those whose workload names share the longest prefix with its own
        (``fused_conv2d_nchwc_...``), the most measured first."""
        name = self.tasks[n].workload.name
        others = sorted((m for m, policy in enumerate(self.policies)
                         if m != n and policy is not None),
                        key=lambda m: (-_common_prefix(name, self.tasks[m].workload.name),
                                       -self.tasks[m].trials))
        return [c for m in others[:MAX_SUGGESTIONS]
                for c in self.policies[m].best_candidates(1)]

    def measure(self, trials: Sequence[Trial]) -> list[MeasureResult]:
        """Measure one batch of trials of one task; every result goes through the
        callbacks as it arrives, then the batch does. A result that would make its
        program the task's best is held back until the batch is measured; the fastest of
        those is then measured again (``second_look``) and counts as its looks settle."""
        trials = list(trials)
        held: dict[int, MeasureResult] = {}

        def report(i: int, result: MeasureResult) -> None:
            for callback in self.callbacks:
                callback.on_result(self, trials[i], result)

        def on_result(i: int, result: MeasureResult) -> None:
            if self._would_lead(trials[i], result, held.values()):
                held[i] = result
            else:
                report(i, result)

        start = time.perf_counter()
        db_before = self.seconds.database
        results = self.pool.measure([t.input for t in trials], on_result)
        if held:
            leader = min(held, key=lambda i: held[i].median_cost or 0.0)
            try:
                trials[leader], results[leader] = self._look_again(trials[leader], held[leader])
                held[leader] = results[leader]
            finally:  # a look that failed (the cluster lost) loses no first figure
                for i in sorted(held):
                    report(i, held[i])
        self.seconds.measure += time.perf_counter() - start - (self.seconds.database - db_before)
        self.seconds.build += sum(r.build_s for r in results)
        self.seconds.run += sum(r.run_s for r in results)
        for callback in self.callbacks:
            callback.on_batch(self, trials, results)
        return results

    def _would_lead(self, trial: Trial, result: MeasureResult,
                    held: Iterable[MeasureResult]) -> bool:
        """Whether ``result`` makes its program the fastest of its task so far (counting
        the results held back in this batch) with a figure another look can check."""
        if trial.reconfirm or not worth_a_look(result):
            return False
        best = min([self.tasks[trial.task].best_cost, *(r.median_cost or math.inf for r in held)])
        return (result.median_cost or math.inf) < best

    def _look_again(self, trial: Trial, first: MeasureResult) -> tuple[Trial, MeasureResult]:
        """Measure ``trial`` once more, and a third time if the two looks disagree; the
        trial (carrying every look's repeats) and the result its record keeps. A look that
        failed or was disturbed says nothing about the program and ends the looking."""
        looks = [first]
        while len(looks) < 3 and (len(looks) == 1 or not agree(looks[0], looks[1])):
            (again,) = self.pool.measure([trial.input])
            if not worth_a_look(again):
                break
            looks.append(again)
        if len(looks) == 1:
            return trial, first
        return (dataclasses.replace(trial, looks=tuple(tuple(r.costs) for r in looks)),
                settle(looks))

    # ------------------------------------------------------------------ the end
    def _reconfirm(self) -> None:
        """Measure each task's few best programs again; report the best confirmed one."""
        if self.spec.reconfirm:
            for n in range(len(self.tasks)):
                self._reconfirm_task(n)
                self._check_cancelled()

    def _reconfirm_task(self, n: int) -> None:
        """Measure the task's few best programs again, side by side in interleaved rounds
        (``side_by_side``), and rank the task's programs by that: the records of programs
        found slower than the winner are marked outranked in the database where they lead
        its best query, and the program the best query answers with then becomes the
        task's best. Its side-by-side figure is the confirmed best only if it agrees with
        that answer's record within the noise the device measured for either
        (``second_look.tolerance``); otherwise the record's figure stands, unconfirmed,
        and the summary says why."""
        task = self.tasks[n]
        target = str(self.spec.target)
        leaders = _leading_programs(self.db.best(task.key, target,
                                                 k=self.spec.reconfirm * 4).records,
                                    self.spec.reconfirm)
        if not leaders:
            return
        trials = [Trial(n, task.workload, self.spec.target, Candidate(steps), reconfirm=True)
                  for _, steps in leaders]
        rounds = [self.measure(trials)]
        if len(leaders) > 1 and not any(r.provenance.settings.get("simulated")
                                        for r in rounds[0]):
            more = self.measure(trials * (side_by_side.ROUNDS - 1))
            rounds += [more[i:i + len(trials)] for i in range(0, len(more), len(trials))]
        comparison = side_by_side.compare(rounds)
        if comparison is None:
            task.unconfirmed = _not_measured_again([results[0] for results in rounds])
            return
        device_model = next(r.provenance.device_model for results in rounds for r in results
                            if r.ok)
        record, steps = self._rerank(task, leaders, comparison, device_model)
        position = next(p for p, (_, s) in enumerate(leaders) if s.key == steps.key)
        task.best_steps, task.best_cost, task.confirmed = steps, record.median_cost, False
        figures = comparison.figures[position]
        if not figures:
            task.unconfirmed = _not_measured_again([results[position] for results in rounds])
            return
        before, cost = record.median_cost, statistics.median(figures)
        allowed = tolerance(comparison.noise[position], float(record.measure.get("noise", 1.0)))
        if abs(cost / before - 1.0) > allowed:
            task.unconfirmed = (f"re-measured at {cost * 1e3:.4g} ms, {cost / before:.2f}x its "
                                f"record's {before * 1e3:.4g} ms: more than the "
                                f"{allowed:.0%} the noise checks allow, so the machine's "
                                "speed changed between the two")
            return
        task.best_cost, task.confirmed = cost, True
        task.unconfirmed = ""
        task.curve.append((task.trials, task.best_cost))

    def _rerank(self, task: TaskProgress, leaders: list[tuple[Record, Steps]],
                comparison: side_by_side.Comparison, device_model: str
                ) -> tuple[Record, Steps]:
        """Outrank the records of the programs ``comparison`` found slower than its winner
        (measured on ``device_model``) wherever they lead the compared programs' records
        in the best query, the re-measurements just stored included; returns the first of
        those records afterwards, and its steps. Says in the task's summary what
        changed."""
        slower = {leaders[p][1].key: ratio for p, ratio in comparison.outranked()}
        by = leaders[comparison.winner][0]
        # the compared programs' records only: another job on this database may have
        # stored records of other programs meanwhile, which this comparison says nothing of
        compared = {steps.key for _, steps in leaders}
        ranked = [(r, s) for r, s in _schedulable(self.db.best(
            task.key, str(self.spec.target),
            k=self.spec.reconfirm * (4 + side_by_side.ROUNDS)).records) if s.key in compared]
        losers: list[tuple[Record, float]] = []
        lost: set[str] = set()  # the steps keys of the losers' programs
        for record, steps in ranked:
            if steps.key not in slower or record.device_model != device_model:
                break
            losers.append((record, slower[steps.key]))
            lost.add(steps.key)
        task.reranked = ""
        if losers:
            self.db.outrank(Outranking(loser.measurement_id, by.measurement_id, ratio,
                                       self.job_id) for loser, ratio in losers)
            task.reranked = (f"{len(lost)} program(s) whose records were faster took up to "
                             f"{max(slower[key] for key in lost):.2f}x the time of the "
                             "fastest when measured side by side with it; the best query "
                             "now passes over their records")
        return ranked[len(losers)] if len(losers) < len(ranked) else leaders[comparison.winner]

    def _finish(self, status: str, error: str) -> str:
        """Store the final status and progress; returns the error to report (with the
        storage error, if the database cannot be written)."""
        try:
            try:
                self.save_progress(force=True, status=status, error=error)
            except JobTakenOver:
                return error
            except JobStateError:  # cancelled meanwhile: keep that status, store the progress
                self.save_progress(force=True)
        except DatabaseError as err:
            log.error("job %s: its final status could not be stored: %s", self.job_id, err)
            storage = f"storage error: {err}"
            return error if storage in error else "; ".join(filter(None, [error, storage]))
        return error

    # ------------------------------------------------------------------ for the callbacks
    def progress_json(self) -> dict[str, Any]:
        return {"trials": self._trials_done(), "trial_budget": self.spec.trials,
                "seconds": self.seconds.to_json(), "heartbeat": time.time(),
                "runner": this_process(), "runner_deaths": self._runner_deaths,
                "trials_at_claim": self._trials_at_claim,
                "estimated_latency_s": estimated_latency(self.tasks),
                "estimate_curve": self.estimate_curve,
                "tasks": [task.to_json() for task in self.tasks]}

    def save_progress(self, force: bool = False, status: str | None = None,
                      error: str | None = None) -> None:
        """Store the progress (at most every few seconds unless ``force``): it is also the
        heartbeat that tells a resuming process whether this one is still alive."""
        now = time.monotonic()
        if not force and now - self._beat < _HEARTBEAT_S:
            return
        self._beat = now
        start = time.perf_counter()
        self.db.jobs.update(self.job_id, status=status, progress=self.progress_json(),
                            error=error, runner=self.runner_id)
        self.seconds.database += time.perf_counter() - start

    def _check_cancelled(self) -> None:
        if self.db.jobs.get(self.job_id).status == "cancelled":
            raise JobCancelled

    def emit(self, event: Event) -> None:
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a broken listener must not break the job
                log.exception("progress listener failed")


def _curve(stored: Any) -> list[list[float]]:
    """A stored ``[[trials, latency], ...]`` curve, keeping only well-formed points."""
    if not isinstance(stored, list):
        return []
    return [[int(p[0]), float(p[1])] for p in stored
            if isinstance(p, list) and len(p) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)]


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def _leading_programs(ranked: Iterable[Record], count: int) -> list[tuple[Record, Steps]]:
    """The first ``count`` programs of a best-query answer, each with its best record."""
    leaders: dict[str, tuple[Record, Steps]] = {}
    for record, steps in _schedulable(ranked):
        leaders.setdefault(steps.key, (record, steps))
    return list(leaders.values())[:count]


def _not_measured_again(results: list[MeasureResult]) -> str:
    """Why a best program's re-measurements (``results``) confirm nothing."""
    disturbed = [r.noise for r in results if r.disturbed]
    if disturbed:
        return ("the re-measurements were disturbed by other work on the machine "
                f"(slowdown up to {max(disturbed):.2f}x)")
    return f"its re-measurement failed: {results[0].error_kind.value}: {results[0].error_msg}"


def _schedulable(records: Iterable[Record]) -> list[tuple[Record, Steps]]:
    """The records whose steps are a schedule, with their steps parsed (an imported record
    may hold steps no schedule has, e.g. JSON objects: those are skipped with a warning)."""
    out = []
    for record in records:
        try:
            out.append((record, Steps(record.steps)))
        except ValueError as err:
            log.warning("record %s skipped: its steps are not a schedule (%s)",
                        record.measurement_id, err)
    return out


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
