"""Measure callbacks: what happens to each measured trial, as small swappable objects
(TVM meta_schedule's MeasureCallback) instead of closures inside the tuning loop.

The loop calls ``on_result`` as soon as each candidate's result is final (so a record is
committed before the next candidate runs) and ``on_batch`` once a task's batch is done.
The default chain stores records, feeds the search policy, and reports progress; a job
can be given more (e.g. to export trials elsewhere).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from workers import MeasureResult, simulated_facts

from .trial import Trial

if TYPE_CHECKING:
    from .runner import JobRunner


class MeasureCallback:
    """Reacts to measured trials of a job; both hooks do nothing by default."""

    def on_result(self, job: JobRunner, trial: Trial, result: MeasureResult) -> None:
        """One trial's result is final."""

    def on_batch(self, job: JobRunner, trials: Sequence[Trial],
                 results: Sequence[MeasureResult]) -> None:
        """A batch of one task (or the end-of-job reconfirmation batch) is measured."""


class StoreRecords(MeasureCallback):
    """Commits every measurement to the job's database as soon as it is made."""

    def on_result(self, job: JobRunner, trial: Trial, result: MeasureResult) -> None:
        job.check_still_mine()  # a job another process took over stores nothing more
        record = trial.record(result, job.job_id)
        start = time.perf_counter()
        job.db.add_records([record])
        job.seconds.database += time.perf_counter() - start


class UpdatePolicy(MeasureCallback):
    """Tells each search policy how its candidates did (its cost model retrains)."""

    def on_batch(self, job: JobRunner, trials: Sequence[Trial],
                 results: Sequence[MeasureResult]) -> None:
        searched = [(t, r) for t, r in zip(trials, results, strict=True) if not t.reconfirm]
        if not searched:
            return
        start = time.perf_counter()
        policy = job.policies[searched[0][0].task]
        # a disturbed figure is the machine's, not the program's: nothing to learn from
        clean = [(t, r) for t, r in searched if not r.disturbed]
        policy.notify([t.candidate for t, _ in clean], [r.median_cost for _, r in clean])
        disturbed = [(t, r) for t, r in searched if r.disturbed]
        policy.notify_disturbed([t.candidate for t, _ in disturbed],
                                [r.median_cost for _, r in disturbed])
        job.seconds.search += time.perf_counter() - start


class ReportProgress(MeasureCallback):
    """Counts trials into their task's progress, stores the job's progress (its heartbeat)
    every few seconds and after each batch, and emits a ``batch`` event."""

    def on_result(self, job: JobRunner, trial: Trial, result: MeasureResult) -> None:
        if not trial.reconfirm:
            facts = simulated_facts(result.provenance.settings)
            job.tasks[trial.task].observe(trial.candidate.steps, result.median_cost,
                                          result.error_kind.value, result.noise,
                                          result.disturbed, facts, result.unpreempted > 0)
            job.save_progress()

    def on_batch(self, job: JobRunner, trials: Sequence[Trial],
                 results: Sequence[MeasureResult]) -> None:
        if not trials or trials[0].reconfirm:
            return
        task = job.tasks[trials[0].task]
        task.curve.append((task.trials, task.best_cost))
        job.save_progress(force=True)
        job.emit({"type": "batch", "task": task.key, "batch": len(trials),
                  **job.progress_json()})


def default_callbacks() -> list[MeasureCallback]:
    """Store records, then update the policy, then report progress (the order matters:
    a result is committed before it is reported)."""
    return [StoreRecords(), UpdatePolicy(), ReportProgress()]
