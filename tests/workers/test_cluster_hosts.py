"""A Ray cluster run the way an operator runs it, each process on its own test host
(tests/workers/hosts.py): a head started with ``ray start --head`` and token
authentication, two ``tensortune worker`` hosts, and tuning from a third host (which
joins with ``tensortune worker --devices none``) with the ``tensortune`` command.

A missing or wrong token, an unreachable head and a tuning host that is not a node of the
cluster are one line at once; both workers measure; a worker host killed mid-batch loses
and repeats nothing; a head killed mid-job ends the job with a clear error, and the job
resumes once the cluster is back, measuring nothing twice.

One cluster for the module (Ray start-up is slow and CI has 2 cores); the tests run in
file order and build on its state. The worker hosts share this machine's cores, so
candidates are single-threaded (``cpu -cores=1``): two devices timing parallel kernels on
the same two cores at once would slow each other by orders of magnitude.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import db
from tests.db.backends import PG_URL, fresh_url, skip_without_postgres
from tests.workers.hosts import Host, HostNetwork, TcpForward, unavailable

pytest.importorskip("ray")
WHY_NOT = unavailable()
pytestmark = [pytest.mark.ray, pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)]

HEAD_PORT = 6379
PYTHON = sys.executable
RAY = str(Path(sys.executable).with_name("ray"))
STARTED = "Ray runtime started"


def _wait_for(log: Path, text: str, timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {log} after {timeout} s:\n"
                         f"{log.read_text(errors='replace')[-3000:]}")


class Cluster:
    """The module's hosts and the commands an operator would type on them."""

    def __init__(self, net: HostNetwork, tmp: Path):
        self.net = net
        self.tmp = tmp
        self.token_file = tmp / "head-token"
        self.token_file.write_text(secrets.token_hex(32))
        # HOME is a fresh folder: no ~/.ray/auth_token of this machine's user is found
        home = tmp / "home"
        home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        self.env.update(HOME=str(home), PYTHONUNBUFFERED="1")
        self.env.pop("TENSORTUNE_RAY_ADDRESS", None)
        self.head = net.add_host("head")
        self.workers = [net.add_host("w1"), net.add_host("w2")]
        self.driver = net.add_host("drv")  # joins without devices: tuning processes run here
        self.outsider = net.add_host("out")  # not a node of the cluster
        self.address = f"{self.head.address}:{HEAD_PORT}"
        self.db = f"sqlite:///{tmp / 'tuning.db'}"
        self.starts: Counter = Counter()

    def log(self, name: str) -> Path:
        return self.tmp / f"{name}-{self.starts[name]}.log"

    def start_head(self) -> None:
        self.starts["head"] += 1
        # A dead node is noticed in a few seconds instead of Ray's default half minute
        env = {**self.env, "RAY_AUTH_MODE": "token",
               "RAY_AUTH_TOKEN_PATH": str(self.token_file),
               "RAY_health_check_period_ms": "2000", "RAY_health_check_timeout_ms": "4000",
               "RAY_health_check_failure_threshold": "3"}
        self.head.popen([RAY, "start", "--head", "--block", f"--port={HEAD_PORT}",
                         f"--node-ip-address={self.head.address}", "--num-cpus=1",
                         "--include-dashboard=false", "--disable-usage-stats"],
                        self.log("head"), env=env)
        _wait_for(self.log("head"), STARTED)

    def start_nodes(self, *workers: int, driver: bool = False) -> None:
        """Start the worker hosts ``workers`` (and the tuning host's node), one after the
        other (together, they overload 2 cores)."""
        joining = [(self.workers[n], f"worker{n}", "cpu") for n in workers]
        if driver:
            joining.append((self.driver, "driver", "none"))
        for host, name, devices in joining:
            self.starts[name] += 1
            host.popen(self.tensortune("worker", "--ray-address", self.address,
                                       "--ray-token-file", str(self.token_file),
                                       "--devices", devices), self.log(name), env=self.env)
            _wait_for(self.log(name), STARTED)

    def tensortune(self, *args: str) -> list[str]:
        return [PYTHON, "-m", "tuner", *args]

    def run(self, host: Host, *args: str, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        return host.run(self.tensortune(*args), env=env or self.env, timeout=timeout)

    def tune_args(self, trials: int, size: int = 64) -> list[str]:
        return ["tune", "--op", "matmul", "-p", f"M={size}", "-p", f"N={size}", "-p",
                f"K={size}", "--trials", str(trials), "--batch-size", "8", "--reconfirm", "0",
                "--target", "cpu -cores=1",
                "--ray-address", self.address, "--ray-token-file", str(self.token_file),
                "--db", self.db, "--quiet", "--baselines", "none", "--json"]

    def records(self, job_id: str) -> list[Any]:
        with db.Database(self.db) as database:
            return database.query_records(job_id=job_id, limit=None)

    def start_tune(self, name: str, trials: int, size: int) -> tuple[subprocess.Popen, str]:
        """Start a tune on the driver host; returns it and its job's id, once the job has
        a batch of records."""
        log = self.tmp / f"{name}.log"
        tune = self.driver.popen(self.tensortune(*self.tune_args(trials, size)[:-1]), log,
                                 env=self.env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and tune.poll() is None:
            with db.Database(self.db) as database:
                for job in database.jobs.list(status="running"):
                    if database.count_records(job_id=job.id) >= 8:
                        return tune, job.id
            time.sleep(0.2)
        raise AssertionError(f"no batch measured:\n{log.read_text()[-3000:]}")

    def job(self, job_id: str) -> Any:
        with db.Database(self.db) as database:
            return database.jobs.get(job_id)


@pytest.fixture(scope="module")
def network() -> Iterator[HostNetwork]:
    with HostNetwork() as net:
        yield net


@pytest.fixture(scope="module")
def cluster(network: HostNetwork, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    c = Cluster(network, tmp_path_factory.mktemp("cluster"))
    c.start_head()
    c.start_nodes(0, 1, driver=True)
    return c


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_a_missing_or_wrong_token_or_a_wrong_port_is_one_line_at_once(
        cluster: Cluster) -> None:
    wrong = cluster.tmp / "wrong-token"
    wrong.write_text(secrets.token_hex(32))
    started = time.monotonic()
    no_token = _one_line_error(cluster.run(cluster.driver, "worker", "--ray-address",
                                           cluster.address))
    assert (f"the Ray head at {cluster.address} uses token authentication and no token "
            "was given: give the head's token with --ray-token-file FILE") in no_token
    bad_file = _one_line_error(cluster.run(cluster.driver, "worker", "--ray-address",
                                           cluster.address, "--ray-token-file", str(wrong)))
    assert f"refused the token from RAY_AUTH_TOKEN_PATH={wrong}" in bad_file
    bad_variable = _one_line_error(cluster.run(
        cluster.driver, "worker", "--ray-address", cluster.address,
        env={**cluster.env, "RAY_AUTH_TOKEN": "not-the-token"}))
    assert "refused the token from RAY_AUTH_TOKEN:" in bad_variable
    unreachable = _one_line_error(cluster.run(
        cluster.driver, "tune", "--op", "matmul", "-p", "M=8", "-p", "N=8", "-p", "K=8",
        "--ray-address", f"{cluster.head.address}:{HEAD_PORT + 1}", "--db", cluster.db))
    assert "cannot be reached" in unreachable and f"--port={HEAD_PORT + 1}" in unreachable
    assert time.monotonic() - started < 60  # Ray's own retries would take a minute each
    with db.Database(cluster.db) as database:
        assert database.jobs.list() == []  # no job was created for a cluster not joined

    not_a_node = cluster.run(cluster.outsider, *cluster.tune_args(4))
    assert not_a_node.returncode == 1
    assert (f"this host is not a node of the Ray cluster at {cluster.address}"
            in not_a_node.stderr), not_a_node.stderr[-3000:]
    assert f"--ray-address {cluster.address} --devices none" in not_a_node.stderr
    assert "Traceback" not in not_a_node.stderr


def test_the_token_by_variable_joins_and_both_worker_hosts_measure(cluster: Cluster) -> None:
    token = cluster.token_file.read_text()
    args = [a for a in cluster.tune_args(16) if a not in ("--ray-token-file",
                                                            str(cluster.token_file))]
    done = cluster.run(cluster.driver, *args, env={**cluster.env, "RAY_AUTH_TOKEN": token})
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["status"] == "succeeded" and summary["trials"] == 16
    records = cluster.records(summary["job_id"])
    assert len(records) == 16 and all(r.error_kind == "none" for r in records)
    nodes = Counter(r.measure["node"] for r in records)
    assert len(nodes) == 2  # both worker hosts timed candidates (the head owns no device)


def test_a_worker_host_killed_mid_batch_loses_and_repeats_nothing(cluster: Cluster) -> None:
    tune, job_id = cluster.start_tune("tune-kill", 24, size=128)
    cluster.workers[0].kill_all()
    assert tune.wait(timeout=300) == 0
    assert cluster.job(job_id).status == "succeeded"
    records = cluster.records(job_id)
    assert len(records) == 24 and len({json.dumps(r.steps) for r in records}) == 24
    assert all(r.error_kind == "none" for r in records), Counter(r.error_kind for r in records)
    cluster.start_nodes(0)  # as systemd would restart it


def test_a_head_killed_mid_job_fails_it_clearly_and_it_resumes_later(
        cluster: Cluster) -> None:
    tune, job_id = cluster.start_tune("tune-head", 24, size=128)
    killed = time.monotonic()
    cluster.head.kill_all()
    assert tune.wait(timeout=120) == 1
    assert time.monotonic() - killed < 45  # not Ray's minute of retries before it ends us
    text = (cluster.tmp / "tune-head.log").read_text()
    assert "measurement cluster lost: the Ray head at" in text and "stopped answering" in text
    assert f"`tensortune jobs resume {job_id}` goes on from it" in text
    assert "Traceback" not in text and "The program will terminate" not in text
    job = cluster.job(job_id)
    assert job.status == "failed" and "stopped answering" in job.error
    assert 8 <= len(cluster.records(job_id)) < 24

    for host in (*cluster.workers, cluster.driver):  # their nodes went with their head
        host.kill_all()
    cluster.start_head()
    cluster.start_nodes(0, 1, driver=True)
    resumed = cluster.run(cluster.driver, "jobs", "resume", job_id, "--ray-address",
                          cluster.address, "--ray-token-file", str(cluster.token_file),
                          "--db", cluster.db, "--quiet", "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(resumed.stdout)["status"] == "succeeded"
    records = cluster.records(job_id)
    assert len(records) == 24 and len({json.dumps(r.steps) for r in records}) == 24


@pytest.mark.postgres
def test_two_servers_on_their_own_hosts_share_one_queue_and_run_each_job_once(
        network: HostNetwork, tmp_path: Path) -> None:
    skip_without_postgres()
    import tuner

    servers = [network.add_host("api1"), network.add_host("api2")]
    pg = urlsplit(PG_URL)
    with fresh_url("postgresql", tmp_path) as url, \
            TcpForward((network.gateway, 0), (pg.hostname or "127.0.0.1", pg.port or 5432)) \
            as forward:
        with db.Database(url) as database:
            jobs = [tuner.submit_job(database, tuner.JobSpec(
                (tuner.TaskSpec(tuner.Workload.op("matmul", M=16 + n, N=16, K=16)),),
                "cpu -cores=1", 8, batch_size=8, reconfirm=0)).id for n in range(6)]
        # the servers reach PostgreSQL across the bridge, as on other machines
        remote = url.replace(pg.netloc, f"{pg.username}@{forward.address[0]}:"
                                        f"{forward.address[1]}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TENSORTUNE_"))}
        for n, host in enumerate(servers):
            host.popen([PYTHON, "-m", "tuner", "serve", "--host", host.address, "--db", remote],
                       tmp_path / f"serve{n}.log", env=env)
        deadline = time.monotonic() + 240
        with db.Database(url) as database:
            while time.monotonic() < deadline:
                done = [database.jobs.get(j) for j in jobs]
                if all(job.status in ("succeeded", "failed") for job in done):
                    break
                time.sleep(0.5)
            records = {j: database.query_records(job_id=j, limit=None) for j in jobs}
    logs = "\n".join((tmp_path / f"serve{n}.log").read_text()[-2000:] for n in range(2))
    assert [job.status for job in done] == ["succeeded"] * 6, logs
    assert all(len(records[j]) == 8 and len({json.dumps(r.steps) for r in records[j]}) == 8
               for j in jobs), {j: len(r) for j, r in records.items()}
    runners = Counter(job.progress["runner"]["pidns"] for job in done)
    assert len(runners) == 2, runners  # both servers took jobs from the one queue
