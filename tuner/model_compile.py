"""Compiling models with the tuned schedules: ``tuner.compile(model, target, db=...)``.

The model (an ``ir.Module``, an ONNX ``ModelProto``, or a path to an ``.onnx`` file) goes
through ``ir.build``'s pipeline; each fused function's workload takes its best record on
exactly this target from the database, or the default schedule (``default_steps``: chosen
by the analytic cost model, nothing measured) when there is none. ``strict`` makes a
missing record an error. The result is an ``ir.CompiledModel`` (graph executor) or, with
``executor="aot"``, an ``ir.AotModel`` (one C translation unit); its ``tasks`` say, per
task, whether it was tuned.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from db import Database
from schedule import Target, Workload

from .apply import default_steps
from .tune import open_database


class CompileError(ValueError):
    """The model cannot be compiled as asked (a bad model file, or ``strict`` misses)."""


def load_model(model: Any) -> Any:
    """An ``ir.Module`` from a module, an ONNX model or a path to an ``.onnx`` file."""
    import ir

    if isinstance(model, ir.Module):
        return model
    from ir import OnnxImportError, from_onnx

    if isinstance(model, str | os.PathLike) and not os.path.exists(model):
        raise CompileError(f"no model file {model}")
    try:
        return from_onnx(model)
    except OnnxImportError as exc:
        raise CompileError(str(exc)) from None


def model_tasks(model: Any, target: Target | str = "cpu", db: Database | str | None = None,
                opt_level: int = 3) -> list[dict[str, Any]]:
    """The tuning tasks of a model, each with whether the database has a record for it on
    ``target``: ``{"key", "name", "ops", "flops", "weight", "tuned", "workload"}``."""
    from ir import extract_tasks

    target = Target.parse(target)
    database = open_database(db) if db is not None else None
    out = []
    for task in extract_tasks(load_model(model), target, opt_level):
        tuned = database is not None and bool(
            database.best(task.workload.key, str(target)).records)
        out.append({"key": task.workload.key, "name": task.name, "ops": task.ops,
                    "flops": task.flops, "weight": task.weight, "tuned": tuned,
                    "workload": task.workload})
    return out


def best_schedules(db: Database | str | None, target: Target | str = "cpu"
                   ) -> Callable[[Workload], Any]:
    """``workload -> steps | None``: its best record's steps on exactly ``target`` in
    ``db`` (what ``ir.build``, ``ir.backend.vm.compile`` and ``aot_compile`` take as
    ``schedules``)."""
    database, target = open_database(db), str(Target.parse(target))

    def best_steps(workload: Workload) -> Any:
        answer = database.best(workload.key, target)
        return answer.records[0].steps if answer.records else None
    return best_steps


EXECUTORS = ("graph", "aot")


def compile(model: Any, target: Target | str = "cpu", db: Database | str | None = None, *,
            strict: bool = False, opt_level: int = 3, executor: str = "graph") -> Any:
    """Build ``model`` with the best schedules ``db`` holds for ``target`` (see the module
    docstring) for ``executor``: ``graph`` (an ``ir.CompiledModel``) or ``aot`` (an
    ``ir.AotModel``)."""
    from ir import GraphBuildError, aot_compile, build

    if executor not in EXECUTORS:
        raise CompileError(f"unknown executor {executor!r}; one of {', '.join(EXECUTORS)}")
    target = Target.parse(target)
    module = load_model(model)
    builder = build if executor == "graph" else aot_compile
    try:
        compiled = builder(module, target, schedules=best_schedules(db, target),
                           opt_level=opt_level,
                           default_schedule=lambda wl: default_steps(wl, target))
    except GraphBuildError as exc:
        raise CompileError(str(exc)) from None
    misses = [t for t in compiled.tasks if t.key is not None and not t.tuned]
    if strict and misses:
        raise CompileError(f"{len(misses)} of {len(compiled.tasks)} tasks have no tuning "
                           f"record on {target}: " + ", ".join(
                               f"{t.name} ({t.key})" for t in misses[:10]))
    return compiled
