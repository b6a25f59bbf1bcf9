"""The SQL side of the tuning records: rows and statements for the idempotent batch insert,
the best-k query with its fallback chain, and :class:`RecordFilter`, the filter every record
query takes. :class:`db.Database` runs them; this module opens no connection itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from sqlalchemy import Connection, Integer, Select, bindparam, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from .errors import RecordError, WorkloadConflictError
from .models import RecordRow, WorkloadRow
from .outranking import not_outranked
from .records import ERROR_KINDS, Record, cost_stats, target_family

#: How far :meth:`db.Database.best` may widen the match, narrowest first. Each level is a
#: superset of the one before; the answer's ``match`` names the level that answered.
MATCH_LEVELS: tuple[str, ...] = ("exact", "other_toolchain", "other_device", "same_isa")
Fallback = Literal["other_toolchain", "other_device", "same_isa"]
RecordOrder = Literal["id", "timestamp", "cost"]

# Rows per INSERT statement; a batch of any size is still one transaction.
INSERT_CHUNK = 1000
# Keys per IN (...) list when reading workloads back.
_IN_CHUNK = 500
MAX_K = 10_000

_R = RecordRow
_RECORD_COLUMNS = (
    _R.workload_key, _R.target, _R.steps_json, _R.costs_json, _R.error_kind, _R.error_msg,
    _R.timestamp, _R.device_model, _R.toolchain, _R.build_s, _R.run_s, _R.host, _R.flags,
    _R.measure_json, _R.job_id, _R.version, WorkloadRow.workload_json, WorkloadRow.flops,
)


@dataclass(frozen=True, slots=True)
class BestResult:
    """The answer of :meth:`db.Database.best`: up to k records, best first, and which match
    level produced them (``"none"`` with no records when nothing matched)."""

    match: str
    records: list[Record]

    @property
    def best(self) -> Record | None:
        """The best record, or None."""
        return self.records[0] if self.records else None


@dataclass(frozen=True, slots=True)
class Summary:
    """What the database knows about one (workload, target)."""

    workload_key: str
    target: str
    records: int
    ok_records: int
    best_cost: float | None
    first_seen: float
    last_seen: float
    flops: float | None

    @property
    def best_gflops(self) -> float | None:
        """GFLOP/s of the best record, when the FLOP count and a best cost are known."""
        if self.flops is None or not self.best_cost:
            return None
        return self.flops / self.best_cost / 1e9


def select_records() -> Select[Any]:
    return select(*_RECORD_COLUMNS).join(WorkloadRow, WorkloadRow.key == _R.workload_key)


def row_record(row: Any) -> Record:
    return Record._trusted(
        workload_key=row.workload_key,
        workload=json.loads(row.workload_json),
        target=row.target,
        steps=json.loads(row.steps_json),
        costs=json.loads(row.costs_json),
        error_kind=row.error_kind,
        timestamp=row.timestamp,
        device_model=row.device_model,
        toolchain=row.toolchain,
        flops=row.flops,
        error_msg=row.error_msg,
        build_s=row.build_s,
        run_s=row.run_s,
        host=row.host,
        flags=row.flags,
        measure=json.loads(row.measure_json),
        job_id=row.job_id,
        version=row.version,
    )


def _record_row(record: Record) -> dict[str, Any]:
    stats = cost_stats(record.costs)
    median, mean, minimum = stats if stats else (None, None, None)
    return {
        "measurement_id": record.measurement_id,
        "workload_key": record.workload_key,
        "target": record.target,
        "target_family": target_family(record.target),
        "device_model": record.device_model,
        "toolchain": record.toolchain,
        "host": record.host,
        "flags": record.flags,
        "measure_json": record.canonical("measure"),
        "steps_json": record.canonical("steps"),
        "costs_json": record.canonical("costs"),
        "error_kind": record.error_kind,
        "error_msg": record.error_msg,
        "median_cost": median,
        "mean_cost": mean,
        "min_cost": minimum,
        "build_s": record.build_s,
        "run_s": record.run_s,
        "timestamp": record.timestamp,
        "job_id": record.job_id,
        "version": record.version,
    }


_INSERT_COLUMNS = tuple(
    column.name for column in RecordRow.__table__.columns if column.name != "id"
)


@cache
def _insert_records_sql(placeholder: str) -> str:
    """INSERT of one record row that skips a measurement id already stored; same SQL for
    SQLite (3.24+) and PostgreSQL, given the driver's placeholder."""
    columns = ", ".join(_INSERT_COLUMNS)
    values = ", ".join([placeholder] * len(_INSERT_COLUMNS))
    return (
        f"INSERT INTO records ({columns}) VALUES ({values}) "
        "ON CONFLICT (measurement_id) DO NOTHING"
    )


