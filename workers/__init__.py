"""Workers layer: builders and runners, device plugins (cpu, cuda, vta), the Ray pool,
and the remote device server/client.

    from workers import LocalPool, MeasureInput
    with LocalPool() as pool:
        results = pool.measure([MeasureInput(workload.to_json(), "cpu", steps)])

``RayPool`` (the same interface across a Ray cluster) imports Ray on first use.
Imports only ``schedule`` (its top-level package).
"""

from __future__ import annotations

from typing import Any

from .builder import Builder, LocalBuilder
from .cluster import RAY_ADDRESS_ENV, node_resources, worker_command
from .cpu import CpuDevice
from .device import BuildResult, Device, device_kinds, device_type, register_device
from .measure import (
    ErrorKind,
    MeasureInput,
    MeasureInputError,
    MeasureResult,
    MeasureSettings,
    Provenance,
)
from .pool import LocalPool, Pool, ResultCallback

__all__ = [
    "RAY_ADDRESS_ENV",
    "BuildResult",
    "Builder",
    "CpuDevice",
    "Device",
    "ErrorKind",
    "LocalBuilder",
    "LocalPool",
    "MeasureInput",
    "MeasureInputError",
    "MeasureResult",
    "MeasureSettings",
    "Pool",
    "Provenance",
    "RayPool",
    "ResultCallback",
    "device_kinds",
    "device_type",
    "node_resources",
    "register_device",
    "worker_command",
]


def __getattr__(name: str) -> Any:
    if name == "RayPool":  # imports Ray (slow, and an optional dependency)
        from .ray_pool import RayPool

        return RayPool
    raise AttributeError(f"module 'workers' has no attribute {name!r}")
