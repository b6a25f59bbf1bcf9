"""The ``tensortune db`` and ``tensortune records`` commands: upgrade, export, import,
distill (JSON lines and T4), their --json output and their one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from db import Database, head_revision
from tests.db.backends import BACKENDS, fresh_url
from tests.db.helpers import batch, key, record
from tuner.cli import main


@pytest.fixture
def url(tmp_path: Path) -> str:
    database = Database(f"sqlite:///{tmp_path / 'cli.db'}")
    records = [*batch(0, 20, workloads=4), record("w0", error_kind="compile_error")]
    database.add_records(records)
    database.close()
    return f"sqlite:///{tmp_path / 'cli.db'}"


@pytest.mark.parametrize(
    "argv",
    [
        ["db", "--help"],
        ["db", "upgrade", "--help"],
        ["records", "--help"],
        ["records", "export", "--help"],
        ["records", "import", "--help"],
        ["records", "distill", "--help"],
    ],
)
def test_help_shows_an_example(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tensortune") and "example" in out
    assert f"tensortune {argv[0]}" in out.split("example", 1)[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_db_upgrade(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with fresh_url(backend, tmp_path) as db_url:
        assert main(["db", "upgrade", "--db", db_url]) == 0
        out = capsys.readouterr().out
        assert f"schema upgraded from revision (empty) to {head_revision()}" in out
        assert main(["db", "upgrade", "--db", db_url, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["from_revision"] == report["to_revision"] == head_revision()


def test_export_import_round_trip(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "all.jsonl"
    assert main(["records", "export", str(out_file), "--db", url]) == 0
    assert capsys.readouterr().out.strip() == f"exported 21 record(s) to {out_file}"
    copy = f"sqlite:///{tmp_path / 'copy.db'}"
    assert main(["records", "import", str(out_file), "--db", copy]) == 0
    assert "imported 21 new record(s)" in capsys.readouterr().out
    assert main(["records", "import", str(out_file), "--db", copy, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["added"], report["already_present"], report["imported"]) == (0, 21, True)
    assert main(["records", "export", "-", "--db", url, "--workload-key", key("w1")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and all(json.loads(x)["workload_key"] == key("w1") for x in lines)


def test_import_rejects_a_file_with_bad_lines(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    good = json.dumps(record("new"))
    bad.write_text(f"{good}\nnot json\n{json.dumps({**record('x'), 'costs': 'fast'})}\n")
    assert main(["records", "import", str(bad), "--db", url]) == 1
    captured = capsys.readouterr()
    [line] = captured.err.strip().splitlines()
    assert line.startswith(f"tensortune: error: {bad}: 2 malformed line(s), nothing imported")
    assert "line 2: not valid JSON" in line and "line 3: field 'costs'" in line
    assert Database(url).count_records() == 21

    assert main(["records", "import", str(bad), "--db", url, "--json"]) == 1
    captured = capsys.readouterr()
    assert [b["line"] for b in json.loads(captured.out)["bad_lines"]] == [2, 3]

    assert main(["records", "import", str(bad), "--db", url, "--skip-bad-lines"]) == 0
    captured = capsys.readouterr()
    assert "imported 1 new record(s)" in captured.out
    assert captured.err.count("tensortune: warning:") == 2
    assert Database(url).count_records() == 22


def test_distill_jsonl_and_t4(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "best.jsonl"
    assert main(["records", "distill", "--k", "2", "--out", str(out_file), "--db", url]) == 0
    assert "8 to" in capsys.readouterr().out  # 4 workloads x 2
    lines = out_file.read_text().splitlines()
    assert len(lines) == 8 and {json.loads(x)["error_kind"] for x in lines} == {"none"}
    t4 = tmp_path / "best.t4.json"
    argv = ["records", "distill", "--k", "1", "--out", str(t4), "--format", "t4", "--db", url]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "file": str(t4), "format": "t4", "k": 1, "records": 4,
    }
    assert len(json.loads(t4.read_text())["results"]) == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["records", "export", "x.jsonl", "--db", "postgresql://u:pw@127.0.0.1:1/db"],
            "tensortune: error: cannot connect to the database postgresql://u:***@127.0.0.1:1/db",
        ),
        (["records", "import", "/nonexistent/r.jsonl"], "cannot read /nonexistent/r.jsonl"),
        (["db", "upgrade", "--db", "mysql://h/db"], "tensortune: error: unsupported database"),
    ],
)
def test_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert message in err and "pw@" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["records", "distill", "--out", "x"], "the following arguments are required: --k"),
        (["records", "distill", "--k", "0", "--out", "x"], "expected a positive integer"),
        (["records", "distill", "--k", "1", "--out", "x", "--format", "csv"], "invalid choice"),
        (["db"], "required: COMMAND"),
    ],
)
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err
