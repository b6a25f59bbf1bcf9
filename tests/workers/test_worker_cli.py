"""``tensortune worker``: joins a Ray cluster with ``ray start``, advertising this machine's
devices as resources; clear one-line errors for a missing address or an unknown device."""

from __future__ import annotations

import json
import shlex

import pytest

import tuner.cli
from tuner.cli import main
from workers import RAY_ADDRESS_ENV


@pytest.fixture(autouse=True)
def no_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RAY_ADDRESS_ENV, raising=False)


def test_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "tensortune worker --ray-address" in out


def test_dry_run_prints_the_ray_start_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--ray-address", "10.0.0.5:6379", "--dry-run"]) == 0
    argv = shlex.split(capsys.readouterr().out)
    assert argv[0].endswith("ray") and argv[1] == "start" and "--block" in argv
    assert "--address=10.0.0.5:6379" in argv
    [resources] = [a.split("=", 1)[1] for a in argv if a.startswith("--resources=")]
    assert json.loads(resources) == {"cpu-measure": 1}


def test_the_address_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[list[str]] = []
    monkeypatch.setenv(RAY_ADDRESS_ENV, "head:6379")
    monkeypatch.setattr(tuner.cli.subprocess, "call", lambda argv: ran.append(argv) or 0)
    assert main(["worker", "--devices", "cpu"]) == 0
    [argv] = ran
    assert "--address=head:6379" in argv
    assert "advertising cpu-measure=1" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "status", "message"), [
    (["worker"], 1, "no Ray cluster address: give --ray-address HOST:PORT or set "
                    "TENSORTUNE_RAY_ADDRESS"),
    (["worker", "--ray-address", "h:1", "--devices", "cpu,fpga"], 1,
     "unknown device kind(s) fpga in --devices; available: cpu"),
    (["worker", "--ray-address", "h:1", "--devices", ","], 2,
     "argument --devices: expected device kinds like cpu or cpu,cuda"),
])
def test_errors_are_one_clear_line(argv: list[str], status: int, message: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert message in err.strip().splitlines()[-1]
