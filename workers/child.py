"""The sandbox child process: ``python -m workers.child FD`` (started by
:class:`workers.sandbox.Sandbox`, never by hand).

It answers ``ready``, then runs one job after another: resolve the job's function, call it
with a ``started()`` callback and the job document, send back ``done`` (a JSON value and
byte blobs) or ``raised`` (the exception's text). A watchdog thread ends the process when
its parent is gone, so a hung candidate never outlives the runner.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

from workers.sandbox import Closed, recv_message, resolve, send_message


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(3)


def serve(fd: int) -> None:
    """Run jobs sent over the socket ``fd`` until the parent closes it."""
    sock = socket.socket(fileno=fd)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    send_message(sock, {"kind": "ready"})
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

        try:
            value, blobs = resolve(request["fn"])(started, request["job"])
        except Exception as err:  # reported to the parent, which decides what it means
            send_message(sock, {"kind": "raised", "message": f"{type(err).__name__}: {err}"})
            continue
        send_message(sock, {"kind": "done", "value": value, "blobs": len(blobs)}, blobs)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
