"""Connections: which database a URL names, how an engine for it is made, the schema check,
and how driver errors become one-line :class:`~db.errors.DatabaseError` messages.

:class:`Connector` owns the engine of one database and hands out read connections and write
transactions to the stores that share it. SQLite gets WAL mode, a busy timeout, foreign keys and
``BEGIN IMMEDIATE`` for writes (so concurrent writers queue on the lock instead of failing
when a read transaction would have to be upgraded); PostgreSQL gets ``psycopg`` (v3),
pre-ping and a connect timeout. An SQLite file that cannot be opened for writing (a
read-only mount or file) is opened read-only instead: reading works, and a write fails
with a one-line :class:`ReadOnlyDatabaseError`.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy.exc as sa_exc
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from .errors import DatabaseError, DatabaseUnavailableError, SchemaError
from .schema import current_revision, existing_tables, head_revision, known_revisions
from .schema import upgrade as run_upgrade

#: The environment variable naming the database (any SQLAlchemy URL; ``postgresql://...``).
URL_ENV = "TENSORTUNE_DB_URL"
#: The environment variable naming tensortune's home directory (default ``~/.tensortune``).
HOME_ENV = "TENSORTUNE_HOME"
DEFAULT_DB_FILE = "tuning.db"
#: How long an SQLite writer waits for another writer's lock before giving up.
BUSY_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10

# PostgreSQL SQLSTATEs that mean "run the transaction again".
_RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock


class TransientError(DatabaseError):
    """A write lost a deadlock or serialization race; running it again is safe."""


class ReadOnlyDatabaseError(DatabaseError):
    """A write to a database that could only be opened read-only."""


def _read_only_urls(url: URL) -> list[URL]:
    """Read-only URLs of an SQLite file that exists (none for anything else): read-only
    with locking first (sees what other processes write), then immutable (no locks and no
    WAL files: what a read-only mount allows; it sees the file as it is)."""
    path = url.database or ""
    if url.get_backend_name() != "sqlite" or _sqlite_is_memory(url) or path.startswith(
            "file:") or not Path(path).expanduser().is_file():
        return []
    uri = Path(path).expanduser().absolute().as_uri().removeprefix("file://")
    return [make_url(f"sqlite:///file:{uri}?mode=ro&uri=true"),
            make_url(f"sqlite:///file:{uri}?mode=ro&immutable=1&uri=true")]


def tensortune_home() -> Path:
    """``$TENSORTUNE_HOME`` or ``~/.tensortune``."""
    return Path(os.environ.get(HOME_ENV) or "~/.tensortune").expanduser()


def mask_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (sa_exc.ArgumentError, ValueError):
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def resolve_url(url: str | None) -> tuple[URL, str]:
    """The SQLAlchemy URL for ``url`` and the text to show users (password masked).

    ``None`` means ``$TENSORTUNE_DB_URL`` or else the SQLite file
    ``$TENSORTUNE_HOME/tuning.db``. A string without ``://`` is a path to an SQLite file.
    ``postgresql://`` and ``postgres://`` use the psycopg (v3) driver.
    """
    if url is None:
        url = os.environ.get(URL_ENV) or None
    if url is None:
        url = f"sqlite:///{tensortune_home() / DEFAULT_DB_FILE}"
    elif "://" not in url:
        url = f"sqlite:///{Path(url).expanduser().absolute()}"
    display = mask_url(url)
    try:
        parsed = make_url(url)
    except (sa_exc.ArgumentError, ValueError) as exc:
        raise DatabaseUnavailableError(f"not a database URL: {display} ({exc})") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed, display


def _sqlite_is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"


def _set_wal_mode(cursor: Any) -> None:
    """Switch the file to WAL mode (persistent; a no-op once done). Switching needs an
    exclusive lock, and SQLite may answer "database is locked" at once instead of waiting
    on the busy timeout when several processes open a new file together: retry then."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any, *, memory: bool) -> None:
    # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's implicit transactions
    # would defer it and never use IMMEDIATE).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    if not memory:
        _set_wal_mode(cursor)
    cursor.execute("PRAGMA foreign_keys = ON")
    # 32 MiB of page cache per connection (default 2 MiB): the indexes of a million records
    # are ~100 MiB, and inserts touch random pages of the measurement-id index.
    cursor.execute("PRAGMA cache_size = -32768")
    cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get("tensortune_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def make_engine(url: URL, display: str) -> Engine:
    """An engine for ``url`` configured as described in the module docstring."""
    backend = url.get_backend_name()
    try:
        if backend == "sqlite":
            memory = _sqlite_is_memory(url)
            kwargs: dict[str, Any] = {
                "connect_args": {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
            }
            if memory:
                kwargs["poolclass"] = StaticPool
            engine = create_engine(url, **kwargs)

            @event.listens_for(engine, "connect")
            def on_connect(dbapi_connection: Any, record: Any) -> None:
                _sqlite_on_connect(dbapi_connection, record, memory=memory)

            event.listen(engine, "begin", _sqlite_on_begin)
            return engine
        if backend == "postgresql":
            return create_engine(
                url, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
            )
    except (ImportError, sa_exc.NoSuchModuleError) as exc:
        hint = " (pip install 'tensortune[postgres]')" if backend == "postgresql" else ""
        raise DatabaseUnavailableError(
            f"no driver for the database {display}: {exc}{hint}"
        ) from None
    except sa_exc.ArgumentError as exc:
        raise DatabaseUnavailableError(f"bad database URL {display}: {exc}") from None
    raise DatabaseUnavailableError(
        f"unsupported database {display}: use sqlite:///PATH or postgresql://USER@HOST/DB"
    )


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


class Connector:
    """Owns the engine of one database: its URL, the schema check, read connections and
    write transactions. :class:`db.Database` makes one and shares it with its stores
    (records, :class:`~db.job_store.JobStore`, :class:`~db.token_store.TokenStore`,
    :class:`~db.snapshot_store.SnapshotStore`); a store can also be given one directly.

    ``create``: create the schema when the database is empty (default True). Nothing is
    opened until the first operation; failing to reach the database then raises
    :class:`~db.errors.DatabaseUnavailableError` naming the URL (password masked). An
    SQLite file's directory is created then if it is missing.
    """

    def __init__(self, url: str | None = None, *, create: bool = True) -> None:
        self.url, self.display_url = resolve_url(url)
        self.engine = make_engine(self.url, self.display_url)
        self._create = create
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        self._engine_lock = threading.Lock()
        self._directory_ready = self.url.get_backend_name() != "sqlite" or _sqlite_is_memory(
            self.url
        )
        self.read_only = False
        """Whether the database could only be opened read-only (then writes fail)."""

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self.engine.dialect.name

    def close(self) -> None:
        """Close every pooled connection (the object can still be used afterwards)."""
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.display_url!r})"

    # --- connections ------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reading (SQLite: one transaction, rolled back at the end;
        PostgreSQL: autocommit, every statement its own snapshot)."""
        self._ensure_schema()
        with self._connect(write=False) as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed when the block ends, rolled back on any error."""
        self._ensure_schema()
        with self._connect(write=True) as conn:
            yield conn

    def _make_directory(self) -> None:
        """Create the directory of an SQLite file on first use (``sqlite:///new/dir/x.db``)."""
        if self._directory_ready:
            return
        path = self.url.database or ""
        if path and not path.startswith("file:"):
            try:
                Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._unavailable(exc) from None
        self._directory_ready = True

    def _open(self) -> Connection:
        """A connection; an SQLite file that cannot be opened for writing is reopened
        read-only (for the rest of this connector's life: make a new one to write again
        once the file or mount is writable)."""
        engine = self.engine
        try:
            return engine.connect()
        except sa_exc.DBAPIError as exc:
            reason = _first_line(exc)
            if self.read_only or not ("unable to open" in reason or "readonly" in reason):
                raise self._unavailable(exc) from None
            failure: sa_exc.DBAPIError = exc
        with self._engine_lock:  # one thread swaps the engine; the others use the new one
            if self.engine is not engine:
                return self.engine.connect()
            for url in _read_only_urls(self.url):
                candidate = make_engine(url, self.display_url)
                try:
                    conn = candidate.connect()
                    conn.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar()
                except sa_exc.DBAPIError as exc:
                    candidate.dispose()
                    failure = exc
                    continue
                engine.dispose()
                self.engine, self.read_only = candidate, True
                return conn
        raise self._unavailable(failure) from None

    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[Connection]:
        if not self.read_only:
            self._make_directory()
        conn = self._open()
        if write and self.read_only:
            conn.close()
            raise ReadOnlyDatabaseError(
                f"the database {self.display_url} is read-only (a read-only file or mount): "
                "it can be read, not written")
        try:
            with self._errors("writing to" if write else "reading"):
                if write:
                    conn.execution_options(tensortune_write=True)
                    with conn.begin():
                        yield conn
                else:
                    if self.url.get_backend_name() == "postgresql":
                        # Each read statement sees one snapshot anyway; without BEGIN and
                        # ROLLBACK a query costs one round trip instead of three.
                        conn.execution_options(isolation_level="AUTOCOMMIT")
                    yield conn
        finally:
            conn.close()

    # --- the schema -------------------------------------------------------------------

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
        """Check once that the database is at this code's schema revision; create the
        schema in an empty database (``create``); otherwise raise a SchemaError saying what
        to do. An older database is never upgraded silently."""
        if self._schema_ready:
            return
        with self._schema_lock:
            if self._schema_ready:
                return
            head = head_revision()
            with self._connect(write=False) as conn:
                # tables first: another process's creation commits the tables and the
                # version table together, so tables seen here mean its version is seen next
                # (read the other way round, a commit in between looked like foreign tables)
                tables = existing_tables(conn)
                revision = current_revision(conn)
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

    # --- errors -----------------------------------------------------------------------

    def _unavailable(self, exc: BaseException) -> DatabaseUnavailableError:
        reason = _first_line(exc)
        password = self.url.password
        if password:
            reason = reason.replace(str(password), "***")
        if self.url.get_backend_name() == "sqlite":
            return DatabaseUnavailableError(
                f"cannot open the database {self.display_url}: {reason} "
                "(does its directory exist, and is it writable?)"
            )
        return DatabaseUnavailableError(
            f"cannot connect to the database {self.display_url}: {reason}"
        )

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Turn SQLAlchemy/driver errors raised in the block into one-line DatabaseErrors."""
        try:
            yield
        except DatabaseError:
            raise
        except sa_exc.DBAPIError as exc:
            raise self._translate(exc, action) from exc
        except sa_exc.SQLAlchemyError as exc:
            raise DatabaseError(f"{action} {self.display_url} failed: {_first_line(exc)}") from exc

    def _translate(self, exc: sa_exc.DBAPIError, action: str) -> DatabaseError:
        reason = _first_line(exc)
        sqlstate = getattr(exc.orig, "sqlstate", None) or ""
        if sqlstate in _RETRYABLE_SQLSTATES:
            return TransientError(f"{action} {self.display_url} lost a race: {reason}")
        if exc.connection_invalidated or sqlstate.startswith(("08", "57P")):
            return self._unavailable(exc)
        if "database is locked" in reason or "database is busy" in reason:
            return DatabaseError(
                f"the database {self.display_url} stayed locked by another writer for "
                f"{BUSY_TIMEOUT_S:g} s; try again"
            )
        if "unable to open database file" in reason or "readonly database" in reason:
            return self._unavailable(exc)
        return DatabaseError(f"{action} {self.display_url} failed: {reason}")


class StoreBase:
    """The base of the stores (:class:`db.Database` for records, ``JobStore``,
    ``TokenStore``, ``SnapshotStore``): each works through a :class:`Connector`, shared by
    every store of one database. Given a URL (or None for the default database) instead of
    a connector, a store makes its own."""

    def __init__(self, connector: Connector | str | None = None) -> None:
        self.connector = connector if isinstance(connector, Connector) else Connector(connector)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.connector.display_url!r})"
