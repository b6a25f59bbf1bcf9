"""Joining a Ray cluster as a measurement node: what ``tensortune worker`` runs.

A worker node is a plain Ray node started with ``ray start --address ADDR`` that
advertises one Ray resource per device it owns (``cpu-measure``, ``opencl``, ``fpga``, and
``GPU``, Ray's own, as ``--num-gpus``); the pools place each device's actor on a node
holding that resource. Before advertising a device the node checks that the device is
alive.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from .device import device_type

RAY_ADDRESS_ENV = "TENSORTUNE_RAY_ADDRESS"
"""Environment variable with the address of the Ray cluster to join (``host:port``)."""
RAY_AUTH_MODE_ENV = "RAY_AUTH_MODE"
"""Ray's switch for token authentication (``token`` or ``disabled``)."""
RAY_TOKEN_ENV = "RAY_AUTH_TOKEN"
"""Ray's variable holding the cluster's token itself."""
RAY_TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
"""Ray's variable naming a file that holds the cluster's token."""


class RayAccessError(ConnectionError):
    """The Ray cluster cannot be joined; the message says why and how to fix it, in one
    line."""


class ClusterLostError(RayAccessError):
    """The Ray cluster's head stopped answering while a pool was using it."""


def split_address(address: str) -> tuple[str, int]:
    """(host, port) of a ``host:port`` address (``[v6]:port`` too); ``RayAccessError``
    for anything else."""
    host, _, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RayAccessError(f"expected the Ray head's address as HOST:PORT, got {address!r}")
    return host, int(port)


def use_token_file(path: str | Path) -> None:
    """Make the token in the file at ``path`` the one this process and the Ray processes
    it starts present (it takes precedence over ``RAY_AUTH_TOKEN``)."""
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise RayAccessError(f"the Ray token file {path} does not exist")
    os.environ[RAY_TOKEN_PATH_ENV] = str(resolved)
    os.environ.pop(RAY_TOKEN_ENV, None)


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
        for slot in range(count):
            probe = cls.for_slot("", slot)
            try:
                if not probe.is_alive():
                    raise ValueError(f"the {kind} device {probe.id} of this machine does not "
                                     "answer")
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


def worker_command(address: str, resources: dict[str, int],
                   ray_options: Sequence[str] = ()) -> list[str]:
    """The ``ray start`` command line that joins ``address`` advertising ``resources``;
    ``ray_options`` go to ``ray start`` as they are (fixed ports behind a firewall, say)."""
    if not address:
        raise ValueError(f"no Ray address: give one (host:port) or set {RAY_ADDRESS_ENV}")
    taken = [opt for opt in ray_options
             if opt.split("=")[0] in ("--address", "--resources", "--num-gpus", "--block",
                                      "--head")]
    if taken:
        raise ValueError(f"{taken[0].split('=')[0]} is set by tensortune worker itself")
    custom = {name: count for name, count in resources.items() if name != "GPU"}
    gpus = [f"--num-gpus={resources['GPU']}"] if "GPU" in resources else []
    return [_ray_executable(), "start", f"--address={address}",
            f"--resources={json.dumps(custom, sort_keys=True)}", *gpus, *ray_options, "--block"]
