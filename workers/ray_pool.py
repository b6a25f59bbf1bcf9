"""The Ray-backed measurement pool, a :class:`RayBuilder` and a :class:`RayRunner`: builds
are Ray tasks on any node with a free CPU, each device is a Ray actor pinned to the node
that owns it and holding that device's resource (``cpu-measure``, ...). A built library
(tens of KB) comes back to this process with its build and goes to a device with its run,
so that a candidate does not depend on the node that built it once the build is done (a
build node lost later would leave its device waiting on an object that is gone).

A batch is built completely before it is timed, so no node of the cluster builds for this
pool while one of its devices is being timed; each device actor times one candidate at a
time. When a device actor or its node dies mid-batch, its candidate is retried on another
device of the same kind, or returned as ``device_lost`` when none is left: every input
gets exactly one result. The pool discovers devices at every batch, so nodes that joined
since (``tensortune worker``) are used.

With no address (and no ``TENSORTUNE_RAY_ADDRESS``) Ray starts locally, sized to this
machine, with this machine's devices as resources (without the dashboard, which doubles
the start-up time; start a cluster with ``ray start --head`` to have one).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from schedule import Target

from .builder import Builder, build_in_sandbox, build_key, type_path
from .cluster import RAY_ADDRESS_ENV
from .device import BuildResult, Device, device_kinds, device_type
from .measure import ErrorKind, MeasureInput, MeasureResult, MeasureSettings, Provenance
from .pool import MeasurePool
from .ray_access import (
    HeadWatch,
    check_ray_head,
    is_local_address,
    not_a_node_error,
    require_ray_node,
)
from .runner import BuiltCandidate, ResultCallback, Runner
from .sandbox import READY_TIMEOUT, Sandbox, resolve

_BUILTIN_RESOURCES = frozenset({"CPU", "GPU", "memory", "object_store_memory"})
_build_sandbox: Sandbox | None = None  # one per Ray worker process, reused across tasks
# A device that has not answered this long after a candidate's load and run timeouts (time
# to restart its sandbox, compute a reference) is taken for lost: its actor is killed and
# the candidate goes to another device.
UNRESPONSIVE_GRACE_S = READY_TIMEOUT + 60.0


@ray.remote(num_cpus=1, num_returns=2, max_retries=3)
def _build_task(device: str, inp: dict[str, Any],
                compile_timeout: float) -> tuple[dict[str, Any], bytes]:
    """Build one candidate in this worker's sandbox: (metadata, library bytes)."""
    global _build_sandbox
    if _build_sandbox is None:
        _build_sandbox = Sandbox()
    result = build_in_sandbox(_build_sandbox, resolve(device), MeasureInput.from_json(inp),
                              compile_timeout)
    return result.metadata(), result.library


class DeviceActor:
    """Owns one device on its node; runs one candidate at a time."""

    def __init__(self, device: str, slot: int = 0):
        self.node = ray.get_runtime_context().get_node_id()
        self.device: Device = resolve(device).for_slot(self.node, slot)

    def describe(self, targets: list[str]) -> dict[str, Any]:
        """The device's id, whether it is alive, and which of ``targets`` it serves."""
        return {"id": self.device.id, "node": self.node, "alive": self.device.is_alive(),
                "serves": [self.device.serves(Target.parse(t)) for t in targets]}

    def run(self, metadata: dict[str, Any], library: bytes, inp: dict[str, Any],
            settings: dict[str, Any]) -> dict[str, Any]:
        build = BuildResult.from_metadata(metadata, library)
        return self.device.run(build, MeasureInput.from_json(inp).parsed(),
                               MeasureSettings.from_json(settings)).to_json()

    def close(self) -> None:
        self.device.close()


_RemoteDeviceActor = ray.remote(DeviceActor)


@dataclass(eq=False)
class _Device:
    """The driver's view of one device actor."""

    kind: str
    node: str
    slot: int
    handle: Any
    id: str = ""
    serves: set[str] = field(default_factory=set)


