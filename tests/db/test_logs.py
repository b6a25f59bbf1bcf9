"""JSON-lines export/import (round trip, unknown fields, malformed lines, no duplicates)
and the T4 export, on both backends."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from db import (
    T4_SCHEMA_VERSION,
    Database,
    DatabaseError,
    ImportFileError,
    Record,
    read_jsonl,
    write_jsonl,
)
from tests.db.backends import fresh_url
from tests.db.helpers import TARGET, batch, key, record


def _snapshot(db: Database) -> list[Record]:
    return sorted(db.query_records(limit=None), key=lambda r: r.measurement_id)


def _mixed_records() -> list[dict]:
    records = batch(0, 40, workloads=4)
    records += [record("w1", error_kind=kind, timestamp=1.8e9 + i, error_msg=f"é {kind} ☃")
                for i, kind in enumerate(("compile_error", "run_timeout", "device_lost"))]
    records += [record("w2", [0.1, 0.2], target="cuda -arch=sm_90", job_id="j1", flags="")]
    return records


def test_round_trip_gives_same_records_and_best_answers(
    db: Database, backend: str, tmp_path: Path
) -> None:
    db.add_records(_mixed_records())
    path = tmp_path / "records.jsonl"
    assert db.export_jsonl(path) == 44
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 44 and all(json.loads(line)["version"] == 1 for line in lines)
    with fresh_url(backend, tmp_path) as url:
        other = Database(url)
        report = other.import_jsonl(path)
        assert (report.records, report.added, report.already_present) == (44, 44, 0)
        assert report.imported and report.bad_lines == [] and report.unknown_fields == []
        assert _snapshot(other) == _snapshot(db)
        for s in db.summaries():
            for fallback in (False, True):
                assert other.best(s.workload_key, s.target, k=3, fallback=fallback) == db.best(
                    s.workload_key, s.target, k=3, fallback=fallback
                )
        # exporting again gives the same bytes (ids and values are exact)
        again = tmp_path / "again.jsonl"
        other.export_jsonl(again)
        assert sorted(again.read_text().splitlines()) == sorted(lines)
        other.close()


def test_import_never_duplicates(db: Database, tmp_path: Path) -> None:
    db.add_records(batch(0, 10))
    path = tmp_path / "r.jsonl"
    write_jsonl([Record.from_dict(r) for r in batch(5, 20)], path)
    report = db.import_jsonl(path)
    assert (report.records, report.added, report.already_present) == (15, 10, 5)
    report = db.import_jsonl(path)
    assert (report.added, report.already_present) == (0, 15)
    assert db.count_records() == 20
    # the same record twice in one file is one record
    twice = tmp_path / "twice.jsonl"
    line = Record.from_dict(record("new")).to_json()
    twice.write_text(line + "\n" + line + "\n")
    assert db.import_jsonl(twice).added == 1 and db.count_records() == 21


def test_import_tolerates_unknown_fields_and_blank_lines(db: Database, tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    rows = [
        {**record("a"), "gpu_clock_mhz": 1980, "id": "not-checked"},
        {**record("b"), "energy": {"joules": 1.5}},
    ]
    path.write_text("\n" + json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\n   \n")
    report = db.import_jsonl(path)
    assert (report.lines, report.added) == (2, 2)
    assert report.unknown_fields == ["energy", "gpu_clock_mhz"]
    assert db.best(key("a"), TARGET).best == Record.from_dict(record("a"))


def _bad_file(tmp_path: Path) -> Path:
    good = [Record.from_dict(r).to_json() for r in batch(0, 6)]
    lines = [
        good[0],
        '{"workload_key": "abc"',  # truncated JSON (line 2)
        good[1],
        json.dumps({**record("x"), "costs": "fast"}),  # bad field (line 4)
        good[2],
        "",
        "[1, 2, 3]",  # not an object (line 7)
        good[3],
        json.dumps({k: v for k, v in record("y").items() if k != "target"}),  # line 9
        good[4],
        good[5][: len(good[5]) // 2],  # truncated last line, no newline (line 11)
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines))
    return path


def test_malformed_lines_reject_the_whole_file(db: Database, tmp_path: Path) -> None:
    db.add_records([record("kept")])
    path = _bad_file(tmp_path)
    with pytest.raises(ImportFileError) as info:
        db.import_jsonl(path)
    report = info.value.report
    assert [b.line for b in report.bad_lines] == [2, 4, 7, 9, 11]
    messages = {b.line: b.message for b in report.bad_lines}
    assert messages[2].startswith("not valid JSON")
    assert messages[4] == "field 'costs': expected a list of numbers, got str"
    assert messages[7] == "expected a JSON object, got list"
    assert messages[9] == "missing field 'target'"
    assert (report.added, report.imported) == (0, False)
    text = str(info.value)
    assert text.startswith(f"{path}: 5 malformed line(s), nothing imported (line 2: not valid")
    assert "line 11: not valid JSON" in text and "more" not in text
    assert "\n" not in text and "--skip-bad-lines" in text
    assert db.count_records() == 1  # nothing from the file
    many = tmp_path / "many.jsonl"
    many.write_text("{\n" * 8)
    with pytest.raises(ImportFileError, match=r"8 malformed .*line 5: .*; and 3 more\)") as info:
        db.import_jsonl(many)
    assert len(info.value.report.bad_lines) == 8


def test_skip_bad_lines_imports_the_rest(db: Database, tmp_path: Path) -> None:
    report = db.import_jsonl(_bad_file(tmp_path), skip_bad_lines=True)
    assert [b.line for b in report.bad_lines] == [2, 4, 7, 9, 11]
    assert (report.lines, report.records, report.added, report.imported) == (10, 5, 5, True)
    assert db.count_records() == 5
    assert report.to_dict()["bad_lines"][0] == {"line": 2, "message": report.bad_lines[0].message}


def test_file_objects_gzip_and_unreadable_files(db: Database, tmp_path: Path) -> None:
    db.add_records(batch(0, 7))
    buffer = io.StringIO()
    assert db.export_jsonl(buffer, workload_key=key("w1")) == 2
    binary = io.BytesIO()
    assert db.export_jsonl(binary) == 7
    assert binary.getvalue().decode().count("\n") == 7
    gz = tmp_path / "r.jsonl.gz"
    assert db.export_jsonl(gz) == 7
    with gzip.open(gz, "rt") as handle:
        assert len(handle.read().splitlines()) == 7
    assert [n for n, _ in read_jsonl(gz)] == list(range(1, 8))
    assert db.import_jsonl(gz).already_present == 7
    assert db.import_jsonl(io.StringIO(buffer.getvalue())).already_present == 2
    with pytest.raises(DatabaseError, match=r"cannot read .*missing\.jsonl: No such file"):
        db.import_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(DatabaseError, match="cannot write .*: No such file"):
        db.export_jsonl(tmp_path / "no-dir" / "out.jsonl")
    not_gzip = tmp_path / "fake.jsonl.gz"
    not_gzip.write_text("plain")
    with pytest.raises(DatabaseError, match="cannot read .*fake.jsonl.gz"):
        db.import_jsonl(not_gzip)
    # a failed export leaves no file and no temporary behind
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_non_utf8_line_is_reported(db: Database, tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(Record.from_dict(record()).to_json().encode() + b"\n\xff\xfe{}\n")
    with pytest.raises(ImportFileError) as info:
        db.import_jsonl(path)
    assert info.value.report.bad_lines[0].line == 2
    assert info.value.report.bad_lines[0].message.startswith("not UTF-8 text")


def test_t4_export_shape(db: Database, tmp_path: Path) -> None:
    db.add_records(_mixed_records())
    path = tmp_path / "best.t4.json"
    count = db.export_t4(path, k=2)
    document = json.loads(path.read_text())
    assert set(document) == {"schema_version", "results"}
    assert document["schema_version"] == T4_SCHEMA_VERSION == "1.0.0"
    results = document["results"]
    assert len(results) == count == len(db.distill(2)) == 9  # 4 workloads x 2 + 1 cuda
    for result in results:
        # the T4 results schema: required fields and their types
        assert {"configuration", "times", "invalidity", "correctness"} <= set(result)
        assert isinstance(result["timestamp"], str) and result["timestamp"].endswith("+00:00")
        assert set(result["configuration"]) == {"workload_key", "target", "steps"}
        assert isinstance(result["times"]["runtimes"], list)
        assert isinstance(result["times"]["compilation_time"], float)
        assert result["invalidity"] == "correct" and result["correctness"] == 1
        assert result["objectives"] == ["time"]
        names = [m["name"] for m in result["measurements"]]
        assert names == ["time", "time_mean", "time_min", "gflops"]
        assert all(isinstance(m["value"], float) and m["unit"] for m in result["measurements"])
    everything = tmp_path / "all.t4.json"
    assert db.export_t4(everything) == 44
    invalid = {r["invalidity"] for r in json.loads(everything.read_text())["results"]}
    assert invalid == {"correct", "compile", "timeout", "runtime"}
    allowed = {"timeout", "compile", "runtime", "correctness", "constraints", "correct"}
    assert invalid <= allowed
