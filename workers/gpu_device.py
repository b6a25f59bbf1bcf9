"""What the GPU devices (``opencl``, ``cuda``) share: a build that lowers the steps for the
GPU and prints the program, and a run that sends it to the device's sandbox, checks the
outputs against the workload's reference and turns every way it can end into a result.

A subclass says how a printed program becomes the shipped artefact (OpenCL source as it is,
CUDA compiled to a cubin by nvcc on the building node), which sandbox job runs it, and what
else that job needs to know.
"""

from __future__ import annotations

import socket
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

from schedule import (
    BuildError,
    CompileTimeout,
    GpuSource,
    KernelSignature,
    ScheduleError,
    Target,
    TensorExprError,
    gpu_source,
    make_schedule,
)

from .device import BuildResult, Device
from .measure import ErrorKind, MeasureInput, MeasureResult, MeasureSettings, Provenance
from .reference import ReferenceOutputs, compare_outputs, kernel_arrays, output_bytes
from .sandbox import Sandbox, SandboxError


def check_and_time(module: Any, signature: KernelSignature, job: dict[str, Any],
                   started: Callable[[], None]) -> tuple[list[float], list[bytes]]:
    """In a run job: make the workload's inputs, signal the start, run the module once for
    the check (its outputs' bytes, when the job checks) and time it: (costs, outputs)."""
    arrays = kernel_arrays(signature, job["workload"], job["seed"])
    started()
    outputs: list[bytes] = []
    if job["check"]:
        module(*arrays)
        outputs = output_bytes(arrays, signature)
    costs = module.time(*arrays, number=job["number"], repeat=job["repeat"],
                        min_repeat_ms=job["min_repeat_ms"])
    return costs, outputs


class GpuDevice(Device):
    """A device that runs programs of the GPU lowering, one at a time, in a sandbox.
    ``model`` names the device in results' provenance."""

    #: The sandbox job (``"module:function"``) that runs a built program.
    run_job: ClassVar[str]
    #: The code generator and compiler, as results' provenance names them.
    compiler: ClassVar[str]

    def __init__(self, node: str = "", *, limit_address_space: bool = True):
        super().__init__(node)
        self.host = socket.gethostname()
        self.model = "unknown GPU"
        self._sandbox = Sandbox(limit_address_space=limit_address_space)
        self._references = ReferenceOutputs()

    @classmethod
    def build(cls, inp: MeasureInput, compile_timeout: float) -> BuildResult:
        start = time.perf_counter()
        if inp.library:
            return BuildResult(ErrorKind.INVALID_SCHEDULE, f"no {inp.library} baseline on "
                               f"{cls.kind} devices", compiler=cls.compiler)
        try:
            s, args = make_schedule(inp.workload, inp.steps)
            target = Target.parse(inp.target)
            src = gpu_source(s, args, target)
            library, extra, flags = cls.compile(src, target, compile_timeout)
        except (ScheduleError, TensorExprError) as err:
            return BuildResult(ErrorKind.INVALID_SCHEDULE, str(err),
                               time.perf_counter() - start, compiler=cls.compiler)
        except BuildError as err:
            kind = ErrorKind.COMPILE_TIMEOUT if isinstance(err, CompileTimeout) \
                else ErrorKind.COMPILE_ERROR
            return BuildResult(kind, str(err)[:4000], time.perf_counter() - start,
                               compiler=cls.compiler)
        return BuildResult(ErrorKind.NONE, "", time.perf_counter() - start, library,
                           {"kernel": src.signature.to_json(), "plan": src.plan.to_json(),
                            **extra}, cls.compiler, flags)

    @classmethod
    @abstractmethod
    def compile(cls, src: GpuSource, target: Target,
                timeout: float) -> tuple[bytes, dict[str, Any], list[str]]:
        """The artefact shipped to the device for a printed program, what the run needs
        beside the kernel signature and launch plan, and the compiler flags;
        ``BuildError`` or ``ScheduleError`` when the program cannot be built."""

    @abstractmethod
    def job(self, build: BuildResult) -> dict[str, Any]:
        """The device-specific fields of the run job (the program, which device)."""

    def after_fault(self) -> str:
        """Called after the program crashed or corrupted the device (the sandbox is
        restarted already); what to add to the result's message."""
        return ""

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.device_name}@{self.host}" + \
            (f"/{self.node[:12]}" if self.node else "")

    @property
    @abstractmethod
    def device_name(self) -> str:
        """This device among its kind's on the host (an OpenCL platform, a CUDA ordinal)."""

    def is_alive(self) -> bool:
        try:
            return self._sandbox.call("workers.sandbox:ping", {}, start_timeout=30.0,
                                      timeout=30.0).status == "ok"
        except SandboxError:
            return False

    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        start = time.perf_counter()
        provenance = Provenance(self.host, self.node, self.model, str(inp.target),
                                build.compiler, list(build.flags), settings.timing())

        def result(kind: ErrorKind, message: str = "", costs: Any = ()) -> MeasureResult:
            return MeasureResult(list(costs), kind, message, build.build_s,
                                 time.perf_counter() - start, self.id, time.time(), provenance)

        reference = None
        try:
            if settings.check:
                reference = self._references.get(inp.workload, settings)
                if isinstance(reference, tuple):
                    message, permanent = reference
                    return replace(result(ErrorKind.RUNTIME_ERROR, message),
                                   workload_error=permanent)
            job = {**self.job(build), "signature": build.signature["kernel"],
                   "plan": build.signature["plan"], "workload": inp.workload.to_json(),
                   "seed": settings.seed, "check": settings.check, "number": settings.number,
                   "repeat": settings.repeat, "min_repeat_ms": settings.min_repeat_ms}
            outcome = self._sandbox.call(self.run_job, job, start_timeout=settings.load_timeout,
                                         timeout=settings.run_timeout)
        except SandboxError as err:
            return result(ErrorKind.DEVICE_LOST, f"{self.id}: {err}")
        if outcome.status in ("timeout", "start_timeout"):
            self._sandbox.restart()
            return result(ErrorKind.RUN_TIMEOUT, f"the program {outcome.message}"
                          + self.after_fault())
        if outcome.status == "raised":
            return result(ErrorKind.RUNTIME_ERROR, outcome.message)
        if outcome.status != "ok":
            self._sandbox.restart()
            return result(ErrorKind.RUNTIME_ERROR, f"the program crashed: {outcome.message}"
                          + self.after_fault())
        value = outcome.value if isinstance(outcome.value, dict) else {}
        if "device_lost" in value:
            return result(ErrorKind.DEVICE_LOST, f"{self.id}: {value['device_lost']}")
        if "compile_error" in value:
            return result(ErrorKind.COMPILE_ERROR, str(value["compile_error"])[:4000])
        if "fault" in value:
            self._sandbox.restart()
            return result(ErrorKind.RUNTIME_ERROR, f"the program faulted on the device: "
                          f"{str(value['fault'])[:2000]}" + self.after_fault())
        costs = value.get("costs")
        if not (isinstance(costs, list) and len(costs) == settings.repeat
                and all(isinstance(c, float) and 0 < c < float("inf") for c in costs)):
            return result(ErrorKind.RUNTIME_ERROR, f"the timing gave no valid costs: "
                                                   f"{str(value)[:200]}")
        if reference is not None:
            mismatch = compare_outputs(outcome.blobs, reference)
            if mismatch:
                self._sandbox.restart()
                return result(ErrorKind.WRONG_ANSWER, mismatch, costs)
        return result(ErrorKind.NONE, costs=costs)

    def close(self) -> None:
        self._sandbox.close()
        self._references.close()
