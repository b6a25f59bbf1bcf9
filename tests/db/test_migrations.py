"""Schema migrations on both backends: the models and the Alembic scripts agree, an old
database with rows upgrades to head without losing one, and databases at the wrong
revision are refused with a message that says what to do."""

from __future__ import annotations

import json

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, text

from db import Database, Record, SchemaError, canonical_json, head_revision
from db.models import Base
from db.record_store import _record_row
from tests.db.helpers import TARGET, batch, key, record


def test_models_match_migrations(db: Database) -> None:
    assert db.upgrade() == (None, head_revision())
    assert db.upgrade() == (head_revision(), head_revision())  # again: nothing to do
    with db.connector.read() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"db/models.py and db/migrations disagree: {diff}"


def _old_rows(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """Workload and record rows as revision 0001 stored them (no family, mean or min)."""
    workloads, rows = {}, []
    for data in records:
        rec = Record.from_dict(data)
        workloads[rec.workload_key] = {
            "key": rec.workload_key, "workload_json": canonical_json(rec.workload),
            "flops": rec.flops,
            "created_at": 1.0,
        }
        row = _record_row(rec)
        for new_column in ("target_family", "mean_cost", "min_cost"):
            del row[new_column]
        rows.append(row)
    return list(workloads.values()), rows


def test_upgrade_from_the_initial_revision_keeps_every_row(db_url: str) -> None:
    old = Database(db_url, create=False)
    assert old.upgrade("0001") == (None, "0001")
    records = batch(0, 50, workloads=5)
    records += [record("w1", error_kind="compile_error", timestamp=1.8e9)]
    records += [record("w2", [0.5, 0.1, 0.3], target="cpu -isa=avx512 -cores=16")]
    workloads, rows = _old_rows(records)
    engine = create_engine(old.connector.url)
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO workloads (key, workload_json, flops, created_at) "
                 "VALUES (:key, :workload_json, :flops, :created_at)"),
            workloads,
        )
        columns = list(rows[0])
        conn.execute(
            text(f"INSERT INTO records ({', '.join(columns)}) "
                 f"VALUES ({', '.join(':' + c for c in columns)})"),
            rows,
        )
        conn.execute(
            text("INSERT INTO jobs (id, status, spec_json, progress_json, owner, error, "
                 "created_at, updated_at) VALUES ('j1', 'running', '{}', '{}', NULL, '', 1, 1)")
        )
    engine.dispose()
    old.close()

    current = Database(db_url)
    with pytest.raises(SchemaError, match=r"schema revision 0001, older than .*db upgrade"):
        current.count_records()
    assert current.schema_revision() == "0001"
    assert current.upgrade() == ("0001", head_revision())
    assert current.count_records() == len(records) == 52
    assert current.jobs.get("j1").status == "running"
    with current.connector.read() as conn:
        backfilled = conn.execute(
            text("SELECT target, target_family, costs_json, mean_cost, min_cost FROM records")
        ).all()
    assert len(backfilled) == 52
    for target, family, costs_json, mean, minimum in backfilled:
        assert family == "cpu -isa=avx512" and target.startswith(family)
        costs = json.loads(costs_json)
        assert (mean, minimum) == ((sum(costs) / len(costs), min(costs)) if costs else (None, None))
    # the new columns and indexes work on the old rows
    widened = current.best(key("w2"), "cpu -isa=avx512 -cores=64", fallback=True)
    assert widened.match == "same_isa"
    ranked = current.best(key("w0"), TARGET, k=100).records
    expected = [Record.from_dict(r) for r in records if r["workload_key"] == key("w0")]
    assert {r.measurement_id for r in ranked} == {r.measurement_id for r in expected}
    assert [r.median_cost for r in ranked] == sorted(r.median_cost or 0 for r in expected)
    assert current.add_records(records) == 0  # old rows keep their measurement ids
    current.close()


def test_refuses_databases_at_unknown_revisions_or_without_version(db_url: str) -> None:
    database = Database(db_url)
    database.add_records([record()])
    with database.connector.write() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
    database.close()
    newer = Database(db_url)
    with pytest.raises(SchemaError, match="revision 'ffff', which this tensortune does not know"):
        newer.count_records()
    with pytest.raises(SchemaError, match="does not know"):
        newer.upgrade()
    engine = create_engine(newer.connector.url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE alembic_version"))
    engine.dispose()
    newer.close()
    with pytest.raises(SchemaError, match="has tensortune tables .* but no schema version"):
        Database(db_url).count_records()


def test_create_false_on_an_empty_database(db_url: str) -> None:
    database = Database(db_url, create=False)
    with pytest.raises(SchemaError, match="has no tensortune schema; create it with `tensortune"):
        database.count_records()
    assert database.schema_revision() is None
    database.upgrade()
    assert database.count_records() == 0
    database.close()
