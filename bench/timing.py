"""Wall-clock timing the benchmark scripts share: a call timed repeatedly from Python, and
a busy loop pinned to one core to time beside."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

#: a process that keeps one core busy
BUSY_LOOP = "while True: pass"


def load_on_core(core: int, code: str = BUSY_LOOP) -> subprocess.Popen:
    """A Python process running ``code`` pinned to ``core`` (the caller kills it)."""
    proc = subprocess.Popen([sys.executable, "-c", code])
    os.sched_setaffinity(proc.pid, {core})
    return proc


def median_call_time(fn: Callable[[], object], budget_s: float = 0.5,
                     max_calls: int = 500) -> float:
    """The median seconds of ``fn()`` after one warm-up call: at least 5 calls, then more
    while within ``budget_s`` (at most ``max_calls``)."""
    fn()
    times = []
    deadline = time.perf_counter() + budget_s
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < max_calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
