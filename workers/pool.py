"""Measurement pools: the one entry point the tuner uses,
``pool.measure(inputs) -> list[MeasureResult]`` (one result per input, in input order).

``LocalPool`` builds and times on this machine without Ray: it builds the whole batch in
parallel child processes, then times the built candidates one at a time on its device(s),
so builds never run while a device is being timed. ``RayPool`` (``workers.ray_pool``)
has the same interface across a cluster.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType

from schedule import Target, TensorExprError, Workload

from .builder import LocalBuilder, failed_build_result
from .cpu import CpuDevice
from .device import Device, device_type
from .measure import MeasureInput, MeasureInputError, MeasureResult, MeasureSettings

ResultCallback = Callable[[int, MeasureResult], None]
"""Called with (input index, result) as soon as each candidate's result is final."""


def prepare_inputs(inputs: Sequence[MeasureInput],
                   device_types: Mapping[str, type[Device]] | None = None) -> list[MeasureInput]:
    """Check every input before anything is built: the workload parses, the target parses
    and a device kind serves it (one of ``device_types``, or a registered one). Returns
    the inputs with canonical target strings; raises :class:`MeasureInputError` naming
    the input and the problem."""
    if isinstance(inputs, MeasureInput | str | bytes) or not isinstance(inputs, Sequence):
        raise MeasureInputError("measure() takes a list of MeasureInput")
    workloads: set[str] = set()
    targets: dict[str, str] = {}
    out = []
    for n, inp in enumerate(inputs):
        if not isinstance(inp, MeasureInput):
            raise MeasureInputError(f"measure input {n}: expected a MeasureInput, got "
                                    f"{type(inp).__name__} (use MeasureInput.from_json)")
        try:
            text = json.dumps(inp.workload, sort_keys=True)
            if text not in workloads:
                Workload.from_json(inp.workload)
                workloads.add(text)
            if inp.target not in targets:
                target = Target.parse(inp.target)
                if target.kind not in (device_types or {}):
                    device_type(target.kind)
                targets[inp.target] = str(target)
        except (ValueError, TypeError, TensorExprError) as err:
            raise MeasureInputError(f"measure input {n}: {err}") from None
        out.append(MeasureInput(inp.workload, targets[inp.target], inp.steps))
    return out


class Pool(ABC):
    """Builds and times candidates. ``settings`` apply to every batch."""

    settings: MeasureSettings

    @abstractmethod
    def measure(self, inputs: Sequence[MeasureInput],
                callback: ResultCallback | None = None) -> list[MeasureResult]:
        """Measure a batch: exactly one result per input, in input order. Bad inputs
        raise :class:`MeasureInputError` before anything runs; a candidate's own faults
        and lost devices are results."""

    @abstractmethod
    def close(self) -> None:
        """Release processes, actors and files."""

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class LocalPool(Pool):
    """Measures on this machine: ``devices`` (default: this CPU) and a
    :class:`LocalBuilder` with ``build_workers`` processes (default: one per core)."""

    def __init__(self, settings: MeasureSettings | None = None,
                 devices: Sequence[Device] | None = None, build_workers: int | None = None):
        self.settings = settings or MeasureSettings()
        self.devices = list(devices) if devices is not None else [CpuDevice()]
        self.builder = LocalBuilder(build_workers, self.settings.compile_timeout,
                                    {d.kind: type(d) for d in self.devices})

    def _device_for(self, n: int, inp: MeasureInput) -> Device:
        target = Target.parse(inp.target)
        for device in self.devices:
            if device.serves(target):
                return device
        ids = ", ".join(d.id for d in self.devices) or "none"
        raise MeasureInputError(f"measure input {n}: no device of this pool serves target "
                                f"{inp.target!r} (devices: {ids})")

    def measure(self, inputs: Sequence[MeasureInput],
                callback: ResultCallback | None = None) -> list[MeasureResult]:
        inputs = prepare_inputs(inputs, self.builder.device_types)
        devices = [self._device_for(n, inp) for n, inp in enumerate(inputs)]
        builds = self.builder.build(inputs)
        results: list[MeasureResult | None] = [None] * len(inputs)

        def finish(n: int, result: MeasureResult) -> None:
            results[n] = result
            if callback is not None:
                callback(n, result)

        for n, build in enumerate(builds):
            if not build.ok:
                finish(n, failed_build_result(build, inputs[n], self.settings))
        for n, build in enumerate(builds):
            if build.ok:
                finish(n, devices[n].run(build, inputs[n], self.settings))
        return results  # type: ignore[return-value]  # every slot is filled above

    def close(self) -> None:
        self.builder.close()
        for device in self.devices:
            device.close()
