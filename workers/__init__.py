"""Workers layer: builders and runners, device plugins (cpu, ...), and the Ray pool.

    from workers import LocalPool, MeasureInput
    with LocalPool() as pool:
        results = pool.measure([MeasureInput(workload, target, steps)])

A pool is a ``Builder`` and a ``Runner`` (``MeasurePool``): a new way of reaching devices
is one new class of either. ``RayPool`` (the same interface across a Ray cluster) imports
Ray on first use.
Imports only ``schedule`` (its top-level package).
"""

from __future__ import annotations

from typing import Any

from .builder import Builder, LocalBuilder
from .cluster import RAY_ADDRESS_ENV, node_resources, worker_command
from .cpu import CpuDevice
from .device import (
    BuildResult,
    Device,
    device_kinds,
    device_type,
    register_device,
    unregister_device,
)
from .measure import (
    ErrorKind,
    MeasureInput,
    MeasureInputError,
    MeasureResult,
    MeasureSettings,
    Provenance,
)
from .pool import LocalPool, MeasurePool, Pool
from .runner import BuiltCandidate, LocalRunner, ResultCallback, Runner
from .sandbox import Outcome, Sandbox, SandboxError

__all__ = [
    "RAY_ADDRESS_ENV",
    "BuildResult",
    "Builder",
    "BuiltCandidate",
    "CpuDevice",
    "Device",
    "ErrorKind",
    "LocalBuilder",
    "LocalPool",
    "LocalRunner",
    "MeasureInput",
    "MeasureInputError",
    "MeasurePool",
    "MeasureResult",
    "MeasureSettings",
    "Outcome",
    "Pool",
    "Provenance",
    "RayPool",
    "ResultCallback",
    "Runner",
    "Sandbox",
    "SandboxError",
    "device_kinds",
    "device_type",
    "node_resources",
    "register_device",
    "unregister_device",
    "worker_command",
]


def __getattr__(name: str) -> Any:
    if name == "RayPool":  # imports Ray (slow, and an optional dependency)
        from .ray_pool import RayPool

        return RayPool
    raise AttributeError(f"module 'workers' has no attribute {name!r}")
