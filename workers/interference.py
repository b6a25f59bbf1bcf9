"""Interference: how much CPU other work used while a candidate was being timed.

Linux counts every CPU's busy time in ``/proc/stat`` (user, system, interrupts, and the
time a hypervisor stole from this VM); the timing process knows its own CPU time to the
nanosecond. The difference over the timing window is what everything else ran meanwhile,
in cores: a busy loop on one core reads about 1.0, a quiet machine about 0 (the service's
own idle processes read a few hundredths). The kernel counts busy time in ticks
(``SC_CLK_TCK``, usually 100 per second) per CPU, so over a short window the figure is
only good to about ``2 x cores`` ticks; ``other_load`` subtracts that margin, so a short
window never reads as disturbed by rounding alone.

Where ``/proc/stat`` cannot be read (not Linux), nothing is reported and only the
candidate's own spread across its repeats tells interference.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_STAT = "/proc/stat"


def _busy_seconds() -> float | None:
    """Busy CPU seconds of all CPUs since boot (``None`` where unknown)."""
    try:
        with open(_STAT) as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Window:
    """A timing window's start: the machine's busy time, this process's CPU time and the
    wall clock."""

    busy: float | None
    own: float
    wall: float

    @classmethod
    def start(cls) -> Window:
        return cls(_busy_seconds(), time.process_time(), time.perf_counter())

    def other_load(self) -> float | None:
        """Cores' worth of CPU that other work used since the start, less the counting
        margin (never below 0); ``None`` where the machine's busy time is unknown."""
        busy = _busy_seconds()
        if busy is None or self.busy is None:
            return None
        wall = max(time.perf_counter() - self.wall, 1e-9)
        other = (busy - self.busy) - (time.process_time() - self.own)
        margin = 2 * (os.cpu_count() or 1) / os.sysconf("SC_CLK_TCK")
        return max(0.0, other - margin) / wall


def noise(costs: list[float], load: float | None) -> float:
    """The slowdown a measurement may have suffered (1.0: none seen): the slowest repeat
    against the fastest, or 1 + the other work's load in cores, whichever is worse."""
    spread = max(costs) / min(costs) if costs and min(costs) > 0 else 1.0
    return min(max(spread, 1.0 + (load or 0.0)), MAX_NOISE)


#: A bound on the figure (a near-zero fastest repeat could make the spread overflow).
MAX_NOISE = 1e6
