"""The ``cuda`` device: GPU programs (the GPU lowering printed as CUDA C) compiled by nvcc and
run on an NVIDIA GPU through the CUDA driver, in the device's sandbox.

A build (on any node with the CUDA toolkit, no GPU needed) lowers the steps, prints CUDA C,
compiles it with ``nvcc`` to a cubin for the target's arch and checks each kernel's
registers (``ptxas -v``) against the target's limit: a kernel over a limit is an invalid
schedule and never reaches the device. A run loads the cubin in the sandbox (a process of
its own, with no address-space limit: the driver maps the GPU's memory into it), runs it
once for the correctness check and times it with CUDA events after a warm-up call, the L2
cache flushed before each repeat (``schedule.gpu_build.CudaModule``).

A kernel that faults (an illegal address, a launch failure) leaves its CUDA context
unusable: the candidate is a runtime error, the sandbox process (and with it the context)
is replaced, and the device is checked with a small round trip before the next candidate.
One device per GPU ``nvidia-smi`` lists (Ray resource ``GPU``); it serves targets of its
own arch only (a cubin runs on the architecture it was built for).
"""

from __future__ import annotations

import base64
import functools
import os
import subprocess
from collections.abc import Callable
from typing import Any

from schedule import (
    BuildError,
    CudaError,
    CudaModule,
    CudaUnavailable,
    GpuSource,
    KernelSignature,
    LaunchPlan,
    Target,
    check_cuda_resources,
    compile_cuda,
    cuda_arch,
    cuda_round_trip,
    nvcc_path,
    nvidia_gpus,
)

from .device import BuildResult, register_device
from .gpu_device import GpuDevice, check_and_time
from .sandbox import SandboxError


def run_program(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: load the cubin on the job's GPU, run it once on the workload's inputs
    (when checking) and time it. A fault that corrupts the context comes back as
    ``{"fault": ...}`` (the caller replaces this process)."""
    signature = KernelSignature.from_json(job["signature"])
    plan = LaunchPlan.from_json(job["plan"])
    try:
        mod = CudaModule(signature, plan, base64.b64decode(job["cubin"]), job["ordinal"])
    except BuildError as err:
        started()
        return {"compile_error": str(err)}, []
    except CudaUnavailable as err:
        started()
        return {"device_lost": str(err)}, []
    try:
        costs, outputs = check_and_time(mod, signature, job, started)
    except CudaError as err:
        if err.sticky:
            return {"fault": str(err)}, []
        raise
    finally:
        mod.close()
    return {"costs": costs}, outputs


def check_device(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: whether the job's GPU answers a small round trip (what is checked after
    a fault, before the next candidate)."""
    started()
    return {"ok": cuda_round_trip(job["ordinal"])}, []


@functools.lru_cache(maxsize=1)
def nvcc_version() -> str:
    """The CUDA compiler's release line (``Cuda compilation tools, release 13.0, ...``)."""
    nvcc = nvcc_path()
    if nvcc is None:
        return "nvcc (not installed)"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "nvcc"
    lines = [ln for ln in out.splitlines() if "release" in ln]
    return lines[-1].strip() if lines else "nvcc"


def visible_gpu(slot: int) -> tuple[int, int]:
    """(the driver's ordinal, nvidia-smi's index) of this process's GPU number ``slot``.
    The driver sees only the GPUs ``CUDA_VISIBLE_DEVICES`` lists (a Ray actor holding a GPU
    sees the one it was given, whatever its slot), nvidia-smi every GPU."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    if not all(v.isdigit() for v in visible):
        return slot, slot
    ordinal = slot if slot < len(visible) else 0
    return ordinal, int(visible[ordinal])


@register_device
class CudaDevice(GpuDevice):
    """One NVIDIA GPU of this machine (``ordinal``: its number in the driver's order)."""

    kind = "cuda"
    resource = "GPU"
    run_job = "workers.cuda:run_program"
    compiler = "tensortune-gpu-codegen (CUDA C) + nvcc"

    def __init__(self, node: str = "", ordinal: int = 0):
        super().__init__(node, limit_address_space=False)
        self.ordinal, index = visible_gpu(ordinal)
        gpus = nvidia_gpus()
        cap, name = gpus[index] if index < len(gpus) else ("", "no GPU found")
        self.model = name
        self.arch = cuda_arch(cap) if cap else ""

    @classmethod
    def count_here(cls) -> int:
        return len(nvidia_gpus())

    @classmethod
    def for_slot(cls, node: str, slot: int) -> CudaDevice:
        return cls(node, slot)

    @classmethod
    def compile(cls, src: GpuSource, target: Target,
                timeout: float) -> tuple[bytes, dict[str, Any], list[str]]:
        binary = compile_cuda(src.source, target.arch, timeout)
        check_cuda_resources(binary, target)
        resources = {name: [r.registers, r.spill_bytes, r.shared_bytes]
                     for name, r in binary.resources.items()}
        return binary.cubin, {"resources": resources}, \
            [nvcc_version(), "-cubin", f"-arch={target.arch}", "-O3"]

    @property
    def device_name(self) -> str:
        return str(self.ordinal)

    def serves(self, target: Target) -> bool:
        return target.kind == "cuda" and bool(self.arch) and target.arch == self.arch

    def job(self, build: BuildResult) -> dict[str, Any]:
        return {"cubin": base64.b64encode(build.library).decode(), "ordinal": self.ordinal}

    def is_alive(self) -> bool:
        try:
            outcome = self._sandbox.call("workers.cuda:check_device", {"ordinal": self.ordinal},
                                         start_timeout=60.0, timeout=60.0)
        except SandboxError:
            return False
        return outcome.status == "ok" and isinstance(outcome.value, dict) \
            and outcome.value.get("ok") is True

    def after_fault(self) -> str:
        if self.is_alive():
            return " (the device was checked after it and answers)"
        return " (the device did not answer a check after it)"
