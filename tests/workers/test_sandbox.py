"""The sandbox child process: answers, crashes, hangs and garbage become outcomes, the
child is killed (with its own children) and replaced, and the parent goes on."""

from __future__ import annotations

import os
import resource
import socket
import time
from collections.abc import Iterator

import pytest

from workers.sandbox import Sandbox, child_environment

JOBS = "tests.workers.faults"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox()
    yield box
    box.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead too
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_a_job_answers_json_and_bytes(sandbox: Sandbox) -> None:
    out = sandbox.call(f"{JOBS}:echo_job", {"x": [1, 2.5]}, start_timeout=30, timeout=30)
    assert out.status == "ok"
    assert out.value["echo"] == {"x": [1, 2.5]}
    assert out.blobs == [b"\x00\x01binary"]
    assert out.value["pid"] == sandbox.pid != os.getpid()


def test_a_segfault_is_reported_and_the_next_job_gets_a_fresh_child(sandbox: Sandbox) -> None:
    out = sandbox.call(f"{JOBS}:segfault_job", {}, start_timeout=30, timeout=30)
    assert out.status == "crashed"
    assert "SIGSEGV" in out.message
    again = sandbox.call(f"{JOBS}:echo_job", 1, start_timeout=30, timeout=30)
    assert again.status == "ok"


def test_a_hang_is_killed_after_the_timeout(sandbox: Sandbox) -> None:
    sandbox.call("workers.sandbox:ping", {}, start_timeout=30, timeout=30)
    pid = sandbox.pid
    out = sandbox.call(f"{JOBS}:hang_job", {}, start_timeout=30, timeout=0.5)
    assert out.status == "timeout"
    assert 0.5 <= out.run_seconds < 5
    assert pid is not None and not _alive(pid)


def test_the_run_timeout_counts_from_the_start_signal(sandbox: Sandbox) -> None:
    job = {"load": 1.0, "run": 0.2}
    out = sandbox.call(f"{JOBS}:sleep_then_start_job", job, start_timeout=30, timeout=0.6)
    assert out.status == "ok" and out.value == "finished"
    assert out.seconds > 1.0 and out.run_seconds < 0.6
    out = sandbox.call(f"{JOBS}:hang_job", {"before_start": True}, start_timeout=0.5,
                       timeout=30)
    assert out.status == "start_timeout"


def test_an_exception_is_reported_with_its_type(sandbox: Sandbox) -> None:
    out = sandbox.call(f"{JOBS}:raise_job", {}, start_timeout=30, timeout=30)
    assert out.status == "raised"
    assert out.message == "MemoryError: no memory for the scratch buffer"


def test_garbage_on_the_socket_kills_the_child(sandbox: Sandbox) -> None:
    start = time.monotonic()
    out = sandbox.call(f"{JOBS}:garble_job", {}, start_timeout=30, timeout=30)
    assert out.status == "crashed" and "garbled" in out.message
    assert time.monotonic() - start < 10
    assert sandbox.call(f"{JOBS}:echo_job", 2, start_timeout=30, timeout=30).status == "ok"


def test_killing_the_sandbox_takes_its_grandchildren(sandbox: Sandbox) -> None:
    out = sandbox.call(f"{JOBS}:spawn_grandchild_job", {}, start_timeout=30, timeout=30)
    grandchild = out.value["grandchild"]
    assert _alive(grandchild)
    sandbox.restart()
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


SECRETS = {"TENSORTUNE_DB_URL": "postgresql://tuner:hunter2@db.internal/tuning",
           "TENSORTUNE_API_TOKEN": "tt_secret_token", "AWS_SECRET_ACCESS_KEY": "abc123"}


def test_a_kernel_cannot_read_the_parents_environment_or_reach_its_ports(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    with socket.socket() as server:  # a port of the parent's, e.g. a database
        server.bind(("127.0.0.1", 0))
        server.listen()
        box = Sandbox()
        try:
            out = box.call(f"{JOBS}:snoop_job",
                           {"names": [*SECRETS, "PATH"], "port": server.getsockname()[1]},
                           start_timeout=30, timeout=30)
            isolation = box.isolation
        finally:
            box.close()
    assert out.status == "ok", out.message
    seen = out.value["environment"]
    assert all(seen[name] == "" for name in SECRETS), seen
    assert seen["PATH"]  # what compilers need is still there
    assert not set(out.value["all_names"]) & set(SECRETS)
    assert out.value["parents_environ"].startswith("refused"), "read /proc/<parent>/environ"
    assert not any(value in out.value["parents_environ"] for value in SECRETS.values())
    assert out.value["rejoined"] is False
    limits = out.value["limits"]
    assert 0 < limits["RLIMIT_AS"] != resource.RLIM_INFINITY
    assert 0 < limits["RLIMIT_CPU"] != resource.RLIM_INFINITY
    assert 0 < limits["RLIMIT_FSIZE"] != resource.RLIM_INFINITY
    assert limits["RLIMIT_CORE"] == 0
    if os.geteuid() != 0:
        pytest.skip(f"network isolation needs root here: {isolation['network']}")
    assert isolation["network"] == "isolated"
    assert out.value["reached"] is False


def test_the_child_environment_keeps_only_named_variables() -> None:
    env = child_environment({"PATH": "/bin", "OMP_NUM_THREADS": "2", "PGPASSWORD": "x",
                             "TENSORTUNE_DB_URL": "sqlite:///x", "TENSORTUNE_HOME": "/h"})
    assert {k: v for k, v in env.items() if k != "PYTHONPATH"} == {
        "PATH": "/bin", "OMP_NUM_THREADS": "2", "TENSORTUNE_HOME": "/h"}


def test_a_gpu_devices_child_has_no_address_space_limit_but_keeps_the_others() -> None:
    """A GPU driver maps the device's memory into the process: the cuda device's sandbox
    lifts the address-space limit, and only that one."""
    box = Sandbox(limit_address_space=False)
    try:
        out = box.call(f"{JOBS}:snoop_job", {"names": ["PATH"], "port": 1},
                       start_timeout=30, timeout=30)
        isolation = box.isolation
    finally:
        box.close()
    assert out.status == "ok", out.message
    limits = out.value["limits"]
    assert limits["RLIMIT_AS"] == resource.RLIM_INFINITY
    assert isolation["memory_bytes"] is None
    assert 0 < limits["RLIMIT_CPU"] != resource.RLIM_INFINITY
    assert 0 < limits["RLIMIT_FSIZE"] != resource.RLIM_INFINITY
    assert limits["RLIMIT_CORE"] == 0
    assert out.value["rejoined"] is False
