"""Remote boards: a device server that runs programs on its accelerator for tuners on other
hosts, and the client that reaches it.

``tensortune device-server --device vta --port P --token-file F`` serves one device (here the
``vta`` simulator; a board's driver would take its place behind the same protocol). A
message is a length-prefixed JSON header and byte strings (``workers.sandbox``'s framing)
with a shared-key HMAC-SHA256 over the header and the blobs' digests, a fresh nonce and a
timestamp: a message without the key's MAC, older than ``MAX_SKEW_S`` or replayed is
refused, and answers carry the MAC of the request they answer. Sizes are bounded (header,
blob, one DRAM image a run), every read has a deadline, and a malformed message closes
that connection only. Programs are untrusted: each runs in a ``Sandbox`` child (killed at
``run_timeout``), one at a time (one device), so a program that deadlocks, overflows a
buffer or runs forever is an error answer and the server goes on serving.

``RemoteDevice(address, key).run(program, dram)`` returns the ``SimResult``; a server that
cannot be reached or goes away mid-run is ``DeviceLostError`` (the infrastructure's fault,
never the candidate's); a refused message is ``DeviceRefusedError``; the program's own
faults are ``SimulationError`` with their kind.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import socket
import socketserver
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from schedule import vta

from .sandbox import Closed, Deadline, Garbled, Sandbox, SandboxError, recv_message, send_message
from .vta import SimResult, SimulationError, Simulator

PROTOCOL = 1
MAX_SKEW_S = 300.0
MAX_HEADER_BYTES = 8 << 20
MAX_DRAM_BYTES = 256 << 20
READ_TIMEOUT_S = 30.0
MIN_KEY_BYTES = 16
#: Connections served at once; more are closed at once (each holds a thread while it waits).
MAX_CONNECTIONS = 32
_SEEN_NONCES = 100_000
DEVICES = ("vta",)


class DeviceLostError(ConnectionError):
    """The device server cannot be reached, or went away before it answered."""


class DeviceRefusedError(PermissionError):
    """The device server refused the message (authentication, replay, limits)."""


def read_device_key(path: str | os.PathLike[str]) -> bytes:
    """The shared key in a token file (its bytes, surrounding whitespace stripped)."""
    try:
        key = Path(path).read_bytes().strip()
    except OSError as err:
        raise ValueError(f"cannot read the token file {path}: {err.strerror}") from None
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"the token file {path} holds {len(key)} bytes; a key needs at least "
                         f"{MIN_KEY_BYTES} (e.g. `python -c 'import secrets; "
                         f"print(secrets.token_hex(32))' > {path}`)")
    return key


def _mac(key: bytes, header: dict[str, Any], blobs: list[bytes]) -> str:
    body = json.dumps({k: v for k, v in header.items() if k != "mac"}, sort_keys=True)
    digests = [hashlib.sha256(b).hexdigest() for b in blobs]
    return hmac.new(key, "\n".join([body, *digests]).encode(), hashlib.sha256).hexdigest()


def _signed(key: bytes, header: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
    header = {**header, "blobs": len(blobs)}
    return {**header, "mac": _mac(key, header, blobs)}


def _authentic(key: bytes, header: dict[str, Any], blobs: list[bytes]) -> bool:
    mac = header.get("mac")
    return isinstance(mac, str) and hmac.compare_digest(mac, _mac(key, header, blobs))


# ---------------------------------------------------------------------- the device side
def simulate_job(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: run the program on the DRAM image at ``job["dram"]`` with the
    configuration ``job["config"]``."""
    config = vta.VtaConfig.from_json(job["config"])
    program = [vta.from_json(doc) for doc in job["program"]]
    dram = np.fromfile(job["dram"], dtype=np.uint8)
    started()
    try:
        result = Simulator(config).run(program, dram)
    except SimulationError as err:
        return {"error": err.kind, "message": str(err)[:2000]}, []
    return {"cycles": result.cycles, "seconds": result.seconds, "stats": result.stats}, \
        [result.dram.tobytes()]


