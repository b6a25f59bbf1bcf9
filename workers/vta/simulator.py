"""A cycle-approximate, event-driven simulator of the ``vta`` accelerator, bit-exact in what
it computes (``workers.vta.execute``).

Four processes run at once, as in the hardware: **fetch** hands the instructions, in
program order, to the command queues of the **load**, **compute** and **store** modules
(``queue_depth`` entries each: a full queue stalls fetch, and so every later instruction);
each module runs its queue in order. An instruction starts when its module is free, it has
been fetched, the tokens it pops are there and the token queues it pushes to have room; it
pushes its tokens when it ends. Costs, in cycles:

- LOAD / STORE: a DMA request (``dma_latency``), then the rows' bytes over the one shared
  DRAM port (``bus_bytes`` a cycle, two cycles a row to open it) — a transfer waits while
  another module's holds the port — and at least one cycle per buffer entry written
  (padding is written, never read);
- GEMM: one micro-op execution a cycle, plus its pipeline's depth; ALU: two cycles per
  execution with a tensor operand (one register-file read port), one with an immediate;
- every instruction: one cycle to issue.

So a load overlaps the compute of the previous tile only when the program's tokens allow it
(virtual threads): the simulator shows it as fewer cycles, not by summing latencies. The
order in which instructions take effect is the simulated order, so a program that races
(reads a buffer its tokens do not protect) computes what such hardware would. A token wait
that can never be met is a ``deadlock`` :class:`SimulationError` naming what each module
waits for.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedule import vta

from .execute import SimulationError, VtaState

GEMM_PIPELINE = 4
ALU_PIPELINE = 4
ROW_CYCLES = 2
_NEIGHBOURS = {vta.Module.LOAD: (None, vta.Module.COMPUTE),
               vta.Module.COMPUTE: (vta.Module.LOAD, vta.Module.STORE),
               vta.Module.STORE: (vta.Module.COMPUTE, None)}
_MODULES = (vta.Module.LOAD, vta.Module.COMPUTE, vta.Module.STORE)


@dataclass
class SimResult:
    """A program's run: the DRAM after it, its cycles and what they were spent on."""

    dram: np.ndarray
    cycles: int
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Unit:
    """One module's progress: its instructions (program indices), how many started, when
    each started, and when it is free."""

    queue: list[int]
    started: int = 0
    starts: list[int] = field(default_factory=list)
    free: int = 0
    busy: int = 0


TokenQueue = tuple[vta.Module, vta.Module]


def _tokens(insn: vta.Instruction) -> tuple[list[TokenQueue], list[TokenQueue]]:
    """The token queues (from, to) an instruction pops and pushes."""
    module = insn.module
    prev, nxt = _NEIGHBOURS[module]
    pops, pushes = [], []
    for flag, neighbour, direction in (("pop_prev", prev, "pop"), ("pop_next", nxt, "pop"),
                                       ("push_prev", prev, "push"),
                                       ("push_next", nxt, "push")):
        if not getattr(insn.deps, flag):
            continue
        if neighbour is None:
            raise SimulationError("bad_program", f"{insn}: the {module} module has no "
                                  f"{flag.split('_')[1]} module to {direction} a token with")
        if direction == "pop":
            pops.append((neighbour, module))
        else:
            pushes.append((module, neighbour))
    return pops, pushes


