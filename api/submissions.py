"""Guards on job submission, per token, in memory: a sliding-window rate limit, and the
recognition of repeated submissions (the same spec by the same token within a short window,
or the same ``Idempotency-Key``), which get the existing job back instead of a new one."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from typing import Any

#: How long an Idempotency-Key is remembered (seconds).
IDEMPOTENCY_TTL_S = 24 * 3600.0
RATE_WINDOW_S = 60.0


class RateLimited(Exception):
    """Too many submissions; ``retry_after`` seconds until the next one is allowed."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def spec_digest(spec: dict[str, Any]) -> str:
    """A stable hash of a validated spec's JSON."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


class SubmissionGuard:
    """Rate limit (``per_minute`` per token) and repeat detection (``window_s``)."""

    def __init__(self, per_minute: int, window_s: float) -> None:
        self.per_minute = per_minute
        self.window_s = window_s
        self._lock = threading.Lock()
        self._times: dict[str, deque[float]] = {}
        self._recent: dict[tuple[str, str], tuple[float, str]] = {}  # (who, key) -> (t, job)

    def repeat_of(self, who: str, digest: str, idempotency_key: str | None) -> str | None:
        """The job id an earlier identical submission created, if this one repeats it."""
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            if idempotency_key is not None:
                hit = self._recent.get((who, "key:" + idempotency_key))
                if hit:
                    return hit[1]
            hit = self._recent.get((who, "spec:" + digest))
            return hit[1] if hit and now - hit[0] <= self.window_s else None

    def admit(self, who: str) -> None:
        """Count a submission of ``who``; RateLimited when over the limit."""
        now = time.monotonic()
        with self._lock:
            times = self._times.setdefault(who, deque())
            while times and now - times[0] >= RATE_WINDOW_S:
                times.popleft()
            if len(times) >= self.per_minute:
                retry = RATE_WINDOW_S - (now - times[0])
                raise RateLimited(f"rate limit: at most {self.per_minute} job submissions a "
                                  f"minute per token; retry in {retry:.0f} s", retry)
            times.append(now)

    def remember(self, who: str, digest: str, idempotency_key: str | None,
                 job_id: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._recent[(who, "spec:" + digest)] = (now, job_id)
            if idempotency_key is not None:
                self._recent[(who, "key:" + idempotency_key)] = (now, job_id)

    def _expire(self, now: float) -> None:
        old = [k for k, (t, _) in self._recent.items()
               if now - t > (IDEMPOTENCY_TTL_S if k[1].startswith("key:") else self.window_s)]
        for k in old:
            del self._recent[k]
