"""Tuning on a vta "board" behind a device server on loopback (started as a user would:
``tensortune device-server``): results come back from the server with the board's
provenance and improve on the default schedule; a server killed mid-job loses no record
and the candidates after it are ``device_lost``; ``tensortune worker --devices
vta=HOST:PORT`` advertises one ``fpga`` resource per live board and refuses a dead one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from db import Database
from schedule import Steps, Workload, vta
from tests.workers.test_device_server import Server
from tuner import tune
from workers import LocalPool, MeasureSettings, VtaDevice

DENSE = Workload.op("dense", M=16, N=128, K=256, dtype="int8", bias=False, requant_shift=8)
SETTINGS = MeasureSettings(repeat=1)


def test_tuning_through_a_device_server_improves_on_the_default(tmp_path: Path) -> None:
    server = Server(tmp_path)
    try:
        db = Database(f"sqlite:///{tmp_path / 'board.db'}")
        device = VtaDevice(board=server.address, key=server.key)
        with LocalPool(SETTINGS, devices=[device], build_workers=1) as pool:
            result = tune(DENSE, "vta", trials=16, db=db, pool=pool, batch_size=8)
        assert result.status == "succeeded"
        records = db.query_records(job_id=result.job_id)
        assert all(r.ok and f"board {server.address}" in r.device_model for r in records)
        compute = vta.VtaCompute(DENSE, vta.VtaConfig())
        default = compute.template_steps(compute.default_template())
        [first] = [r for r in records if Steps.of(r.steps) == default]
        assert result.tasks[0].best_cost < first.median_cost / 2
        db.close()
    finally:
        server.stop()


def test_a_server_killed_mid_job_loses_no_record_and_the_rest_are_device_lost(
        tmp_path: Path) -> None:
    server = Server(tmp_path)
    db = Database(f"sqlite:///{tmp_path / 'killed.db'}")
    batches = []

    def kill_after_the_first_batch(event: dict) -> None:
        if event.get("type") == "batch":
            batches.append(event)
            if len(batches) == 1:
                server.stop()

    try:
        device = VtaDevice(board=server.address, key=server.key)
        with LocalPool(SETTINGS, devices=[device], build_workers=1) as pool:
            result = tune(DENSE, "vta", trials=12, db=db, pool=pool, batch_size=4,
                          on_event=kill_after_the_first_batch)
    finally:
        if server.process.poll() is None:
            server.stop()
    records = db.query_records(job_id=result.job_id)
    kinds = [r.error_kind for r in sorted(records, key=lambda r: r.timestamp)]
    assert kinds[:4] == ["none"] * 4  # the first batch, measured before the kill, is kept
    assert len(kinds) > 4 and set(kinds[4:]) == {"device_lost"}
    assert all("device server" in r.error_msg for r in records if not r.ok)
    assert result.tasks[0].best_cost < float("inf")  # the job keeps what it measured
    db.close()


def test_the_worker_advertises_live_boards_and_refuses_dead_ones(tmp_path: Path) -> None:
    server = Server(tmp_path)
    key_file = tmp_path / "device.key"
    command = [sys.executable, "-m", "tuner", "worker", "--ray-address", "127.0.0.1:1",
               "--dry-run", "--device-key-file", str(key_file), "--devices"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENSORTUNE_VTA")}
    try:
        live = subprocess.run([*command, f"cpu,vta={server.address}"], capture_output=True,
                              text=True, env=env, timeout=120)
        assert live.returncode == 0, live.stderr
        assert '"fpga": 1' in live.stdout and '"cpu-measure": 1' in live.stdout
        dead = subprocess.run([*command, f"vta={server.address},127.0.0.1:9"],
                              capture_output=True, text=True, env=env, timeout=120)
        assert dead.returncode != 0 and "vta@127.0.0.1:9 of this machine does not answer" \
            in dead.stderr
        keyless = subprocess.run([*command[:-3], "--devices", f"vta={server.address}"],
                                 capture_output=True, text=True, env=env, timeout=120)
        assert keyless.returncode != 0 and "needs --device-key-file" in keyless.stderr
    finally:
        server.stop()


@pytest.mark.parametrize(("text", "kinds"), [
    ("cpu", ["cpu"]), ("cpu,vta=h:1,h:2", ["cpu", "vta=h:1,h:2"]),
    ("vta=h:1, cpu", ["vta=h:1", "cpu"]),
])
def test_device_lists_with_boards_parse(text: str, kinds: list[str]) -> None:
    from tuner.cli import _device_kinds

    assert _device_kinds(text) == kinds
