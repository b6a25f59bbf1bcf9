"""Background jobs: the fair lock serves waiters in arrival order, concurrent jobs share
one pool with their batches interleaved and never two at once, cancelled and restarted jobs
behave, with a fake pool (no compiling) so that these run in a second or two."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from api.events import EventHub
from api.executor import JobExecutor
from db import Database
from tuner import FairLock, SharedPool, submit_job
from workers import (
    ClusterLostError,
    MeasureInput,
    MeasureResult,
    MeasureSettings,
    Pool,
    ResultCallback,
)

FAST_JOB = {
    "workloads": [{"op": "matmul", "params": {"M": 16, "N": 16, "K": 16}}],
    "target": "cpu", "trials": 12, "batch_size": 4, "reconfirm": 0, "cost_model": "random",
    "policy": "random", "baselines": [],  # the pool's calls are the tuning batches only
}


class FakePool(Pool):
    """Pretends to measure: every candidate costs 1 ms; records which job measured when
    and whether two batches ever overlapped."""

    def __init__(self, settings: MeasureSettings, log: list[str], delay: float = 0.02):
        self.settings = settings
        self.log = log
        self.delay = delay
        self.busy = threading.Lock()
        self.overlaps = 0

    def measure(self, inputs: Sequence[MeasureInput],
                callback: ResultCallback | None = None) -> list[MeasureResult]:
        if not self.busy.acquire(blocking=False):
            self.overlaps += 1
            self.busy.acquire()
        try:
            self.log.append(threading.current_thread().name)
            time.sleep(self.delay)
            results = [MeasureResult([1e-3 * (1 + n / 100)], "none", timestamp=time.time())
                       for n in range(len(inputs))]
            for n, result in enumerate(results):
                if callback is not None:
                    callback(n, result)
            return results
        finally:
            self.busy.release()

    def close(self) -> None:
        pass


def test_fair_lock_serves_waiters_in_arrival_order() -> None:
    lock = FairLock()
    order: list[int] = []
    lock.acquire()
    threads = []
    for n in range(5):
        thread = threading.Thread(target=lambda n=n: (lock.acquire(), order.append(n),
                                                      lock.release()))
        thread.start()
        threads.append(thread)
        while lock.waiting < n + 2:  # holder + the n + 1 waiters so far
            time.sleep(0.001)
    lock.release()
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2, 3, 4]


def _executor(tmp_path: Path, log: list[str], workers: int = 3
              ) -> tuple[Database, JobExecutor, list[FakePool]]:
    db = Database(f"sqlite:///{tmp_path / 'exec.db'}")
    pools: list[FakePool] = []

    def factory(settings: MeasureSettings) -> Pool:
        pools.append(FakePool(settings, log))
        return pools[-1]

    return db, JobExecutor(db, SharedPool(factory), EventHub(), workers), pools


def _wait_for(db: Database, job_ids: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while any(db.jobs.get(j).status in ("queued", "running") for j in job_ids):
        assert time.monotonic() < deadline, [db.jobs.get(j).status for j in job_ids]
        time.sleep(0.05)


def test_concurrent_jobs_share_the_pool_fairly(tmp_path: Path) -> None:
    log: list[str] = []
    db, executor, pools = _executor(tmp_path, log)
    jobs = [submit_job(db, {**FAST_JOB, "seed": n}).id for n in range(3)]
    executor.start()  # takes up the queued jobs
    try:
        _wait_for(db, jobs)
    finally:
        executor.stop()
    assert [db.jobs.get(j).status for j in jobs] == ["succeeded"] * 3
    assert len(pools) == 1 and pools[0].overlaps == 0  # one pool, one batch at a time
    # 3 jobs x 12 trials / 4 per batch, and each job's first leader measured once more
    # (tuner.second_look)
    assert len(log) == 9 + 3
    # interleaved: no job ran all its batches in a row while the others waited
    runs = [1]
    for before, now in itertools.pairwise(log):
        runs.append(runs[-1] + 1 if now == before else 1)
    assert max(runs) <= 2, log
    assert all(db.jobs.get(j).progress["trials"] == 12 for j in jobs)


def test_events_are_published_per_batch_and_at_the_end(tmp_path: Path) -> None:
    db, executor, _ = _executor(tmp_path, [], workers=1)
    job_id = submit_job(db, FAST_JOB).id
    executor.start()
    try:
        _wait_for(db, [job_id])
        # the job's final status is stored a moment before its thread publishes "done"
        # and ends: wait for the thread, not only for the database
        deadline = time.monotonic() + 30
        while executor.hub.read(job_id, 0)[1] and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        executor.stop()
    events, live = executor.hub.read(job_id, 0)
    assert not live
    assert [e["type"] for e in events] == ["batch", "batch", "batch", "done"]
    assert [e["trials"] for e in events] == [4, 8, 12, 12]


def test_a_job_cancelled_before_it_starts_is_not_run(tmp_path: Path) -> None:
    log: list[str] = []
    db, executor, _ = _executor(tmp_path, log, workers=1)
    job_id = submit_job(db, FAST_JOB).id
    db.jobs.update(job_id, status="cancelled")
    executor.submit(job_id)
    executor.start()
    try:
        deadline = time.monotonic() + 10
        while executor.active and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        executor.stop()
    assert executor.active == 0 and log == []
    assert db.jobs.get(job_id).status == "cancelled"


def test_a_lost_cluster_fails_its_job_clearly_and_the_next_job_joins_afresh(
        tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'exec.db'}")
    pools: list[Pool] = []
    closed: list[Pool] = []

    class LostClusterPool(FakePool):
        def measure(self, inputs: Sequence[MeasureInput],
                    callback: ResultCallback | None = None) -> list[MeasureResult]:
            raise ClusterLostError("the Ray head at 10.0.0.5:6379 stopped answering")

        def close(self) -> None:
            closed.append(self)

    def factory(settings: MeasureSettings) -> Pool:
        pools.append((LostClusterPool if not pools else FakePool)(settings, []))
        return pools[-1]

    executor = JobExecutor(db, SharedPool(factory), EventHub(), 1)
    executor.start()
    try:
        first = submit_job(db, FAST_JOB).id
        executor.submit(first)
        _wait_for(db, [first])
        second = submit_job(db, {**FAST_JOB, "seed": 1}).id
        executor.submit(second)
        _wait_for(db, [second])
    finally:
        executor.stop()
    lost = db.jobs.get(first)
    assert lost.status == "failed"
    assert lost.error == ("measurement cluster lost: the Ray head at 10.0.0.5:6379 stopped "
                          "answering")
    assert closed == [pools[0]] and len(pools) == 2  # dropped, then made again
    assert db.jobs.get(second).status == "succeeded"
    db.close()
