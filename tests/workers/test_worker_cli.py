"""``tensortune worker``: joins a Ray cluster with ``ray start``, advertising this machine's
devices as resources and handing Ray the head's token; clear one-line errors for a missing
address, an unknown device, a bad ``ray start`` option or token file; where the token is
looked for. (Against a real head with token authentication: test_cluster_hosts.py.)"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

import tuner.cli
import workers
from tuner.cli import main
from workers import RAY_ADDRESS_ENV
from workers.ray_access import RayAccess


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


def test_the_address_comes_from_the_environment_and_the_token_goes_to_ray(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[tuple[list[str], dict[str, str]]] = []
    asked: list[str] = []

    def check(address: str) -> RayAccess:  # the head's answer (a real one: test_cluster_hosts)
        asked.append(address)
        return RayAccess(address, "RAY_AUTH_TOKEN_PATH=/etc/token",
                         {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/etc/token"})

    monkeypatch.setenv(RAY_ADDRESS_ENV, "head:6379")
    monkeypatch.setattr(workers, "check_ray_head", check)
    monkeypatch.setattr(tuner.cli.subprocess, "call",
                        lambda argv, env: ran.append((argv, env)) or 0)
    assert main(["worker", "--devices", "cpu"]) == 0
    [(argv, env)] = ran
    assert asked == ["head:6379"] and "--address=head:6379" in argv
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"] == "/etc/token"
    err = capsys.readouterr().err
    assert "token authentication, token from RAY_AUTH_TOKEN_PATH=/etc/token" in err
    assert "advertising cpu-measure=1" in err


def test_a_node_without_devices_and_options_for_ray_start(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--ray-address", "10.0.0.5:6379", "--devices", "none", "--dry-run",
                 "--", "--node-manager-port=6380", "--min-worker-port=10002"]) == 0
    argv = shlex.split(capsys.readouterr().out)
    assert "--resources={}" in argv
    assert argv[-3:] == ["--node-manager-port=6380", "--min-worker-port=10002", "--block"]


def test_the_token_file_flag_wins_over_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("abc\n")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "other")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", "")  # both restored when the test ends
    workers.use_token_file(token)
    assert os.environ["RAY_AUTH_TOKEN_PATH"] == str(token) and "RAY_AUTH_TOKEN" not in os.environ
    from workers.ray_access import _token

    assert _token(os.environ) == ("abc", f"RAY_AUTH_TOKEN_PATH={token}",
                                  {"RAY_AUTH_TOKEN_PATH": str(token)})
    assert _token({"RAY_AUTH_TOKEN": " t0k "})[:2] == ("t0k", "RAY_AUTH_TOKEN")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token there
    assert _token({}) == ("", "", {})
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("home")
    assert _token({})[:2] == ("home", str(tmp_path / ".ray" / "auth_token"))
    (tmp_path / "empty").write_text("")
    with pytest.raises(workers.RayAccessError, match="is empty"):
        _token({"RAY_AUTH_TOKEN_PATH": str(tmp_path / "empty")})


@pytest.mark.parametrize(("argv", "status", "message"), [
    (["worker"], 1, "no Ray cluster address: give --ray-address HOST:PORT or set "
                    "TENSORTUNE_RAY_ADDRESS"),
    (["worker", "--ray-address", "h:1", "--devices", "cpu,fpga"], 1,
     "unknown device kind(s) fpga in --devices; available: cpu"),
    (["worker", "--ray-address", "h:1", "--devices", ","], 2,
     "argument --devices: expected device kinds like cpu or cpu,vta=HOST:PORT"),
    (["worker", "--ray-address", "h:1", "--devices", "cpu=h:2"], 1,
     "--devices cpu=h:2: only vta devices are reached through device servers"),
    (["worker", "--ray-address", "h:1", "--dry-run", "--", "--head"], 1,
     "--head is set by tensortune worker itself"),
    (["worker", "--ray-address", "h", "--devices", "cpu"], 1,
     "expected the Ray head's address as HOST:PORT, got 'h'"),
    (["worker", "--ray-address", "h:1", "--ray-token-file", "/nonexistent/token"], 1,
     "the Ray token file /nonexistent/token does not exist"),
    (["tune", "--op", "matmul", "-p", "M=8", "-p", "N=8", "-p", "K=8", "--ray-address",
      "no-such-host.invalid:6379"], 1,
     "the Ray head's host name 'no-such-host.invalid' cannot be resolved"),
])
def test_errors_are_one_clear_line(argv: list[str], status: int, message: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert message in err.strip().splitlines()[-1]
