"""Database layer: SQLAlchemy models, the Database API, log import/export and migrations.

Imports nothing of ours; records cross this boundary as JSON-able dicts and dataclasses.
Other layers use only what is exported here (``from db import Database, Record``)::

    from db import Database
    db = Database()                      # $TENSORTUNE_DB_URL or $TENSORTUNE_HOME/tuning.db
    db.add_records([record_dict, ...])   # -> how many were new
    answer = db.best(workload_key, "cpu -isa=avx512 -cores=2", k=3)
    answer.match, answer.records         # "exact", [Record, ...] best first

The record JSON format, the identity of a measurement and the best-query fallback order
are documented in ``db/FORMAT.md``.
"""

from .database import Database
from .engine import URL_ENV, mask_url, tensortune_home
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
from .job_store import JOB_STATUSES, TRANSITIONS, Job
from .logs import (
    T4_SCHEMA_VERSION,
    BadLine,
    ImportReport,
    read_jsonl,
    t4_result,
    write_jsonl,
    write_t4,
)
from .record_store import MATCH_LEVELS, BestResult, Summary
from .records import (
    ERROR_KINDS,
    FORMAT_VERSION,
    IDENTITY_FIELDS,
    Record,
    canonical_json,
    target_family,
)
from .schema import head_revision
from .snapshot_store import Snapshot
from .token_store import ApiTokenInfo

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
    "Database",
    "DatabaseError",
    "DatabaseUnavailableError",
    "ImportFileError",
    "ImportReport",
    "Job",
    "JobStateError",
    "NotFoundError",
    "Record",
    "RecordError",
    "SchemaError",
    "Snapshot",
    "Summary",
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
