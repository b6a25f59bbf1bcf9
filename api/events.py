"""The progress events of jobs running in this server, kept in memory for the server-sent
event streams: one log per job (every ``batch`` event, then ``done``), the logs of the last
few finished jobs kept for late listeners. Written by job threads, read by request handlers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

Event = dict[str, Any]


class EventHub:
    """Per-job event logs; at most ``keep_finished`` logs of finished jobs are kept."""

    def __init__(self, keep_finished: int = 64) -> None:
        self._lock = threading.Lock()
        self._logs: OrderedDict[str, list[Event]] = OrderedDict()
        self._live: set[str] = set()
        self._keep = keep_finished

    def open(self, job_id: str) -> None:
        """A job starts (or resumes) in this server: a fresh log."""
        with self._lock:
            self._logs[job_id] = []
            self._logs.move_to_end(job_id)
            self._live.add(job_id)

    def publish(self, job_id: str, event: Event) -> None:
        with self._lock:
            self._logs.setdefault(job_id, []).append(event)

    def close(self, job_id: str) -> None:
        """The job's thread ended; its log stays readable until evicted."""
        with self._lock:
            self._live.discard(job_id)
            finished = [j for j in self._logs if j not in self._live]
            for old in finished[: max(0, len(finished) - self._keep)]:
                del self._logs[old]

    def read(self, job_id: str, start: int) -> tuple[list[Event], bool]:
        """(the job's events from index ``start`` on, whether a thread here runs it)."""
        with self._lock:
            return list(self._logs.get(job_id, ())[start:]), job_id in self._live
