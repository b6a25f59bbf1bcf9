"""The shape of the database API: one Connector per database, shared by the records
(``Database``) and the job, token and snapshot stores; the SQLite directory made on first
use; the record filter in one place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import db
from db import (
    Connector,
    Database,
    DatabaseError,
    JobStore,
    RecordError,
    RecordFilter,
    SnapshotStore,
    TokenStore,
)
from tests.db.helpers import TARGET, batch, record


def test_stores_share_the_database_connector(db: Database) -> None:
    assert isinstance(db.connector, Connector)
    assert isinstance(db.jobs, JobStore)
    assert isinstance(db.tokens, TokenStore)
    assert isinstance(db.snapshots, SnapshotStore)
    assert db.jobs.connector is db.connector
    assert db.tokens.connector is db.connector
    assert db.snapshots.connector is db.connector
    job = db.jobs.create({"trials": 1})
    # A store made on its own (from the connector or the URL) sees the same rows.
    assert JobStore(db.connector).get(job.id) == job
    other = JobStore(db.display_url if db.dialect == "sqlite" else db.connector)
    assert other.get(job.id) == job


def test_no_two_public_classes_share_a_name() -> None:
    from db import models
    from schedule import Workload

    public = {name for name in db.__all__ if isinstance(getattr(db, name), type)}
    rows = {name for name, value in vars(models).items()
            if isinstance(value, type) and issubclass(value, models.Base)}
    assert not public & rows
    assert Workload.__name__ not in rows and "Job" not in rows and "Record" not in rows


def test_sqlite_directory_is_made_on_first_use(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "dir"
    database = Database(f"sqlite:///{directory / 'x.db'}")
    assert not directory.exists()  # nothing is opened before the first operation
    secret, info = database.tokens.create("ana")
    assert (directory / "x.db").is_file()
    assert database.tokens.verify(secret) == info
    database.close()


def test_token_create_with_a_url_in_a_new_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tuner.cli import main

    path = tmp_path / "fresh" / "sub" / "x.db"
    monkeypatch.setenv("TENSORTUNE_DB_URL", f"sqlite:///{path}")
    assert main(["token", "create", "--role", "reader", "--owner", "ana", "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["owner"] == "ana"
    with Database() as database:
        assert database.tokens.verify(created["token"]) is not None


def test_default_home_is_made_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "nested"
    monkeypatch.setenv("TENSORTUNE_HOME", str(home))
    monkeypatch.delenv("TENSORTUNE_DB_URL", raising=False)
    with Database() as database:
        assert database.count_records() == 0
    assert (home / "tuning.db").is_file()


def test_an_unmakeable_directory_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    database = Database(f"sqlite:///{blocker / 'sub' / 'x.db'}")
    with pytest.raises(DatabaseError, match="cannot open the database") as info:
        database.jobs.list()
    assert "\n" not in str(info.value)


def test_record_filter_is_the_filter_of_every_record_query(db: Database) -> None:
    db.add_records([*batch(0, 4), record("mm", [2e-3], job_id="j1"),
                    record("mm", [1e-3], job_id="j1", target="cpu -isa=avx2 -cores=2")])
    where = {"job_id": "j1", "target": TARGET}
    chosen = db.query_records(**where, limit=None)
    assert [(r.job_id, r.target) for r in chosen] == [("j1", TARGET)]
    assert db.count_records(**where) == 1
    assert list(db.iter_records(**where)) == chosen
    assert db.distill(5, **where) == chosen
    assert len(RecordFilter(**where).conditions()) == 2
    assert RecordFilter().conditions() == []
    with pytest.raises(TypeError):
        db.query_records(colour="red")
    with pytest.raises(RecordError, match="unknown error_kind 'oops'"):
        db.count_records(error_kind="oops")
