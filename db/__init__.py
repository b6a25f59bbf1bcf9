"""Database layer: SQLAlchemy models, the Database API, log import/export and migrations.

Imports nothing of ours; records cross this boundary as JSON-able dicts and dataclasses.
Other layers use only what is exported here (``from db import Database, Record``)::

    from db import Database
    db = Database()                      # $TENSORTUNE_DB_URL or $TENSORTUNE_HOME/tuning.db
    db.add_records([record_dict, ...])   # -> how many were new
    answer = db.best(workload_key, "cpu -isa=avx512 -cores=2", k=3)
    answer.match, answer.records         # "exact", [Record, ...] best first
    db.query_records(job_id=job.id, ok=True, order="cost", limit=10)   # RecordFilter fields

A :class:`Database` is the tuning records; its other tables are stores that share its
connection (a :class:`Connector`)::

    job = db.jobs.create(spec, owner="ana"); db.jobs.claim(job.id, runner="host/pid")
    secret, info = db.tokens.create(); db.tokens.verify(secret)   # its own owner
    db.snapshots.save(task, target, blob, meta); db.snapshots.latest(task, target)

The record JSON format, the identity of a measurement and the best-query fallback order
are documented in ``db/FORMAT.md``.
"""

from .database import Database
from .engine import URL_ENV, Connector, ReadOnlyDatabaseError, mask_url, tensortune_home
from .errors import (
    DatabaseError,
    DatabaseUnavailableError,
    ImportFileError,
    JobStateError,
    NotFoundError,
    RecordError,
    SchemaError,
    WorkloadConflictError,
)
from .job_store import JOB_STATUSES, TRANSITIONS, Job, JobStore, JobTakenOver
from .logs import (
    T4_SCHEMA_VERSION,
    BadLine,
    ImportReport,
    read_jsonl,
    t4_result,
    write_jsonl,
    write_t4,
)
from .outranking import Outranking
from .record_store import MATCH_LEVELS, BestResult, RecordFilter, Summary
from .records import (
    ERROR_KINDS,
    FORMAT_VERSION,
    IDENTITY_FIELDS,
    Record,
    canonical_json,
    target_family,
)
from .schema import head_revision
from .snapshot_store import Snapshot, SnapshotStore
from .token_store import ApiTokenInfo, TokenStore

__all__ = [
    "ERROR_KINDS",
    "FORMAT_VERSION",
    "IDENTITY_FIELDS",
    "JOB_STATUSES",
    "MATCH_LEVELS",
    "T4_SCHEMA_VERSION",
    "TRANSITIONS",
    "URL_ENV",
    "ApiTokenInfo",
    "BadLine",
    "BestResult",
    "Connector",
    "Database",
    "DatabaseError",
    "DatabaseUnavailableError",
    "ImportFileError",
    "ImportReport",
    "Job",
    "JobStateError",
    "JobStore",
    "JobTakenOver",
    "NotFoundError",
    "Outranking",
    "ReadOnlyDatabaseError",
    "Record",
    "RecordError",
    "RecordFilter",
    "SchemaError",
    "Snapshot",
    "SnapshotStore",
    "Summary",
    "TokenStore",
    "WorkloadConflictError",
    "canonical_json",
    "head_revision",
    "mask_url",
    "read_jsonl",
    "t4_result",
    "target_family",
    "tensortune_home",
    "write_jsonl",
    "write_t4",
]
