"""Fixtures of the API tests: a real ``tensortune serve`` on a free loopback port with its
own SQLite database and home, tokens for every role, and an in-process app for the tests
that need no running jobs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from api import Settings, create_app
from db import Database
from tuner.client import Client

ROLES = ("reader", "submitter", "admin")
#: A tiny job: one small matmul, 8 trials in batches of 4, quick timing.
TINY_JOB = {
    "workloads": [{"op": "matmul", "params": {"M": 32, "N": 32, "K": 32}}],
    "target": "cpu", "trials": 8, "batch_size": 4, "reconfirm": 1, "cost_model": "random",
    "measure": {"repeat": 2, "min_repeat_ms": 1},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", *args], env=env, text=True,
                          capture_output=True, timeout=120)


@dataclass
class Server:
    url: str
    db_url: str
    home: Path
    tokens: dict[str, str]
    process: subprocess.Popen[bytes]

    def client(self, role: str | None = "admin") -> Client:
        return Client(self.url, self.tokens[role] if role else None, timeout=60)


def start_server(home: Path, env_extra: dict[str, str] | None = None) -> Server:
    """``tensortune serve`` in a subprocess; returns once /healthz answers."""
    home.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{home / 'tuning.db'}"
    env = {**os.environ, "TENSORTUNE_HOME": str(home), "TENSORTUNE_DB_URL": db_url,
           **(env_extra or {})}
    tokens = {}
    for role in ROLES:
        done = cli("token", "create", "--role", role, "--owner", f"{role}-user", "--json",
                   env=env)
        assert done.returncode == 0, done.stderr
        payload = json.loads(done.stdout)
        assert payload["role"] == role and payload["token"].startswith("tt_")
        tokens[role] = payload["token"]
    port = free_port()
    log = open(home / "server.log", "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen([sys.executable, "-m", "tuner", "serve", "--port", str(port),
                                "--log-level", "warning"], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("server did not start:\n" + (home / "server.log").read_text())
        time.sleep(0.2)
    return Server(url, db_url, home, tokens, process)


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("api_server"))
    yield running
    stop_server(running)


@pytest.fixture(scope="session")
def finished_job(server: Server) -> dict:
    """A tiny job submitted to the real server and followed to its end over SSE; the
    events are in ``"events"``."""
    with server.client("submitter") as api:
        created = api.submit(TINY_JOB)
        events = list(api.events(created["id"], timeout=300))
        return {"created": created, "events": events, "job": api.job(created["id"])}


@pytest.fixture(scope="session")
def failing_job(server: Server) -> dict:
    """A tiny job whose every candidate fails (a compile time limit no build meets),
    followed to its end. The server's kernel cache is emptied first: a program another job
    of the same workload compiled would come from it, with no compile to time out."""
    shutil.rmtree(server.home / "kernels", ignore_errors=True)
    spec = {**TINY_JOB, "measure": {**TINY_JOB["measure"], "compile_timeout": 0.001}}
    with server.client("submitter") as api:
        created = api.submit(spec)
        list(api.events(created["id"], timeout=300))
        return {"created": created, "job": api.job(created["id"]),
                "trials": api.trials(created["id"])}


#: Job options of a tiny model upload (the small CNN's four tasks, 8 trials).
MODEL_OPTIONS = {"target": "cpu", "trials": 10, "batch_size": 2, "reconfirm": 1,
                 "cost_model": "random", "measure": {"repeat": 2, "min_repeat_ms": 1}}


@pytest.fixture(scope="session")
def finished_model_job(server: Server) -> dict:
    """The small CNN uploaded to the real server as a model job, followed to its end."""
    from ..onnx_models import small_cnn

    with server.client("submitter") as api:
        created = api.submit_model(small_cnn().SerializeToString(), MODEL_OPTIONS,
                                   filename="cnn.onnx")
        events = list(api.events(created["id"], timeout=600))
        return {"created": created, "events": events, "job": api.job(created["id"]),
                "best": api.model_best(created["id"])}


@dataclass
class LocalApp:
    """An in-process app (no job threads: submitted jobs stay queued) and its tokens."""

    http: TestClient
    db: Database
    tokens: dict[str, str]

    def headers(self, role: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"} if role else {}


def make_local_app(tmp_path: Path, **settings: object) -> LocalApp:
    tmp_path.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{tmp_path / 'api.db'}"
    app = create_app(Settings(db_url=db_url, run_jobs=False, **settings))
    db = app.state.service.db
    tokens = {role: db.tokens.create(f"{role}-user", name=role)[0] for role in ROLES}
    return LocalApp(TestClient(app, raise_server_exceptions=False), db, tokens)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalApp]:
    app = make_local_app(tmp_path)
    with app.http:
        yield app
