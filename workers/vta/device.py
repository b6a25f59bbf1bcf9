"""The ``vta`` device: a candidate is built by the vta code generator into a program (JSON:
instructions, micro-ops, DRAM layout) and run on the accelerator — here its
cycle-approximate simulator, in the device's sandbox (the program is derived from user
input). The host's share (packing the inputs into the core's layout, unpacking the output)
happens there too, untimed, as a model's weights are packed once when it is compiled.

A measurement's cost is the simulated time at the board preset's clock, labelled simulated:
its provenance names the simulator, and its settings carry ``simulated: true``, the
cycles, the GEMM core's utilisation (the workload's MACs over what the core could do in
those cycles) and the program's static facts. One device per process (Ray resource
``fpga``); ``TENSORTUNE_VTA_PRESET`` picks the board preset (default ``pynq``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from schedule import ScheduleError, Target, TensorExprError, Workload, vta

from ..device import BuildResult, Device, register_device
from ..measure import ErrorKind, MeasureInput, MeasureResult, MeasureSettings, Provenance
from ..reference import ReferenceOutputs, compare_outputs
from ..sandbox import Sandbox, SandboxError
from .simulator import Simulator

PRESET_ENV = "TENSORTUNE_VTA_PRESET"
COMPILER = "tensortune-vta-codegen"


def simulate(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: pack the workload's inputs of ``seed``, run the program on the
    simulator, and answer its cycles, seconds and statistics with the unpacked output."""
    config = vta.VtaConfig.from_json(job["config"])
    workload = Workload.from_json(job["workload"])
    program = vta.VtaProgram.from_json(job["program"])
    compute = vta.VtaCompute(workload, config)
    dram = program.dram_image(compute.pack_inputs(workload.random_inputs(job["seed"])), config)
    started()
    result = Simulator(config).run(program.instructions, dram)
    output = compute.unpack_output(program.output(result.dram, config))
    stats = {k: v for k, v in result.stats.items() if isinstance(v, int | float)}
    return {"cycles": result.cycles, "seconds": result.seconds, "stats": stats,
            "macs": compute.macs}, [output.tobytes()]


@register_device
class VtaDevice(Device):
    """The vta accelerator, simulated (see the module docstring)."""

    kind = "vta"
    resource = "fpga"

    def __init__(self, node: str = "", preset: str | None = None):
        super().__init__(node)
        self.host = socket.gethostname()
        self.preset = preset or os.environ.get(PRESET_ENV, "pynq")
        if self.preset not in vta.PRESETS:
            raise ValueError(f"unknown vta board preset {self.preset!r}; one of "
                             f"{', '.join(vta.PRESETS)}")
        self._sandbox = Sandbox()
        self._references = ReferenceOutputs()

    @classmethod
    def count_here(cls) -> int:
        return 1  # the simulator runs anywhere

    @classmethod
    def build(cls, inp: MeasureInput, compile_timeout: float) -> BuildResult:
        start = time.perf_counter()
        try:
            config = vta.VtaConfig.for_target(inp.target)
            _, program = vta.compile_workload(inp.workload, inp.steps, config)
        except vta.VtaUnsupported as err:
            return BuildResult(ErrorKind.INVALID_SCHEDULE, f"not supported on vta: {err}",
                               time.perf_counter() - start, compiler=COMPILER)
        except (ScheduleError, TensorExprError, vta.VtaConfigError) as err:
            return BuildResult(ErrorKind.INVALID_SCHEDULE, str(err),
                               time.perf_counter() - start, compiler=COMPILER)
        return BuildResult(ErrorKind.NONE, "", time.perf_counter() - start, program.dumps(),
                           {"program": program.stats(config)}, COMPILER, [])

    @property
    def id(self) -> str:
        return f"vta-sim@{self.host}" + (f"/{self.node[:12]}" if self.node else "")

    def serves(self, target: Target) -> bool:
        return target.kind == "vta"

    def is_alive(self) -> bool:
        try:
            return self._sandbox.call("workers.sandbox:ping", {}, start_timeout=30.0,
                                      timeout=30.0).status == "ok"
        except SandboxError:
            return False

    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        start = time.perf_counter()
        config = vta.VtaConfig.for_target(inp.target, self.preset)
        model = (f"vta simulator (simulated) {self.preset} {config.clock_mhz:g} MHz "
                 f"{config.batch}x{config.block_in}x{config.block_out}")
        facts: dict[str, Any] = {"simulated": True, "clock_mhz": config.clock_mhz,
                                 **build.signature.get("program", {})}

        def result(kind: ErrorKind, message: str = "", costs: Any = ()) -> MeasureResult:
            provenance = Provenance(self.host, self.node, model, str(inp.target),
                                    build.compiler, list(build.flags),
                                    {**settings.timing(), **facts})
            return MeasureResult(list(costs), kind, message, build.build_s,
                                 time.perf_counter() - start, self.id, time.time(), provenance)

        reference = None
        try:
            if settings.check:
                reference = self._references.get(inp.workload, settings)
                if isinstance(reference, tuple):
                    message, permanent = reference
                    return replace(result(ErrorKind.RUNTIME_ERROR, message),
                                   workload_error=permanent)
            job = {"program": build.library.decode(), "config": config.to_json(),
                   "workload": inp.workload.to_json(), "seed": settings.seed}
            outcome = self._sandbox.call("workers.vta.device:simulate", job,
                                         start_timeout=settings.load_timeout,
                                         timeout=settings.run_timeout)
        except SandboxError as err:
            return result(ErrorKind.DEVICE_LOST, f"{self.id}: {err}")
        if outcome.status == "raised":
            return result(ErrorKind.RUNTIME_ERROR, outcome.message)
        if outcome.status in ("timeout", "start_timeout"):
            self._sandbox.restart()
            return result(ErrorKind.RUN_TIMEOUT, f"the simulation {outcome.message}")
        if outcome.status != "ok":
            self._sandbox.restart()
            return result(ErrorKind.RUNTIME_ERROR, f"the simulator crashed: {outcome.message}")
        value = outcome.value
        seconds = value.get("seconds") if isinstance(value, dict) else None
        if not isinstance(seconds, float) or not 0 < seconds < float("inf"):
            return result(ErrorKind.RUNTIME_ERROR, f"the simulation gave no time: {value!r:.200}")
        cycles = int(value["cycles"])
        facts.update(value.get("stats", {}))
        facts.update(cycles=cycles, mac_utilization=round(
            value["macs"] / (cycles * config.macs_per_cycle), 4))
        if reference is not None:
            mismatch = compare_outputs(outcome.blobs, reference)
            if mismatch:
                return result(ErrorKind.WRONG_ANSWER, mismatch, [seconds])
        return result(ErrorKind.NONE, costs=[seconds])

    def close(self) -> None:
        self._sandbox.close()
        self._references.close()


def simulated_facts(settings: Mapping[str, Any]) -> dict[str, Any] | None:
    """A simulated result's cycles and utilisation, from its provenance's settings (a
    record's ``measure``); None for a timed device's result."""
    if not settings.get("simulated"):
        return None
    return {k: settings[k] for k in ("cycles", "mac_utilization", "clock_mhz", "dma_bytes",
                                     "instructions") if k in settings}

