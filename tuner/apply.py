"""Applying tuned schedules: the best steps for a workload on a target, and its compiled
module. This is what model compilation calls."""

from __future__ import annotations

import warnings
from typing import Any

from db import Database
from schedule import Module, Target, Workload, build, make_schedule

from .tune import open_database


class UntunedWarning(UserWarning):
    """No tuning record exists for a workload; a default schedule is used instead."""


def default_steps(workload: Workload, target: Target | str = "cpu") -> list[list[Any]]:
    """A reasonable untuned schedule: the outermost loop of each output in parallel (as
    JSON steps, like every schedule this module hands out)."""
    s, args = make_schedule(workload)
    if Target.parse(target).cores > 1:
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
