"""The :class:`Database`: the tuning records of one database (add, the best query, record
queries, summaries, distillation, import and export), and the stores of its other tables,
sharing its connection: ``db.jobs`` (:class:`~db.job_store.JobStore`), ``db.tokens``
(:class:`~db.token_store.TokenStore`) and ``db.snapshots``
(:class:`~db.snapshot_store.SnapshotStore`).

One object per database, safe to share between threads (not across ``fork``: a child
process opens its own). A new, empty database is created at the current schema on first
use; an older one must be brought up to date with :meth:`Database.upgrade`
(``tensortune db upgrade``), never silently.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from sqlalchemy import func, select

from .engine import Connector, StoreBase, TransientError
from .errors import RecordError, WorkloadConflictError
from .job_store import JobStore
from .logs import ImportReport, PathOrFile, import_batches, source_name, write_jsonl, write_t4
from .models import RecordRow, WorkloadRow
from .outranking import Outranking, find_outrankings, insert_outrankings, not_outranked
from .record_store import (
    MATCH_LEVELS,
    MAX_K,
    BestResult,
    Fallback,
    RecordFilter,
    RecordOrder,
    Summary,
    best_statement,
    check_page,
    insert_rows,
    prepare_rows,
    row_record,
    select_records,
)
from .records import Record, as_record, target_family
from .snapshot_store import SnapshotStore
from .token_store import TokenStore

_R = RecordRow
_WRITE_ATTEMPTS = 5


def _where(filters: Mapping[str, Any]) -> list[Any]:
    """The SQL conditions of record-query keyword filters (the fields of RecordFilter)."""
    return RecordFilter(**filters).conditions()


class Database(StoreBase):
    """The tuning database at ``url``: its records, and (as attributes) its ``jobs``,
    ``tokens`` and ``snapshots`` stores, all on one :class:`~db.engine.Connector`.

    ``url``: an SQLAlchemy URL (``sqlite:///PATH``, ``postgresql://USER@HOST/DB``), a path
    to an SQLite file, or None for ``$TENSORTUNE_DB_URL`` or else
    ``$TENSORTUNE_HOME/tuning.db`` (default home ``~/.tensortune``).

    ``create``: create the schema when the database is empty (default True). Nothing is
    opened until the first operation; failing to reach the database then raises
    :class:`~db.errors.DatabaseUnavailableError` naming the URL (password masked).
    """

    def __init__(self, url: str | None = None, *, create: bool = True) -> None:
        super().__init__(Connector(url, create=create))
        self.jobs = JobStore(self.connector)
        self.tokens = TokenStore(self.connector)
        self.snapshots = SnapshotStore(self.connector)

    # --- the database as a whole -------------------------------------------------------

    @property
    def display_url(self) -> str:
        """The database's URL with its password masked."""
        return self.connector.display_url

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self.connector.dialect

    def schema_revision(self) -> str | None:
        """The schema revision the database is at (None: no tensortune schema yet)."""
        return self.connector.schema_revision()

    def upgrade(self, revision: str = "head") -> tuple[str | None, str | None]:
        """Bring the database to ``revision`` (default: the newest) without losing a row;
        return (revision before, revision after). Safe to run concurrently and again."""
        return self.connector.upgrade(revision)

    def close(self) -> None:
        """Close every pooled connection (the object can still be used afterwards)."""
        self.connector.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        workloads, rows = prepare_rows(parsed)
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                with self.connector.write() as conn:
                    return insert_rows(conn, workloads, rows)
            except TransientError:
                if attempt == _WRITE_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

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
        report = ImportReport(source=source_name(src))
        batches = import_batches(src, report, skip_bad_lines=skip_bad_lines,
                                 batch_size=batch_size)
        with self.connector.write() as conn:
            for batch in batches:
                try:
                    report.added += insert_rows(conn, *prepare_rows(batch))
                except WorkloadConflictError as exc:
                    raise WorkloadConflictError(f"{report.source}: {exc}") from None
        report.already_present = report.records - report.added
        report.imported = True
        return report

    def outrank(self, verdicts: Iterable[Outranking]) -> int:
        """Mark records outranked (see :mod:`db.outranking`): the best query and
        :meth:`distill` pass over them from now on. One transaction; returns how many
        verdicts were new (a record already outranked keeps its first verdict). A verdict
        naming an unknown or failed record, or pairing records of different workloads or
        targets, raises :class:`~db.errors.RecordError` and stores none."""
        verdicts = list(verdicts)
        with self.connector.write() as conn:
            return insert_outrankings(conn, verdicts)

    def outranked(self, measurement_ids: Iterable[str]) -> dict[str, Outranking]:
        """The verdicts on those of ``measurement_ids`` that are outranked, by id."""
        with self.connector.read() as conn:
            return find_outrankings(conn, list(measurement_ids))

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
        with self.connector.read() as conn:
            for name, by_family, by_device, by_toolchain in levels:
                params = {
                    "workload_key": workload_key,
                    "target": family if by_family else target,
                    "device_model": device_model,
                    "toolchain": toolchain,
                    "k": k,
                }
                statement = best_statement(by_family, by_device, by_toolchain)
                rows = conn.execute(statement, params).all()
                if rows:
                    return BestResult(name, [row_record(row) for row in rows])
        return BestResult("none", [])

    # --- record queries ---------------------------------------------------------------

    def query_records(
        self,
        *,
        order: RecordOrder = "id",
        limit: int | None = 100,
        offset: int = 0,
        **filters: Any,
    ) -> list[Record]:
        """Records matching every filter given (the fields of :class:`RecordFilter`:
        ``workload_key``, ``target``, ``device_model``, ``toolchain``, ``job_id``,
        ``error_kind``, ``ok``, ``since``, ``until``), one page of them.

        ``order``: ``"id"`` (the order they were stored), ``"timestamp"``, or ``"cost"``
        (median cost, failed records last). Every order ends with the storage order, so
        pages never overlap or skip.
        """
        check_page(limit, offset)
        conditions = _where(filters)
        if order == "id":
            ordering: list[Any] = [_R.id]
        elif order == "timestamp":
            ordering = [_R.timestamp, _R.id]
        elif order == "cost":
            ordering = [_R.median_cost.is_(None), _R.median_cost, _R.id]
        else:
            raise ValueError(f"order must be 'id', 'timestamp' or 'cost', got {order!r}")
        statement = select_records().where(*conditions).order_by(*ordering).offset(offset)
        if limit is not None:
            statement = statement.limit(limit)
        with self.connector.read() as conn:
            return [row_record(row) for row in conn.execute(statement)]

    def count_records(self, **filters: Any) -> int:
        """How many records match (the filters of :meth:`query_records`)."""
        statement = select(func.count()).select_from(_R).where(*_where(filters))
        with self.connector.read() as conn:
            return int(conn.execute(statement).scalar_one())

    def iter_records(self, *, batch_size: int = 1000, **filters: Any) -> Iterator[Record]:
        """Every matching record in storage order, read in batches (keyset pagination, so
        it is cheap on any table size); takes the filters of :meth:`query_records`."""
        conditions = _where(filters)
        last_id = -1
        while True:
            statement = (
                select_records()
                .add_columns(_R.id)
                .where(*conditions, _R.id > last_id)
                .order_by(_R.id)
                .limit(batch_size)
            )
            with self.connector.read() as conn:
                rows = conn.execute(statement).all()
            if not rows:
                return
            for row in rows:
                yield row_record(row)
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
        check_page(limit, offset)
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
            .where(*RecordFilter(workload_key=workload_key, target=target).conditions())
            .group_by(_R.workload_key, _R.target)
            .subquery()
        )
        statement = (
            select(grouped, WorkloadRow.flops)
            .join(WorkloadRow, WorkloadRow.key == grouped.c.workload_key)
            .order_by(grouped.c.workload_key, grouped.c.target)
            .offset(offset)
        )
        if limit is not None:
            statement = statement.limit(limit)
        with self.connector.read() as conn:
            return [Summary(**row._mapping) for row in conn.execute(statement)]

    def distill(self, k: int, **filters: Any) -> list[Record]:
        """The best ``k`` error-free records of every (workload, target), ranked as in
        :meth:`best`; ordered by workload key, target, then rank. The filters (those of
        :meth:`query_records`) choose which records take part (e.g. only those of one
        device model)."""
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be in 1..{MAX_K}, got {k}")
        rank = (
            func.row_number()
            .over(partition_by=(_R.workload_key, _R.target), order_by=(_R.median_cost, _R.id))
            .label("rank")
        )
        conditions = [*replace(RecordFilter(**filters), ok=True).conditions(), not_outranked()]
        ranked = select(_R.id, rank).where(*conditions).subquery()
        statement = (
            select_records()
            .join(ranked, ranked.c.id == _R.id)
            .where(ranked.c.rank <= k)
            .order_by(_R.workload_key, _R.target, ranked.c.rank)
        )
        with self.connector.read() as conn:
            return [row_record(row) for row in conn.execute(statement)]

    # --- export -----------------------------------------------------------------------

    def export_jsonl(self, dest: PathOrFile, **filters: Any) -> int:
        """Write every record matching ``filters`` (those of ``query_records``) to
        ``dest`` as JSON lines, in storage order; return how many."""
        return write_jsonl(self.iter_records(**filters), dest)

    def export_t4(self, dest: PathOrFile, *, k: int | None = None, **filters: Any) -> int:
        """Write records as a T4 results document: the best ``k`` per (workload, target)
        when ``k`` is given (see ``distill``), else every record matching ``filters``."""
        records = self.distill(k, **filters) if k is not None else self.iter_records(**filters)
        return write_t4(records, dest)
