"""Workers layer: builders and runners, device plugins (cpu, ...), and the Ray pool.

    from workers import LocalPool, MeasureInput
    with LocalPool() as pool:
        results = pool.measure([MeasureInput(workload, target, steps)])

A pool is a ``Builder`` and a ``Runner`` (``MeasurePool``): a new way of reaching devices
is one new class of either. A measure input with a ``library`` is a baseline (numpy, torch,
the target's peak: ``workers.baselines``). ``workers.vta`` simulates the FPGA accelerator;
``workers.opencl`` runs GPU programs through OpenCL (PoCL on a machine without a GPU),
``workers.cuda`` compiles them with nvcc and runs them on NVIDIA GPUs;
``serve_device`` / ``RemoteDevice`` put a device behind an authenticated server
(``tensortune device-server``). ``RayPool`` (the same interface across a Ray cluster) and
``check_ray_head`` (can this process join the cluster, with which token) import Ray on
first use.
Imports only ``schedule`` (its top-level package).
"""

from __future__ import annotations

import importlib
from typing import Any

from .baselines import BASELINES
from .builder import Builder, LocalBuilder
from .cluster import (
    RAY_ADDRESS_ENV,
    ClusterLostError,
    RayAccessError,
    node_resources,
    use_token_file,
    worker_command,
)
from .cpu import CpuDevice
from .cuda import CudaDevice
from .device import (
    BuildResult,
    Device,
    device_kinds,
    device_type,
    register_device,
    unregister_device,
)
from .device_server import (
    DeviceLostError,
    DeviceRefusedError,
    RemoteDevice,
    read_device_key,
    serve_device,
)
from .measure import (
    ErrorKind,
    MeasureInput,
    MeasureInputError,
    MeasureResult,
    MeasureSettings,
    Provenance,
)
from .opencl import OpenCLDevice
from .pool import LocalPool, MeasurePool, Pool
from .program_text import ProgramTextError, program_text
from .runner import BuiltCandidate, LocalRunner, ResultCallback, Runner
from .sandbox import Outcome, Sandbox, SandboxError
from .vta import Simulator as VtaSimulator
from .vta import VtaDevice, simulated_facts

__all__ = [
    "BASELINES",
    "RAY_ADDRESS_ENV",
    "BuildResult",
    "Builder",
    "BuiltCandidate",
    "ClusterLostError",
    "CpuDevice",
    "CudaDevice",
    "Device",
    "DeviceLostError",
    "DeviceRefusedError",
    "ErrorKind",
    "LocalBuilder",
    "LocalPool",
    "LocalRunner",
    "MeasureInput",
    "MeasureInputError",
    "MeasurePool",
    "MeasureResult",
    "MeasureSettings",
    "OpenCLDevice",
    "Outcome",
    "Pool",
    "ProgramTextError",
    "Provenance",
    "RayAccessError",
    "RayPool",
    "RemoteDevice",
    "ResultCallback",
    "Runner",
    "Sandbox",
    "SandboxError",
    "VtaDevice",
    "VtaSimulator",
    "check_ray_head",
    "device_kinds",
    "device_type",
    "node_resources",
    "program_text",
    "read_device_key",
    "register_device",
    "require_ray_node",
    "serve_device",
    "simulated_facts",
    "unregister_device",
    "use_token_file",
    "worker_command",
]


_LAZY = {"RayPool": "ray_pool", "check_ray_head": "ray_access",
         "require_ray_node": "ray_access"}
"""Names whose modules import Ray (slow, and an optional dependency): imported on use."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'workers' has no attribute {name!r}")