class DeviceServer(socketserver.ThreadingTCPServer):
    """Serves one device to authenticated clients (see the module docstring)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], key: bytes, config: vta.VtaConfig, *,
                 run_timeout: float = 60.0, max_dram_bytes: int = MAX_DRAM_BYTES):
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"a key needs at least {MIN_KEY_BYTES} bytes")
        self.key = key
        self.config = config
        self.run_timeout = run_timeout
        self.max_dram_bytes = max_dram_bytes
        self.device_lock = threading.Lock()  # one program at a time: one device
        self._nonces: OrderedDict[str, float] = OrderedDict()
        self._nonce_lock = threading.Lock()
        self._connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.sandbox = Sandbox()
        super().__init__(address, _Connection)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._connections.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connections.release()

    def fresh(self, header: dict[str, Any]) -> str:
        """Why the (authentic) message is refused, or ``""``: too old or replayed."""
        sent, nonce = header.get("time"), header.get("nonce")
        if not isinstance(sent, int | float) or abs(time.time() - sent) > MAX_SKEW_S:
            return f"the message's time is more than {MAX_SKEW_S:g} s off this server's clock"
        if not isinstance(nonce, str) or not 16 <= len(nonce) <= 64:
            return "the message has no nonce"
        now = time.time()
        with self._nonce_lock:
            if nonce in self._nonces:
                return "a replayed message"
            self._nonces[nonce] = now
            # a nonce older than twice the skew cannot come back inside the time window
            while len(self._nonces) > _SEEN_NONCES or \
                    next(iter(self._nonces.values())) < now - 2 * MAX_SKEW_S:
                self._nonces.popitem(last=False)
        return ""

    def run_program(self, program: Any, dram: bytes) -> tuple[dict[str, Any], list[bytes]]:
        """The answer to a run request (program JSON, DRAM bytes)."""
        if not isinstance(program, list) or not program:
            return {"status": "error", "kind": "bad_program",
                    "message": "program: a non-empty list of instructions"}, []
        with tempfile.NamedTemporaryFile(prefix="tt-dram-", suffix=".bin") as file:
            file.write(dram)
            file.flush()
            job = {"config": self.config.to_json(), "program": program, "dram": file.name}
            with self.device_lock:
                try:
                    outcome = self.sandbox.call("workers.device_server:simulate_job", job,
                                                start_timeout=60.0, timeout=self.run_timeout)
                except SandboxError as err:
                    return {"status": "error", "kind": "device_lost",
                            "message": f"the device cannot run programs: {err}"}, []
        if outcome.status == "ok" and isinstance(outcome.value, dict):
            value = outcome.value
            if "error" in value:
                return {"status": "error", "kind": str(value["error"]),
                        "message": str(value.get("message", ""))}, []
            return {"status": "ok", **value}, list(outcome.blobs[:1])
        kind = "timeout" if outcome.status in ("timeout", "start_timeout") else "bad_program"
        return {"status": "error", "kind": kind, "message": f"the program {outcome.message}"}, []

    def server_close(self) -> None:
        super().server_close()
        self.sandbox.close()


class _Connection(socketserver.BaseRequestHandler):
    """One client connection: requests and answers until it closes or misbehaves."""

    server: DeviceServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        server = self.server
        while True:
            try:
                header, blobs = recv_message(
                    sock, time.monotonic() + READ_TIMEOUT_S, max_header=MAX_HEADER_BYTES,
                    max_blob=server.max_dram_bytes, max_blobs=1)
            except (Closed, Garbled, Deadline, OSError):
                return  # a broken or idle connection ends; the server goes on
            if not _authentic(server.key, header, blobs):
                self._answer(header, {"status": "refused", "message": "authentication failed "
                                      "(another key, or an altered message)"}, [], sign=False)
                return
            why = server.fresh(header)
            if why:
                self._answer(header, {"status": "refused", "message": why}, [])
                continue
            op = header.get("op")
            if op == "describe":
                self._answer(header, {"status": "ok", "protocol": PROTOCOL, "device": "vta",
                                      "simulated": True, "config": server.config.to_json()},
                             [])
            elif op == "run" and len(blobs) == 1:
                answer, out = server.run_program(header.get("program"), blobs[0])
                self._answer(header, answer, out)
            else:
                self._answer(header, {"status": "refused", "message": "unknown request: op "
                                      "is describe, or run with one DRAM image"}, [])

    def _answer(self, request: dict[str, Any], answer: dict[str, Any], blobs: list[bytes],
                sign: bool = True) -> None:
        answer = {**answer, "nonce": request.get("nonce") if sign else None}
        with contextlib.suppress(OSError):
            send_message(self.request, _signed(self.server.key, answer, blobs) if sign
                         else {**answer, "blobs": len(blobs)}, blobs)


def serve_device(host: str, port: int, key: bytes, config: vta.VtaConfig, *,
          run_timeout: float = 60.0, ready: Callable[[tuple[str, int]], None] | None = None
          ) -> None:
    """Serve until interrupted; ``ready`` is called with the bound address."""
    with DeviceServer((host, port), key, config, run_timeout=run_timeout) as server:
        if ready is not None:
            ready(server.server_address[:2])
        server.serve_forever(poll_interval=0.2)


# ---------------------------------------------------------------------- the client side
class RemoteDevice:
    """A device server at ``address`` (``host:port``) reached with ``key``."""

    def __init__(self, address: str, key: bytes, *, timeout: float = 120.0):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"device address {address!r}: expected HOST:PORT")
        self.address = (host.strip("[]"), int(port))
        self.key = key
        self.timeout = timeout

    def _request(self, header: dict[str, Any], blobs: list[bytes]
                 ) -> tuple[dict[str, Any], list[bytes]]:
        nonce = secrets.token_hex(16)
        message = _signed(self.key, {**header, "nonce": nonce, "time": time.time(),
                                     "protocol": PROTOCOL}, blobs)
        where = f"device server {self.address[0]}:{self.address[1]}"
        try:
            with socket.create_connection(self.address, timeout=10.0) as sock:
                send_message(sock, message, blobs)
                answer, out = recv_message(sock, time.monotonic() + self.timeout,
                                           max_header=MAX_HEADER_BYTES, max_blob=MAX_DRAM_BYTES,
                                           max_blobs=1)
        except (Closed, Deadline, OSError) as err:
            raise DeviceLostError(f"{where}: {type(err).__name__} {err}".rstrip()) from None
        except Garbled:
            raise DeviceLostError(f"{where}: a garbled answer") from None
        if answer.get("status") == "refused":
            raise DeviceRefusedError(f"{where} refused the request: {answer.get('message')}")
        if not _authentic(self.key, answer, out) or answer.get("nonce") != nonce:
            raise DeviceRefusedError(f"{where}: the answer is not signed with this key for "
                                     "this request")
        return answer, out

    def describe(self) -> dict[str, Any]:
        answer, _ = self._request({"op": "describe"}, [])
        return answer

    def run(self, program: list[vta.Instruction], dram: np.ndarray | bytes) -> SimResult:
        data = bytes(dram) if isinstance(dram, bytes | bytearray) else \
            np.ascontiguousarray(dram, dtype=np.uint8).tobytes()
        answer, out = self._request({"op": "run", "program": [vta.to_json(i) for i in program]},
                                    [data])
        if answer.get("status") != "ok":
            kind = str(answer.get("kind", "bad_program"))
            if kind == "device_lost":
                raise DeviceLostError(str(answer.get("message")))
            raise SimulationError(kind, str(answer.get("message", "")))
        return SimResult(np.frombuffer(out[0], np.uint8).copy(), int(answer["cycles"]),
                         float(answer["seconds"]), dict(answer.get("stats", {})))
