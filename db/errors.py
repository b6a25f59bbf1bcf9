"""The exceptions of the database layer.

Everything this package raises on purpose is a :class:`DatabaseError`, with a message that
names the problem in one line (a URL, a field, a line number, a job id) and never a raw
driver traceback. Callers (the CLI, the REST API) can print ``str(exc)`` as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .logs import ImportReport


class DatabaseError(Exception):
    """Base class of every error the database layer raises on purpose."""


class DatabaseUnavailableError(DatabaseError):
    """The database cannot be reached or opened (bad URL, server down, missing driver,
    unwritable file). The message names the URL with its password masked."""


class SchemaError(DatabaseError):
    """The database schema is not the one this version of tensortune works with (too old:
    run ``tensortune db upgrade``; newer; or not a tensortune database at all)."""


class RecordError(DatabaseError, ValueError):
    """A record (a dict or a JSON line) is malformed; the message names the field."""


class WorkloadConflictError(DatabaseError):
    """A workload key arrived with a workload JSON different from the one stored for it."""


class NotFoundError(DatabaseError, LookupError):
    """A job, token or other object named by id does not exist."""


class JobStateError(DatabaseError):
    """A job status change that the job's lifecycle does not allow (e.g. succeeded -> running)."""


class ImportFileError(DatabaseError):
    """A JSON-lines file was rejected; nothing from it was imported.

    ``report`` holds every malformed line with its line number.
    """

    def __init__(self, message: str, report: ImportReport) -> None:
        super().__init__(message)
        self.report = report
