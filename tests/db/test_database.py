"""The Database API on both backends: idempotent adds, the best query (ranking, target
isolation, fallback reporting), filtered/paginated queries, summaries, distill, errors."""

from __future__ import annotations

import pytest

from db import (
    Database,
    DatabaseError,
    DatabaseUnavailableError,
    Record,
    RecordError,
    WorkloadConflictError,
)
from tests.db.helpers import DEVICE, TARGET, TOOLCHAIN, batch, key, record

# --- adding records ---------------------------------------------------------------------


def test_add_is_idempotent(db: Database) -> None:
    records = batch(0, 30)
    assert db.add_records(records) == 30
    assert db.add_records(records) == 0
    assert db.add_records(batch(20, 40)) == 10  # overlapping batch: only the new ones
    assert db.add_records(records[:3] + records[:3]) == 0  # duplicates inside one batch
    assert db.count_records() == 40
    assert db.add_records([]) == 0


def test_records_and_dicts_are_equivalent(db: Database) -> None:
    data = record("a")
    assert db.add_records([Record.from_dict(data)]) == 1
    assert db.add_records([data]) == 0
    [stored] = db.query_records()
    assert stored == Record.from_dict(data)


def test_bad_record_writes_nothing_and_names_index_and_field(db: Database) -> None:
    good = batch(0, 3)
    bad = record("a", costs=[-1.0])
    with pytest.raises(RecordError, match=r"record 3: field 'costs\[0\]'"):
        db.add_records([*good, bad])
    assert db.count_records() == 0


def test_workload_key_with_other_workload_is_rejected(db: Database) -> None:
    db.add_records([record("a")])
    other = record("a", timestamp=1_790_000_123.0, workload={"op": "softmax", "params": {}})
    with pytest.raises(WorkloadConflictError, match=f"workload key {key('a')} is already"):
        db.add_records([other, record("b")])
    assert db.count_records() == 1  # the whole batch was rolled back
    with pytest.raises(WorkloadConflictError, match="two different workloads in one batch"):
        db.add_records([record("c"), {**record("c", timestamp=2e9), "workload": {"op": "x"}}])


def test_flops_filled_in_when_first_unknown(db: Database) -> None:
    db.add_records([record("a", flops=None)])
    db.add_records([record("a", timestamp=1_790_000_001.0)])
    assert db.summaries()[0].flops == record("a")["flops"]


# --- the best query ---------------------------------------------------------------------


def test_best_ranks_by_median_among_error_free_records(db: Database) -> None:
    wk = key("mm")
    db.add_records(
        [
            # medians: 3.0, 2.0 (min 0.1 but median high would be 2.0), 1.5, errors
            record("mm", [3.0, 3.0, 3.0], timestamp=1e9 + 1),
            record("mm", [0.1, 2.0, 9.0], timestamp=1e9 + 2),
            record("mm", [1.5], timestamp=1e9 + 3),
            record("mm", error_kind="compile_error", timestamp=1e9 + 4),
            record("mm", error_kind="run_timeout", timestamp=1e9 + 5),
            record("mm", error_kind="wrong_answer", timestamp=1e9 + 6),
        ]
    )
    answer = db.best(wk, TARGET, k=5)
    assert answer.match == "exact"
    assert [r.median_cost for r in answer.records] == [1.5, 2.0, 3.0]
    assert all(r.error_kind == "none" for r in answer.records)
    assert db.best(wk, TARGET).records == answer.records[:1]
    assert answer.best is answer.records[0]


def test_best_ties_go_to_the_record_stored_first(db: Database) -> None:
    db.add_records([record("mm", [1.0], timestamp=1e9 + 5)])
    db.add_records([record("mm", [1.0], timestamp=1e9 + 1)])
    [first, second] = db.best(key("mm"), TARGET, k=2).records
    assert (first.timestamp, second.timestamp) == (1e9 + 5, 1e9 + 1)


def test_best_never_returns_another_target_without_fallback(db: Database) -> None:
    wk = key("mm")
    db.add_records(
        [
            record("mm", [5.0], target="cpu -isa=avx512 -cores=2"),
            record("mm", [0.1], target="cpu -isa=avx512 -cores=16"),
            record("mm", [0.01], target="cpu -isa=avx2 -cores=2"),
            record("mm", [0.001], target="cuda -arch=sm_90"),
            record("other", [0.0001], target="cpu -isa=avx512 -cores=2"),
        ]
    )
    answer = db.best(wk, "cpu -isa=avx512 -cores=2", k=10)
    assert answer.match == "exact"
    assert [(r.target, r.costs) for r in answer.records] == [("cpu -isa=avx512 -cores=2", [5.0])]
    none = db.best(wk, "cpu -isa=avx512 -cores=8", k=10)
    assert (none.match, none.records, none.best) == ("none", [], None)
    assert db.best(key("nothing"), TARGET).match == "none"


