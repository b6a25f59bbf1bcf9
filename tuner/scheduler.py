"""The task scheduler: which task of a job gets the next batch of trials.

A job tunes several tasks (workloads) against one objective, the weighted sum of their best
latencies (a weight is how often the workload runs in the model). Like Ansor's task
scheduler, ``gradient`` gives the next batch to the task where one more batch is expected to
reduce that sum the most, estimated from the task's own recent progress (backward) and an
optimistic guess that its latency can still drop in proportion to the trials spent so far
(forward). Every task first gets one batch, and a small share of choices is random so no
task starves on a bad estimate. ``round-robin`` simply cycles.

The first batches go out in order of each task's weight times its roofline time
(:func:`roofline_seconds`, a lower bound from its FLOPs and the bytes it must touch), so
that when the budget cannot reach every task, those left on their default schedule are the
cheapest (a model's last layer, a 5 MB matrix-vector product of little arithmetic, is not
left out for coming last in the graph).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from schedule import dtype as dt

SCHEDULERS = ("gradient", "round-robin")
# A nominal machine for ordering first batches (the ratio matters, not the figures): a few
# cores' vector FMA rate, and the bandwidth of a working set past L2.
NOMINAL_FLOPS = 200e9
NOMINAL_BYTES_PER_S = 20e9


def roofline_seconds(workload: Any) -> float:
    """A lower bound on a run of ``workload`` on the nominal machine: its FLOPs at the FMA
    rate or its arguments' bytes (inputs and outputs, each touched once) at the bandwidth,
    whichever takes longer."""
    nbytes = sum(math.prod(t.shape) * dt.itemsize(t.dtype) for t in workload.tensors())
    return max(workload.flops / NOMINAL_FLOPS, nbytes / NOMINAL_BYTES_PER_S)


@dataclass
class TaskHistory:
    """What the scheduler knows of one task."""

    weight: float
    trials: int = 0
    rounds: int = 0
    best_after_round: list[float] = field(default_factory=list)  # best latency, per round
    active: bool = True

    @property
    def best(self) -> float:
        return self.best_after_round[-1] if self.best_after_round else math.inf


class TaskScheduler:
    """Chooses the task of each round; ``record`` tells it how a round went."""

    def __init__(self, weights: list[float], strategy: str = "gradient", *,
                 window: int = 3, alpha: float = 0.2, eps: float = 0.05, seed: int = 0,
                 costs: list[float] | None = None):
        """``costs``: each task's expected time per run (e.g. :func:`roofline_seconds`);
        the first batches go to the largest weight x cost first (default: in order)."""
        if strategy not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {strategy!r}; one of {', '.join(SCHEDULERS)}")
        self.strategy = strategy
        self.tasks = [TaskHistory(float(w)) for w in weights]
        self.window, self.alpha, self.eps = window, alpha, eps
        self._rng = random.Random(seed)
        self._next = 0
        costs = costs if costs is not None else [1.0] * len(weights)
        if len(costs) != len(weights) or not all(math.isfinite(c) and c >= 0 for c in costs):
            raise ValueError(f"costs must be {len(weights)} finite non-negative numbers, one "
                             f"per task; got {costs!r}")
        self._first_order = sorted(range(len(weights)),
                                   key=lambda n: -float(weights[n]) * costs[n])
        self.reason = ""
        """Why :meth:`next_task` chose its last task, in a few words."""

    def record(self, task: int, trials: int, best_latency: float) -> None:
        history = self.tasks[task]
        history.trials += trials
        history.rounds += 1
        history.best_after_round.append(best_latency)

    def retire(self, task: int) -> None:
        """No more trials for this task (stopped early, or its space is exhausted)."""
        self.tasks[task].active = False

    def next_task(self) -> int | None:
        """The task for the next round, or None when every task is retired."""
        active = [n for n, t in enumerate(self.tasks) if t.active]
        if not active:
            return None
        if self.strategy == "round-robin":
            self.reason = "round-robin: its turn"
            for offset in range(len(self.tasks)):
                n = (self._next + offset) % len(self.tasks)
                if self.tasks[n].active:
                    self._next = n + 1
                    return n
        unexplored = [n for n in self._first_order
                      if self.tasks[n].active and self.tasks[n].rounds == 0]
        if unexplored:
            self.reason = ("not tried yet: every task gets a first round, the largest "
                           "weight x roofline time first")
            return unexplored[0]
        if self._rng.random() < self.eps:
            self.reason = f"exploration: a random task ({self.eps:.0%} of rounds)"
            return self._rng.choice(active)
        chosen = max(active, key=self.expected_gain)
        self.reason = ("no valid program yet: tried again, valued as the costliest known task"
                       if not math.isfinite(self.tasks[chosen].best) else
                       "the largest expected gain (weight x recent improvement per round)")
        return chosen

    def expected_gains(self) -> list[float | None]:
        """Each task's :meth:`expected_gain`, as reported. None: retired, not tried yet, or
        without a valid program yet (its rounds are then valued at the costliest known
        task's latency: a stand-in that makes the scheduler try it again, not an
        estimate to show)."""
        return [self.expected_gain(n) if t.active and t.rounds and math.isfinite(t.best)
                else None for n, t in enumerate(self.tasks)]

    def expected_gain(self, task: int) -> float:
        """Expected reduction of the weighted latency sum from one more round of ``task``."""
        t = self.tasks[task]
        if not math.isfinite(t.best):
            # nothing valid yet: trying again is worth as much as the costliest known task
            known = [o.weight * o.best for o in self.tasks if math.isfinite(o.best)]
            return max(known, default=1.0)
        history = [b for b in t.best_after_round if math.isfinite(b)]
        back = len(history) - 1 - self.window
        backward = (history[back] - history[-1]) / self.window if back >= 0 else \
            (history[0] - history[-1]) / max(len(history) - 1, 1)
        forward = t.best / max(t.rounds, 1)
        return t.weight * (self.alpha * backward + (1 - self.alpha) * forward)
