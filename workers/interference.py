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

A machine that stays busy (another job on a core for the whole tune) leaves no quiet
window. But a kernel's threads often take their cores back from such work when they
wake, and a short repeat often runs from start to end without any of them waiting for a
core: Linux counts, per thread, the time it spent runnable but waiting for a CPU
(``/proc/self/task/*/schedstat``; ``run_delay``), so a repeat during which this
process's threads together waited next to nothing ran on its cores alone. Where the
kernel's threads take every core of the machine, nothing else ran meanwhile, but for what
a hypervisor stole from the whole VM (``Window.stolen_load``). (Counting preemptions
instead, involuntary context switches, misses a woken thread left waiting behind the
other work: a softmax of 55 us ran 600 us in repeats without a single preemption.)
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

_STAT = "/proc/stat"
T = TypeVar("T")


def _cpu_seconds() -> tuple[float, float] | None:
    """(busy, stolen) CPU seconds of all CPUs since boot (``None`` where unknown)."""
    try:
        with open(_STAT) as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq + steal) / tick, steal / tick


def thread_stats() -> dict[int, tuple[int, int]]:
    """Per live thread of this process (by thread id): nanoseconds it ran on a CPU and
    nanoseconds it spent runnable but waiting for one, since it started (``schedstat``);
    empty where Linux does not say."""
    stats = {}
    for path in glob.glob("/proc/self/task/*/schedstat"):
        try:
            with open(path) as stat:
                ran, waited = stat.read().split()[:2]
            stats[int(path.split("/")[-2])] = (int(ran), int(waited))
        except (OSError, ValueError):  # a thread that just ended: skip it
            continue
    return stats


def run_delay() -> float | None:
    """Seconds the threads of this process have spent runnable but waiting for a CPU (the
    live threads, since each started); ``None`` where Linux does not say."""
    stats = thread_stats()
    return sum(waited for _, waited in stats.values()) / 1e9 if stats else None


def waiting_share(call: Callable[[], T]) -> tuple[T, float | None]:
    """What ``call()`` returns, and the share of its wall time that this process's threads
    spent waiting for a CPU, together (``None`` where Linux does not say)."""
    waited, start = run_delay(), time.perf_counter()
    value = call()
    now = run_delay()
    if waited is None or now is None:
        return value, None
    return value, (now - waited) / max(time.perf_counter() - start, 1e-9)


@dataclass(frozen=True)
class Window:
    """A timing window's start: the machine's busy time, this process's CPU time and the
    wall clock."""

    cpu: tuple[float, float] | None  # (busy, stolen) seconds
    own: float
    wall: float

    @classmethod
    def start(cls) -> Window:
        return cls(_cpu_seconds(), time.process_time(), time.perf_counter())

    def other_load(self) -> float | None:
        """Cores' worth of CPU that other work used since the start, less the counting
        margin (never below 0); ``None`` where the machine's busy time is unknown."""
        now = _cpu_seconds()
        if now is None or self.cpu is None:
            return None
        other = (now[0] - self.cpu[0]) - (time.process_time() - self.own)
        return self._per_wall(other)

    def stolen_load(self) -> float | None:
        """Cores' worth of time the hypervisor gave other VMs since the start, less the
        counting margin; ``None`` where unknown."""
        now = _cpu_seconds()
        if now is None or self.cpu is None:
            return None
        return self._per_wall(now[1] - self.cpu[1])

    def _per_wall(self, seconds: float) -> float:
        wall = max(time.perf_counter() - self.wall, 1e-9)
        margin = 2 * (os.cpu_count() or 1) / os.sysconf("SC_CLK_TCK")
        return max(0.0, seconds - margin) / wall


def noise(costs: list[float], load: float | None) -> float:
    """The slowdown a measurement may have suffered (1.0: none seen): the slowest repeat
    against the fastest, or 1 + the other work's load in cores, whichever is worse."""
    spread = max(costs) / min(costs) if costs and min(costs) > 0 else 1.0
    return min(max(spread, 1.0 + (load or 0.0)), MAX_NOISE)


#: A bound on the figure (a near-zero fastest repeat could make the spread overflow).
MAX_NOISE = 1e6
