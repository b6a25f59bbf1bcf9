"""Tuning logs as files: JSON lines (one record a line, ``db/FORMAT.md``) export and import,
and export in the community T4 auto-tuning results format.

The readers and writers work on any iterable of :class:`~db.records.Record`; the
:class:`LogStore` mixin of :class:`db.Database` connects them to the database. A file
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

from .errors import DatabaseError, ImportFileError, RecordError, WorkloadConflictError
from .record_store import RecordStore
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
    """What :meth:`LogStore.import_jsonl` read and did."""

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


def _source_name(src: PathOrFile) -> str:
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


# --- the database side ------------------------------------------------------------------


class LogStore(RecordStore):
    """Log import/export operations of :class:`db.Database`."""

    def export_jsonl(self, dest: PathOrFile, **filters: Any) -> int:
        """Write every record matching ``filters`` (those of ``query_records``) to
        ``dest`` as JSON lines, in storage order; return how many."""
        return write_jsonl(self.iter_records(**filters), dest)

    def export_t4(self, dest: PathOrFile, *, k: int | None = None, **filters: Any) -> int:
        """Write records as a T4 results document: the best ``k`` per (workload, target)
        when ``k`` is given (see ``distill``), else every record matching ``filters``."""
        records = self.distill(k, **filters) if k is not None else self.iter_records(**filters)
        return write_t4(records, dest)

    def import_jsonl(
        self, src: PathOrFile, *, skip_bad_lines: bool = False, batch_size: int = 1000
    ) -> ImportReport:
        """Import a JSON-lines file (a path, ``.gz`` allowed, or an open file) in one
        transaction, and report what happened.

        Unknown fields are ignored (and listed in the report). Records already stored are
        not added again. If any line is malformed, nothing is imported and
        :class:`~db.errors.ImportFileError` is raised (its ``report`` lists every bad line
        with its number) -- unless ``skip_bad_lines``, which imports the good lines.
        """
        report = ImportReport(source=_source_name(src))
        unknown: set[str] = set()
        batch: list[Record] = []
        with _file_errors(report.source, "read"), _open_lines(src) as lines, self._write() as conn:

            def flush() -> None:
                if batch:
                    try:
                        report.added += self._insert(conn, *self._prepare(batch))
                    except WorkloadConflictError as exc:
                        raise WorkloadConflictError(f"{report.source}: {exc}") from None
                    batch.clear()

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
                    flush()
            report.unknown_fields = sorted(unknown)
            if report.bad_lines and not skip_bad_lines:
                report.added = 0
                raise ImportFileError(self._rejection(report), report)
            flush()
        report.already_present = report.records - report.added
        report.imported = True
        return report

    @staticmethod
    def _rejection(report: ImportReport) -> str:
        quoted = "; ".join(str(bad) for bad in report.bad_lines[:_QUOTED_BAD_LINES])
        more = len(report.bad_lines) - _QUOTED_BAD_LINES
        tail = f"; and {more} more" if more > 0 else ""
        return (
            f"{report.source}: {len(report.bad_lines)} malformed line(s), nothing imported "
            f"({quoted}{tail}); use skip_bad_lines (--skip-bad-lines) to import the rest"
        )
