"""Runners: time built candidates on devices, one candidate at a time per device.

``Runner`` is the interface (as in TVM meta_schedule): a pool builds a batch with its
:class:`~workers.builder.Builder`, then hands the successful builds to its runner. A new
way of reaching devices (a Ray cluster, a remote board behind a device server) is one new
``Runner``; ``LocalRunner`` times on device objects of this process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .device import BuildResult, Device
from .measure import MeasureInput, MeasureInputError, MeasureResult, MeasureSettings

ResultCallback = Callable[[int, MeasureResult], None]
"""Called with (input index, result) as soon as each candidate's result is final."""


@dataclass(frozen=True)
class BuiltCandidate:
    """A candidate that built: its index in the batch, its (parsed) input and its build."""

    index: int
    input: MeasureInput
    build: BuildResult


class Runner(ABC):
    """Times built candidates with ``settings``."""

    settings: MeasureSettings

    def check(self, inputs: Sequence[MeasureInput]) -> None:  # noqa: B027 (optional hook)
        """Raise :class:`MeasureInputError` (naming the input) for a candidate this runner
        can never time, before anything is built. By default every input is accepted."""

    @abstractmethod
    def run(self, candidates: Sequence[BuiltCandidate], finish: ResultCallback) -> None:
        """Time every candidate and call ``finish(index, result)`` exactly once for each
        (a candidate's crash, hang or wrong answer, and a lost device, are results)."""

    @abstractmethod
    def close(self) -> None:
        """Release devices, processes and files."""


class LocalRunner(Runner):
    """Times on ``devices`` of this process, in input order, each candidate on the first
    device that serves its target."""

    def __init__(self, devices: Sequence[Device], settings: MeasureSettings):
        self.devices = list(devices)
        self.settings = settings

    def _device_for(self, n: int, inp: MeasureInput) -> Device:
        for device in self.devices:
            if device.serves(inp.target):
                return device
        ids = ", ".join(d.id for d in self.devices) or "none"
        raise MeasureInputError(f"measure input {n}: no device of this pool serves target "
                                f"{str(inp.target)!r} (devices: {ids})")

    def check(self, inputs: Sequence[MeasureInput]) -> None:
        for n, inp in enumerate(inputs):
            self._device_for(n, inp)

    def run(self, candidates: Sequence[BuiltCandidate], finish: ResultCallback) -> None:
        for cand in candidates:
            device = self._device_for(cand.index, cand.input)
            finish(cand.index, device.run(cand.build, cand.input, self.settings))

    def close(self) -> None:
        for device in self.devices:
            device.close()
