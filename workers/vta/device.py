"""The ``vta`` device: a candidate is built by the vta code generator into a program (JSON:
instructions, micro-ops, DRAM layout) and run on the accelerator — here its
cycle-approximate simulator, in the device's sandbox (the program is derived from user
input). The host's share (packing the inputs into the core's layout, unpacking the output)
happens there too, untimed, as a model's weights are packed once when it is compiled.

A board behind a device server (``workers.device_server``) runs the program instead: the
sandbox packs the DRAM image, this process sends it with the program and unpacks what comes
back (bytes only; the server runs the program in its own sandbox). A board that cannot be
reached, goes away or refuses the key is ``device_lost``, never the candidate's fault.

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

import numpy as np

from schedule import ScheduleError, Target, TensorExprError, Workload, vta

from ..device import BuildResult, Device, register_device
from ..measure import ErrorKind, MeasureInput, MeasureResult, MeasureSettings, Provenance
from ..reference import ReferenceOutputs, compare_outputs
from ..sandbox import Outcome, Sandbox, SandboxError
from .execute import SimulationError
from .simulator import SimResult, Simulator

PRESET_ENV = "TENSORTUNE_VTA_PRESET"
#: ``HOST:PORT,...``: the device servers (boards) this machine's vta devices proxy to.
BOARDS_ENV = "TENSORTUNE_VTA_BOARDS"
#: The token file holding the boards' shared key.
KEY_FILE_ENV = "TENSORTUNE_DEVICE_KEY_FILE"
COMPILER = "tensortune-vta-codegen"


def boards_here() -> list[str]:
    """The device servers named by ``$TENSORTUNE_VTA_BOARDS`` (none: the local simulator)."""
    return [b.strip() for b in os.environ.get(BOARDS_ENV, "").split(",") if b.strip()]


def _prepared(job: dict[str, Any]) -> tuple[vta.VtaConfig, vta.VtaProgram, vta.VtaCompute,
                                              np.ndarray]:
    config = vta.VtaConfig.from_json(job["config"])
    workload = Workload.from_json(job["workload"])
    program = vta.VtaProgram.from_json(job["program"])
    compute = vta.VtaCompute(workload, config)
    dram = program.dram_image(compute.pack_inputs(workload.random_inputs(job["seed"])), config)
    return config, program, compute, dram


def simulate(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: pack the workload's inputs of ``seed``, run the program on the
    simulator, and answer its cycles, seconds and statistics with the unpacked output."""
    config, program, compute, dram = _prepared(job)
    started()
    return _answer(Simulator(config).run(program.instructions, dram), program, compute, config)


