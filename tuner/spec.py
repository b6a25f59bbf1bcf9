"""The job specification: what to tune, where, with which budget and search options.

One validated, JSON-serialisable description shared by ``tune()``, the CLI and the REST API,
and stored with every job so that a job can be resumed in another process. Validation never
runs user code: workloads are an operator name with parameters or a declarative DAG.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from schedule import Target, Workload
from search import COST_MODELS, POLICIES, SearchTask, policy_kinds, searchable_kinds
from workers import BASELINES, MeasureSettings

from .scheduler import SCHEDULERS

MAX_WORKLOADS = 256
MAX_TRIALS = 1_000_000
MAX_BATCH = 1024
#: Timing while tuning: three repeats of at least 50 ms each (half the workers' default), so
#: a trial costs little; the best few are measured again at the end (``reconfirm``).
TUNING_MEASURE = MeasureSettings(repeat=3, min_repeat_ms=50)
#: Timing the tasks of a model job: ten single calls, each after a 64 MiB buffer is written
#: (the caches flushed, as Ansor's ``enable_cpu_cache_flush``). Inside a model a kernel's
#: weights have usually been evicted by the layers before it; warm timings favoured
#: programs that ran up to 1.6x slower there (a BERT layer: 7.13 ms tuned warm, 5.77 ms
#: tuned cold, in 30% less tuning time; bench/RESULTS.md).
MODEL_MEASURE = MeasureSettings(number=1, repeat=10, min_repeat_ms=0, flush_bytes=64 << 20)


class SpecError(ValueError):
    """A job specification that cannot be run; the message names the bad field."""


def error_message(err: BaseException) -> str:
    """An exception's message without KeyError's quoting."""
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)


@dataclass(frozen=True)
class TaskSpec:
    """One workload of a job and its weight (how often it runs in the model)."""

    workload: Workload
    weight: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload.to_json(), "weight": self.weight}


@dataclass(frozen=True)
class ModelInfo:
    """The model a job's tasks were extracted from: its file name (as uploaded; only shown)
    and the SHA-256 of its bytes. Its tasks' weights are their occurrences in the model."""

    name: str
    sha256: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not 0 < len(self.name) <= 255 or \
                not self.name.isprintable():
            raise SpecError("model.name: 1 to 255 printable characters")
        if not isinstance(self.sha256, str) or len(self.sha256) != 64 or \
                any(c not in "0123456789abcdef" for c in self.sha256):
            raise SpecError("model.sha256: 64 lowercase hexadecimal digits")

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "sha256": self.sha256}

    @classmethod
    def from_json(cls, doc: Any) -> ModelInfo:
        if not isinstance(doc, Mapping) or set(doc) != {"name", "sha256"}:
            raise SpecError('model: must be {"name": ..., "sha256": ...}')
        return cls(doc["name"], doc["sha256"])


