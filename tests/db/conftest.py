"""Fixtures of the database tests: every test that takes ``backend``, ``db_url`` or ``db``
runs once on SQLite and once on PostgreSQL (see tests/db/backends.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from db import Database
from tests.db.backends import BACKENDS, fresh_url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    with fresh_url(backend, tmp_path) as url:
        yield url


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url)
    try:
        yield database
    finally:
        database.close()
