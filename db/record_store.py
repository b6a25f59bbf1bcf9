"""Records in the database: idempotent batch insert, the best-k query with its fallback
chain, filtered and paginated queries, per-(workload, target) summaries and distillation.

A mixin of :class:`db.Database`; it reaches the database only through ``_read()`` and
``_write()`` of :class:`db.engine.Store`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from sqlalchemy import Connection, Integer, Select, bindparam, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from .engine import Store, TransientError
from .errors import RecordError, WorkloadConflictError
from .models import TuningRecord, Workload
from .records import ERROR_KINDS, Record, as_record, cost_stats, target_family

#: How far :meth:`RecordStore.best` may widen the match, narrowest first. Each level is a
#: superset of the one before; the answer's ``match`` names the level that answered.
MATCH_LEVELS: tuple[str, ...] = ("exact", "other_toolchain", "other_device", "same_isa")
Fallback = Literal["other_toolchain", "other_device", "same_isa"]
RecordOrder = Literal["id", "timestamp", "cost"]

# Rows per INSERT statement; a batch of any size is still one transaction.
INSERT_CHUNK = 1000
# Keys per IN (...) list when reading workloads back.
_IN_CHUNK = 500
_WRITE_ATTEMPTS = 5
MAX_K = 10_000

_R = TuningRecord
_RECORD_COLUMNS = (
    _R.workload_key, _R.target, _R.steps_json, _R.costs_json, _R.error_kind, _R.error_msg,
    _R.timestamp, _R.device_model, _R.toolchain, _R.build_s, _R.run_s, _R.host, _R.flags,
    _R.measure_json, _R.job_id, _R.version, Workload.workload_json, Workload.flops,
)


@dataclass(frozen=True, slots=True)
class BestResult:
    """The answer of :meth:`RecordStore.best`: up to k records, best first, and which match
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


def _select_records() -> Select[Any]:
    return select(*_RECORD_COLUMNS).join(Workload, Workload.key == _R.workload_key)


def _row_record(row: Any) -> Record:
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
    column.name for column in TuningRecord.__table__.columns if column.name != "id"
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
def _best_statement(by_family: bool, by_device: bool, by_toolchain: bool) -> Select[Any]:
    """The best query for one match level, built once (bound parameters: workload_key,
    target, device_model, toolchain, k), so a query costs no statement construction."""
    column = _R.target_family if by_family else _R.target
    conditions = [
        _R.workload_key == bindparam("workload_key"),
        _R.median_cost.is_not(None),
        column == bindparam("target"),
    ]
    if by_device:
        conditions.append(_R.device_model == bindparam("device_model"))
    if by_toolchain:
        conditions.append(_R.toolchain == bindparam("toolchain"))
    return (
        _select_records()
        .where(*conditions)
        .order_by(_R.median_cost, _R.id)
        .limit(bindparam("k", type_=Integer))
    )


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _filters(
    *,
    workload_key: str | None = None,
    target: str | None = None,
    device_model: str | None = None,
    toolchain: str | None = None,
    job_id: str | None = None,
    error_kind: str | Sequence[str] | None = None,
    ok: bool | None = None,
    since: float | None = None,
    until: float | None = None,
) -> list[Any]:
    conditions: list[Any] = []
    for column, value in (
        (_R.workload_key, workload_key),
        (_R.target, target),
        (_R.device_model, device_model),
        (_R.toolchain, toolchain),
        (_R.job_id, job_id),
    ):
        if value is not None:
            conditions.append(column == value)
    if error_kind is not None:
        kinds = [error_kind] if isinstance(error_kind, str) else list(error_kind)
        unknown = [kind for kind in kinds if kind not in ERROR_KINDS]
        if unknown:
            raise RecordError(f"unknown error_kind {unknown[0]!r}; one of {', '.join(ERROR_KINDS)}")
        conditions.append(_R.error_kind.in_(kinds))
    if ok is not None:
        conditions.append(_R.median_cost.is_not(None) if ok else _R.median_cost.is_(None))
    if since is not None:
        conditions.append(_R.timestamp >= since)
    if until is not None:
        conditions.append(_R.timestamp < until)
    return conditions


def _check_page(limit: int | None, offset: int) -> None:
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")


