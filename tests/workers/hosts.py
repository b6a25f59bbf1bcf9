"""Test hosts on one machine: network namespaces joined by veth pairs to a bridge, so that
processes started "on" a host have their own address, ports and loopback, and see the
others only across the bridge, as separate machines on one LAN would. Each host also has
its own process namespace (Ray finds its local node by listing processes) and temporary
folder. Needs root, ``ip`` (iproute2) and ``unshare``
(util-linux); :func:`unavailable` says why not otherwise.

    with HostNetwork() as net:
        head = net.add_host("head")           # 10.x.y.2, reachable from every other host
        proc = head.popen(["ray", "start", ...])
        head.kill_all()                        # SIGKILL every process of the host

Names carry this process's id, so concurrent test runs on one machine do not collide.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any


def unavailable() -> str:
    """Why test hosts cannot be made here ("" when they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for command, package in (("ip", "iproute2"), ("unshare", "util-linux"),
                             ("nsenter", "util-linux")):
        if shutil.which(command) is None:
            return f"the {command} command ({package}) is not installed"
    probe = f"ttprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Host:
    """One network namespace with an address on the bridge, and a temporary folder of its
    own (``TMPDIR`` and ``RAY_TMPDIR`` of its processes: Ray keeps per-host state there,
    such as the node's address, which hosts sharing one /tmp would mix up)."""

    def __init__(self, network: HostNetwork, name: str, address: str):
        self.network = network
        self.name = name
        self.address = address
        self.tmp = Path("/tmp") / name  # short: Ray's socket paths must stay under 108 bytes
        self.tmp.mkdir(exist_ok=True)
        self._init_pid = 0

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run on this host: in its network namespace and its process namespace
        (its commands see one another's processes, and no other host's)."""
        return ["nsenter", "-t", str(self._init()), "--net", "--pid", "--mount", *argv]

    def _init(self) -> int:
        """The process holding this host's process namespace (pid 1 there), started when
        there is none (at first, and after :meth:`kill_all`)."""
        if self._init_pid and Path(f"/proc/{self._init_pid}").exists():
            return self._init_pid
        holder = subprocess.Popen(["ip", "netns", "exec", self.name, "unshare", "--pid",
                                   "--fork", "--mount-proc", "sleep", "infinity"],
                                  start_new_session=True)
        self.network.holders.append(holder)
        children = Path(f"/proc/{holder.pid}/task/{holder.pid}/children")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if children.exists() and children.read_text().split():
                self._init_pid = int(children.read_text().split()[0])
                return self._init_pid
            time.sleep(0.01)
        raise RuntimeError(f"host {self.name}: its process namespace did not start")

    def environment(self, env: dict[str, str] | None) -> dict[str, str]:
        return {**(os.environ if env is None else env), "TMPDIR": str(self.tmp),
                "RAY_TMPDIR": str(self.tmp)}

    def popen(self, argv: Sequence[str], log: Path, env: dict[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` on this host, its output going to ``log``."""
        out = open(log, "ab")  # noqa: SIM115 - the child holds it; closed with the host
        self.network.files.append(out)
        return subprocess.Popen(self.command(argv), stdout=out, stderr=subprocess.STDOUT,
                                env=self.environment(env), start_new_session=True, **kwargs)

    def run(self, argv: Sequence[str], env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(argv), capture_output=True, text=True,
                              env=self.environment(env), timeout=timeout)

    def pids(self) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True,
                             text=True).stdout
        return [int(p) for p in out.split()]

    def kill_all(self) -> None:
        """SIGKILL every process on this host, as a power cut would."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._init_pid = 0  # the next command starts the host afresh
        deadline = time.monotonic() + 10
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)


class HostNetwork:
    """A bridge with hosts; everything is removed on exit (processes killed first)."""

    def __init__(self) -> None:
        tag = os.getpid() % 100000
        self.bridge = f"ttbr{tag}"
        self.prefix = f"10.{200 + tag % 50}.{tag % 250}"
        self.gateway = f"{self.prefix}.1"
        """This machine's own address on the bridge."""
        self.hosts: list[Host] = []
        self.files: list[Any] = []
        self.holders: list[subprocess.Popen] = []
        self._tag = tag

    def __enter__(self) -> HostNetwork:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        return self

    def add_host(self, role: str) -> Host:
        n = len(self.hosts) + 2
        name = f"tt{self._tag}{role}"
        outer, inner = f"ttv{self._tag}o{n}", f"ttv{self._tag}i{n}"
        _ip("netns", "add", name)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", name)
        _ip("link", "set", outer, "master", self.bridge)
        _ip("link", "set", outer, "up")
        host = Host(self, name, f"{self.prefix}.{n}")
        for args in (["addr", "add", f"{host.address}/24", "dev", inner],
                     ["link", "set", inner, "up"], ["link", "set", "lo", "up"],
                     ["route", "add", "default", "via", self.gateway]):
            _ip("-n", name, *args)
        self.hosts.append(host)
        return host

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for host in self.hosts:
            host.kill_all()
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True)
            shutil.rmtree(host.tmp, ignore_errors=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        for out in self.files:
            out.close()
        for holder in self.holders:
            holder.wait(timeout=10)


class TcpForward:
    """Forwards connections to ``listen`` (host, port) to ``target``, in threads of this
    process: a service of this machine bound to loopback (the test PostgreSQL, say) made
    reachable from the test hosts."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]):
        self.target = target
        self._server = socket.create_server(listen)
        self.address = self._server.getsockname()[:2]
        self._closing = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    def __enter__(self) -> TcpForward:
        self._threads[0].start()
        return self

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for src, dst in ((client, upstream), (upstream, client)):
                pump = threading.Thread(target=self._pump, args=(src, dst), daemon=True)
                pump.start()
                self._threads.append(pump)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._server.close()
