"""Connections: which database a URL names, how an engine for it is made, and how driver
errors become one-line :class:`~db.errors.DatabaseError` messages.

:class:`Store` is the base of :class:`db.Database`: it owns the engine and hands out read
connections and write transactions. SQLite gets WAL mode, a busy timeout, foreign keys and
``BEGIN IMMEDIATE`` for writes (so concurrent writers queue on the lock instead of failing
when a read transaction would have to be upgraded); PostgreSQL gets ``psycopg`` (v3),
pre-ping and a connect timeout.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy.exc as sa_exc
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from .errors import DatabaseError, DatabaseUnavailableError

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
        home = tensortune_home()
        home.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{home / DEFAULT_DB_FILE}"
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


def _sqlite_on_connect(dbapi_connection: Any, _record: Any, *, memory: bool) -> None:
    # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's implicit transactions
    # would defer it and never use IMMEDIATE).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    if not memory:
        cursor.execute("PRAGMA journal_mode = WAL")
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


class Store:
    """Owns the engine of one database; the base of :class:`db.Database`."""

    def __init__(self, url: str | None = None) -> None:
        self._url, self.display_url = resolve_url(url)
        self._engine = make_engine(self._url, self.display_url)
        self._schema_ready = False
        self._schema_lock = threading.Lock()

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._engine.dialect.name

    def close(self) -> None:
        """Close every pooled connection (the object can still be used afterwards)."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.display_url!r})"

    # --- connections ------------------------------------------------------------------

    def _ensure_schema(self) -> None:  # overridden by Database
        self._schema_ready = True

    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[Connection]:
        try:
            conn = self._engine.connect()
        except sa_exc.DBAPIError as exc:
            raise self._unavailable(exc) from None
        try:
            with self._errors("writing to" if write else "reading"):
                if write:
                    conn.execution_options(tensortune_write=True)
                    with conn.begin():
                        yield conn
                else:
                    if self._url.get_backend_name() == "postgresql":
                        # Each read statement sees one snapshot anyway; without BEGIN and
                        # ROLLBACK a query costs one round trip instead of three.
                        conn.execution_options(isolation_level="AUTOCOMMIT")
                    yield conn
        finally:
            conn.close()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A connection for reading (SQLite: one transaction, rolled back at the end;
        PostgreSQL: autocommit, every statement its own snapshot)."""
        self._ensure_schema()
        with self._connect(write=False) as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction: committed when the block ends, rolled back on any error."""
        self._ensure_schema()
        with self._connect(write=True) as conn:
            yield conn

    # --- errors -----------------------------------------------------------------------

    def _unavailable(self, exc: BaseException) -> DatabaseUnavailableError:
        reason = _first_line(exc)
        password = self._url.password
        if password:
            reason = reason.replace(str(password), "***")
        if self._url.get_backend_name() == "sqlite":
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
