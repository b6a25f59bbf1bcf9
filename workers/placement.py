"""Where a parallel kernel's threads run while it is timed on a machine that stays busy.

Beside a busy loop pinned to one of two cores, Linux often leaves both threads of a
parallel kernel on the other core, where they take turns: a 1.3 ms conv then took 16 ms a
call, and 0-3 of 100 short repeats ran with no thread waiting for a core. With the
calling thread on the busy core and the kernel's other thread on the free one, 54-62 of
100 did: the caller sleeps before each repeat, and a thread waking from sleep is handed
its core ahead of work that has been running, whereas the kernel's worker threads spin at
the end of each parallel region and get no such turn (bench/RESULTS.md, session 41).

Which core is busy is not known, so a :class:`Spread` tries the placements in turn, keeping
one while its repeats run alone and moving on when one waited: the caller on one core, the
kernel's other threads (the threads that ran during a call of the kernel: its OpenMP team)
one per remaining core. On a quiet machine any placement is as fast as the scheduler's
own. The threads get their CPU sets back when the timing ends.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

from .interference import thread_stats


def helpers_of(call: Callable[[], object]) -> list[int]:
    """The ids of this process's other threads that ran on a CPU while ``call()`` ran (a
    parallel kernel's worker threads), those that ran most first. Linux adds up a running
    thread's time at each scheduler tick, so ``call`` should last a few ticks (10 ms)."""
    me = threading.get_native_id()
    before = thread_stats()
    call()
    after = thread_stats()
    ran = {tid: cpu - before[tid][0] for tid, (cpu, _) in after.items()
           if tid != me and tid in before and cpu > before[tid][0]}
    return sorted(ran, key=lambda tid: -ran[tid])


class Spread:
    """Places the calling thread and ``helpers`` (as many as there are other cores, the
    first ones) one per core of this process's CPU set, the caller's core moving on with
    each :meth:`shift` (module docstring)."""

    def __init__(self, helpers: list[int]):
        self.caller = threading.get_native_id()
        self.cores = sorted(os.sched_getaffinity(0))
        self.helpers = helpers[: len(self.cores) - 1]  # one thread per core
        self.turn = 0
        self._before = {tid: _affinity(tid) for tid in (self.caller, *self.helpers)}

    @property
    def useful(self) -> bool:
        """Whether placing does anything: there are helpers, and cores to spread over."""
        return bool(self.helpers)

    def place(self) -> None:
        """Pin the caller to the core whose turn it is and the helpers to the others
        (nothing where there are no helpers)."""
        if not self.useful:
            return
        n = len(self.cores)
        mine = self.cores[self.turn % n]
        others = [core for core in self.cores if core != mine]
        _pin(self.caller, {mine})
        for i, tid in enumerate(self.helpers):
            _pin(tid, {others[i % len(others)]})

    def shift(self) -> None:
        """Move to the next placement (the caller's next core)."""
        self.turn += 1
        self.place()

    def release(self) -> None:
        """Give every placed thread the CPU set it had before."""
        if not self.useful:
            return
        for tid, cores in self._before.items():
            if cores:
                _pin(tid, cores)


def _affinity(tid: int) -> set[int]:
    try:
        return os.sched_getaffinity(tid)
    except OSError:  # a thread that ended
        return set()


def _pin(tid: int, cores: set[int]) -> None:
    with contextlib.suppress(OSError):  # a thread that ended, or a CPU set taken away
        os.sched_setaffinity(tid, cores)
