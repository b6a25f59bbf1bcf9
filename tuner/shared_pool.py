"""The measurement pools the tuner uses: :func:`measurement_pool` (this machine, or a Ray
cluster when an address is given), and :class:`SharedPool` for concurrent jobs: a pool
whose ``measure()`` calls are serialized by a fair (FIFO ticket) lock, so that batches of
jobs running in threads of one process interleave in arrival order and two batches are
never built or timed at once.

    shared = SharedPool.for_cluster(address)    # a pool per distinct MeasureSettings
    pool = shared.view(spec.measure)            # a Pool for one job; closing it is a no-op
    run_job(db, job_id, pool)                   # in as many threads as there are jobs
    shared.close()
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from types import TracebackType

from workers import (
    RAY_ADDRESS_ENV,
    LocalPool,
    MeasureInput,
    MeasureResult,
    MeasureSettings,
    Pool,
    RayAccessError,
    ResultCallback,
)

PoolFactory = Callable[[MeasureSettings], Pool]


def measurement_pool(settings: MeasureSettings, ray_address: str | None = None) -> Pool:
    """A pool measuring with ``settings``: across the Ray cluster at ``ray_address`` (or
    ``$TENSORTUNE_RAY_ADDRESS``), else on this machine without Ray."""
    address = ray_address or os.environ.get(RAY_ADDRESS_ENV)
    if address:
        from workers import RayPool  # imports Ray: only when a cluster is asked for

        return RayPool(settings, address=address)
    return LocalPool(settings)


class FairLock:
    """A ticket lock: waiters acquire it in the order they asked for it (FIFO), so a thread
    that releases and asks again goes behind every thread already waiting."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next_ticket = 0
        self._serving = 0

    def acquire(self) -> None:
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            while ticket != self._serving:
                self._cond.wait()

    def release(self) -> None:
        with self._cond:
            self._serving += 1
            self._cond.notify_all()

    @property
    def waiting(self) -> int:
        """How many threads hold or wait for the lock."""
        with self._cond:
            return self._next_ticket - self._serving

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class SharedPool:
    """Pools made by ``factory`` (one per distinct measure settings, made on first use),
    all behind one :class:`FairLock`: one batch at a time on this machine. When the Ray
    cluster under them is lost, they are all closed, and made again at the next batch."""

    def __init__(self, factory: PoolFactory = LocalPool) -> None:
        self._factory = factory
        self._pools: dict[MeasureSettings, Pool] = {}
        self._pools_lock = threading.Lock()
        self.lock = FairLock()
        self.batches = 0

    @classmethod
    def for_cluster(cls, ray_address: str | None = None) -> SharedPool:
        """Pools on the Ray cluster at ``ray_address``, or local pools when it is None."""
        if not ray_address:
            return cls()
        return cls(lambda settings: measurement_pool(settings, ray_address))

    def view(self, settings: MeasureSettings | None = None) -> Pool:
        """A :class:`workers.Pool` measuring with ``settings`` through this shared pool."""
        return _SharedView(self, settings or MeasureSettings())

    def measure(self, settings: MeasureSettings, inputs: Sequence[MeasureInput],
                callback: ResultCallback | None = None) -> list[MeasureResult]:
        """Measure one batch when its turn comes (FIFO among concurrent callers)."""
        with self.lock:
            with self._pools_lock:
                pool = self._pools.get(settings)
                if pool is None:
                    pool = self._pools[settings] = self._factory(settings)
            self.batches += 1
            try:
                return pool.measure(inputs, callback)
            except RayAccessError:  # the cluster is gone: the next batch joins it afresh
                self.close()
                raise

    def close(self) -> None:
        with self._pools_lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()


class _SharedView(Pool):
    """What one job sees: a pool with its own settings that measures through the shared one."""

    def __init__(self, shared: SharedPool, settings: MeasureSettings) -> None:
        self.shared = shared
        self.settings = settings

    def measure(self, inputs: Sequence[MeasureInput],
                callback: ResultCallback | None = None) -> list[MeasureResult]:
        return self.shared.measure(self.settings, inputs, callback)

    def close(self) -> None:
        """The shared pool owns the real pools; a job's view has nothing to release."""
