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
from collections.abc import Callable
from typing import Any

from schedule import (
    BuildError,
    GpuSource,
    KernelSignature,
    LaunchPlan,
    OpenCLModule,
    Target,
    opencl_device_name,
)

from .device import BuildResult, register_device
from .gpu_device import GpuDevice, check_and_time


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
    costs, outputs = check_and_time(mod, signature, job, started)
    return {"costs": costs, "compile_s": mod.build_seconds}, outputs


@register_device
class OpenCLDevice(GpuDevice):
    """The first device of one OpenCL platform (``device``: the target's name for it, by
    default the first platform's)."""

    kind = "opencl"
    resource = "opencl"
    run_job = "workers.opencl:run_program"
    compiler = "tensortune-gpu-codegen (OpenCL C; compiled by the device's driver)"

    def __init__(self, node: str = "", device: str | None = None):
        super().__init__(node)
        found = dict(platforms_here())
        if device is None:
            device = next(iter(found), "pocl")
        self.device = device
        self.model = found.get(device, "unknown OpenCL device")
        if device == "pocl":
            self.model += " (PoCL on CPU: a correctness device, not a GPU's timing)"

    @classmethod
    def count_here(cls) -> int:
        return len(platforms_here())

    @classmethod
    def for_slot(cls, node: str, slot: int) -> OpenCLDevice:
        names = [name for name, _ in platforms_here()]
        return cls(node, names[slot] if slot < len(names) else None)

    @classmethod
    def compile(cls, src: GpuSource, target: Target,
                timeout: float) -> tuple[bytes, dict[str, Any], list[str]]:
        return src.source.encode(), {}, []  # the device's driver compiles it

    @property
    def device_name(self) -> str:
        return self.device

    def serves(self, target: Target) -> bool:
        return target.kind == "opencl" and target.device == self.device

    def job(self, build: BuildResult) -> dict[str, Any]:
        return {"source": build.library.decode(), "device": self.device}
