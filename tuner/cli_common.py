"""What every ``tensortune`` command shares: the one-line error type, the database
context, JSON printing."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any


class CLIError(Exception):
    """An expected failure, reported to the user as one line without a traceback."""


def _json_default(value: Any) -> Any:
    """Serialise numpy scalars (and anything else with ``.item()``) as plain numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


DB_HELP = (
    "database URL (sqlite:///PATH, postgresql://USER@HOST/DB) or SQLite file path; "
    "default: $TENSORTUNE_DB_URL, else $TENSORTUNE_HOME/tuning.db"
)


@contextlib.contextmanager
def _database(url: str | None) -> Iterator[Any]:
    """A ``db.Database`` for ``url``; its errors end as one CLI error line."""
    try:
        import db
    except ImportError as exc:
        raise CLIError(
            f"the database layer needs its dependencies ({exc}): pip install 'tensortune[db]'"
        ) from exc
    try:
        database = db.Database(url)
        try:
            yield database
        finally:
            database.close()
    except db.DatabaseError as exc:
        raise CLIError(str(exc)) from exc


def _print_json(payload: Any) -> None:
    print(json.dumps(payload, indent=2, default=_json_default))


