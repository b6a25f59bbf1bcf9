"""The ``opencl`` device: GPU programs (the GPU lowering printed as OpenCL C) run through
an OpenCL driver, in the device's sandbox.

A build (anywhere, no device needed) replays the steps, lowers them for the GPU and prints
OpenCL C with its launch plan; the source is the "library" shipped to the device. A run
compiles it with the device's OpenCL compiler, makes the workload's inputs, runs it once
for the correctness check and times it with the queue's profiling events (device time of
the kernels, summed over a call), all in the sandbox: the program is derived from user
input. A compile error of the driver's is the candidate's ``compile_error``.

On a machine without a GPU, Debian's PoCL runs the kernels on the CPU. That makes this a
correctness device first: its timings are those of the CPU emulating a grid of thread
blocks, and its provenance says so ("PoCL on CPU"). One device per OpenCL platform found
(Ray resource ``opencl``).
"""

from __future__ import annotations

import functools
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from schedule import (
    BuildError,
    KernelSignature,
    LaunchPlan,
    OpenCLModule,
    ScheduleError,
    Target,
    TensorExprError,
    gpu_source,
    make_schedule,
    opencl_device_name,
)

from .device import BuildResult, Device, register_device
from .measure import ErrorKind, MeasureInput, MeasureResult, MeasureSettings, Provenance
from .reference import ReferenceOutputs, compare_outputs, kernel_arrays, output_bytes
from .sandbox import Sandbox, SandboxError

COMPILER = "tensortune-gpu-codegen (OpenCL C; compiled by the device's driver)"


@functools.lru_cache(maxsize=1)
def platforms_here() -> tuple[tuple[str, str], ...]:
    """(target device name, device model) of each OpenCL platform's first device here."""
    try:
        import pyopencl as cl

        return tuple((opencl_device_name(p.name), str(p.get_devices()[0].name))
                     for p in cl.get_platforms())
    except Exception:  # no package, no ICD loader, no platform: no device here
        return ()


def run_program(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: compile the OpenCL program, run it once on the workload's inputs (when
    checking) and time it."""
    signature = KernelSignature.from_json(job["signature"])
    plan = LaunchPlan.from_json(job["plan"])
    try:
        mod = OpenCLModule(signature, plan, job["source"], job["device"])
    except BuildError as err:
        started()
        return {"compile_error": str(err)}, []
    arrays = kernel_arrays(signature, job["workload"], job["seed"])
    started()
    outputs: list[bytes] = []
    if job["check"]:
        mod(*arrays)
        outputs = output_bytes(arrays, signature)
    costs = mod.time(*arrays, number=job["number"], repeat=job["repeat"],
                     min_repeat_ms=job["min_repeat_ms"])
    return {"costs": costs, "compile_s": mod.build_seconds}, outputs


@register_device
class OpenCLDevice(Device):
    """The first device of one OpenCL platform (``device``: the target's name for it, by
    default the first platform's)."""

    kind = "opencl"
    resource = "opencl"

    def __init__(self, node: str = "", device: str | None = None):
        super().__init__(node)
        self.host = socket.gethostname()
        found = dict(platforms_here())
        if device is None:
            device = next(iter(found), "pocl")
        self.device = device
        self.model = found.get(device, "unknown OpenCL device")
        if device == "pocl":
            self.model += " (PoCL on CPU: a correctness device, not a GPU's timing)"
        self._sandbox = Sandbox()
        self._references = ReferenceOutputs()

    @classmethod
    def count_here(cls) -> int:
        return len(platforms_here())

    @classmethod
    def for_slot(cls, node: str, slot: int) -> OpenCLDevice:
        names = [name for name, _ in platforms_here()]
        return cls(node, names[slot] if slot < len(names) else None)

    @classmethod
    def build(cls, inp: MeasureInput, compile_timeout: float) -> BuildResult:
        start = time.perf_counter()
        if inp.library:
            return BuildResult(ErrorKind.INVALID_SCHEDULE, f"no {inp.library} baseline on "
                               "opencl devices", compiler=COMPILER)
        try:
            s, args = make_schedule(inp.workload, inp.steps)
            src = gpu_source(s, args, inp.target)
        except (ScheduleError, TensorExprError) as err:
            return BuildResult(ErrorKind.INVALID_SCHEDULE, str(err),
                               time.perf_counter() - start, compiler=COMPILER)
        return BuildResult(ErrorKind.NONE, "", time.perf_counter() - start,
                           src.source.encode(), {"kernel": src.signature.to_json(),
                                                 "plan": src.plan.to_json()}, COMPILER, [])

    @property
    def id(self) -> str:
        return f"opencl-{self.device}@{self.host}" + (f"/{self.node[:12]}" if self.node else "")

    def serves(self, target: Target) -> bool:
        return target.kind == "opencl" and target.device == self.device

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
            job = {"source": build.library.decode(), "signature": build.signature["kernel"],
                   "plan": build.signature["plan"], "device": self.device,
                   "workload": inp.workload.to_json(), "seed": settings.seed,
                   "check": settings.check, "number": settings.number,
                   "repeat": settings.repeat, "min_repeat_ms": settings.min_repeat_ms}
            outcome = self._sandbox.call("workers.opencl:run_program", job,
                                         start_timeout=settings.load_timeout,
                                         timeout=settings.run_timeout)
        except SandboxError as err:
            return result(ErrorKind.DEVICE_LOST, f"{self.id}: {err}")
        if outcome.status in ("timeout", "start_timeout"):
            self._sandbox.restart()
            return result(ErrorKind.RUN_TIMEOUT, f"the program {outcome.message}")
        if outcome.status == "raised":
            return result(ErrorKind.RUNTIME_ERROR, outcome.message)
        if outcome.status != "ok":
            self._sandbox.restart()
            return result(ErrorKind.RUNTIME_ERROR, f"the program crashed: {outcome.message}")
        value = outcome.value if isinstance(outcome.value, dict) else {}
        if "compile_error" in value:
            return result(ErrorKind.COMPILE_ERROR, str(value["compile_error"])[:4000])
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
