"""The data of a measurement: what goes in (``MeasureInput``), how it is measured
(``MeasureSettings``), and what comes out (``MeasureResult`` with its ``Provenance``).

All of it is plain, JSON-able data (``to_json`` / ``from_json``), so inputs and results
cross process and node boundaries and land in the database unchanged. ``from_json`` checks
the shape of a document and raises ``ValueError`` naming the bad field
(``MeasureInputError`` for a measure input).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from schedule import Steps, Target, Workload

from .baselines import BASELINES


class MeasureInputError(ValueError):
    """A measure input that cannot be measured at all (malformed, unknown workload or
    target, no device for it): the caller's mistake, raised before anything runs."""


class ErrorKind(StrEnum):
    """How a measurement ended. Only ``device_lost`` is a failure of the infrastructure
    (a device, worker or node went away); every other kind is the candidate's outcome."""

    NONE = "none"
    INVALID_SCHEDULE = "invalid_schedule"
    COMPILE_ERROR = "compile_error"
    COMPILE_TIMEOUT = "compile_timeout"
    RUNTIME_ERROR = "runtime_error"
    RUN_TIMEOUT = "run_timeout"
    WRONG_ANSWER = "wrong_answer"
    DEVICE_LOST = "device_lost"

    @property
    def is_infrastructure(self) -> bool:
        return self is ErrorKind.DEVICE_LOST


def _fields(doc: Any, what: str, required: set[str], optional: set[str] | None = None,
            error: type[ValueError] = ValueError) -> None:
    optional = optional or set()
    if not isinstance(doc, Mapping):
        raise error(f"{what} must be a JSON object, got {type(doc).__name__}")
    missing = sorted(required - set(doc))
    if missing:
        raise error(f"{what}: missing field(s) {missing}")
    extra = sorted(set(doc) - required - optional)
    if extra:
        raise error(f"{what}: unexpected field(s) {extra}")


@dataclass(frozen=True)
class MeasureInput:
    """One candidate: a workload, a target and a schedule as steps; or, with ``library``
    set (one of ``workers.baselines.BASELINES``, no steps), a baseline to compare the
    candidates with (the workload computed by that library, or the target's peak).

    Inside a process these are typed values (``Workload``, ``Target``, ``Steps``), passed
    along without being parsed again. At a boundary an input may be built from their JSON
    forms (``Workload.to_json()``, a target string, a list of steps): only the shape is
    checked then, and :meth:`parsed` (which every pool calls first) parses them once.
    """

    workload: Workload | Mapping[str, Any]
    target: Target | str
    steps: Steps | Sequence[Sequence[Any]]
    library: str = ""

    def __post_init__(self) -> None:
        if self.library and self.library not in BASELINES:
            raise MeasureInputError(f"measure input: unknown baseline library "
                                    f"{self.library!r}; one of {', '.join(BASELINES)}")
        if not isinstance(self.workload, Workload | Mapping):
            raise MeasureInputError("measure input: 'workload' must be a JSON object "
                                    "(Workload.to_json()) or a Workload")
        if not isinstance(self.target, Target) and (
                not isinstance(self.target, str) or not self.target.strip()):
            raise MeasureInputError("measure input: 'target' must be a non-empty string, "
                                    "e.g. 'cpu', or a Target")
        if isinstance(self.steps, Steps):
            return
        if not isinstance(self.steps, list | tuple):
            raise MeasureInputError("measure input: 'steps' must be a list of steps")
        for n, step in enumerate(self.steps):
            if not isinstance(step, list | tuple) or not step or not isinstance(step[0], str):
                raise MeasureInputError(f"measure input: step {n} must be a list starting "
                                        f"with the step's name, got {step!r}")
        if isinstance(self.workload, Mapping):
            object.__setattr__(self, "workload", dict(self.workload))
        object.__setattr__(self, "steps", [list(step) for step in self.steps])

    @property
    def is_parsed(self) -> bool:
        return (isinstance(self.workload, Workload) and isinstance(self.target, Target)
                and isinstance(self.steps, Steps))

    def parsed(self) -> MeasureInput:
        """This input with typed values (itself when it has them already). Raises
        ``ValueError``/``TypeError`` (a bad workload, target or step) for the caller to
        name the input."""
        if self.is_parsed:
            return self
        return MeasureInput(Workload.from_json(self.workload)
                            if not isinstance(self.workload, Workload) else self.workload,
                            Target.parse(self.target), Steps.of(self.steps), self.library)

    def to_json(self) -> dict[str, Any]:
        workload = self.workload
        doc = {"workload": workload.to_json() if isinstance(workload, Workload) else workload,
               "target": str(self.target),
               "steps": self.steps.to_json() if isinstance(self.steps, Steps) else self.steps}
        return {**doc, "library": self.library} if self.library else doc

    @classmethod
    def from_json(cls, doc: Any) -> MeasureInput:
        _fields(doc, "measure input", {"workload", "target", "steps"}, {"library"},
                error=MeasureInputError)
        library = doc.get("library", "")
        if not isinstance(library, str):
            raise MeasureInputError("measure input: 'library' must be a string")
        return cls(doc["workload"], doc["target"], doc["steps"], library)


