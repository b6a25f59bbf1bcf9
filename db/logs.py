"""Tuning logs as files: JSON lines (one record a line, ``db/FORMAT.md``) export and import,
and export in the community T4 auto-tuning results format.

The readers and writers work on any iterable of :class:`~db.records.Record`;
:class:`db.Database` connects them to the database (``export_jsonl``, ``import_jsonl``...). A file
written to a path appears atomically (written beside it, then renamed), so a reader never
sees half an export; a ``.gz`` suffix means gzip.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from .errors import DatabaseError, ImportFileError, RecordError
from .records import Record, cost_stats

PathOrFile = str | os.PathLike[str] | IO[str] | IO[bytes]

#: The T4 results schema version written by :func:`write_t4`.
T4_SCHEMA_VERSION = "1.0.0"
#: error_kind -> T4 ``invalidity``.
T4_INVALIDITY: dict[str, str] = {
    "none": "correct",
    "invalid_schedule": "constraints",
    "compile_error": "compile",
    "compile_timeout": "timeout",
    "runtime_error": "runtime",
    "run_timeout": "timeout",
    "wrong_answer": "correctness",
    "device_lost": "runtime",
}
_KNOWN_FIELDS = frozenset(f.name for f in fields(Record)) | {"id"}
# How many bad lines an error message quotes (the report holds all of them).
_QUOTED_BAD_LINES = 5


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line of a JSON-lines file that is not a valid record."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(slots=True)
class ImportReport:
    """What :meth:`db.Database.import_jsonl` read and did."""

    source: str
    lines: int = 0
    records: int = 0
    added: int = 0
    already_present: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)
    unknown_fields: list[str] = field(default_factory=list)
    imported: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able data."""
        data = asdict(self)
        data["bad_lines"] = [{"line": b.line, "message": b.message} for b in self.bad_lines]
        return data


# --- reading ----------------------------------------------------------------------------


def source_name(src: PathOrFile) -> str:
    """How an import report names ``src``: its path, or the open file's name."""
    if isinstance(src, str | os.PathLike):
        return os.fspath(src)
    return str(getattr(src, "name", "<file>"))


@contextlib.contextmanager
def _open_lines(src: PathOrFile) -> Iterator[Iterable[str | bytes]]:
    if isinstance(src, str | os.PathLike):
        path = Path(src)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            yield handle
    else:
        yield src


def parse_line(text: str | bytes) -> tuple[Record, set[str]]:
    """One JSON line -> (the record, the names of fields it has that records do not).

    Raises :class:`~db.errors.RecordError` with a message fit for a report line."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise RecordError("not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # an integer over Python's digit limit, say
        raise RecordError(f"not valid JSON ({str(exc).split(';')[0]})") from None
    if "\\u0000" in text:  # NUL in text: PostgreSQL cannot store it, so no database may
        pending = [data]
        while pending:
            value = pending.pop()
            if isinstance(value, str) and "\x00" in value:
                raise RecordError("a string holds a NUL character (\\u0000), which the "
                                  "database cannot store")
            if isinstance(value, dict):
                pending.extend(value)
                pending.extend(value.values())
            elif isinstance(value, list):
                pending.extend(value)
    record = Record.from_dict(data)
    return record, set(data) - _KNOWN_FIELDS


def read_jsonl(src: PathOrFile) -> Iterator[tuple[int, Record | BadLine]]:
    """(line number, record or :class:`BadLine`) for every non-blank line of ``src``."""
    with _open_lines(src) as lines:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                yield number, parse_line(raw)[0]
            except RecordError as exc:
                yield number, BadLine(number, str(exc))


# --- writing ----------------------------------------------------------------------------


@contextlib.contextmanager
def _file_errors(name: str, verb: str) -> Iterator[None]:
    """Turn an OSError (missing file, bad gzip, full disk...) into a one-line DatabaseError."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise DatabaseError(f"cannot {verb} {name}: {reason}") from None


class _TextWriter:
    """``write(str)`` over a binary handle, in UTF-8."""

    def __init__(self, binary: IO[bytes]) -> None:
        self._binary = binary

    def write(self, text: str) -> int:
        self._binary.write(text.encode("utf-8"))
        return len(text)