def test_fallback_chain_reports_the_level_used(db: Database) -> None:
    wk = key("mm")
    db.add_records(
        [
            record("mm", [4.0], device_model="EPYC", toolchain="gcc 12"),
            record("mm", [3.0], device_model="EPYC", toolchain="gcc 13"),
            record("mm", [2.0], device_model="Xeon", toolchain="gcc 12"),
            record("mm", [1.0], target="cpu -isa=avx512 -cores=16", device_model="Xeon"),
        ]
    )
    exact = db.best(wk, TARGET, device_model="EPYC", toolchain="gcc 12", fallback=True)
    assert (exact.match, exact.best and exact.best.costs) == ("exact", [4.0])
    # no filters: exact target string, any device and toolchain
    assert db.best(wk, TARGET).best.costs == [2.0]  # type: ignore[union-attr]

    chain = [
        (dict(device_model="EPYC", toolchain="clang 17"), "other_toolchain", [[3.0, 4.0]]),
        (dict(device_model="Arm", toolchain="gcc 12"), "other_device", [[2.0, 3.0, 4.0]]),
        (dict(device_model="EPYC"), "exact", [[3.0, 4.0]]),
    ]
    for filters, match, costs in chain:
        answer = db.best(wk, TARGET, k=5, fallback=True, **filters)  # type: ignore[arg-type]
        assert answer.match == match, filters
        assert [[c for r in answer.records for c in r.costs]] == costs, filters

    # narrower allowed fallback stops earlier
    assert db.best(wk, TARGET, device_model="Arm", fallback="other_toolchain").match == "none"
    assert db.best(wk, TARGET, device_model="Arm", fallback=False).match == "none"
    # another target of the same ISA: only with same_isa, and it says so
    other = "cpu -isa=avx512 -cores=64"
    assert db.best(wk, other, fallback="other_device").match == "none"
    widened = db.best(wk, other, k=5, fallback="same_isa")
    assert widened.match == "same_isa"
    assert [r.costs for r in widened.records] == [[1.0], [2.0], [3.0], [4.0]]
    assert db.best(wk, "cpu -isa=sve -cores=2", fallback=True).match == "none"


def test_best_rejects_bad_arguments(db: Database) -> None:
    with pytest.raises(ValueError, match="k must be"):
        db.best(key("mm"), TARGET, k=0)
    with pytest.raises(ValueError, match="fallback must be one of"):
        db.best(key("mm"), TARGET, fallback="anything")  # type: ignore[arg-type]


# --- queries, summaries, distill --------------------------------------------------------


def test_query_filters_and_pagination(db: Database) -> None:
    records = batch(0, 25, workloads=2)
    records.append(record("w0", error_kind="compile_error", timestamp=1_800_000_000.0))
    records.append(record("w0", [0.5], job_id="job-7", timestamp=1_800_000_001.0))
    db.add_records(records)
    assert db.count_records() == 27
    assert db.count_records(workload_key=key("w0")) == 15
    assert db.count_records(ok=False) == 1
    assert db.count_records(error_kind=["compile_error", "run_timeout"]) == 1
    assert [r.job_id for r in db.query_records(job_id="job-7")] == ["job-7"]
    assert db.count_records(since=1_790_000_010.0, until=1_790_000_020.0) == 10
    assert db.count_records(target="cuda -arch=sm_90") == 0
    assert db.count_records(device_model=DEVICE, toolchain=TOOLCHAIN) == 27

    for order in ("id", "timestamp", "cost"):
        pages = [db.query_records(order=order, limit=10, offset=o) for o in (0, 10, 20, 30)]
        assert [len(p) for p in pages] == [10, 10, 7, 0]
        flat = [r.measurement_id for page in pages for r in page]
        assert len(set(flat)) == 27
        assert flat == [r.measurement_id for r in db.query_records(order=order, limit=None)]
    by_time = db.query_records(order="timestamp", limit=None)
    assert [r.timestamp for r in by_time] == sorted(r.timestamp for r in by_time)
    by_cost = db.query_records(order="cost", limit=None)
    assert by_cost[-1].error_kind == "compile_error"
    medians = [r.median_cost for r in by_cost[:-1]]
    assert medians == sorted(medians)  # type: ignore[type-var]
    assert len(list(db.iter_records(batch_size=4))) == 27
    assert len(list(db.iter_records(batch_size=4, workload_key=key("w1")))) == 12

    with pytest.raises(RecordError, match="unknown error_kind 'nope'"):
        db.query_records(error_kind="nope")
    with pytest.raises(ValueError, match="order must be"):
        db.query_records(order="size")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit must be"):
        db.query_records(limit=-1)