#: Most extra timings of one disturbed candidate (each within ``run_timeout``).
MAX_REMEASURE = 5


@dataclass(frozen=True)
class MeasureSettings:
    """How candidates are built and timed (TVM's time evaluator settings, plus limits).

    Each repeat times ``number`` calls, doubling ``number`` until the repeat lasts
    ``min_repeat_ms``; ``flush_bytes`` > 0 writes a scratch buffer that large before each
    repeat to evict the caches. Inputs are ``Workload.random_inputs(seed)``; with
    ``check`` the output is compared with ``Workload.reference``. ``run_timeout`` counts
    from the moment the device starts the candidate (after loading it), ``load_timeout``
    bounds the loading, ``compile_timeout`` each build.

    A device that can tell interference (the cpu device: ``workers.interference``) times
    a candidate again, up to ``remeasure`` times, while its noise (the slowdown other work
    or the spread of its repeats suggests) exceeds ``noise_tolerance``; a figure that stays
    above it is marked ``disturbed``.
    """

    number: int = 1
    repeat: int = 3
    min_repeat_ms: int = 100
    flush_bytes: int = 0
    check: bool = True
    seed: int = 0
    compile_timeout: float = 60.0
    run_timeout: float = 10.0
    load_timeout: float = 30.0
    noise_tolerance: float = 1.25
    remeasure: int = 2

    def __post_init__(self) -> None:
        for name in ("number", "repeat"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
                raise ValueError(f"measure settings: {name} must be an integer in "
                                 f"1..2**31-1, got {value!r}")
        for name in ("min_repeat_ms", "flush_bytes", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"measure settings: {name} must be a non-negative integer, "
                                 f"got {value!r}")
        if not isinstance(self.check, bool):
            raise ValueError(f"measure settings: check must be true or false, "
                             f"got {self.check!r}")
        for name in ("compile_timeout", "run_timeout", "load_timeout"):
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value) or value <= 0):
                raise ValueError(f"measure settings: {name} must be a positive number of "
                                 f"seconds, got {value!r}")
        if (isinstance(self.remeasure, bool) or not isinstance(self.remeasure, int)
                or not 0 <= self.remeasure <= MAX_REMEASURE):
            raise ValueError(f"measure settings: remeasure must be an integer in "
                             f"0..{MAX_REMEASURE}, got {self.remeasure!r}")
        tolerance = self.noise_tolerance
        if (isinstance(tolerance, bool) or not isinstance(tolerance, int | float)
                or not 1.0 <= tolerance < math.inf):
            raise ValueError(f"measure settings: noise_tolerance must be a number >= 1 (the "
                             f"slowdown tolerated), got {tolerance!r}")

    def timing(self) -> dict[str, Any]:
        """The settings that change a measured figure (recorded in the provenance)."""
        return {"number": self.number, "repeat": self.repeat,
                "min_repeat_ms": self.min_repeat_ms, "flush_bytes": self.flush_bytes,
                "seed": self.seed, "check": self.check}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Any) -> MeasureSettings:
        names = set(cls.__dataclass_fields__)
        _fields(doc, "measure settings", set(), names)
        return cls(**dict(doc))


