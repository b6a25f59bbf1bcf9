"""The :class:`Database` API: one object per database, safe to share between threads (not
across ``fork``: a child process opens its own).

It combines the record, log, job, token and snapshot operations (each in its own module)
and owns the schema: a new, empty database is created at the current schema on first use;
an older one must be brought up to date with :meth:`Database.upgrade`
(``tensortune db upgrade``), never silently.
"""

from __future__ import annotations

from .errors import SchemaError
from .job_store import JobStore
from .logs import LogStore
from .schema import current_revision, existing_tables, head_revision, known_revisions
from .schema import upgrade as run_upgrade
from .snapshot_store import SnapshotStore
from .token_store import TokenStore


class Database(LogStore, JobStore, TokenStore, SnapshotStore):
    """The tuning database at ``url``.

    ``url``: an SQLAlchemy URL (``sqlite:///PATH``, ``postgresql://USER@HOST/DB``), a path
    to an SQLite file, or None for ``$TENSORTUNE_DB_URL`` or else
    ``$TENSORTUNE_HOME/tuning.db`` (default home ``~/.tensortune``).

    ``create``: create the schema when the database is empty (default True). Nothing is
    opened until the first operation; failing to reach the database then raises
    :class:`~db.errors.DatabaseUnavailableError` naming the URL (password masked).
    """

    def __init__(self, url: str | None = None, *, create: bool = True) -> None:
        super().__init__(url)
        self._create = create

    # --- schema -----------------------------------------------------------------------

    def schema_revision(self) -> str | None:
        """The schema revision the database is at (None: no tensortune schema yet)."""
        with self._connect(write=False) as conn:
            return current_revision(conn)

    def upgrade(self, revision: str = "head") -> tuple[str | None, str | None]:
        """Bring the database to ``revision`` (default: the newest) without losing a row;
        return (revision before, revision after). Safe to run concurrently and again."""
        with self._connect(write=True) as conn:
            before = current_revision(conn)
            if before is not None and before not in known_revisions():
                raise SchemaError(self._newer_message(before))
            run_upgrade(conn, revision)
            after = current_revision(conn)
        self._schema_ready = after == head_revision()
        return before, after

    def _newer_message(self, revision: str) -> str:
        return (
            f"the database {self.display_url} is at schema revision {revision!r}, which this "
            f"tensortune does not know (newest it knows: {head_revision()}); was it upgraded "
            "by a newer tensortune?"
        )

    def _ensure_schema(self) -> None:
        if self._schema_ready:
            return
        with self._schema_lock:
            if self._schema_ready:
                return
            head = head_revision()
            with self._connect(write=False) as conn:
                revision = current_revision(conn)
                tables = existing_tables(conn) if revision is None else set()
            if revision == head:
                self._schema_ready = True
                return
            if revision is None and tables:
                raise SchemaError(
                    f"the database {self.display_url} has tensortune tables "
                    f"({', '.join(sorted(tables))}) but no schema version table; it was not "
                    "made by tensortune, or its alembic_version table was dropped"
                )
            if revision is None and self._create:
                self.upgrade()
                return
            if revision is None:
                raise SchemaError(
                    f"the database {self.display_url} has no tensortune schema; create it "
                    f"with `tensortune db upgrade --db {self.display_url}`"
                )
            if revision in known_revisions():
                raise SchemaError(
                    f"the database {self.display_url} is at schema revision {revision}, "
                    f"older than this tensortune's {head}: run `tensortune db upgrade --db "
                    f"{self.display_url}` (it keeps every row)"
                )
            raise SchemaError(self._newer_message(revision))

