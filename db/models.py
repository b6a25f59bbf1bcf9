"""The SQLAlchemy 2.0 ORM models: the current schema, table by table.

These classes describe the schema at the newest Alembic revision (``db/migrations``); the
test suite checks that the two agree on SQLite and PostgreSQL. Change a model only
together with a new migration. Each is named after a row of its table (``WorkloadRow``,
``RecordRow``, ...), so none shares a name with the data types of this or another layer
(``schedule.Workload``, ``db.Record``, ``db.Job``).

JSON values are stored as canonical JSON text (``*_json`` columns), times as float seconds
since the epoch, so that both backends hold exactly the same values and a round trip
through a JSON-lines file is exact.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# 64-bit ids on PostgreSQL; SQLite only auto-increments an INTEGER PRIMARY KEY (its rowid).
BigId = BigInteger().with_variant(Integer(), "sqlite")

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# The partial indexes behind the best query hold error-free records only.
_OK = text("median_cost IS NOT NULL")


class Base(DeclarativeBase):
    """Declarative base of every tensortune table."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class WorkloadRow(Base):
    """A workload: its key (a hash computed by the schedule layer) and canonical JSON."""

    __tablename__ = "workloads"

    key: Mapped[str] = mapped_column(String(32), primary_key=True)
    workload_json: Mapped[str] = mapped_column(Text)
    flops: Mapped[float | None] = mapped_column(Double)
    created_at: Mapped[float] = mapped_column(Double)


class RecordRow(Base):
    """One measurement. ``measurement_id`` (unique) is the hash of its identity fields, so
    adding the same measurement twice stores it once. ``median_cost``/``mean_cost``/
    ``min_cost`` are computed at insert time and NULL for records with an error."""

    __tablename__ = "records"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    measurement_id: Mapped[str] = mapped_column(String(64), unique=True)
    workload_key: Mapped[str] = mapped_column(String(32), ForeignKey("workloads.key"))
    target: Mapped[str] = mapped_column(String(512))
    # The ISA family of ``target`` (db.records.target_family), for the "same_isa" fallback.
    target_family: Mapped[str] = mapped_column(String(512), server_default="")
    device_model: Mapped[str] = mapped_column(String(255))
    toolchain: Mapped[str] = mapped_column(String(255))
    host: Mapped[str] = mapped_column(String(255))
    flags: Mapped[str] = mapped_column(Text)
    measure_json: Mapped[str] = mapped_column(Text)
    steps_json: Mapped[str] = mapped_column(Text)
    costs_json: Mapped[str] = mapped_column(Text)
    error_kind: Mapped[str] = mapped_column(String(32))
    error_msg: Mapped[str] = mapped_column(Text)
    median_cost: Mapped[float | None] = mapped_column(Double)
    mean_cost: Mapped[float | None] = mapped_column(Double)
    min_cost: Mapped[float | None] = mapped_column(Double)
    build_s: Mapped[float] = mapped_column(Double)
    run_s: Mapped[float] = mapped_column(Double)
    timestamp: Mapped[float] = mapped_column(Double)
    job_id: Mapped[str | None] = mapped_column(String(64), index=True)
    version: Mapped[int] = mapped_column(Integer)

    __table_args__ = (
        # best(): exact target, ranked by median cost (ties by insertion order).
        Index(
            "ix_records_best",
            "workload_key", "target", "median_cost", "id",
            sqlite_where=_OK, postgresql_where=_OK,
        ),
        # best() with a device_model filter.
        Index(
            "ix_records_best_device",
            "workload_key", "target", "device_model", "median_cost", "id",
            sqlite_where=_OK, postgresql_where=_OK,
        ),
        # best() widened to the same ISA family (fallback "same_isa").
        Index(
            "ix_records_best_family",
            "workload_key", "target_family", "median_cost", "id",
            sqlite_where=_OK, postgresql_where=_OK,
        ),
        # summaries() and record queries per (workload, target) in time order.
        Index("ix_records_workload_target_time", "workload_key", "target", "timestamp"),
    )


class OutrankedRow(Base):
    """A record the best query passes over: its program was timed slower than the program
    of ``by_measurement_id`` (a record of the same workload and target) when the two were
    measured in the same moment, by ``ratio`` (median of the per-round ratios). Records
    stay as measured; this is a later verdict on them (``Database.outrank``)."""

    __tablename__ = "outranked"

    measurement_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("records.measurement_id"), primary_key=True)
    by_measurement_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("records.measurement_id"))
    ratio: Mapped[float] = mapped_column(Double)
    job_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Double)


class JobRow(Base):
    """A tuning job: its lifecycle status, spec and progress (JSON), owner and times."""

    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    spec_json: Mapped[str] = mapped_column(Text)
    progress_json: Mapped[str] = mapped_column(Text)
    owner: Mapped[str | None] = mapped_column(String(255), index=True)
    error: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)
    started_at: Mapped[float | None] = mapped_column(Double)
    finished_at: Mapped[float | None] = mapped_column(Double)
    runner: Mapped[str | None] = mapped_column(String(255))

    __table_args__ = (Index("ix_jobs_status_created_at", "status", "created_at"),)


class ApiTokenRow(Base):
    """An API token. Only the SHA-256 of the secret is stored, never the secret."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[float] = mapped_column(Double)
    revoked_at: Mapped[float | None] = mapped_column(Double)


class SnapshotRow(Base):
    """A serialised cost model (opaque bytes) for one task and target; newest id wins."""

    __tablename__ = "cost_model_snapshots"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    task: Mapped[str] = mapped_column(String(255))
    target: Mapped[str] = mapped_column(String(512))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    meta_json: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Double)

    __table_args__ = (Index("ix_cost_model_snapshots_task_target", "task", "target", "id"),)
