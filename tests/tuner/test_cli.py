"""The ``tensortune`` command line: version, help, usage errors and the ``demo`` command."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import tuner
from tuner.cli import main

FAKE_REPORT = {
    "gflops": 12.5,
    "numpy_gflops": 50.0,
    "ratio": 0.25,
    "max_abs_err": 3.0e-6,
    "schedule": "split C.i by 32\nreorder C.io, C.jo, C.ii, C.ji",
}


@pytest.fixture
def fake_schedule(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Stand in a fake ``schedule.examples`` and record the calls to matmul_report."""
    calls: list[tuple[int, int]] = []

    def matmul_report(size: int, repeat: int) -> dict[str, object]:
        calls.append((size, repeat))
        return dict(FAKE_REPORT)

    examples = types.ModuleType("schedule.examples")
    examples.matmul_report = matmul_report  # type: ignore[attr-defined]
    package = types.ModuleType("schedule")
    package.examples = examples  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "schedule", package)
    monkeypatch.setitem(sys.modules, "schedule.examples", examples)
    return calls


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tensortune {tuner.__version__}"


@pytest.mark.parametrize("argv", [["--help"], ["demo", "--help"]])
def test_help_shows_an_example(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tensortune")
    assert "example" in out and "tensortune demo" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "required: COMMAND"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["demo", "--size", "0"], "argument --size: expected a positive integer, got '0'"),
        (["demo", "--repeat", "many"], "argument --repeat: expected a positive integer"),
        (["demo", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_exit_2_with_one_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert message in err.strip().splitlines()[-1]


def test_demo_prints_report(
    fake_schedule: list[tuple[int, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--size", "256", "--repeat", "2"]) == 0
    assert fake_schedule == [(256, 2)]
    out = capsys.readouterr().out
    assert "matmul 256x256x256 float32" in out
    assert "12.50 GFLOP/s" in out and "50.00 GFLOP/s" in out and "0.25 x numpy" in out
    assert "  reorder C.io, C.jo, C.ii, C.ji" in out


def test_demo_json(
    fake_schedule: list[tuple[int, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--json"]) == 0
    assert fake_schedule == [(1024, 5)]
    assert json.loads(capsys.readouterr().out) == {"size": 1024, "repeat": 5, **FAKE_REPORT}


def test_demo_reports_an_incomplete_report(
    monkeypatch: pytest.MonkeyPatch,
    fake_schedule: list[tuple[int, int]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys.modules["schedule.examples"], "matmul_report", lambda n, r: {})
    assert main(["demo"]) == 1
    assert capsys.readouterr().err.startswith("tensortune: error: schedule.examples")


def test_python_m_tuner_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "--version"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"tensortune {tuner.__version__}"


def test_demo_end_to_end_through_the_schedule_layer(capsys: pytest.CaptureFixture[str]) -> None:
    """The real thing: a small scheduled matmul is built, run and checked against numpy."""
    assert main(["demo", "--size", "64", "--repeat", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["max_abs_err"] < 1e-3
    assert report["gflops"] > 0 and report["numpy_gflops"] > 0
    assert report["ratio"] == pytest.approx(report["gflops"] / report["numpy_gflops"], rel=1e-3)