def local_resources() -> dict[str, float]:
    """The custom resources of this machine's devices (for an embedded Ray)."""
    out: dict[str, float] = {}
    for kind in device_kinds():
        cls = device_type(kind)
        if cls.resource not in _BUILTIN_RESOURCES and cls.count_here() > 0:
            out[cls.resource] = float(cls.count_here())
    return out


def actor_resources(resource: str) -> dict[str, Any]:
    """The actor options that reserve one device advertised as Ray ``resource``: GPUs are
    Ray's own resource (``num_gpus``; Ray then shows the actor only its GPU through
    ``CUDA_VISIBLE_DEVICES``), other devices custom resources."""
    return {"num_gpus": 1} if resource == "GPU" else {"resources": {resource: 1}}


def _node_ip() -> str:
    """The address of the Ray node this process belongs to."""
    node_id = ray.get_runtime_context().get_node_id()
    return next(node["NodeManagerAddress"] for node in ray.nodes() if node["NodeID"] == node_id)


def ray_address(address: str | None = None) -> str | None:
    """The cluster to join: ``address``, else ``$TENSORTUNE_RAY_ADDRESS``, else None (start
    Ray on this machine, also what ``"local"`` asks for)."""
    address = address or os.environ.get(RAY_ADDRESS_ENV) or None
    return None if address == "local" else address


def _kind_type(device_types: Mapping[str, type[Device]], kind: str) -> type[Device]:
    return device_types.get(kind) or device_type(kind)


def _wait_all(refs: list[Any], watch: HeadWatch) -> None:
    """Wait until every one of ``refs`` is ready, making sure the head still answers."""
    pending = refs
    while pending:
        ready, pending = ray.wait(pending, num_returns=len(pending),
                                  timeout=watch.interval_s)
        if pending and not ready:
            watch.check()


class RayBuilder(Builder):
    """Builds every distinct candidate of a batch as a Ray task."""

    def __init__(self, compile_timeout: float, device_types: Mapping[str, type[Device]],
                 watch: HeadWatch):
        self.compile_timeout = compile_timeout
        self.device_types = dict(device_types)
        self.watch = watch

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        refs: dict[tuple[str, ...], tuple[Any, Any]] = {}
        keys = []
        for inp in map(MeasureInput.parsed, inputs):
            cls = _kind_type(self.device_types, inp.target.kind)
            key = build_key(cls, inp)
            keys.append(key)
            if key not in refs:
                refs[key] = _build_task.remote(type_path(cls), inp.to_json(),
                                               self.compile_timeout)
        _wait_all([ref for pair in refs.values() for ref in pair], self.watch)
        builds: dict[tuple[str, ...], BuildResult] = {}
        for key, (meta_ref, library_ref) in refs.items():
            try:
                builds[key] = BuildResult.from_metadata(ray.get(meta_ref), ray.get(library_ref))
            except ray.exceptions.RayError as err:
                builds[key] = BuildResult(ErrorKind.DEVICE_LOST,
                                          f"the build worker was lost: {err}")
        return [builds[key] for key in keys]

    def close(self) -> None:
        """Build tasks hold nothing between batches."""


