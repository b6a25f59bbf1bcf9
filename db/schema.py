"""Schema versions: running the Alembic migrations shipped in ``db/migrations`` and telling
whether a database is at the revision this code needs.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text

from .models import Base

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: The tables of the current schema.
TABLES = frozenset(Base.metadata.tables)
# Key of the PostgreSQL advisory lock that serialises concurrent upgrades.
_PG_UPGRADE_LOCK = 0x7475_6E65  # "tune"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic configuration for the shipped scripts (no ``alembic.ini`` needed)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The newest schema revision (the one :mod:`db.models` describes)."""
    head = _scripts().get_current_head()
    assert head is not None, "db/migrations/versions holds no revision"
    return head


def known_revisions() -> list[str]:
    """Every revision, oldest first."""
    return [script.revision for script in reversed(list(_scripts().walk_revisions()))]


def current_revision(conn: Connection) -> str | None:
    """The revision the database is at, or None when it has no version table."""
    return MigrationContext.configure(conn).get_current_revision()


def existing_tables(conn: Connection) -> set[str]:
    """Which tensortune tables the database holds."""
    return TABLES & set(inspect(conn).get_table_names())


def upgrade(conn: Connection, revision: str = "head") -> None:
    """Apply the migrations up to ``revision`` on ``conn``, inside the transaction the
    caller opened (so the upgrade is all-or-nothing), after taking the upgrade lock:
    ``BEGIN IMMEDIATE`` on SQLite (taken by the caller), an advisory lock on PostgreSQL."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_UPGRADE_LOCK})
    command.upgrade(alembic_config(conn), revision)