@dataclass
class Provenance:
    """Where and how a result was obtained, so that records from different machines or
    toolchains are never mixed up: the host and Ray node that ran it, the device model
    (CPU model name, GPU name, accelerator configuration), the canonical target, the
    compiler with its version and flags, and the timing settings."""

    host: str = ""
    node: str = ""
    device_model: str = ""
    target: str = ""
    compiler: str = ""
    flags: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Any) -> Provenance:
        names = set(cls.__dataclass_fields__)
        _fields(doc, "provenance", set(), names)
        return cls(**{**dict(doc), "flags": list(doc.get("flags", [])),
                      "settings": dict(doc.get("settings", {}))})


@dataclass
class MeasureResult:
    """The outcome of one candidate: ``costs`` (seconds per call, one per repeat; empty
    unless it ran), the error kind and message, build and run wall seconds, the device id,
    the Unix time it was finished and its provenance. ``workload_error``: the failure is
    the workload's, not the candidate's (its reference outputs cannot be computed), so no
    candidate of it can succeed. ``noise``: the worst slowdown the device's interference
    checks saw while timing it (1.0: quiet, or a device without checks); ``disturbed``:
    above the settings' tolerance even after re-measuring. ``unpreempted``: other work kept
    the machine busy, and the costs are the short repeats (this many) during which no
    thread of the kernel lost its core (``workers.interference``); 0: the settings'
    repeats."""

    costs: list[float]
    error_kind: ErrorKind
    error_msg: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    device: str = ""
    timestamp: float = field(default_factory=time.time)
    provenance: Provenance = field(default_factory=Provenance)
    workload_error: bool = False
    noise: float = 1.0
    disturbed: bool = False
    unpreempted: int = 0

    def __post_init__(self) -> None:
        self.error_kind = ErrorKind(self.error_kind)

    @property
    def ok(self) -> bool:
        return self.error_kind is ErrorKind.NONE

    @property
    def median_cost(self) -> float | None:
        """Median seconds per call over the repeats; None when it did not run."""
        return statistics.median(self.costs) if self.ok and self.costs else None

    @property
    def mean_cost(self) -> float:
        """Mean seconds per call over the repeats (``inf`` when it did not run)."""
        return sum(self.costs) / len(self.costs) if self.costs else math.inf

    def to_json(self) -> dict[str, Any]:
        return {"costs": list(self.costs), "error_kind": self.error_kind.value,
                "error_msg": self.error_msg, "build_s": self.build_s, "run_s": self.run_s,
                "device": self.device, "timestamp": self.timestamp,
                "provenance": self.provenance.to_json(), "workload_error": self.workload_error,
                "noise": self.noise, "disturbed": self.disturbed,
                "unpreempted": self.unpreempted}

    @classmethod
    def from_json(cls, doc: Any) -> MeasureResult:
        _fields(doc, "measure result", {"costs", "error_kind"},
                {"error_msg", "build_s", "run_s", "device", "timestamp", "provenance",
                 "workload_error", "noise", "disturbed", "unpreempted"})
        kinds = [k.value for k in ErrorKind]
        if doc["error_kind"] not in kinds:
            raise ValueError(f"measure result: unknown error_kind {doc['error_kind']!r}; "
                             f"accepted: {', '.join(kinds)}")
        if not isinstance(doc["costs"], list) or not all(
                isinstance(c, int | float) and not isinstance(c, bool) for c in doc["costs"]):
            raise ValueError("measure result: 'costs' must be a list of numbers")
        return cls(costs=[float(c) for c in doc["costs"]], error_kind=doc["error_kind"],
                   error_msg=str(doc.get("error_msg", "")),
                   build_s=float(doc.get("build_s", 0.0)), run_s=float(doc.get("run_s", 0.0)),
                   device=str(doc.get("device", "")),
                   timestamp=float(doc.get("timestamp", 0.0)),
                   provenance=Provenance.from_json(doc.get("provenance", {})),
                   workload_error=doc.get("workload_error") is True,
                   noise=_noise(doc.get("noise", 1.0)), disturbed=doc.get("disturbed") is True,
                   unpreempted=_count(doc.get("unpreempted", 0)))


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"measure result: 'unpreempted' must be a non-negative integer, "
                         f"got {value!r}")
    return value


def _noise(value: Any) -> float:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not 1.0 <= value < math.inf):
        raise ValueError(f"measure result: 'noise' must be a finite number >= 1, "
                         f"got {value!r}")
    return float(value)
