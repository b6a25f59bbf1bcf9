"""A killable child process that runs jobs one at a time: the isolation under every build
and every run.

The child is ``python -m workers.child FD``, started in its own session (so the whole
process group, compiler included, dies on a kill) and talking over a socket pair. A job
names a function (``"module:function"``, always one of ours) and a JSON document; the
function receives a ``started()`` callback and returns ``(value, blobs)``: a JSON value and
a list of byte strings. Messages are length-prefixed frames of JSON or raw bytes — never
pickle — and every read of the parent has a deadline, so whatever a candidate does in the
child (crash, hang, scribble on memory, write garbage to the socket) the parent learns it
as an :class:`Outcome` and goes on.

Two clocks: ``start_timeout`` runs from sending the job until the child calls
``started()`` (loading a library, making inputs), ``timeout`` from then until the answer.

What runs in the child is derived from user input, so the child gets little (on Linux):
- an environment of a few named variables (no database URLs, tokens or other secrets), and
  no way to read the parent's: the parent makes itself non-dumpable (so ``/proc/<pid>/
  environ`` and ``mem`` are closed to processes without ``CAP_SYS_PTRACE``) and the child
  starts with an empty capability bounding set and ``no_new_privs`` (a child of root has no
  capabilities either: it cannot ptrace, ``setns`` back, or override file permissions);
- resource limits (address space, CPU seconds per job, file size, no core dumps; see
  ``workers.child``);
- where the OS allows it (running as root), a network namespace of its own with no
  interface up. Where it does not, the child keeps the parent's network access.
``Sandbox.isolation`` says what a child got. What remains: a child runs as the same user,
so it can signal the parent and touch that user's files (run workers as a dedicated user).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_LENGTH = struct.Struct("!Q")
_MAX_HEADER = 64 << 20
_MAX_BLOB = 1 << 36
_MAX_BLOBS = 1024
_CHUNK = 1 << 20
READY_TIMEOUT = 120.0
#: The variables a sandbox child inherits (exact names, or prefixes ending in ``_``): what
#: compilers, OpenMP/BLAS runtimes and the kernel cache need; nothing else of the parent's.
CHILD_ENVIRONMENT = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "CC",
                     "LD_LIBRARY_PATH", "TENSORTUNE_HOME", "TENSORTUNE_CPU_ISA",
                     "TENSORTUNE_SANDBOX_MEMORY", "OMP_", "GOMP_", "KMP_", "OPENBLAS_",
                     "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
#: The variable that sets a child's address space (read by ``workers.child``), and its value
#: for no limit.
MEMORY_ENV = "TENSORTUNE_SANDBOX_MEMORY"
UNLIMITED = "unlimited"


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_CLONE_NEWNET = 0x40000000
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_LAST_CAPABILITY = 63


def _confine_child() -> None:
    """Runs in the new child between fork and exec (``preexec_fn``): a network namespace
    of its own where allowed, no capabilities after exec, no privilege gains. Only calls
    into libc prepared by the parent; failures (no privilege) leave things as they are."""
    if _LIBC is None:
        return
    _LIBC.unshare(_CLONE_NEWNET)
    for capability in range(_LAST_CAPABILITY + 1):
        if _LIBC.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break
    _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


@functools.cache
def _close_own_proc_files() -> None:
    """Make this process non-dumpable (once, before its first child)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _namespace(pid: int | str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""


def child_environment(parent: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a sandbox child: the allowed variables of ``parent`` (default:
    this process's) and the path to our packages."""
    parent = dict(os.environ) if parent is None else parent
    env = {name: value for name, value in parent.items()
           if name in CHILD_ENVIRONMENT
           or any(p.endswith("_") and name.startswith(p) for p in CHILD_ENVIRONMENT)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


class SandboxError(RuntimeError):
    """The child process could not be started or did not answer its start-up handshake:
    a failure of the machine, not of a candidate."""


@dataclass
class Outcome:
    """How a job ended. ``status`` is ``ok`` (``value``/``blobs`` hold the answer),
    ``raised`` (the function raised: ``message``), ``crashed`` (the child died:
    ``message`` names the signal or exit status), ``start_timeout`` (no ``started()``
    within ``start_timeout``) or ``timeout`` (no answer within ``timeout`` after it).
    ``seconds`` is the wall time from sending the job, ``run_seconds`` from ``started()``."""

    status: str
    value: Any = None
    blobs: list[bytes] = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0
    run_seconds: float = 0.0


class Deadline(Exception):
    """A message did not arrive whole before its deadline."""


class Closed(Exception):
    """The other end closed the socket."""


class Garbled(Closed):
    """The other end sent something that is not a well-formed message."""


def send_message(sock: socket.socket, header: dict[str, Any], blobs: list[bytes] = ()) -> None:
    data = json.dumps(header).encode()
    sock.sendall(_LENGTH.pack(len(data)) + data)
    for blob in blobs:
        sock.sendall(_LENGTH.pack(len(blob)))
        sock.sendall(blob)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    """``n`` bytes, read in chunks: memory grows only as data really arrives (a garbled
    length cannot make the parent allocate it up front)."""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Deadline
            sock.settimeout(remaining)
        try:
            chunk = sock.recv(min(n - got, _CHUNK))
        except TimeoutError:
            raise Deadline from None
        except OSError:
            raise Closed from None
        if not chunk:
            raise Closed
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _recv_frame(sock: socket.socket, limit: int, deadline: float | None) -> bytes:
    (length,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size, deadline))
    if length > limit:
        raise Garbled
    return _recv_exact(sock, length, deadline)


def recv_message(sock: socket.socket, deadline: float | None, *, max_header: int = _MAX_HEADER,
                 max_blob: int = _MAX_BLOB, max_blobs: int = _MAX_BLOBS
                 ) -> tuple[dict[str, Any], list[bytes]]:
    """One message: a JSON header (an object whose ``blobs`` says how many byte strings
    follow) and its blobs. Raises ``Garbled`` past a limit or on malformed framing,
    ``Closed`` when the other end went away, and ``Deadline`` past ``deadline``
    (``time.monotonic()``)."""
    try:
        header = json.loads(_recv_frame(sock, max_header, deadline))
    except (ValueError, UnicodeDecodeError):
        raise Garbled from None
    count = header.get("blobs", 0) if isinstance(header, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= max_blobs:
        raise Garbled
    blobs = [_recv_frame(sock, max_blob, deadline) for _ in range(count)]
    return header, blobs


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()


def describe_exit(returncode: int | None) -> str:
    """``killed by signal SIGSEGV`` / ``exited with status 3``."""
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class Sandbox:
    """One child process, started on first use and restarted after it dies or is killed.
    Not thread-safe: one job at a time."""

    def __init__(self, ready_timeout: float = READY_TIMEOUT, *, limit_address_space: bool = True):
        self.ready_timeout = ready_timeout
        self.limit_address_space = limit_address_space
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._finalizer: weakref.finalize | None = None
        self.isolation: dict[str, Any] = {}
        """What the last child reported of its isolation (limits, network namespace)."""

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        environment = child_environment()
        if not self.limit_address_space:
            # A GPU driver maps far more virtual memory than the machine has (the device's
            # memory and a unified address space): an address-space limit breaks it.
            environment[MEMORY_ENV] = UNLIMITED
        parent, child = socket.socketpair()
        _close_own_proc_files()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "workers.child", str(child.fileno())],
                pass_fds=(child.fileno(),), start_new_session=True, env=environment,
                stdin=subprocess.DEVNULL, preexec_fn=_confine_child)
        except OSError as err:
            parent.close()
            raise SandboxError(f"cannot start a sandbox process: {err}") from None
        finally:
            child.close()
        self._proc, self._sock = proc, parent
        self._finalizer = weakref.finalize(self, _close, proc, parent)
        try:
            header, _ = recv_message(parent, time.monotonic() + self.ready_timeout)
        except (Deadline, Closed):
            header = {}
        if header.get("kind") != "ready":
            self.close()
            raise SandboxError(f"the sandbox process did not start within "
                               f"{self.ready_timeout:g} s ({describe_exit(proc.poll())})")
        isolation = header.get("isolation")
        self.isolation = dict(isolation) if isinstance(isolation, dict) else {}
        own, childs = _namespace("self"), _namespace(proc.pid)
        self.isolation["network"] = ("isolated" if own and childs and own != childs else
                                     "not isolated (a network namespace needs root)")

    def _ensure(self) -> socket.socket:
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            self._start()
        assert self._sock is not None
        return self._sock

    def restart(self) -> None:
        """Kill the child (if any); the next job starts a fresh one."""
        self.close()

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._proc = self._sock = self._finalizer = None

    def call(self, fn: str, job: Any, *, start_timeout: float, timeout: float) -> Outcome:
        """Run ``fn`` (``"module:function"``) on ``job`` in the child. Raises
        :class:`SandboxError` only when no child can be started."""
        sock = self._ensure()
        sent = time.monotonic()
        started: float | None = None

        def outcome(status: str, message: str = "", value: Any = None,
                    blobs: list[bytes] | None = None) -> Outcome:
            now = time.monotonic()
            return Outcome(status, value, blobs or [], message, now - sent,
                           now - started if started is not None else 0.0)

        try:
            sock.settimeout(30.0)
            send_message(sock, {"fn": fn, "job": job})
            deadline = sent + start_timeout
            while True:
                header, blobs = recv_message(sock, deadline)
                kind = header.get("kind")
                if kind == "started" and started is None:
                    started = time.monotonic()
                    deadline = started + timeout
                elif kind == "done":
                    return outcome("ok", value=header.get("value"), blobs=blobs)
                elif kind == "raised":
                    return outcome("raised", str(header.get("message", ""))[:4000])
                else:
                    raise Garbled
        except Deadline:
            self.restart()
            if started is None:
                return outcome("start_timeout", f"did not start within {start_timeout:g} s "
                               "(killed)")
            return outcome("timeout", f"did not finish within {timeout:g} s (killed)")
        except Garbled:
            self.restart()
            return outcome("crashed", "the child process sent a garbled answer (killed)")
        except (Closed, OSError):
            code = self._exit_code()
            self.restart()
            return outcome("crashed", f"the child process {describe_exit(code)}")

    def _exit_code(self) -> int | None:
        """The exit status of a child that closed its end (it is normally exiting)."""
        assert self._proc is not None
        try:
            return self._proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return None


def _close(proc: subprocess.Popen, sock: socket.socket) -> None:
    sock.close()
    if proc.poll() is None:
        _kill_group(proc)


def ping(started: Callable[[], None], job: Any) -> tuple[Any, list[bytes]]:
    """A job that does nothing: shows that a child answers."""
    started()
    return job, []


def resolve(name: str) -> Callable[..., Any]:
    """The object named ``"module:qualname"`` (a job function or a device class of ours)."""
    module, _, attr = name.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