@cache
def best_statement(by_family: bool, by_device: bool, by_toolchain: bool) -> Select[Any]:
    """The best query for one match level, built once (bound parameters: workload_key,
    target, device_model, toolchain, k), so a query costs no statement construction."""
    column = _R.target_family if by_family else _R.target
    conditions = [
        _R.workload_key == bindparam("workload_key"),
        _R.median_cost.is_not(None),
        column == bindparam("target"),
        not_outranked(),
    ]
    if by_device:
        conditions.append(_R.device_model == bindparam("device_model"))
    if by_toolchain:
        conditions.append(_R.toolchain == bindparam("toolchain"))
    return (
        select_records()
        .where(*conditions)
        .order_by(_R.median_cost, _R.id)
        .limit(bindparam("k", type_=Integer))
    )


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordFilter:
    """Which records a query takes: those matching every field that is not None.

    ``error_kind``: one kind or several; ``ok``: error-free (True) or failed (False)
    records; ``since``/``until`` bound ``timestamp`` (since <= t < until). The record
    queries of :class:`db.Database` take these fields as keyword arguments.
    """

    workload_key: str | None = None
    target: str | None = None
    device_model: str | None = None
    toolchain: str | None = None
    job_id: str | None = None
    error_kind: str | Sequence[str] | None = None
    ok: bool | None = None
    since: float | None = None
    until: float | None = None

    def conditions(self) -> list[Any]:
        """The SQL conditions (to AND together) on the records table."""
        conditions: list[Any] = []
        for column, value in (
            (_R.workload_key, self.workload_key),
            (_R.target, self.target),
            (_R.device_model, self.device_model),
            (_R.toolchain, self.toolchain),
            (_R.job_id, self.job_id),
        ):
            if value is not None:
                conditions.append(column == value)
        if self.error_kind is not None:
            kinds = [self.error_kind] if isinstance(self.error_kind, str) else list(
                self.error_kind
            )
            unknown = [kind for kind in kinds if kind not in ERROR_KINDS]
            if unknown:
                raise RecordError(
                    f"unknown error_kind {unknown[0]!r}; one of {', '.join(ERROR_KINDS)}"
                )
            conditions.append(_R.error_kind.in_(kinds))
        if self.ok is not None:
            conditions.append(_R.median_cost.is_not(None) if self.ok else _R.median_cost.is_(None))
        if self.since is not None:
            conditions.append(_R.timestamp >= self.since)
        if self.until is not None:
            conditions.append(_R.timestamp < self.until)
        return conditions


def check_page(limit: int | None, offset: int) -> None:
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")




def prepare_rows(
    records: Sequence[Record],
) -> tuple[dict[str, tuple[str, float | None]], list[dict[str, Any]]]:
    """Workload rows by key and record rows (deduplicated, sorted by measurement id so
    that concurrent writers take row locks in the same order and cannot deadlock)."""
    workloads: dict[str, tuple[str, float | None]] = {}
    first: dict[str, Record] = {}
    rows: dict[str, dict[str, Any]] = {}
    for record in records:
        key = record.workload_key
        seen = first.get(key)
        if seen is None:
            first[key] = record
            workloads[key] = (record.canonical("workload"), record.flops)
        elif seen.workload is not record.workload and seen.workload != record.workload:
            raise WorkloadConflictError(
                f"workload key {key} comes with two different workloads in one batch"
            )
        elif workloads[key][1] is None and record.flops is not None:
            workloads[key] = (workloads[key][0], record.flops)
        row = _record_row(record)
        rows.setdefault(row["measurement_id"], row)
    return dict(sorted(workloads.items())), [rows[mid] for mid in sorted(rows)]


def insert_rows(
    conn: Connection,
    workloads: dict[str, tuple[str, float | None]],
    rows: list[dict[str, Any]],
) -> int:
    """Insert what :func:`prepare_rows` made, inside the caller's write transaction; return
    how many record rows were new. A workload key stored with another workload raises
    :class:`~db.errors.WorkloadConflictError`."""
    postgres = conn.dialect.name == "postgresql"
    now = time.time()
    workload_rows = [
        {"key": key, "workload_json": text, "flops": flops, "created_at": now}
        for key, (text, flops) in workloads.items()
    ]
    insert = pg_insert if postgres else sqlite_insert
    conn.execute(insert(WorkloadRow).on_conflict_do_nothing(index_elements=["key"]),
                 workload_rows)
    for chunk in _chunks(list(workloads), _IN_CHUNK):
        stored = conn.execute(
            select(WorkloadRow.key, WorkloadRow.workload_json, WorkloadRow.flops).where(
                WorkloadRow.key.in_(chunk)
            )
        ).all()
        for key, stored_json, stored_flops in stored:
            text, flops = workloads[key]
            if stored_json != text:
                raise WorkloadConflictError(
                    f"workload key {key} is already stored with a different workload "
                    f"(stored {stored_json[:80]}..., new {text[:80]}...)"
                )
            if stored_flops is None and flops is not None:
                conn.execute(
                    update(WorkloadRow).where(WorkloadRow.key == key).values(flops=flops)
                )
    # The driver's own executemany (C loop in sqlite3, pipeline mode in psycopg) is several
    # times faster here than a multi-row VALUES statement; its rowcount counts only the
    # rows inserted, not those skipped by ON CONFLICT DO NOTHING.
    statement = _insert_records_sql("%s" if postgres else "?")
    added = 0
    for chunk in _chunks(rows, INSERT_CHUNK):
        params = [tuple(row[name] for name in _INSERT_COLUMNS) for row in chunk]
        result = conn.exec_driver_sql(statement, params)
        added += max(result.rowcount, 0)
    return added
