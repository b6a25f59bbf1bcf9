"""The device server, started as a user would (``tensortune device-server``) on loopback:
authenticated runs give the simulator's results; wrong keys, replays, stale, oversized and
garbled messages are refused and the server goes on; a program that deadlocks or runs too
long is an error answer; a server that goes away is ``DeviceLostError``."""

from __future__ import annotations

import os
import re
import secrets
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from schedule.vta import Deps, Finish, Gemm, Loops, VtaConfig
from tests.workers.test_vta_simulator import _matmul
from workers import DeviceLostError, DeviceRefusedError, RemoteDevice
from workers.device_server import _signed
from workers.vta import SimulationError, Simulator


class Server:
    """``tensortune device-server`` on loopback, with a fresh key (or ``key``) in
    ``tmp/device.key``."""

    def __init__(self, tmp: Path, run_timeout: float = 60.0, key: bytes | None = None):
        self.key = key or secrets.token_hex(32).encode()
        self.key_file = tmp / "device.key"
        self.key_file.write_bytes(self.key + b"\n")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tuner", "device-server", "--device", "vta", "--port", "0",
             "--token-file", str(self.key_file), "--run-timeout", str(run_timeout)],
            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        line = self.process.stderr.readline()
        found = re.search(r"on (127\.0\.0\.1):(\d+)$", line.strip())
        assert found, line
        self.address = f"{found[1]}:{found[2]}"

    def client(self, key: bytes | None = None, timeout: float = 120.0) -> RemoteDevice:
        return RemoteDevice(self.address, key or self.key, timeout=timeout)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)
        self.process.stderr.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("device-server"), run_timeout=3.0)
    yield running
    running.stop()


def test_a_run_gives_what_the_simulator_gives(server: Server) -> None:
    kernel, want = _matmul(m=8, k=64, n=64, weight_buffers=2)
    remote = server.client().run(kernel.program, kernel.dram)
    local = Simulator(VtaConfig()).run(kernel.program, kernel.dram)
    assert remote.cycles == local.cycles and remote.stats == local.stats
    np.testing.assert_array_equal(remote.dram, local.dram)
    np.testing.assert_array_equal(kernel.output(remote.dram, VtaConfig()), want)
    described = server.client().describe()
    assert described["simulated"] and described["config"]["block_out"] == 16


def test_bad_programs_are_error_answers_and_the_server_goes_on(server: Server) -> None:
    client = server.client()
    with pytest.raises(SimulationError, match="deadlock") as err:
        client.run([Gemm(Loops(0, 1), deps=Deps(pop_prev=True)), Finish()], b"\0" * 16)
    assert err.value.kind == "deadlock"
    endless = [Gemm(Loops(0, 1, iter_out=16383, iter_in=16383)) for _ in range(8)] + [Finish()]
    start = time.monotonic()
    with pytest.raises(SimulationError, match="did not finish within 3 s") as err:
        client.run(endless, b"\0" * 16)
    assert err.value.kind == "timeout" and time.monotonic() - start < 30
    kernel, _ = _matmul(m=4, k=32, n=32, weight_buffers=1)
    assert client.run(kernel.program, kernel.dram).cycles > 0  # still serving


def test_wrong_keys_replays_and_stale_messages_are_refused(server: Server) -> None:
    with pytest.raises(DeviceRefusedError, match="authentication failed"):
        server.client(key=b"another key of enough bytes").describe()
    host, port = server.address.split(":")

    def exchange(header: dict) -> dict:
        from workers.sandbox import recv_message, send_message

        with socket.create_connection((host, int(port)), timeout=10) as sock:
            send_message(sock, header)
            answer, _ = recv_message(sock, time.monotonic() + 30)
        return answer

    fresh = _signed(server.key, {"op": "describe", "nonce": secrets.token_hex(16),
                                 "time": time.time()}, [])
    assert exchange(fresh)["status"] == "ok"
    replayed = exchange(fresh)
    assert replayed["status"] == "refused" and "replayed" in replayed["message"]
    stale = _signed(server.key, {"op": "describe", "nonce": secrets.token_hex(16),
                                 "time": time.time() - 3600}, [])
    assert "clock" in exchange(stale)["message"]
    altered = {**_signed(server.key, {"op": "describe", "nonce": secrets.token_hex(16),
                                      "time": time.time()}, []), "op": "run"}
    assert "authentication failed" in exchange(altered)["message"]


def test_oversized_and_garbled_messages_close_only_their_connection(server: Server) -> None:
    host, port = server.address.split(":")
    for junk in (struct.pack("!Q", 1 << 40),            # a header said to be a terabyte
                 b"\x00" * 8 + b"not json at all",       # an empty header, then noise
                 struct.pack("!Q", 5) + b"[1,2]"):       # a header that is not an object
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(junk)
            sock.settimeout(30)
            assert sock.recv(16) == b""  # closed by the server, without an answer
    assert server.client().describe()["status"] == "ok"


def test_a_server_that_goes_away_is_a_lost_device(tmp_path: Path) -> None:
    server = Server(tmp_path)
    client = server.client(timeout=30)
    assert client.describe()["status"] == "ok"
    server.stop()
    with pytest.raises(DeviceLostError, match="device server 127.0.0.1"):
        client.describe()


def test_the_command_refuses_a_short_or_missing_key_and_clients_a_bad_address(
        tmp_path: Path) -> None:
    (tmp_path / "short.key").write_text("too short")
    for key_file, message in (("short.key", "at least 16"), ("none.key", "cannot read")):
        done = subprocess.run([sys.executable, "-m", "tuner", "device-server", "--port", "0",
                               "--token-file", str(tmp_path / key_file)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and message in done.stderr
        assert "Traceback" not in done.stderr
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        RemoteDevice("localhost", b"k" * 32)


def test_idle_connections_past_the_limit_are_closed_at_once(server: Server) -> None:
    from workers.device_server import MAX_CONNECTIONS

    host, port = server.address.split(":")
    idle = [socket.create_connection((host, int(port)), timeout=10)
            for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.5)  # the server has taken them up
        with socket.create_connection((host, int(port)), timeout=10) as extra:
            extra.settimeout(10)
            assert extra.recv(16) == b""  # closed: no thread waits on it
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 10
    while True:  # the idle connections' threads end once their clients went away
        try:
            assert server.client().describe()["status"] == "ok"
            break
        except DeviceLostError:
            assert time.monotonic() < deadline
            time.sleep(0.2)
