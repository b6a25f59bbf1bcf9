"""Database backends for the tests: SQLite (a file in a temporary directory) and
PostgreSQL (a fresh schema of the server at $TENSORTUNE_TEST_PG_URL, default
postgresql://postgres@127.0.0.1:5432/test, dropped afterwards). Where that server is
unreachable the PostgreSQL half is skipped with a reason that says so in capitals."""

from __future__ import annotations

import contextlib
import os
import uuid
import warnings
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

import pytest

PG_URL = os.environ.get("TENSORTUNE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


@lru_cache(maxsize=1)
def postgres_problem() -> str | None:
    """None when the test PostgreSQL server answers, else why not."""
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - psycopg is a dev dependency
        return f"psycopg is not installed ({exc})"
    try:
        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return str(exc).strip().splitlines()[0]
    return None


def skip_without_postgres() -> None:
    problem = postgres_problem()
    if problem is not None:
        message = f"POSTGRESQL UNREACHABLE at {PG_URL}, PostgreSQL half skipped: {problem}"
        warnings.warn(message, stacklevel=2)
        pytest.skip(message)


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql)


@contextlib.contextmanager
def fresh_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database on ``backend``; removed afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / f'tt-{uuid.uuid4().hex[:8]}.db'}"
        return
    skip_without_postgres()
    schema = f"tt_test_{uuid.uuid4().hex[:12]}"
    _pg_admin(f"CREATE SCHEMA {schema}")
    try:
        sep = "&" if "?" in PG_URL else "?"
        yield f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        _pg_admin(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]
