"""Several processes writing at once lose nothing and duplicate nothing; a process killed
(SIGKILL) in the middle of a batch leaves the batch all there or not there. Both backends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from db import Database, Record
from tests.db.helpers import batch

REPO_ROOT = Path(__file__).resolve().parents[2]
WRITERS = 5
SPAN = 500  # records per writer; writer i covers [i*250, i*250 + 500): neighbours overlap
BATCH = 50


def _spawn(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.db.writer", *args],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _expect_line(process: subprocess.Popen[str], expected: str) -> None:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if line != expected:
        process.kill()
        _, err = process.communicate(timeout=30)
        pytest.fail(f"writer said {line!r} instead of {expected!r}; stderr:\n{err}")


@pytest.mark.slow
def test_concurrent_writers_lose_nothing_and_duplicate_nothing(db_url: str, tmp_path: Path) -> None:
    # The database starts empty: the writers also race to create the schema.
    go = tmp_path / "go"
    ranges = [(i * SPAN // 2, i * SPAN // 2 + SPAN) for i in range(WRITERS - 1)]
    ranges.append((0, (WRITERS) * SPAN // 2))  # one writer covers everything
    writers = [_spawn("concurrent", db_url, str(a), str(b), str(BATCH), str(go))
               for a, b in ranges]
    for writer in writers:
        _expect_line(writer, "READY")
    go.touch()
    added = []
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        added.append(json.loads(out.strip().splitlines()[-1])["added"])
    total = max(b for _, b in ranges)
    expected = {Record.from_dict(r).measurement_id for r in batch(0, total)}
    database = Database(db_url)
    stored = [r.measurement_id for r in database.iter_records()]
    database.close()
    assert sum(added) == len(stored) == len(set(stored)) == total
    assert set(stored) == expected


@pytest.mark.slow
@pytest.mark.parametrize("when", ["mid", "after"])
def test_killed_writer_leaves_its_batch_all_or_nothing(db_url: str, when: str) -> None:
    database = Database(db_url)
    database.add_records(batch(0, 10))  # create the schema and some earlier records
    count = 2500  # three INSERT statements of at most 1000 rows
    writer = _spawn("hang", db_url, str(count), when)
    _expect_line(writer, "MID" if when == "mid" else "COMMITTED")
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    expected = 10 if when == "mid" else 10 + count
    assert database.count_records() == expected
    # the database is consistent and writable: the batch goes in whole afterwards
    assert database.add_records(batch(10_000, 10_000 + count)) == (count if when == "mid" else 0)
    assert database.count_records() == 10 + count
    if database.dialect == "sqlite":
        with database.connector.read() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    database.close()


def _open_and_write(path: str, go: str) -> str:
    while not os.path.exists(go):
        pass
    from db.engine import make_engine, resolve_url

    url, display = resolve_url(f"sqlite:///{path}")
    try:
        with make_engine(url, display).connect() as conn:
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
        return "ok"
    except Exception as exc:  # the assertion below shows what went wrong
        return f"{type(exc).__name__}: {exc}"


def test_processes_opening_a_new_sqlite_file_together_all_succeed(tmp_path: Path) -> None:
    """Switching a new file to WAL mode takes an exclusive lock that SQLite may refuse at
    once ("database is locked") without waiting on the busy timeout; opening retries."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for attempt in range(40):
        path, go = tmp_path / f"{attempt}.db", tmp_path / f"{attempt}.go"
        with context.Pool(6) as pool:
            pending = pool.starmap_async(_open_and_write, [(str(path), str(go))] * 6)
            go.touch()
            outcomes = pending.get(timeout=120)
        assert outcomes == ["ok"] * 6
