"""A base for device plugins that the tuner tests fake: one device per machine, a "build"
that is only the lowered program's text (so the steps are checked to replay), always alive,
nothing to close. Subclasses give ``kind``, ``resource``, ``id``, ``serves`` and ``run``."""

from __future__ import annotations

from schedule import Target, lower, make_schedule
from workers import BuildResult, Device, ErrorKind, MeasureInput


class LoweredTextDevice(Device):
    kind = "cpu"

    @classmethod
    def count_here(cls) -> int:
        return 1

    @classmethod
    def build(cls, inp: MeasureInput, compile_timeout: float) -> BuildResult:
        s, args = make_schedule(inp.workload, inp.steps)
        return BuildResult(ErrorKind.NONE, library=str(lower(s, args)).encode())

    def serves(self, target: Target) -> bool:
        return target.kind == self.kind

    def is_alive(self) -> bool:
        return True

    def close(self) -> None:
        return None