class Simulator:
    """Runs programs on one configuration."""

    def __init__(self, config: vta.VtaConfig):
        self.config = config

    def run(self, program: list[vta.Instruction], dram: np.ndarray) -> SimResult:
        """Run ``program`` against ``dram`` (bytes; not modified): the result's ``dram``
        is the memory after it. Raises :class:`SimulationError`."""
        config = self.config
        if not program or not isinstance(program[-1], vta.Finish):
            raise SimulationError("bad_program", "a program ends with FINISH")
        if any(isinstance(insn, vta.Finish) for insn in program[:-1]):
            raise SimulationError("bad_program", "FINISH before the end of the program")
        state = VtaState(config, dram)
        flags = [_tokens(insn) for insn in program]
        units = {m: _Unit([n for n, insn in enumerate(program) if insn.module is m])
                 for m in _MODULES}
        position = {n: k for unit in units.values() for k, n in enumerate(unit.queue)}
        tokens: dict[TokenQueue, deque[int]] = {
            (a, b): deque() for a in _MODULES for b in _MODULES if a is not b}
        fetched: list[int] = []  # fetch time of each instruction, in program order
        port_free = 0
        stats = {"gemm_ops": 0, "alu_ops": 0, "dram_port_cycles": 0, "instructions":
                 len(program), **{f"{mem}_load_bytes": 0 for mem in ("inp", "wgt", "acc",
                                                                     "uop")},
                 "out_store_bytes": 0}

        def fetch_time() -> int | None:
            n = len(fetched)
            unit = units[program[n].module]
            k = position[n]
            ready = fetched[-1] + 1 if fetched else 0
            if k >= config.queue_depth:  # its queue has room once an earlier entry started
                earlier = k - config.queue_depth
                if earlier >= unit.started:
                    return None
                ready = max(ready, unit.starts[earlier])
            return ready

        def start_time(unit: _Unit) -> int | None:
            if unit.started >= len(unit.queue):
                return None
            n = unit.queue[unit.started]
            if n >= len(fetched):
                return None
            pops, pushes = flags[n]
            if any(not tokens[q] for q in pops):
                return None
            if any(len(tokens[q]) >= config.queue_depth for q in pushes):
                return None
            return max([unit.free, fetched[n], *(tokens[q][0] for q in pops)])

        while True:
            candidates: list[tuple[int, int, vta.Module | None]] = []
            if len(fetched) < len(program):
                t = fetch_time()
                if t is not None:
                    candidates.append((t, 0, None))
            for rank, module in enumerate(_MODULES, start=1):
                t = start_time(units[module])
                if t is not None:
                    candidates.append((t, rank, module))
            if not candidates:
                if all(u.started == len(u.queue) for u in units.values()):
                    break
                raise SimulationError("deadlock", self._deadlock(program, units, tokens,
                                                                 flags, len(fetched)))
            start, _, module = min(candidates)
            if module is None:
                fetched.append(start)
                continue
            unit = units[module]
            n = unit.queue[unit.started]
            insn = program[n]
            pops, pushes = flags[n]
            for q in pops:
                tokens[q].popleft()
            state.execute(n, insn)
            duration, port_free = self._cost(insn, start, port_free, stats)
            end = start + duration
            unit.starts.append(start)
            unit.started += 1
            unit.free = end
            unit.busy += duration
            for q in pushes:
                tokens[q].append(end)
        cycles = max(u.free for u in units.values())
        stats.update({f"{m}_busy_cycles": units[m].busy for m in _MODULES})
        stats["gemm_utilization"] = stats["gemm_ops"] / cycles if cycles else 0.0
        return SimResult(state.dram, cycles, config.seconds(cycles), stats)

    def _cost(self, insn: vta.Instruction, start: int, port_free: int,
              stats: dict[str, Any]) -> tuple[int, int]:
        """The instruction's cycles from its start, and when the DRAM port is free after
        it."""
        c = self.config
        if isinstance(insn, vta.Load | vta.Store):
            mem = insn.mem if isinstance(insn, vta.Load) else vta.Mem.OUT
            entry = c.entry_bytes(mem)
            nbytes = insn.y_size * insn.x_size * entry
            transfer = math.ceil(nbytes / c.bus_bytes) + ROW_CYCLES * insn.y_size
            begin = max(start + 1 + c.dma_latency, port_free)  # the request, then the port
            stats["dram_port_cycles"] += transfer
            stats[f"{mem}_load_bytes" if isinstance(insn, vta.Load) else "out_store_bytes"] += \
                nbytes
            end = max(begin + transfer, start + 1 + insn.entries)
            return end - start, begin + transfer
        if isinstance(insn, vta.Gemm):
            stats["gemm_ops"] += insn.loops.count
            return 1 + insn.loops.count + GEMM_PIPELINE, port_free
        if isinstance(insn, vta.Alu):
            stats["alu_ops"] += insn.loops.count
            per = 1 if insn.imm is not None else 2
            return 1 + per * insn.loops.count + ALU_PIPELINE, port_free
        return 1, port_free

    def _deadlock(self, program: list[vta.Instruction], units: dict[vta.Module, _Unit],
                  tokens: dict[TokenQueue, deque[int]],
                  flags: list[Any], fetched: int) -> str:
        """What each process waits for, when none can go on."""
        waits = []
        if fetched < len(program):
            waits.append(f"fetch waits for room in the {program[fetched].module} command "
                         f"queue (instruction {fetched})")
        for module, unit in units.items():
            if unit.started >= len(unit.queue):
                continue
            n = unit.queue[unit.started]
            if n >= fetched:
                continue
            pops, pushes = flags[n]
            missing = [f"a {a}->{b} token" for a, b in pops if not tokens[(a, b)]]
            full = [f"room in the full {a}->{b} token queue" for a, b in pushes
                    if len(tokens[(a, b)]) >= self.config.queue_depth]
            waits.append(f"{module} instruction {n} ({program[n]}) waits for "
                         f"{' and '.join(missing + full) or 'nothing'}")
        return "deadlock: " + "; ".join(waits)
