"""Joining a Ray cluster as a measurement node: what ``tensortune worker`` runs.

A worker node is a plain Ray node started with ``ray start --address ADDR`` that
advertises one Ray resource per device it owns (``cpu-measure``, later ``GPU``,
``fpga``); the pools place each device's actor on a node holding that resource. Before
advertising a device the node checks that the device is alive.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from .device import device_type

RAY_ADDRESS_ENV = "TENSORTUNE_RAY_ADDRESS"
"""Environment variable with the address of the Ray cluster to join (``host:port``)."""


def node_resources(kinds: Sequence[str]) -> dict[str, int]:
    """The Ray resources this machine advertises for the device ``kinds``; raises
    ``ValueError`` for an unknown kind or one this machine does not have."""
    if not kinds:
        raise ValueError("no device kinds given (e.g. cpu)")
    resources: dict[str, int] = {}
    for kind in kinds:
        cls = device_type(kind)
        count = cls.count_here()
        if count < 1:
            raise ValueError(f"this machine has no {kind} device")
        probe = cls()
        try:
            if not probe.is_alive():
                raise ValueError(f"the {kind} device of this machine does not answer")
        finally:
            probe.close()
        resources[cls.resource] = count
    return resources


def _ray_executable() -> str:
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.exists() else shutil.which("ray")
    if found is None:
        raise ValueError("the 'ray' command is not installed; pip install 'tensortune[ray]'")
    return found


def worker_command(address: str, resources: dict[str, int]) -> list[str]:
    """The ``ray start`` command line that joins ``address`` advertising ``resources``."""
    if not address:
        raise ValueError(f"no Ray address: give one (host:port) or set {RAY_ADDRESS_ENV}")
    return [_ray_executable(), "start", f"--address={address}",
            f"--resources={json.dumps(resources, sort_keys=True)}", "--block"]
