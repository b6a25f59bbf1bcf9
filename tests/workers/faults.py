"""Misbehaving candidates and jobs for the workers tests.

``FaultyCpuDevice`` is the real CPU device, except that a candidate whose steps are
``[["fault", NAME]]`` is built into a hostile artefact: a real library (compiled with gcc
through ``compile_source``) whose kernel segfaults, aborts, spins forever, writes garbage
into every open file descriptor, computes nothing, or a real kernel that takes long to
load — or a build that fails to compile or never finishes. The runner gets these through
the ordinary path (bytes plus a kernel signature), so its isolation is tested against
native code doing what it likes.

``UnresponsiveCpuDevice`` is a device whose runner hangs (the Ray pool must give up on it).
The ``*_job`` functions are sandbox jobs that misbehave in Python.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from schedule import Target, compile_schedule, compile_source, te
from workers import CpuDevice, MeasureInput

HEADER = "#include <signal.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <unistd.h>\n"

# Kernels for the 3-argument matmul signature (A, B, C) with the entry renamed tt_fault.
FAULT_SOURCES = {
    "segfault": "int32_t tt_fault(void* a, void* b, void* c) { raise(SIGSEGV); return 0; }\n",
    "abort": "int32_t tt_fault(void* a, void* b, void* c) { abort(); }\n",
    "hang": ("volatile int spin = 1;\n"
             "int32_t tt_fault(void* a, void* b, void* c) { while (spin) {} return 0; }\n"),
    "garble": ("int32_t tt_fault(void* a, void* b, void* c) {\n"
               "  const char junk[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 'j', 'u', 'n', 'k'};\n"
               "  for (int fd = 3; fd < 256; ++fd) write(fd, junk, sizeof junk);\n"
               "  return 0;\n}\n"),
    "nothing": "int32_t tt_fault(void* a, void* b, void* c) { return 0; }\n",
}
TIMER = ("int32_t tt_fault_time(void* a, void* b, void* c, int32_t number, int32_t repeat,\n"
         "                      int32_t min_repeat_ms, int64_t flush, double warm_s,\n"
         "                      double* results) {\n"
         "  int32_t code = tt_fault(a, b, c);\n"
         "  for (int32_t r = 0; r < repeat; ++r) results[r] = 1e-3;\n"
         "  return code;\n}\n")
# A constructor that delays loading the library (a correct kernel otherwise).
SLOW_LOAD = "\n__attribute__((constructor)) static void tt_slow_load(void) { usleep(%d); }\n"
SLOW_LOAD_S = 1.5


class FaultyCpuDevice(CpuDevice):
    """The CPU device with fault injection at the builder boundary (see the module doc)."""

    @classmethod
    def compile_candidate(cls, inp: MeasureInput,
                          compile_timeout: float) -> tuple[bytes, dict[str, Any], list[str]]:
        if not inp.steps or inp.steps[0][0] != "fault":
            return super().compile_candidate(inp, compile_timeout)
        fault = inp.steps[0][1]
        if fault == "compile_error":
            compile_source("int32_t tt_fault(void* a { return ; }\n", [], compile_timeout)
        if fault == "slow_build":
            time.sleep(600)
        plain = MeasureInput(inp.workload, inp.target, [])
        library, signature, flags = super().compile_candidate(plain, compile_timeout)
        if fault == "slow_load":
            return _slow_load_library(plain, flags, compile_timeout), signature, flags
        if fault == "bad_library":
            return b"\x7fELF not really a library", signature, flags
        path, _ = compile_source(HEADER + FAULT_SOURCES[fault] + TIMER, flags, compile_timeout)
        return path.read_bytes(), {**signature, "entry": "tt_fault"}, flags


class UnresponsiveCpuDevice(CpuDevice):
    """A device whose runner itself stops answering (not just a candidate in its child)."""

    def run(self, build: Any, inp: MeasureInput, settings: Any) -> Any:
        time.sleep(3600)


def _slow_load_library(plain: MeasureInput, flags: list[str], timeout: float) -> bytes:
    workload = plain.workload
    args = workload.tensors()
    artifact = compile_schedule(te.create_schedule(args[-1]), args, Target.parse(plain.target))
    source = artifact.source + SLOW_LOAD % int(SLOW_LOAD_S * 1e6)
    path, _ = compile_source("#include <unistd.h>\n" + source, flags, timeout)
    return path.read_bytes()


# ---------------------------------------------------------------------------- sandbox jobs


def echo_job(started: Callable[[], None], job: Any) -> tuple[Any, list[bytes]]:
    started()
    return {"echo": job, "pid": os.getpid()}, [b"\x00\x01binary"]


def segfault_job(started: Callable[[], None], job: Any) -> tuple[Any, list[bytes]]:
    started()
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(60)
    return None, []


def hang_job(started: Callable[[], None], job: Any) -> tuple[Any, list[bytes]]:
    if job.get("before_start"):
        time.sleep(600)
    started()
    time.sleep(600)
    return None, []


def sleep_then_start_job(started: Callable[[], None], job: Any) -> tuple[Any, list[bytes]]:
    """Takes ``job["load"]`` s before starting and ``job["run"]`` s after."""
    time.sleep(job["load"])
    started()
    time.sleep(job["run"])
    return "finished", []


def raise_job(started: Callable[[], None], job: Any) -> tuple[Any, list[bytes]]:
    started()
    raise MemoryError("no memory for the scratch buffer")


def garble_job(started: Callable[[], None], job: Any) -> tuple[Any, list[bytes]]:
    started()
    os.write(int(sys.argv[1]), b"\x00\x00\x00\x00\x00\x00\x00\x05{oops")
    time.sleep(60)
    return None, []


def spawn_grandchild_job(started: Callable[[], None], job: Any) -> tuple[Any, list[bytes]]:
    """Starts a sleeping grandchild (like a compiler): a kill of the sandbox takes both."""
    proc = subprocess.Popen(["sleep", "600"])
    started()
    return {"grandchild": proc.pid}, []


def snoop_job(started: Callable[[], None], job: Any) -> tuple[Any, list[bytes]]:
    """What a kernel could learn in its child: environment variables (read the way C code
    reads them), its resource limits, and whether it reaches a port of the parent's."""
    started()
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    seen = {name: (libc.getenv(name.encode()) or b"").decode() for name in job["names"]}
    try:
        with socket.create_connection(("127.0.0.1", job["port"]), timeout=5):
            reached = True
    except OSError:
        reached = False
    limits = {name: resource.getrlimit(getattr(resource, name))[0]
              for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE")}
    try:  # the parent's environment, the way around getenv
        with open(f"/proc/{os.getppid()}/environ", "rb") as file:
            parents_environ = file.read().decode(errors="replace")
    except OSError as err:
        parents_environ = f"refused: {err}"
    try:  # back into the parent's network namespace
        fd = os.open(f"/proc/{os.getppid()}/ns/net", os.O_RDONLY)
        rejoined = libc.setns(fd, 0x40000000) == 0
        os.close(fd)
    except OSError:
        rejoined = False
    return {"environment": seen, "all_names": sorted(os.environ), "reached": reached,
            "limits": limits, "parents_environ": parents_environ, "rejoined": rejoined}, []
