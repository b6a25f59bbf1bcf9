"""Outranked records: the verdict that a program was slower than another program of its
workload and target when the two were timed in the same moment.

Records are measurements and stay as they were taken. But a figure says as much about
the moment it was taken in as about the program: on a shared host one program measures
1.73 ms in a fast minute and 2.6 ms in a slow one, so the program with the lowest record
is often the one measured in the fastest minute. When a later comparison times the
leading programs side by side in interleaved rounds and finds one of them slower than
another, the slower one's records are marked outranked, and the best query
(:meth:`db.Database.best`, :meth:`db.Database.distill`) passes over them. A record of the
program measured afterwards is not outranked: it is a new look.

The verdicts live in the database only; a JSON-lines export carries the records, not the
verdicts (``db/FORMAT.md``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, exists, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from .errors import RecordError
from .models import OutrankedRow, RecordRow
from .records import MAX_JOB_ID_LEN

# Ids per IN (...) list (older SQLite builds allow 999 bound parameters a statement).
_IN_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Outranking:
    """The record ``measurement_id`` is outranked by the record ``by_measurement_id`` (same
    workload and target, both error-free): in one comparison its program took ``ratio``
    (> 1) times as long. ``job_id``: the job whose comparison found it."""

    measurement_id: str
    by_measurement_id: str
    ratio: float
    job_id: str | None = None


def not_outranked() -> ColumnElement[bool]:
    """The SQL condition that a records row has no outranking verdict."""
    return ~exists(select(OutrankedRow.measurement_id)
                   .where(OutrankedRow.measurement_id == RecordRow.measurement_id))


def insert_outrankings(conn: Connection, verdicts: Sequence[Outranking]) -> int:
    """Check ``verdicts`` against the stored records and store the new ones (a record
    already outranked keeps its first verdict); returns how many were new. Raises
    :class:`~db.errors.RecordError`, storing none, if any verdict is malformed or does
    not pair two error-free records of one workload and target."""
    if not verdicts:
        return 0
    ids = {v.measurement_id for v in verdicts} | {v.by_measurement_id for v in verdicts}
    rows = {row.measurement_id: row for row in conn.execute(
        select(RecordRow.measurement_id, RecordRow.workload_key, RecordRow.target,
               RecordRow.median_cost).where(RecordRow.measurement_id.in_(ids)))}
    for n, verdict in enumerate(verdicts):
        _check(n, verdict, rows)
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    now = time.time()
    added = 0
    first: dict[str, Outranking] = {}
    for verdict in verdicts:
        first.setdefault(verdict.measurement_id, verdict)
    for verdict in first.values():
        statement = insert(OutrankedRow).values(
            measurement_id=verdict.measurement_id, by_measurement_id=verdict.by_measurement_id,
            ratio=verdict.ratio, job_id=verdict.job_id, created_at=now,
        ).on_conflict_do_nothing(index_elements=["measurement_id"]).returning(
            OutrankedRow.measurement_id)
        added += len(conn.execute(statement).all())  # no row back where one was stored
    return added


def _check(n: int, verdict: Outranking, rows: dict[str, Any]) -> None:
    where = f"outranking {n}"
    if not (isinstance(verdict.ratio, float | int) and math.isfinite(verdict.ratio)
            and verdict.ratio > 1.0):
        raise RecordError(f"{where}: ratio must be a finite number above 1, got "
                          f"{verdict.ratio!r}")
    if verdict.job_id is not None and len(verdict.job_id) > MAX_JOB_ID_LEN:
        raise RecordError(f"{where}: job_id is longer than {MAX_JOB_ID_LEN} characters")
    if verdict.measurement_id == verdict.by_measurement_id:
        raise RecordError(f"{where}: a record cannot outrank itself")
    for role, mid in (("record", verdict.measurement_id), ("outranking record",
                                                           verdict.by_measurement_id)):
        row = rows.get(mid)
        if row is None:
            raise RecordError(f"{where}: no {role} with measurement id {mid!r} is stored")
        if row.median_cost is None:
            raise RecordError(f"{where}: the {role} {mid[:12]} is a failed measurement")
    loser, winner = rows[verdict.measurement_id], rows[verdict.by_measurement_id]
    if (loser.workload_key, loser.target) != (winner.workload_key, winner.target):
        raise RecordError(f"{where}: the two records are of different workloads or targets")


def find_outrankings(conn: Connection, measurement_ids: Sequence[str]) -> dict[str, Outranking]:
    """The stored verdicts on ``measurement_ids``, by the outranked record's id."""
    ids = sorted(set(measurement_ids))
    found: dict[str, Outranking] = {}
    for start in range(0, len(ids), _IN_CHUNK):
        rows = conn.execute(
            select(OutrankedRow.measurement_id, OutrankedRow.by_measurement_id,
                   OutrankedRow.ratio, OutrankedRow.job_id)
            .where(OutrankedRow.measurement_id.in_(ids[start:start + _IN_CHUNK])))
        found.update({row.measurement_id: Outranking(row.measurement_id, row.by_measurement_id,
                                                     row.ratio, row.job_id) for row in rows})
    return found