def dram_image(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: the DRAM image a board starts the program from (the packed inputs)."""
    _, _, _, dram = _prepared(job)
    started()
    return {}, [dram.tobytes()]


def _answer(result: SimResult, program: vta.VtaProgram, compute: vta.VtaCompute,
            config: vta.VtaConfig) -> tuple[Any, list[bytes]]:
    output = compute.unpack_output(program.output(result.dram, config))
    stats = {k: v for k, v in result.stats.items() if isinstance(v, int | float)}
    return {"cycles": result.cycles, "seconds": result.seconds, "stats": stats,
            "macs": compute.macs}, [output.tobytes()]


@register_device
class VtaDevice(Device):
    """The vta accelerator: simulated here, or a board behind its device server
    (``board``: ``HOST:PORT``, reached with ``key``; by default the first of
    ``$TENSORTUNE_VTA_BOARDS``, with the key in ``$TENSORTUNE_DEVICE_KEY_FILE``)."""

    kind = "vta"
    resource = "fpga"

    def __init__(self, node: str = "", preset: str | None = None, board: str | None = None,
                 key: bytes | None = None):
        super().__init__(node)
        self.host = socket.gethostname()
        self.preset = preset or os.environ.get(PRESET_ENV, "pynq")
        if self.preset not in vta.PRESETS:
            raise ValueError(f"unknown vta board preset {self.preset!r}; one of "
                             f"{', '.join(vta.PRESETS)}")
        self.board = board if board is not None else next(iter(boards_here()), None)
        self.key = key
        if self.board and key is None:
            from ..device_server import read_device_key

            if not os.environ.get(KEY_FILE_ENV):
                raise ValueError(f"vta board {self.board}: no key (set {KEY_FILE_ENV} to the "
                                 "device server's token file)")
            self.key = read_device_key(os.environ[KEY_FILE_ENV])
        if self.board:
            from ..device_server import RemoteDevice

            RemoteDevice(self.board, self.key)  # ValueError for an address not HOST:PORT
        self._board_config: vta.VtaConfig | None = None
        self._sandbox = Sandbox()
        self._references = ReferenceOutputs()

    @classmethod
    def count_here(cls) -> int:
        return len(boards_here()) or 1  # the boards named here, else the simulator

    @classmethod
    def for_slot(cls, node: str, slot: int) -> VtaDevice:
        boards = boards_here()
        return cls(node, board=boards[slot] if slot < len(boards) else None)

    def _describe_board(self) -> vta.VtaConfig:
        """The board's configuration, as its device server states it (asked once)."""
        if self._board_config is None:
            from ..device_server import RemoteDevice

            answer = RemoteDevice(self.board, self.key, timeout=10.0).describe()
            self._board_config = vta.VtaConfig.from_json(answer["config"])
        return self._board_config

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
        if self.board:
            return f"vta@{self.board}"
        return f"vta-sim@{self.host}" + (f"/{self.node[:12]}" if self.node else "")

    def serves(self, target: Target) -> bool:
        """A vta target of this accelerator's GEMM shape (a board's, as it states it)."""
        if target.kind != "vta":
            return False
        if not self.board:
            return True
        try:
            c = self._describe_board()
        except (OSError, ValueError, KeyError, TypeError):
            return False  # unreachable or confused: not a device to send work to
        return (c.batch, c.block_in, c.block_out) == (target.batch, target.block_in,
                                                     target.block_out)

    def is_alive(self) -> bool:
        try:
            if self.board:
                self._board_config = None
                self._describe_board()
            return self._sandbox.call("workers.sandbox:ping", {}, start_timeout=30.0,
                                      timeout=30.0).status == "ok"
        except (SandboxError, OSError, ValueError, KeyError, TypeError):
            return False

    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        start = time.perf_counter()
        config = vta.VtaConfig.for_target(inp.target, self.preset)
        where = "simulator"
        if self.board:
            try:
                config = self._describe_board()
            except (OSError, ValueError, KeyError, TypeError) as err:
                return MeasureResult([], ErrorKind.DEVICE_LOST, f"{self.id}: {err}",
                                     build.build_s, time.perf_counter() - start, self.id)
            where = f"board {self.board} (its device server simulates)"
        model = (f"vta {where} (simulated) {config.name} {config.clock_mhz:g} MHz "
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
            outcome = self._sandbox.call(
                f"workers.vta.device:{'dram_image' if self.board else 'simulate'}", job,
                start_timeout=settings.load_timeout, timeout=settings.run_timeout)
            if self.board and outcome.status == "ok":
                outcome = self._run_on_board(build, inp, config, outcome.blobs[0], settings)
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
        if isinstance(value, dict) and "device_lost" in value:
            self._board_config = None
            return result(ErrorKind.DEVICE_LOST, f"{self.id}: {value['device_lost']}")
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

    def _run_on_board(self, build: BuildResult, inp: MeasureInput, config: vta.VtaConfig,
                      dram: bytes, settings: MeasureSettings) -> Outcome:
        """Send the program and its DRAM image to the board's device server (this process
        only moves bytes; the server runs the program in its sandbox), as a sandbox
        outcome: ``raised`` for the program's own fault, ``device_lost`` in the value for
        the board's."""
        from ..device_server import DeviceLostError, DeviceRefusedError, RemoteDevice

        program = vta.VtaProgram.from_json(build.library)
        try:
            run = RemoteDevice(self.board, self.key, timeout=settings.run_timeout).run(
                program.instructions, dram)
        except (DeviceLostError, DeviceRefusedError) as err:
            return Outcome("ok", {"device_lost": str(err)})
        except SimulationError as err:
            return Outcome("raised", message=f"SimulationError: {err}")
        value, blobs = _answer(run, program, vta.VtaCompute(inp.workload, config), config)
        return Outcome("ok", value, blobs)

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