@dataclass(frozen=True)
class JobSpec:
    """Everything a tuning job needs. ``trials`` is the job's total budget of measured
    candidates, shared by its workloads through the task scheduler. ``model``: set when
    the workloads are a model's tasks (``tensortune tune-model``, a model upload).
    ``baselines``: what the job measures its tasks against on the same device before
    tuning (``workers.BASELINES``: numpy, torch, the target's peak).
    ``share_across_tasks`` (default): the tasks train one cost model on all their
    measurements (each ranked within its own task) and each task's search starts from the
    others' best programs too, so what one task learnt guides the others' first trials;
    False: every task learns alone."""

    tasks: tuple[TaskSpec, ...]
    target: Target
    trials: int
    batch_size: int = 32
    time_budget_s: float | None = None
    early_stop: int | None = None
    scheduler: str = "gradient"
    policy: str = "sketch"
    cost_model: str = "xgb"
    share_across_tasks: bool = True
    reconfirm: int = 3
    seed: int = 0
    #: None: ``MODEL_MEASURE`` for a model's tasks, ``TUNING_MEASURE`` otherwise
    measure: MeasureSettings | None = None
    model: ModelInfo | None = None
    baselines: tuple[str, ...] = ("numpy", "peak")

    def __post_init__(self) -> None:
        if self.measure is None:
            object.__setattr__(self, "measure", MODEL_MEASURE if self.model is not None
                               else TUNING_MEASURE)
        if not self.tasks:
            raise SpecError("workloads: at least one workload is needed")
        if len(self.tasks) > MAX_WORKLOADS:
            raise SpecError(f"workloads: at most {MAX_WORKLOADS} in one job, got {len(self.tasks)}")
        for n, task in enumerate(self.tasks):
            if not (isinstance(task.weight, int | float) and not isinstance(task.weight, bool)
                    and math.isfinite(task.weight) and task.weight > 0):
                raise SpecError(f"workloads[{n}].weight must be a positive number, "
                                f"got {task.weight!r}")
        try:
            target = Target.parse(self.target)
        except (TypeError, ValueError) as err:
            raise SpecError(f"target: {error_message(err)}") from None
        if target.kind not in searchable_kinds():
            raise SpecError(f"target: no search rules for {target.kind!r} targets yet "
                            f"(only {', '.join(searchable_kinds())} can be tuned)")
        object.__setattr__(self, "target", target)
        for n, task in enumerate(self.tasks):
            try:
                SearchTask(task.workload, target)
            except ValueError as err:
                raise SpecError(f"workloads[{n}]: {error_message(err)}") from None
        _check_int("trials", self.trials, 1, MAX_TRIALS)
        _check_int("batch_size", self.batch_size, 1, MAX_BATCH)
        _check_int("reconfirm", self.reconfirm, 0, 64)
        _check_int("seed", self.seed, 0, 2**31 - 1)
        if self.early_stop is not None:
            _check_int("early_stop", self.early_stop, 1, MAX_TRIALS)
        if self.time_budget_s is not None and not (
                isinstance(self.time_budget_s, int | float) and not isinstance(
                    self.time_budget_s, bool) and 0 < self.time_budget_s < math.inf):
            raise SpecError(f"time_budget_s must be a positive number of seconds, "
                            f"got {self.time_budget_s!r}")
        for name, value, choices in (("scheduler", self.scheduler, SCHEDULERS),
                                     ("policy", self.policy, tuple(POLICIES)),
                                     ("cost_model", self.cost_model, COST_MODELS)):
            if value not in choices:
                raise SpecError(f"{name}: unknown {value!r}; one of {', '.join(choices)}")
        if not isinstance(self.share_across_tasks, bool):
            raise SpecError(f"share_across_tasks must be true or false, "
                            f"got {self.share_across_tasks!r}")
        if not isinstance(self.baselines, list | tuple) or any(
                b not in BASELINES for b in self.baselines) or \
                len(set(self.baselines)) != len(self.baselines):
            raise SpecError(f"baselines: a list of distinct names out of "
                            f"{', '.join(BASELINES)}, got {self.baselines!r}")
        object.__setattr__(self, "baselines", tuple(self.baselines))
        if target.kind not in policy_kinds(self.policy):
            raise SpecError(f"policy: {self.policy!r} cannot search {target.kind} targets "
                            f"(it searches: {', '.join(policy_kinds(self.policy))})")

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"workloads": [t.to_json() for t in self.tasks]}
        for f in fields(self):
            if f.name not in ("tasks", "measure", "model"):
                doc[f.name] = getattr(self, f.name)
        doc["baselines"] = list(self.baselines)
        doc["target"] = str(self.target)
        doc["measure"] = self.measure.to_json()
        if self.model is not None:
            doc["model"] = self.model.to_json()
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> JobSpec:
        """From a JSON object; ``workloads`` entries are ``{"op": ..., "params": {...}}``,
        ``{"dag": ..., "name": ...}`` or ``{"workload": <either>, "weight": w}``."""
        if not isinstance(doc, Mapping):
            raise SpecError("a job specification must be a JSON object")
        names = {f.name for f in fields(cls)} - {"tasks"} | {"workloads"}
        extra = sorted(set(doc) - names)
        if extra:
            raise SpecError(f"unexpected field(s) {extra}; accepted: {sorted(names)}")
        for required in ("workloads", "target", "trials"):
            if required not in doc:
                raise SpecError(f"{required}: required")
        raw = doc["workloads"]
        if not isinstance(raw, list):
            raise SpecError("workloads: must be a list")
        if len(raw) > MAX_WORKLOADS:
            raise SpecError(f"workloads: at most {MAX_WORKLOADS} in one job, got {len(raw)}")
        tasks = tuple(_task(n, entry) for n, entry in enumerate(raw))
        return cls.from_options(tasks, {k: v for k, v in doc.items() if k != "workloads"})

    @classmethod
    def from_options(cls, tasks: tuple[TaskSpec, ...], options: Mapping[str, Any]) -> JobSpec:
        """A spec of ``tasks`` (already read) and its other fields as JSON: ``target``,
        ``trials``, ``measure``, ``model`` and the search options."""
        names = {f.name for f in fields(cls)} - {"tasks"}
        extra = sorted(set(options) - names)
        if extra:
            raise SpecError(f"unexpected field(s) {extra}; accepted: {sorted(names)}")
        for required in ("target", "trials"):
            if required not in options:
                raise SpecError(f"{required}: required")
        rest = {k: v for k, v in options.items() if k not in ("measure", "model")}
        model = options.get("model")
        try:
            measure = MeasureSettings.from_json(options["measure"]) if "measure" in options \
                else None if model is not None else MeasureSettings()
        except (TypeError, ValueError) as err:
            raise SpecError(f"measure: {error_message(err)}") from None
        return cls(tasks=tasks, measure=measure,
                   model=ModelInfo.from_json(model) if model is not None else None, **rest)

    def merged_tasks(self) -> list[TaskSpec]:
        """One task per distinct workload (by key), in order of first appearance, with the
        weights of its repeats summed."""
        merged: dict[str, TaskSpec] = {}
        for task in self.tasks:
            key = task.workload.key
            seen = merged.get(key)
            merged[key] = TaskSpec(task.workload, seen.weight + task.weight) if seen else task
        return list(merged.values())


def _task(n: int, entry: Any) -> TaskSpec:
    if not isinstance(entry, Mapping):
        raise SpecError(f"workloads[{n}]: must be an object like "
                        '{"op": "matmul", "params": {"M": 64, "N": 64, "K": 64}}')
    weight = 1.0
    if "workload" in entry:
        extra = sorted(set(entry) - {"workload", "weight"})
        if extra:
            raise SpecError(f"workloads[{n}]: unexpected field(s) {extra}")
        weight = entry.get("weight", 1.0)
        entry = entry["workload"]
    try:
        return TaskSpec(Workload.from_json(entry), weight)
    except (TypeError, ValueError) as err:
        raise SpecError(f"workloads[{n}]: {error_message(err)}") from None


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError(f"{name} must be an integer in {low}..{high}, got {value!r}")
