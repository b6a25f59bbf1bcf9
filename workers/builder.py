"""Builders: compile a batch of candidates in parallel, each in a killable child process
with a compile timeout, and each distinct candidate once.

``Builder`` is the interface (as in TVM meta_schedule); ``LocalBuilder`` runs a few
:class:`~workers.sandbox.Sandbox` processes on this machine. The Ray pool calls
:func:`build_in_sandbox` from its build tasks. A build that cannot even start its child
process is an infrastructure failure (``device_lost``), never the candidate's fault.
"""

from __future__ import annotations

import os
import queue
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .device import BuildResult, Device, device_type
from .measure import ErrorKind, MeasureInput, MeasureResult, MeasureSettings, Provenance
from .sandbox import Outcome, Sandbox, SandboxError, resolve

# The child's own compiler timeout usually fires first; the parent kills it this much later.
KILL_GRACE_S = 1.0


def type_path(cls: type) -> str:
    """``"module:QualName"``: how a child process finds a class of ours."""
    return f"{cls.__module__}:{cls.__qualname__}"


def build_job(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: build one candidate with the named device class."""
    started()
    cls = resolve(job["device"])
    result = cls.build(MeasureInput.from_json(job["input"]).parsed(), job["compile_timeout"])
    return result.metadata(), [result.library]


def _from_outcome(outcome: Outcome, compile_timeout: float) -> BuildResult:
    if outcome.status == "ok":
        return BuildResult.from_metadata(outcome.value, outcome.blobs[0])
    if outcome.status in ("timeout", "start_timeout"):
        return BuildResult(ErrorKind.COMPILE_TIMEOUT, f"the build did not finish within "
                           f"{compile_timeout:g} s (killed)", outcome.seconds)
    if outcome.status == "raised":
        return BuildResult(ErrorKind.COMPILE_ERROR, f"the build failed: {outcome.message}",
                           outcome.seconds)
    return BuildResult(ErrorKind.COMPILE_ERROR, f"the build crashed: {outcome.message}",
                       outcome.seconds)


def build_in_sandbox(sandbox: Sandbox, cls: type[Device], inp: MeasureInput,
                     compile_timeout: float) -> BuildResult:
    """Build one candidate in ``sandbox``, killing it after ``compile_timeout`` seconds."""
    job = {"device": type_path(cls), "input": inp.to_json(), "compile_timeout": compile_timeout}
    try:
        outcome = sandbox.call("workers.builder:build_job", job,
                               start_timeout=compile_timeout + KILL_GRACE_S,
                               timeout=compile_timeout + KILL_GRACE_S)
    except SandboxError as err:
        return BuildResult(ErrorKind.DEVICE_LOST, f"builder on {socket.gethostname()}: {err}")
    return _from_outcome(outcome, compile_timeout)


def failed_build_result(build: BuildResult, inp: MeasureInput,
                        settings: MeasureSettings) -> MeasureResult:
    """The result of a candidate that never reached a device."""
    return MeasureResult([], build.error_kind, build.error_msg, build_s=build.build_s,
                         timestamp=time.time(),
                         provenance=Provenance(target=str(inp.target), compiler=build.compiler,
                                               flags=list(build.flags),
                                               settings=settings.timing()))


def build_key(cls: type[Device], inp: MeasureInput) -> tuple[str, str, str, str, str]:
    """Candidates with equal keys (of a parsed input) are the same program: built once
    per batch."""
    return type_path(cls), inp.workload.key, str(inp.target), inp.steps.key, inp.library


class Builder(ABC):
    """Builds a batch of (parsed) candidates; the results are in input order.
    ``device_types`` maps a target kind to the device class that builds for it (kinds not
    in it are looked up in the registry)."""

    device_types: dict[str, type[Device]]

    @abstractmethod
    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """One :class:`BuildResult` per input (candidate faults are results, not errors)."""

    @abstractmethod
    def close(self) -> None:
        """Release the builder's processes."""


class LocalBuilder(Builder):
    """Builds on this machine in ``max_workers`` child processes (default: one per core).
    ``device_types`` maps a target kind to its device class (default: the registry)."""

    def __init__(self, max_workers: int | None = None, compile_timeout: float = 60.0,
                 device_types: Mapping[str, type[Device]] | None = None):
        self.max_workers = max_workers or os.cpu_count() or 1
        self.compile_timeout = compile_timeout
        self.device_types = dict(device_types or {})
        self._sandboxes: queue.SimpleQueue[Sandbox] = queue.SimpleQueue()
        self._all: list[Sandbox] = []
        for _ in range(self.max_workers):
            sandbox = Sandbox()
            self._all.append(sandbox)
            self._sandboxes.put(sandbox)
        self._threads = ThreadPoolExecutor(self.max_workers, thread_name_prefix="tt-build")

    def _type_for(self, inp: MeasureInput) -> type[Device]:
        kind = inp.target.kind
        return self.device_types.get(kind) or device_type(kind)

    def _build_one(self, cls: type[Device], inp: MeasureInput) -> BuildResult:
        sandbox = self._sandboxes.get()
        try:
            return build_in_sandbox(sandbox, cls, inp, self.compile_timeout)
        finally:
            self._sandboxes.put(sandbox)

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        futures: dict[tuple[str, ...], Any] = {}
        keys = []
        for inp in map(MeasureInput.parsed, inputs):
            cls = self._type_for(inp)
            key = build_key(cls, inp)
            keys.append(key)
            if key not in futures:
                futures[key] = self._threads.submit(self._build_one, cls, inp)
        return [futures[key].result() for key in keys]

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        for sandbox in self._all:
            sandbox.close()