class RecordStore(Store):
    """Record operations of :class:`db.Database`."""

    # --- writing ----------------------------------------------------------------------

    def add_records(self, records: Iterable[Record | Mapping[str, Any]]) -> int:
        """Store a batch of records (``Record`` objects or their JSON dicts) in one
        transaction; return how many were new.

        Idempotent: a record whose measurement id is already stored (or repeated in the
        batch) is skipped, so retries and re-imports never duplicate. All or nothing: a bad
        record raises :class:`~db.errors.RecordError` (naming its index) before anything is
        written, and a failure or a killed process mid-write leaves none of the batch.
        """
        parsed: list[Record] = []
        for index, item in enumerate(records):
            try:
                parsed.append(as_record(item))
            except RecordError as exc:
                raise RecordError(f"record {index}: {exc}") from None
        if not parsed:
            return 0
        workloads, rows = self._prepare(parsed)
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                with self._write() as conn:
                    return self._insert(conn, workloads, rows)
            except TransientError:
                if attempt == _WRITE_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    @staticmethod
    def _prepare(
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

    def _insert_ignore(self, model: type[Any], key: str) -> Any:
        insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
        return insert(model).on_conflict_do_nothing(index_elements=[key])

    def _insert(
        self,
        conn: Connection,
        workloads: dict[str, tuple[str, float | None]],
        rows: list[dict[str, Any]],
    ) -> int:
        now = time.time()
        workload_rows = [
            {"key": key, "workload_json": text, "flops": flops, "created_at": now}
            for key, (text, flops) in workloads.items()
        ]
        conn.execute(self._insert_ignore(Workload, "key"), workload_rows)
        keys = list(workloads)
        for chunk in _chunks(keys, _IN_CHUNK):
            stored = conn.execute(
                select(Workload.key, Workload.workload_json, Workload.flops).where(
                    Workload.key.in_(chunk)
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
                        update(Workload).where(Workload.key == key).values(flops=flops)
                    )
        # The driver's own executemany (C loop in sqlite3, pipeline mode in psycopg) is several
        # times faster here than a multi-row VALUES statement; its rowcount counts only the
        # rows inserted, not those skipped by ON CONFLICT DO NOTHING.
        statement = _insert_records_sql("%s" if self.dialect == "postgresql" else "?")
        added = 0
        for chunk in _chunks(rows, INSERT_CHUNK):
            params = [tuple(row[name] for name in _INSERT_COLUMNS) for row in chunk]
            result = conn.exec_driver_sql(statement, params)
            added += max(result.rowcount, 0)
        return added

    # --- the best query ---------------------------------------------------------------

    def best(
        self,
        workload_key: str,
        target: str,
        k: int = 1,
        *,
        device_model: str | None = None,
        toolchain: str | None = None,
        fallback: Fallback | bool = False,
    ) -> BestResult:
        """The k best error-free records of ``workload_key`` on ``target``, ranked by median
        cost (ties: the earlier stored first).

        Match levels, narrowest first (see ``db/FORMAT.md``):

        - ``exact``: this target string, and the ``device_model``/``toolchain`` given (a
          filter left as None matches any);
        - ``other_toolchain``: same target and device model, any toolchain;
        - ``other_device``: same target string, any device model and toolchain;
        - ``same_isa``: another target string of the same ISA family
          (``cpu -isa=avx512 -cores=16`` for ``cpu -isa=avx512 -cores=2``).

        Without ``fallback`` only ``exact`` is tried: the answer never holds a record of
        another target. ``fallback`` names the widest level allowed (``True`` = all); the
        first level with any record answers, and ``match`` says which one it was.
        """
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be in 1..{MAX_K}, got {k}")
        widest = "same_isa" if fallback is True else (fallback or "exact")
        if widest not in MATCH_LEVELS:
            raise ValueError(f"fallback must be one of {', '.join(MATCH_LEVELS[1:])}, or a bool")
        allowed = MATCH_LEVELS[: MATCH_LEVELS.index(widest) + 1]
        # (level, match the target family instead of the string, filter device, toolchain)
        levels = [("exact", False, device_model is not None, toolchain is not None)]
        if "other_toolchain" in allowed and toolchain is not None:
            levels.append(("other_toolchain", False, device_model is not None, False))
        if "other_device" in allowed and device_model is not None:
            levels.append(("other_device", False, False, False))
        family = target_family(target)
        if "same_isa" in allowed and family != target:
            levels.append(("same_isa", True, False, False))
        with self._read() as conn:
            for name, by_family, by_device, by_toolchain in levels:
                params = {
                    "workload_key": workload_key,
                    "target": family if by_family else target,
                    "device_model": device_model,
                    "toolchain": toolchain,
                    "k": k,
                }
                statement = _best_statement(by_family, by_device, by_toolchain)
                rows = conn.execute(statement, params).all()
                if rows:
                    return BestResult(name, [_row_record(row) for row in rows])
        return BestResult("none", [])

    # --- record queries ---------------------------------------------------------------

    def query_records(
        self,
        *,
        workload_key: str | None = None,
        target: str | None = None,
        device_model: str | None = None,
        toolchain: str | None = None,
        job_id: str | None = None,
        error_kind: str | Sequence[str] | None = None,
        ok: bool | None = None,
        since: float | None = None,
        until: float | None = None,
        order: RecordOrder = "id",
        limit: int | None = 100,
        offset: int = 0,
    ) -> list[Record]:
        """Records matching every filter given, one page of them.

        ``ok`` selects error-free (True) or failed (False) records; ``since``/``until``
        bound ``timestamp`` (since <= t < until). ``order``: ``"id"`` (the order they were
        stored), ``"timestamp"``, or ``"cost"`` (median cost, failed records last). Every
        order ends with the storage order, so pages never overlap or skip.
        """
        _check_page(limit, offset)
        conditions = _filters(
            workload_key=workload_key, target=target, device_model=device_model,
            toolchain=toolchain, job_id=job_id, error_kind=error_kind, ok=ok, since=since,
            until=until,
        )
        if order == "id":
            ordering: list[Any] = [_R.id]
        elif order == "timestamp":
            ordering = [_R.timestamp, _R.id]
        elif order == "cost":
            ordering = [_R.median_cost.is_(None), _R.median_cost, _R.id]
        else:
            raise ValueError(f"order must be 'id', 'timestamp' or 'cost', got {order!r}")
        statement = _select_records().where(*conditions).order_by(*ordering).offset(offset)
        if limit is not None:
            statement = statement.limit(limit)
        with self._read() as conn:
            return [_row_record(row) for row in conn.execute(statement)]

    def count_records(
        self,
        *,
        workload_key: str | None = None,
        target: str | None = None,
        device_model: str | None = None,
        toolchain: str | None = None,
        job_id: str | None = None,
        error_kind: str | Sequence[str] | None = None,
        ok: bool | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> int:
        """How many records match (the same filters as :meth:`query_records`)."""
        conditions = _filters(
            workload_key=workload_key, target=target, device_model=device_model,
            toolchain=toolchain, job_id=job_id, error_kind=error_kind, ok=ok, since=since,
            until=until,
        )
        with self._read() as conn:
            return int(conn.execute(select(func.count()).select_from(_R).where(*conditions))
                       .scalar_one())

    def iter_records(self, *, batch_size: int = 1000, **filters: Any) -> Iterator[Record]:
        """Every matching record in storage order, read in batches (keyset pagination, so
        it is cheap on any table size); takes the filters of :meth:`query_records`."""
        conditions = _filters(**filters)
        last_id = -1
        while True:
            statement = (
                _select_records()
                .add_columns(_R.id)
                .where(*conditions, _R.id > last_id)
                .order_by(_R.id)
                .limit(batch_size)
            )
            with self._read() as conn:
                rows = conn.execute(statement).all()
            if not rows:
                return
            for row in rows:
                yield _row_record(row)
            last_id = rows[-1].id

    # --- summaries and distillation ---------------------------------------------------

    def summaries(
        self,
        *,
        workload_key: str | None = None,
        target: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Summary]:
        """One :class:`Summary` per (workload, target), ordered by workload key and target:
        record count, error-free count, best median cost, first and last measurement time."""
        _check_page(limit, offset)
        grouped = (
            select(
                _R.workload_key,
                _R.target,
                func.count().label("records"),
                func.count(_R.median_cost).label("ok_records"),
                func.min(_R.median_cost).label("best_cost"),
                func.min(_R.timestamp).label("first_seen"),
                func.max(_R.timestamp).label("last_seen"),
            )
            .where(*_filters(workload_key=workload_key, target=target))
            .group_by(_R.workload_key, _R.target)
            .subquery()
        )
        statement = (
            select(grouped, Workload.flops)
            .join(Workload, Workload.key == grouped.c.workload_key)
            .order_by(grouped.c.workload_key, grouped.c.target)
            .offset(offset)
        )
        if limit is not None:
            statement = statement.limit(limit)
        with self._read() as conn:
            return [
                Summary(
                    workload_key=row.workload_key,
                    target=row.target,
                    records=row.records,
                    ok_records=row.ok_records,
                    best_cost=row.best_cost,
                    first_seen=row.first_seen,
                    last_seen=row.last_seen,
                    flops=row.flops,
                )
                for row in conn.execute(statement)
            ]

    def distill(
        self,
        k: int,
        *,
        workload_key: str | None = None,
        target: str | None = None,
        device_model: str | None = None,
        toolchain: str | None = None,
    ) -> list[Record]:
        """The best ``k`` error-free records of every (workload, target), ranked as in
        :meth:`best`; ordered by workload key, target, then rank. The filters choose which
        records take part (e.g. only those of one device model)."""
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be in 1..{MAX_K}, got {k}")
        rank = (
            func.row_number()
            .over(partition_by=(_R.workload_key, _R.target), order_by=(_R.median_cost, _R.id))
            .label("rank")
        )
        conditions = _filters(
            workload_key=workload_key, target=target, device_model=device_model,
            toolchain=toolchain, ok=True,
        )
        ranked = select(_R.id, rank).where(*conditions).subquery()
        statement = (
            _select_records()
            .join(ranked, ranked.c.id == _R.id)
            .where(ranked.c.rank <= k)
            .order_by(_R.workload_key, _R.target, ranked.c.rank)
        )
        with self._read() as conn:
            return [_row_record(row) for row in conn.execute(statement)]