class RayRunner(Runner):
    """Times built candidates on the device actors of the cluster (see the module doc).

    ``device_start_timeout`` bounds how long a new device actor may take to come up (e.g.
    while another pool holds the device) before it is left out of the batch; a device that
    has not answered ``device_grace_s`` after a candidate's load and run timeouts is taken
    for lost.
    """

    def __init__(self, settings: MeasureSettings, device_types: Mapping[str, type[Device]],
                 watch: HeadWatch, device_start_timeout: float = 60.0,
                 device_grace_s: float = UNRESPONSIVE_GRACE_S):
        self.settings = settings
        self.watch = watch
        self.device_types = dict(device_types)
        self.device_start_timeout = device_start_timeout
        self.device_grace_s = device_grace_s
        self._devices: dict[tuple[str, str, int], _Device] = {}
        self.retries = 0
        """Candidates handed to another device because theirs died (since the start)."""

    # ------------------------------------------------------------------ devices

    def _discover(self, kinds: set[str], targets: list[str]) -> dict[str, list[_Device]]:
        """Start an actor for every device of ``kinds`` in the cluster that has none, ask
        every actor whether it is alive and which targets it serves; drop the others."""
        self.watch.require()  # ray.nodes() would hang for a minute on a dead head
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            for kind in kinds:
                cls = _kind_type(self.device_types, kind)
                for slot in range(int(node["Resources"].get(cls.resource, 0))):
                    key = (kind, node["NodeID"], slot)
                    if key not in self._devices:
                        handle = _RemoteDeviceActor.options(
                            num_cpus=0, **actor_resources(cls.resource), max_restarts=0,
                            max_task_retries=0, max_concurrency=1,
                            scheduling_strategy=NodeAffinitySchedulingStrategy(
                                node["NodeID"], soft=False),
                        ).remote(type_path(cls), slot)
                        self._devices[key] = _Device(kind, node["NodeID"], slot, handle)
        asked = {dev.handle.describe.remote(targets): key
                 for key, dev in self._devices.items() if dev.kind in kinds}
        ready, late = ray.wait(list(asked), num_returns=len(asked),
                               timeout=self.device_start_timeout)
        for ref in late:
            self._drop(asked[ref])
        for ref in ready:
            try:
                info = ray.get(ref)
            except ray.exceptions.RayError:
                info = {"alive": False}
            if not info["alive"]:
                self._drop(asked[ref])
                continue
            dev = self._devices[asked[ref]]
            dev.id = info["id"]
            dev.serves = {t for t, ok in zip(targets, info["serves"], strict=True) if ok}
        found: dict[str, list[_Device]] = {kind: [] for kind in kinds}
        for dev in self._devices.values():
            if dev.kind in kinds:
                found[dev.kind].append(dev)
        return found

    def _drop(self, key: tuple[str, str, int]) -> None:
        dev = self._devices.pop(key, None)
        if dev is not None:
            ray.kill(dev.handle, no_restart=True)

    def devices(self) -> list[str]:
        """Ids of the device actors this runner currently uses."""
        return sorted(dev.id for dev in self._devices.values())

    # ------------------------------------------------------------------ timing

    def run(self, candidates: Sequence[BuiltCandidate], finish: ResultCallback) -> None:
        """Hand queued candidates to idle devices of their kind, one at a time each, until
        every candidate has a result."""
        by_index = {cand.index: cand for cand in candidates}
        targets = {cand.index: str(cand.input.target) for cand in candidates}
        queues: dict[str, deque[int]] = {}
        for cand in candidates:
            queues.setdefault(cand.input.target.kind, deque()).append(cand.index)
        devices = self._discover(set(queues), sorted(set(targets.values())))
        settings = self.settings.to_json()
        limit = self.settings.load_timeout + self.settings.run_timeout + self.device_grace_s
        idle = [dev for devs in devices.values() for dev in devs]
        running: dict[Any, tuple[int, _Device, float]] = {}
        while True:
            for kind, queue in queues.items():
                for n in [n for n in queue
                          if not any(targets[n] in d.serves for d in devices[kind])]:
                    queue.remove(n)
                    finish(n, self._lost(targets[n], kind, devices[kind]))
                for dev in [d for d in idle if d.kind == kind]:
                    n = next((n for n in queue if targets[n] in dev.serves), None)
                    if n is not None:
                        queue.remove(n)
                        idle.remove(dev)
                        cand = by_index[n]
                        ref = dev.handle.run.remote(cand.build.metadata(), cand.build.library,
                                                    cand.input.to_json(), settings)
                        running[ref] = (n, dev, time.monotonic() + limit)
            if not running:
                return
            first = min(deadline for _, _, deadline in running.values())
            ready, _ = ray.wait(list(running), num_returns=1, timeout=min(
                self.watch.interval_s, max(0.0, first - time.monotonic())))
            if not ready:
                self.watch.check()
                for ref, (n, dev, deadline) in list(running.items()):
                    if deadline <= time.monotonic():
                        ray.kill(dev.handle, no_restart=True)  # its run now fails: retried
                        running[ref] = (n, dev, math.inf)
                continue
            n, dev, _ = running.pop(ready[0])
            try:
                result = MeasureResult.from_json(ray.get(ready[0]))
            except ray.exceptions.RayActorError:
                # The device (or its node) died: its candidate goes to another device.
                devices[dev.kind].remove(dev)
                self._drop((dev.kind, dev.node, dev.slot))
                queues[dev.kind].appendleft(n)
                self.retries += 1
                continue
            except ray.exceptions.RayError as err:  # e.g. its artefact could not be fetched
                result = MeasureResult([], ErrorKind.DEVICE_LOST, f"{dev.id}: {err}",
                                       device=dev.id, provenance=Provenance(
                                           target=targets[n], settings=self.settings.timing()))
            idle.append(dev)
            finish(n, result)

    def _lost(self, target: str, kind: str, alive: list[_Device]) -> MeasureResult:
        why = (f"no live {kind} device in the cluster serves {target!r}" if not alive
               else f"none of the live {kind} devices serves {target!r}")
        return MeasureResult([], ErrorKind.DEVICE_LOST, why,
                             provenance=Provenance(target=target,
                                                   settings=self.settings.timing()))

    def close(self) -> None:
        """Close the device actors (their processes and files), then end them; with the
        head gone, they end with their nodes (asking would hang)."""
        if not self.watch.answers():
            self._devices.clear()
            return
        closing = [dev.handle.close.remote() for dev in self._devices.values()]
        ray.wait(closing, num_returns=len(closing), timeout=10)
        for key in list(self._devices):
            self._drop(key)


