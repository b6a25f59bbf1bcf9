"""Applying tuned schedules: the best steps for a workload on a target, and its compiled
module. This is what model compilation calls."""

from __future__ import annotations

import warnings
from typing import Any

from db import Database
from schedule import Module, Target, Workload, build, fallback_gpu_schedule, make_schedule
from search import SearchParams, SearchTask, make_policy, searchable_kinds

from .tune import open_database


class UntunedWarning(UserWarning):
    """No tuning record exists for a workload; a default schedule is used instead."""


#: The short search behind untuned schedules: one generation of 48 sketch samples ranked by
#: the analytic cost model, nothing measured (about a second per workload). On the ResNet-18
#: convolutions it picked programs 4-17x faster than the outer-loop-parallel schedule.
DEFAULT_SEARCH = SearchParams(population=48, generations=1, eps_greedy=0.0, register_prior=1.0)


def default_steps(workload: Workload, target: Target | str = "cpu") -> list[list[Any]]:
    """A reasonable untuned schedule, chosen without measuring anything: the program a
    short sketch search ranks first by the analytic cost model (``DEFAULT_SEARCH``); for a
    workload the sketch rules cannot schedule, the outermost loop of each output in
    parallel (on a GPU: every stage one thread per element). As JSON steps, like every
    schedule this module hands out."""
    target = Target.parse(target)
    if target.kind in searchable_kinds():
        policy = make_policy(SearchTask(workload, target), "sketch", "analytic",
                             params=DEFAULT_SEARCH)
        picks = policy.propose(1)
        if picks:
            return picks[0].steps.to_json()
    s, args = make_schedule(workload)
    if target.is_gpu:  # every stage needs its loops bound to GPU threads
        return fallback_gpu_schedule(args[-workload.num_outputs:]).steps
    if target.cores > 1:
        for out in args[-workload.num_outputs:]:
            axes = s[out].op.axis
            if axes:
                s[out].parallel(axes[0])
    return s.steps


def apply_best(workload: Workload, target: Target | str = "cpu",
               db: Database | str | None = None) -> list[list[Any]]:
    """The steps of the fastest recorded program of ``workload`` on exactly ``target``; a
    default schedule, with an :class:`UntunedWarning`, when nothing was tuned."""
    target = Target.parse(target)
    answer = open_database(db).best(workload.key, str(target))
    if answer.records:
        return answer.records[0].steps
    warnings.warn(f"no tuning record for {workload!r} (key {workload.key}) on {target}; "
                  "using a default schedule", UntunedWarning, stacklevel=2)
    return default_steps(workload, target)


def build_best(workload: Workload, target: Target | str = "cpu",
               db: Database | str | None = None) -> Module:
    """The compiled module of :func:`apply_best`'s schedule."""
    target = Target.parse(target)
    s, args = make_schedule(workload, apply_best(workload, target, db))
    return build(s, args, target=target)
