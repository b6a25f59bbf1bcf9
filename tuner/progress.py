"""The state of a tuning job as it runs: per task (workload) its trials, best program, error
counts and best-so-far curve; per job the split of wall time and the estimated latency of
the whole (the weighted sum of the tasks' best latencies: for a model's job, its end-to-end
estimate). Stored as the job's progress JSON after every batch, returned as the result of
``tune()``, streamed to API clients.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from schedule import Steps, Workload

#: A task's state: waiting for its first batch, being tuned, stopped (budget, time or early
#: stop), finished without a single valid candidate (see its error counts), or rejected
#: (the workload itself cannot be measured, e.g. its reference fails: see its error).
TASK_STATES = ("pending", "tuning", "done", "no_valid_candidate", "rejected")


@dataclass
class BestSchedule:
    """The best program known for a workload on a target (``steps`` as JSON lists, what
    ``Schedule.replay`` and ``json.dumps`` take)."""

    workload_key: str
    steps: list[list[Any]]
    latency_s: float
    gflops: float | None
    confirmed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"workload_key": self.workload_key, "steps": self.steps,
                "latency_s": self.latency_s, "gflops": self.gflops, "confirmed": self.confirmed}


@dataclass
class TaskProgress:
    """One task of a job."""

    workload: Workload
    key: str
    weight: float
    flops: float
    state: str = "pending"
    trials: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    best_cost: float = math.inf
    best_steps: Steps | None = None
    confirmed: bool = False
    since_improvement: int = 0
    curve: list[tuple[int, float]] = field(default_factory=list)  # (trials, best latency)
    error: str = ""
    disturbed: int = 0  # figures the machine's other work slowed, even re-measured
    #: figures of a busy machine taken from the short repeats that ran alone
    unpreempted: int = 0
    max_noise: float = 1.0  # the worst slowdown the interference checks saw
    unconfirmed: str = ""  # why the final re-measurement did not confirm the best
    #: what the final side-by-side comparison changed in the ranking (``side_by_side``)
    reranked: str = ""
    expected_gain_s: float | None = None  # the scheduler's estimate of a round's gain
    chosen_because: str = ""  # why the scheduler gave this task its last round
    #: what the job measured the task against: {"numpy": {"latency_s": s | None,
    #: "error": why not}, ...}; "peak" is the time of its FLOPs at the target's peak
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: what a simulated device said of the best program: cycles, the GEMM core's
    #: utilisation, the clock (``workers.simulated_facts``); empty for timed devices
    best_facts: dict[str, Any] = field(default_factory=dict)

    def observe(self, steps: Steps, cost: float | None, error_kind: str,
                noise: float = 1.0, disturbed: bool = False,
                facts: dict[str, Any] | None = None, unpreempted: bool = False) -> None:
        """Count one measured candidate (``cost`` None when it failed; ``facts``: a
        simulated device's figures of it; ``unpreempted``: its figure is of the short
        repeats that ran alone on a busy machine)."""
        self.trials += 1
        self.errors[error_kind] += 1
        self.disturbed += disturbed
        self.unpreempted += unpreempted
        self.max_noise = max(self.max_noise, noise)
        if cost is not None and cost < self.best_cost:
            self.best_cost, self.best_steps, self.confirmed = cost, steps, False
            self.best_facts = dict(facts or {})
            self.since_improvement = 0
        else:
            self.since_improvement += 1

    def gflops(self, cost: float | None = None) -> float | None:
        cost = self.best_cost if cost is None else cost
        return self.flops / cost / 1e9 if math.isfinite(cost) and self.flops else None

    @property
    def best(self) -> BestSchedule | None:
        if self.best_steps is None:
            return None
        return BestSchedule(self.key, self.best_steps.to_json(), self.best_cost,
                            self.gflops(), self.confirmed)

    def to_json(self) -> dict[str, Any]:
        finite = math.isfinite(self.best_cost)
        return {
            "workload_key": self.key, "workload": self.workload.to_json(),
            "name": repr(self.workload), "weight": self.weight, "flops": self.flops,
            "state": self.state, "trials": self.trials,
            "errors": {kind: n for kind, n in sorted(self.errors.items()) if kind != "none"},
            "valid": self.errors.get("none", 0),
            "best_latency_s": self.best_cost if finite else None,
            "best_gflops": self.gflops(), "confirmed": self.confirmed,
            "curve": [[t, c if math.isfinite(c) else None] for t, c in self.curve],
            "error": self.error, "disturbed": self.disturbed, "max_noise": self.max_noise,
            "unpreempted": self.unpreempted,
            "unconfirmed": self.unconfirmed,
            "reranked": self.reranked,
            "expected_gain_s": self.expected_gain_s
            if self.expected_gain_s is not None and math.isfinite(self.expected_gain_s)
            else None,
            "chosen_because": self.chosen_because,
            "baselines": self.baselines,
            **({"best_facts": self.best_facts} if self.best_facts else {}),
        }


def estimated_latency(tasks: list[TaskProgress]) -> float | None:
    """The weighted sum of the tasks' best latencies (what the task scheduler minimises;
    for a model, its estimated end-to-end latency in its tuned kernels), or None while a
    task has no valid program yet."""
    if not tasks or any(not math.isfinite(t.best_cost) for t in tasks):
        return None
    return sum(t.weight * t.best_cost for t in tasks)


@dataclass
class TimeSplit:
    """Where a job's wall time went (seconds). ``build`` and ``run`` add up the workers'
    per-candidate times (builds run in parallel); ``measure`` is the wall time waiting for
    the pool."""

    search: float = 0.0
    measure: float = 0.0
    build: float = 0.0
    run: float = 0.0
    database: float = 0.0
    total: float = 0.0

    def to_json(self) -> dict[str, float]:
        return {name: round(getattr(self, name), 3) for name in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, doc: Any) -> TimeSplit:
        if not isinstance(doc, dict):
            return cls()
        return cls(**{k: float(v) for k, v in doc.items() if k in cls.__dataclass_fields__})


@dataclass
class TuneResult:
    """What ``tune()`` returns: the job, its final status and every task's outcome."""

    job_id: str
    target: str
    status: str
    tasks: list[TaskProgress]
    seconds: TimeSplit
    error: str = ""

    @property
    def trials(self) -> int:
        return sum(t.trials for t in self.tasks)

    @property
    def estimated_latency_s(self) -> float | None:
        """See :func:`estimated_latency`."""
        return estimated_latency(self.tasks)

    def task(self, workload: Workload | str) -> TaskProgress:
        key = workload if isinstance(workload, str) else workload.key
        for task in self.tasks:
            if task.key == key:
                return task
        raise KeyError(f"workload {key} is not part of job {self.job_id}")

    def best(self, workload: Workload | str) -> BestSchedule | None:
        """The best program found for ``workload`` (None if no candidate was valid)."""
        return self.task(workload).best

    def errors(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for task in self.tasks:
            total.update({k: v for k, v in task.errors.items() if k != "none"})
        return dict(sorted(total.items()))

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "target": self.target, "status": self.status,
                "error": self.error, "trials": self.trials, "errors": self.errors(),
                "estimated_latency_s": self.estimated_latency_s,
                "seconds": self.seconds.to_json(),
                "tasks": [task.to_json() for task in self.tasks]}
