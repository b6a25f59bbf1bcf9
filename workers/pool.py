"""Measurement pools: the one entry point the tuner uses,
``pool.measure(inputs) -> list[MeasureResult]`` (one result per input, in input order).

A pool is a composition of a :class:`~workers.builder.Builder` and a
:class:`~workers.runner.Runner` (:class:`MeasurePool`): the whole batch is built first, then
the runner times the built candidates, so builds never run while a device is being timed.
``LocalPool`` builds in parallel child processes and times on this machine's device(s);
``RayPool`` (``workers.ray_pool``) does both across a cluster.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from types import TracebackType

from schedule import TensorExprError

from .builder import Builder, LocalBuilder, failed_build_result
from .device import Device, device_kinds, device_type
from .measure import (
    ErrorKind,
    MeasureInput,
    MeasureInputError,
    MeasureResult,
    MeasureSettings,
    Provenance,
)
from .runner import BuiltCandidate, LocalRunner, ResultCallback, Runner


def prepare_inputs(inputs: Sequence[MeasureInput],
                   device_types: Mapping[str, type[Device]] | None = None) -> list[MeasureInput]:
    """Check every input before anything is built: its workload, target and steps parse
    (inputs given as JSON are parsed here, once; typed ones pass as they are) and a device
    kind serves the target (one of ``device_types``, or a registered one). Raises
    :class:`MeasureInputError` naming the input and the problem."""
    if isinstance(inputs, MeasureInput | str | bytes) or not isinstance(inputs, Sequence):
        raise MeasureInputError("measure() takes a list of MeasureInput")
    out = []
    for n, inp in enumerate(inputs):
        if not isinstance(inp, MeasureInput):
            raise MeasureInputError(f"measure input {n}: expected a MeasureInput, got "
                                    f"{type(inp).__name__} (use MeasureInput.from_json)")
        try:
            inp = inp.parsed()
            device = (device_types or {}).get(inp.target.kind) or device_type(inp.target.kind)
        except (ValueError, TypeError, TensorExprError) as err:
            raise MeasureInputError(f"measure input {n}: {err}") from None
        if inp.library and inp.library not in device.baselines:
            raise MeasureInputError(f"measure input {n}: {inp.target.kind} devices do not "
                                    f"measure the {inp.library} baseline")
        out.append(inp)
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


class MeasurePool(Pool):
    """A pool made of a ``builder`` and a ``runner``: builds the whole batch, reports the
    candidates that did not build, then has the runner time the others."""

    def __init__(self, builder: Builder, runner: Runner):
        self.builder = builder
        self.runner = runner
        self.settings = runner.settings

    def measure(self, inputs: Sequence[MeasureInput],
                callback: ResultCallback | None = None) -> list[MeasureResult]:
        inputs = prepare_inputs(inputs, self.builder.device_types)
        self.runner.check(inputs)
        builds = self.builder.build(inputs)
        results: list[MeasureResult | None] = [None] * len(inputs)

        def finish(n: int, result: MeasureResult) -> None:
            assert results[n] is None, f"input {n} got a second result"
            results[n] = result
            if callback is not None:
                callback(n, result)

        for n, build in enumerate(builds):
            if not build.ok:
                finish(n, failed_build_result(build, inputs[n], self.settings))
        built = [BuiltCandidate(n, inputs[n], build) for n, build in enumerate(builds)
                 if build.ok]
        if built:
            self.runner.run(built, finish)
        for n, result in enumerate(results):
            if result is None:  # a runner that forgot one: its device answered nothing
                finish(n, MeasureResult([], ErrorKind.DEVICE_LOST, f"{type(self.runner).__name__}"
                                        " returned no result for this candidate",
                                        provenance=Provenance(target=str(inputs[n].target),
                                                              settings=self.settings.timing())))
        return results  # type: ignore[return-value]  # every slot is filled now

    def close(self) -> None:
        self.builder.close()
        self.runner.close()


class LocalPool(MeasurePool):
    """Measures on this machine: ``devices`` (default: one of each registered kind this
    machine has, e.g. the CPU and the simulated vta accelerator) and a
    :class:`LocalBuilder` with ``build_workers`` processes (default: one per core)."""

    def __init__(self, settings: MeasureSettings | None = None,
                 devices: Sequence[Device] | None = None, build_workers: int | None = None):
        settings = settings or MeasureSettings()
        devices = list(devices) if devices is not None else [
            device_type(kind)() for kind in device_kinds() if device_type(kind).count_here()]
        super().__init__(LocalBuilder(build_workers, settings.compile_timeout,
                                      {d.kind: type(d) for d in devices}),
                         LocalRunner(devices, settings))
