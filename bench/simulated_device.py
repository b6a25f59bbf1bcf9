"""A measurement device that takes a fixed time per candidate and builds nothing, for
benchmarking the Ray pool's scheduling (bench/cluster_throughput.py): with it, how many
candidates a cluster times per minute depends on the pool and Ray alone, not on this
machine's cores. Its Ray resource is ``sim-measure``; it serves ``cpu`` targets."""

from __future__ import annotations

import os
import time

from schedule import Target
from workers import (
    BuildResult,
    Device,
    MeasureInput,
    MeasureResult,
    MeasureSettings,
    Provenance,
)

LATENCY_ENV = "TENSORTUNE_SIM_LATENCY_S"
"""Seconds each candidate takes on the device (read where the device runs)."""


class SimulatedDevice(Device):
    """Sleeps :data:`LATENCY_ENV` seconds per candidate and reports that as its cost."""

    kind = "cpu"
    resource = "sim-measure"

    @classmethod
    def count_here(cls) -> int:
        return 0  # only on nodes started with the resource by the benchmark

    @classmethod
    def build(cls, inp: MeasureInput, compile_timeout: float) -> BuildResult:
        return BuildResult(library=b"\0" * 16384, compiler="none")  # a library's size

    @property
    def id(self) -> str:
        return f"sim@{self.node[:12]}/{os.getpid()}"

    def serves(self, target: Target) -> bool:
        return target.kind == "cpu"

    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        latency = float(os.environ.get(LATENCY_ENV, "0.2"))
        started = time.perf_counter()
        time.sleep(latency)
        return MeasureResult([latency], build.error_kind, run_s=time.perf_counter() - started,
                             device=self.id,
                             provenance=Provenance(node=self.node, target=str(inp.target)))

    def is_alive(self) -> bool:
        return True

    def close(self) -> None:
        """Holds nothing."""