@contextlib.contextmanager
def _open_for_writing(dest: PathOrFile) -> Iterator[Any]:
    """Something with ``write(str)`` on ``dest``. For a path: a temporary file beside it,
    fsynced and renamed over it when the block succeeds, removed when it fails."""
    if not isinstance(dest, str | os.PathLike):
        binary = isinstance(dest, io.RawIOBase | io.BufferedIOBase) or "b" in getattr(
            dest, "mode", ""
        )
        yield _TextWriter(dest) if binary else dest  # type: ignore[arg-type]
        return
    path = Path(dest)
    with _file_errors(str(path), "write"):
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with _file_errors(str(path), "write"), os.fdopen(fd, "wb") as raw:
            if path.suffix == ".gz":
                with gzip.GzipFile(filename=path.name[:-3], fileobj=raw, mode="wb") as packed:
                    yield _TextWriter(packed)
            else:
                yield _TextWriter(raw)
            raw.flush()
            os.fsync(raw.fileno())
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_jsonl(records: Iterable[Record], dest: PathOrFile) -> int:
    """Write ``records`` as JSON lines (current format, with ``version`` and ``id``);
    return how many were written."""
    count = 0
    with _open_for_writing(dest) as out:
        for record in records:
            out.write(record.to_json() + "\n")
            count += 1
    return count


def t4_result(record: Record) -> dict[str, Any]:
    """One record as a T4 ``results[]`` entry (see ``db/FORMAT.md`` for the mapping)."""
    measurements: list[dict[str, Any]] = []
    stats = cost_stats(record.costs)
    if stats:
        median, mean, minimum = stats
        measurements = [
            {"name": "time", "value": median, "unit": "s"},
            {"name": "time_mean", "value": mean, "unit": "s"},
            {"name": "time_min", "value": minimum, "unit": "s"},
        ]
        if record.flops and median > 0:
            measurements.append(
                {"name": "gflops", "value": record.flops / median / 1e9, "unit": "GFLOP/s"}
            )
    return {
        "timestamp": datetime.fromtimestamp(record.timestamp, UTC).isoformat(),
        "configuration": {
            "workload_key": record.workload_key,
            "target": record.target,
            "steps": record.steps,
        },
        "times": {
            "compilation_time": record.build_s,
            "benchmark": record.run_s,
            "runtimes": record.costs,
        },
        "invalidity": T4_INVALIDITY[record.error_kind],
        "correctness": 0 if record.error_kind == "wrong_answer" else 1,
        "measurements": measurements,
        "objectives": ["time"],
        "device_model": record.device_model,
        "toolchain": record.toolchain,
        "error_msg": record.error_msg,
    }


def write_t4(records: Iterable[Record], dest: PathOrFile) -> int:
    """Write ``records`` as one T4 results document; return how many were written."""
    results = [t4_result(record) for record in records]
    document = {"schema_version": T4_SCHEMA_VERSION, "results": results}
    with _open_for_writing(dest) as out:
        out.write(json.dumps(document, ensure_ascii=False, allow_nan=False) + "\n")
    return len(results)


# --- importing -------------------------------------------------------------------------


def import_batches(
    src: PathOrFile, report: ImportReport, *, skip_bad_lines: bool = False,
    batch_size: int = 1000,
) -> Iterator[list[Record]]:
    """The records of a JSON-lines file (a path, ``.gz`` allowed, or an open file) in
    batches of ``batch_size``, for :meth:`db.Database.import_jsonl` to add in one
    transaction; ``report`` counts the lines, records, bad lines and unknown fields.

    A malformed line stops the batches (unless ``skip_bad_lines``); the rest of the file
    is still read, to report every bad line, and then :class:`~db.errors.ImportFileError`
    is raised, so the caller's transaction rolls back what it added.
    """
    unknown: set[str] = set()
    batch: list[Record] = []
    with _file_errors(report.source, "read"), _open_lines(src) as lines:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            report.lines += 1
            try:
                record, extra = parse_line(raw)
            except RecordError as exc:
                report.bad_lines.append(BadLine(number, str(exc)))
                continue
            report.records += 1
            unknown |= extra
            if report.bad_lines and not skip_bad_lines:
                continue  # nothing will be imported; read on only to report every bad line
            batch.append(record)
            if len(batch) >= batch_size:
                yield batch
                batch = []
    report.unknown_fields = sorted(unknown)
    if report.bad_lines and not skip_bad_lines:
        report.added = 0
        raise ImportFileError(_rejection(report), report)
    if batch:
        yield batch


def _rejection(report: ImportReport) -> str:
    quoted = "; ".join(str(bad) for bad in report.bad_lines[:_QUOTED_BAD_LINES])
    more = len(report.bad_lines) - _QUOTED_BAD_LINES
    tail = f"; and {more} more" if more > 0 else ""
    return (
        f"{report.source}: {len(report.bad_lines)} malformed line(s), nothing imported "
        f"({quoted}{tail}); use skip_bad_lines (--skip-bad-lines) to import the rest"
    )
