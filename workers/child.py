"""The sandbox child process: ``python -m workers.child FD`` (started by
:class:`workers.sandbox.Sandbox`, never by hand).

It starts without capabilities and, where the OS allows it, in a network namespace of its
own (both arranged by the parent before Python starts: ``workers.sandbox``). Before any job
it sets its resource limits (address space, file size, no core dumps; CPU seconds are
re-armed per job), answers ``ready`` with them, and runs one job after another:
resolve the job's function, call it with a ``started()`` callback and the job document,
send back ``done`` (a JSON value and byte blobs) or ``raised`` (the exception's text). A
watchdog thread ends the process when its parent is gone, so a hung candidate never
outlives the runner.
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import threading
import time
from typing import Any

from workers.sandbox import MEMORY_ENV, UNLIMITED, Closed, recv_message, resolve, send_message

#: CPU seconds one job may use per core of the machine (all threads together), a backstop
#: behind the wall-clock timeouts the parent enforces.
JOB_CPU_SECONDS_PER_CORE = 600
#: The largest file a job may write (a compiled kernel, a temporary source).
MAX_FILE_BYTES = 1 << 30


def memory_limit(environ: dict[str, str] | None = None) -> int:
    """The address-space limit of a child (and of the compiler it runs):
    ``$TENSORTUNE_SANDBOX_MEMORY`` when it is a positive number of bytes, no limit when it
    is ``unlimited`` (a GPU device's child), else the physical memory (at least 4 GiB)."""
    text = (os.environ if environ is None else environ).get(MEMORY_ENV, "")
    if text == UNLIMITED:
        return resource.RLIM_INFINITY
    if text.isdigit() and int(text) > 0:
        return int(text)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(physical, 4 << 30)


def _set_limit(which: int, soft: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(which, (soft, hard))


def _job_cpu_seconds() -> int:
    return JOB_CPU_SECONDS_PER_CORE * (os.cpu_count() or 1)


def confine() -> dict[str, Any]:
    """Apply this process's limits; what was applied, for the parent's ``isolation``."""
    memory = memory_limit()
    _set_limit(resource.RLIMIT_AS, memory)
    _set_limit(resource.RLIMIT_FSIZE, MAX_FILE_BYTES)
    _set_limit(resource.RLIMIT_CORE, 0)
    return {"memory_bytes": None if memory == resource.RLIM_INFINITY else memory,
            "file_bytes": MAX_FILE_BYTES,
            "job_cpu_seconds": _job_cpu_seconds()}


def _arm_cpu_limit() -> None:
    """Allow the next job its CPU seconds on top of what was used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _set_limit(resource.RLIMIT_CPU, used + _job_cpu_seconds())


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(3)


def serve(fd: int) -> None:
    """Run jobs sent over the socket ``fd`` until the parent closes it."""
    sock = socket.socket(fileno=fd)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    send_message(sock, {"kind": "ready", "isolation": confine()})
    while True:
        try:
            request, _ = recv_message(sock, None)
        except Closed:
            return
        signalled = []

        def started(signalled: list[bool] = signalled) -> None:
            if not signalled:
                signalled.append(True)
                send_message(sock, {"kind": "started"})

        _arm_cpu_limit()
        try:
            value, blobs = resolve(request["fn"])(started, request["job"])
        except Exception as err:  # reported to the parent, which decides what it means
            send_message(sock, {"kind": "raised", "message": f"{type(err).__name__}: {err}"})
            continue
        send_message(sock, {"kind": "done", "value": value, "blobs": len(blobs)}, blobs)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