class RayPool(MeasurePool):
    """Measures across a Ray cluster: a :class:`RayBuilder` and a :class:`RayRunner`.

    ``address``: the cluster to join (see :func:`ray_address`), checked first
    (:func:`~workers.ray_access.check_ray_head`: a ``RayAccessError`` when it cannot be
    joined); a Ray runtime this process already has is used as it is (and left running on
    ``close``). ``device_types`` maps a
    target kind to its device class (default: the registry). ``device_start_timeout`` and
    ``device_grace_s``: see :class:`RayRunner`.
    """

    def __init__(self, settings: MeasureSettings | None = None, address: str | None = None,
                 device_types: Mapping[str, type[Device]] | None = None,
                 device_start_timeout: float = 60.0,
                 device_grace_s: float = UNRESPONSIVE_GRACE_S):
        settings = settings or MeasureSettings()
        device_types = dict(device_types or {})
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            address = ray_address(address)
            if address:
                check_ray_head(address).apply()  # one clear line if it cannot be joined
                require_ray_node(address)  # else Ray looks for one for a minute
                ray.init(address=address, logging_level=logging.WARNING)
                node_ip = _node_ip()
                if not is_local_address(node_ip):  # a node of another host (shared /proc)
                    ray.shutdown()
                    raise not_a_node_error(address, node_ip)
            else:
                ray.init(resources=local_resources(), include_dashboard=False,
                         logging_level=logging.WARNING)
        watch = HeadWatch(ray.get_runtime_context().gcs_address)
        super().__init__(RayBuilder(settings.compile_timeout, device_types, watch),
                         RayRunner(settings, device_types, watch, device_start_timeout,
                                   device_grace_s))

    @property
    def retries(self) -> int:
        """Candidates handed to another device because theirs died (since the start)."""
        return self.runner.retries

    def devices(self) -> list[str]:
        """Ids of the device actors this pool currently uses."""
        return self.runner.devices()

    def close(self) -> None:
        super().close()
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