def test_summaries(db: Database) -> None:
    db.add_records(
        [
            record("a", [2.0], timestamp=1e9 + 10),
            record("a", [1.0, 3.0], timestamp=1e9 + 20),
            record("a", error_kind="runtime_error", timestamp=1e9 + 5),
            record("a", [9.0], timestamp=1e9 + 30, target="cuda -arch=sm_90"),
            record("b", error_kind="compile_error", timestamp=1e9 + 7),
        ]
    )
    rows = {(s.workload_key, s.target): s for s in db.summaries()}
    a = rows[(key("a"), TARGET)]
    assert (a.records, a.ok_records, a.best_cost) == (3, 2, 2.0)
    assert (a.first_seen, a.last_seen) == (1e9 + 5, 1e9 + 20)
    assert a.best_gflops == pytest.approx(a.flops / 2.0 / 1e9)  # type: ignore[operator]
    b = rows[(key("b"), TARGET)]
    assert (b.records, b.ok_records, b.best_cost, b.best_gflops) == (1, 0, None, None)
    assert len(rows) == 3
    assert [s.target for s in db.summaries(workload_key=key("a"))] == sorted(
        [TARGET, "cuda -arch=sm_90"]
    )
    assert len(db.summaries(limit=2)) == 2 and len(db.summaries(offset=2)) == 1


def test_distill_keeps_best_k_per_workload_and_target(db: Database) -> None:
    records = [record("a", [float(c)], timestamp=1e9 + c) for c in (5, 1, 4, 2, 3)]
    records += [record("a", [float(c)], timestamp=1e9 + c, target="cuda -arch=sm_90")
                for c in (7, 6)]
    records += [record("b", [0.5], timestamp=1e9), record("b", error_kind="compile_error")]
    records += [record("c", error_kind="run_timeout")]
    db.add_records(records)
    distilled = db.distill(2)
    got = [(r.workload_key, r.target, r.costs) for r in distilled]
    expected = sorted(
        [
            (key("a"), TARGET, [1.0]),
            (key("a"), TARGET, [2.0]),
            (key("a"), "cuda -arch=sm_90", [6.0]),
            (key("a"), "cuda -arch=sm_90", [7.0]),
            (key("b"), TARGET, [0.5]),
        ],
        key=lambda t: (t[0], t[1], t[2]),
    )
    assert got == expected
    assert [r.costs for r in db.distill(1, target="cuda -arch=sm_90")] == [[6.0]]
    # distilled records answer the best query exactly as the full database does
    for wk, target in {(r.workload_key, r.target) for r in distilled}:
        assert db.best(wk, target, k=2).records == [
            r for r in distilled if (r.workload_key, r.target) == (wk, target)
        ]


# --- opening databases ------------------------------------------------------------------


def test_unreachable_postgres_is_one_clear_line_with_password_masked() -> None:
    database = Database("postgresql://tuner:s3cret@127.0.0.1:1/tuning")
    with pytest.raises(DatabaseUnavailableError) as info:
        database.count_records()
    message = str(info.value)
    assert message.startswith(
        "cannot connect to the database postgresql://tuner:***@127.0.0.1:1/tuning:"
    )
    assert "s3cret" not in message and "\n" not in message


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://x@y/z", "unsupported database mysql://x@y/z"),
        ("sqlite:////dev/null/sub/t.db", "cannot open the database"),
        ("postgresql://a:b@/x?sslmode=bogus", "cannot connect to the database"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(DatabaseError, match=message) as info:
        Database(url).count_records()
    assert "\n" not in str(info.value)


def test_default_url_is_sqlite_under_tensortune_home(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    home = Path(str(tmp_path)) / "home"
    monkeypatch.setenv("TENSORTUNE_HOME", str(home))
    monkeypatch.delenv("TENSORTUNE_DB_URL", raising=False)
    database = Database()
    assert database.display_url == f"sqlite:///{home / 'tuning.db'}"
    assert database.add_records([record()]) == 1
    with database.connector.read() as conn:  # WAL mode, foreign keys on, busy timeout set
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    database.close()
    monkeypatch.setenv("TENSORTUNE_DB_URL", f"sqlite:///{home / 'other.db'}")
    assert Database().display_url.endswith("other.db")
    assert Database(str(home / "p.db")).display_url == f"sqlite:///{home / 'p.db'}"
