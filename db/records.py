"""The tuning record as plain data: the :class:`Record` dataclass, its validation, its
canonical JSON form and its measurement id.

A record is one measurement of one schedule (a list of steps) of one workload on one
target, with its result and provenance. The JSON form is documented in ``db/FORMAT.md``;
this module is the single place that reads and checks it. Nothing here touches a database.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from .errors import DatabaseError, RecordError

#: The version of the record JSON format written by this code (and the newest it reads).
FORMAT_VERSION = 1

#: The outcome of a measurement; ``none`` means it ran and its costs are valid.
ERROR_KINDS: tuple[str, ...] = (
    "none",
    "invalid_schedule",
    "compile_error",
    "compile_timeout",
    "runtime_error",
    "run_timeout",
    "wrong_answer",
    "device_lost",
)

#: The fields a record's measurement id is a hash of: everything that was measured and
#: where, but not the workload JSON (the key stands for it), the job that asked for it, or
#: the format version it was written in. The same measurement imported again, from another
#: job's export or an older format, therefore keeps its id.
IDENTITY_FIELDS: tuple[str, ...] = (
    "workload_key",
    "target",
    "device_model",
    "toolchain",
    "host",
    "flags",
    "measure",
    "steps",
    "costs",
    "error_kind",
    "error_msg",
    "build_s",
    "run_s",
    "timestamp",
)

# Column sizes (db/models.py); checked here so a long value is a clear RecordError, not a
# driver error from PostgreSQL's VARCHAR(n).
MAX_TARGET_LEN = 512
MAX_NAME_LEN = 255
MAX_JOB_ID_LEN = 64

_KEY_RE = re.compile(r"^[0-9a-f]{32}$")
# The option of a target string that names its instruction set / architecture, per kind.
_FAMILY_OPTIONS: dict[str, tuple[str, ...]] = {
    "cpu": ("isa", "mcpu", "march"),
    "cuda": ("arch",),
    "vta": ("config",),
}


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> str:
    """The canonical text of a JSON value: sorted keys, no spaces, UTF-8 kept, no NaN.

    Equal values always give equal text, so the text can be hashed and compared.
    Raises ``ValueError``/``TypeError`` for values JSON cannot hold.
    """
    return _CANONICAL.encode(value)


def json_object_text(what: str, value: Any) -> str:
    """The canonical JSON text of ``value``, which must be a JSON object (a mapping);
    otherwise a :class:`~db.errors.DatabaseError` naming ``what`` (e.g. ``"job spec"``)."""
    if not isinstance(value, Mapping):
        raise DatabaseError(f"{what} must be a JSON object, got {type(value).__name__}")
    try:
        return canonical_json(dict(value))
    except (TypeError, ValueError) as exc:
        raise DatabaseError(f"{what} is not representable as JSON ({exc})") from None


def target_family(target: str) -> str:
    """The ISA family of a canonical target string: its kind and the option naming its
    instruction set (``cpu -isa=avx512 -cores=2`` -> ``cpu -isa=avx512``;
    ``cuda -arch=sm_90 -max_threads=1024`` -> ``cuda -arch=sm_90``).

    A target without such an option is its own family (no widening is possible for it).
    """
    tokens = target.split()
    if not tokens:
        return target
    kind, options = tokens[0], {}
    for token in tokens[1:]:
        name, sep, value = token.lstrip("-").partition("=")
        if token.startswith("-") and sep:
            options.setdefault(name, value)
    for name in _FAMILY_OPTIONS.get(kind, ()):
        if name in options:
            return f"{kind} -{name}={options[name]}"
    return target


def cost_stats(costs: list[float]) -> tuple[float, float, float] | None:
    """(median, mean, min) of a cost list, or None when it is empty."""
    if not costs:
        return None
    return statistics.median(costs), math.fsum(costs) / len(costs), min(costs)


def _fail(name: str, problem: str) -> RecordError:
    return RecordError(f"field '{name}': {problem}")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _number(name: str, value: Any, *, minimum: float | None = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(name, f"expected a number, got {_type_name(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise _fail(name, f"expected a finite number, got {value!r}")
    if minimum is not None and number < minimum:
        raise _fail(name, f"expected a number >= {minimum:g}, got {value!r}")
    return number


def _text(name: str, value: Any, *, max_len: int | None = None, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise _fail(name, f"expected a string, got {_type_name(value)}")
    if not empty and not value.strip():
        raise _fail(name, "must not be empty")
    if max_len is not None and len(value) > max_len:
        raise _fail(name, f"longer than {max_len} characters")
    return value


def _json_value(name: str, value: Any) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise _fail(name, f"not representable as JSON ({exc})") from None


@dataclass(frozen=True, slots=True)
class Record:
    """One measurement, as stored and as exchanged (see ``db/FORMAT.md``).

    Construction validates and normalises every field (numbers become floats) and raises
    :class:`~db.errors.RecordError` naming the first bad field. Treat a record as
    immutable, nested lists and dicts included (its canonical JSON and id are cached); use
    ``dataclasses.replace`` to derive a changed one.
    """

    workload_key: str
    workload: dict[str, Any]
    target: str
    steps: list[list[Any]]
    costs: list[float]
    error_kind: str
    timestamp: float
    device_model: str
    toolchain: str
    flops: float | None = None
    error_msg: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    host: str = ""
    flags: str = ""
    measure: dict[str, Any] = field(default_factory=dict)
    job_id: str | None = None
    version: int = FORMAT_VERSION
    # Canonical JSON of the nested fields, made while validating them (not part of the data).
    _workload_json: str = field(default="", init=False, repr=False, compare=False)
    _steps_json: str = field(default="", init=False, repr=False, compare=False)
    _costs_json: str = field(default="", init=False, repr=False, compare=False)
    _measure_json: str = field(default="", init=False, repr=False, compare=False)
    _id: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        key = self.workload_key
        if not isinstance(key, str) or not _KEY_RE.match(key):
            raise _fail("workload_key", f"expected 32 lowercase hex digits, got {key!r}")
        if not isinstance(self.workload, dict):
            raise _fail("workload", f"expected a JSON object, got {_type_name(self.workload)}")
        set_(self, "_workload_json", _json_value("workload", self.workload))
        _text("target", self.target, max_len=MAX_TARGET_LEN, empty=False)
        if "\n" in self.target:
            raise _fail("target", "must be one line")
        steps = self.steps
        if not isinstance(steps, list | tuple):
            raise _fail("steps", f"expected a list of steps, got {_type_name(steps)}")
        for i, step in enumerate(steps):
            if not isinstance(step, list | tuple) or not step or not isinstance(step[0], str):
                raise _fail("steps", f"step {i} is not a list starting with a primitive name")
        set_(self, "steps", [list(step) for step in steps])
        set_(self, "_steps_json", _json_value("steps", self.steps))
        if not isinstance(self.costs, list | tuple):
            raise _fail("costs", f"expected a list of numbers, got {_type_name(self.costs)}")
        set_(self, "costs", [_number(f"costs[{i}]", c) for i, c in enumerate(self.costs)])
        set_(self, "_costs_json", canonical_json(self.costs))
        if self.error_kind not in ERROR_KINDS:
            raise _fail("error_kind", f"{self.error_kind!r} is not one of {', '.join(ERROR_KINDS)}")
        if self.error_kind == "none" and not self.costs:
            raise _fail("costs", "must not be empty when error_kind is 'none'")
        if self.error_kind != "none" and self.costs:
            raise _fail("costs", f"must be empty when error_kind is {self.error_kind!r}")
        timestamp = _number("timestamp", self.timestamp)
        if timestamp <= 0:
            raise _fail("timestamp", f"expected seconds since the epoch, got {self.timestamp!r}")
        set_(self, "timestamp", timestamp)
        _text("device_model", self.device_model, max_len=MAX_NAME_LEN)
        _text("toolchain", self.toolchain, max_len=MAX_NAME_LEN)
        if self.flops is not None:
            set_(self, "flops", _number("flops", self.flops))
        _text("error_msg", self.error_msg)
        set_(self, "build_s", _number("build_s", self.build_s))
        set_(self, "run_s", _number("run_s", self.run_s))
        _text("host", self.host, max_len=MAX_NAME_LEN)
        _text("flags", self.flags)
        if not isinstance(self.measure, dict):
            raise _fail("measure", f"expected a JSON object, got {_type_name(self.measure)}")
        set_(self, "_measure_json", _json_value("measure", self.measure))
        job_id = self.job_id
        if isinstance(job_id, int) and not isinstance(job_id, bool):
            job_id = str(job_id)
            set_(self, "job_id", job_id)
        if job_id is not None:
            _text("job_id", job_id, max_len=MAX_JOB_ID_LEN, empty=False)
        version = self.version
        if isinstance(version, bool) or not isinstance(version, int):
            raise _fail("version", f"expected an integer, got {_type_name(version)}")
        if version > FORMAT_VERSION:
            raise _fail(
                "version",
                f"format version {version} is newer than this tensortune reads "
                f"({FORMAT_VERSION}); upgrade tensortune",
            )
        if version < 1:
            raise _fail("version", f"expected 1..{FORMAT_VERSION}, got {version}")

    # --- derived values ---------------------------------------------------------------

    @property
    def ok(self) -> bool:
        """True when the measurement ran without error (its costs count)."""
        return self.error_kind == "none"

    @property
    def median_cost(self) -> float | None:
        """Median of ``costs`` in seconds (what the best query ranks by); None on error."""
        stats = cost_stats(self.costs)
        return stats[0] if stats else None

    @property
    def measurement_id(self) -> str:
        """SHA-256 (hex) of the canonical JSON of :data:`IDENTITY_FIELDS`: the same
        measurement always has the same id, in every process and database."""
        if not self._id:
            object.__setattr__(self, "_id", hashlib.sha256(self._identity_json().encode())
                               .hexdigest())
        return self._id

    def _identity_json(self) -> str:
        return canonical_json({name: getattr(self, name) for name in IDENTITY_FIELDS})

    def canonical(self, name: str) -> str:
        """Canonical JSON text of the field ``name`` (cached for the nested ones)."""
        cached = getattr(self, f"_{name}_json", "") if name in _CACHED else ""
        return cached or canonical_json(getattr(self, name))

    # --- JSON form --------------------------------------------------------------------

    def to_dict(self, *, with_id: bool = True) -> dict[str, Any]:
        """The record as a JSON-able dict in the current format (``version`` first).

        ``id`` (the measurement id) is informational: readers recompute it.
        """
        data: dict[str, Any] = {"version": FORMAT_VERSION}
        if with_id:
            data["id"] = self.measurement_id
        for f in _PUBLIC_FIELDS:
            if f.name != "version":
                data[f.name] = getattr(self, f.name)
        return data

    def to_json(self) -> str:
        """One line of the JSON-lines format (no trailing newline)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        """Read a record from its JSON form; unknown fields are ignored, a missing required
        field or a bad value raises :class:`~db.errors.RecordError` naming it."""
        if not isinstance(data, Mapping):
            raise RecordError(f"expected a JSON object, got {_type_name(data)}")
        version = data.get("version", 1)
        if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
            # Checked first: a newer format may have renamed the very fields we would miss.
            raise _fail(
                "version",
                f"format version {version} is newer than this tensortune reads "
                f"({FORMAT_VERSION}); upgrade tensortune",
            )
        kwargs: dict[str, Any] = {}
        for f in _PUBLIC_FIELDS:
            if f.name in data:
                kwargs[f.name] = data[f.name]
            elif f.name in _REQUIRED:
                raise RecordError(f"missing field '{f.name}'")
        return cls(**kwargs)

    @classmethod
    def _trusted(cls, **values: Any) -> Record:
        """A record from values that were validated when stored (database rows): no checks,
        so reading is cheap. Not for data from outside."""
        record = object.__new__(cls)
        for name in _CACHE_FIELDS:
            object.__setattr__(record, name, "")
        for name, value in values.items():
            object.__setattr__(record, name, value)
        return record


_PUBLIC_FIELDS = tuple(f for f in fields(Record) if f.init)
_CACHE_FIELDS = tuple(f.name for f in fields(Record) if not f.init)
_CACHED = frozenset({"workload", "steps", "costs", "measure"})
_REQUIRED = frozenset(
    f.name for f in _PUBLIC_FIELDS if f.default is MISSING and f.default_factory is MISSING
)


def as_record(value: Record | Mapping[str, Any]) -> Record:
    """``value`` itself if it is a :class:`Record`, else :meth:`Record.from_dict` of it."""
    return value if isinstance(value, Record) else Record.from_dict(value)
