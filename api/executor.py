"""The background job executor: jobs run in threads of the server process, independent of
requests, all measuring through one :class:`tuner.SharedPool` (one batch at a time on this
machine, batches of concurrent jobs interleaved in FIFO order).

On start it takes up the database's ``queued`` jobs and the ``running`` ones whose process
stopped reporting (a killed server); a watchdog keeps looking for running jobs that go stale
later (a job still running elsewhere is never taken over until then). A resumed job goes on
from its records, so nothing measured is lost or measured again.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from db import Database, DatabaseError, JobStateError
from tuner import JobSpec, SharedPool, SpecError, is_stale, resume_job, run_job

from .events import EventHub

log = logging.getLogger(__name__)

#: How often the watchdog looks for stale running jobs.
WATCHDOG_S = 10.0
_STOP = ""


class JobExecutor:
    """Runs jobs of ``db`` in ``workers`` threads on ``pool``, publishing events to ``hub``."""

    def __init__(self, db: Database, pool: SharedPool, hub: EventHub, workers: int = 4,
                 on_batch: Callable[[int], None] | None = None) -> None:
        self.db = db
        self.pool = pool
        self.hub = hub
        self.workers = workers
        self.on_batch = on_batch
        self._queue: queue.Queue[str] = queue.Queue()
        self._specs: dict[str, JobSpec] = {}  # specs handed over by submit(): not re-read
        self._threads: list[threading.Thread] = []
        self._mine: set[str] = set()  # queued here or running here
        self._lock = threading.Lock()
        self._stop = threading.Event()

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        for n in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"tensortune-job-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        watchdog = threading.Thread(target=self._watch, name="tensortune-watchdog", daemon=True)
        watchdog.start()
        self._threads.append(watchdog)
        self.recover()

    def stop(self) -> None:
        """Stop taking jobs. Jobs running now are left to their threads (daemons): if the
        process exits first, they stay ``running``, go stale and are resumed next start."""
        self._stop.set()
        for _ in range(self.workers):
            self._queue.put(_STOP)

    def recover(self) -> list[str]:
        """Enqueue the queued jobs and the stale running ones not already taken here."""
        taken = []
        try:
            jobs = self.db.jobs.list(status=("queued", "running"), limit=None)
        except DatabaseError:
            log.exception("cannot list jobs to resume")
            return taken
        for job in reversed(jobs):  # oldest first
            if (job.status == "queued" or is_stale(job)) and self.submit(job.id):
                taken.append(job.id)
        return taken

    def submit(self, job_id: str, spec: JobSpec | None = None) -> bool:
        """Run ``job_id`` (queued, or stale running) when a thread is free; False if it is
        already queued or running here. ``spec``: the job's specification, when the caller
        holds it (else it is read from the database)."""
        with self._lock:
            if job_id in self._mine:
                return False
            self._mine.add(job_id)
            if spec is not None:
                self._specs[job_id] = spec
        self._queue.put(job_id)
        return True

    @property
    def active(self) -> int:
        """Jobs queued or running in this server."""
        with self._lock:
            return len(self._mine)

    # ------------------------------------------------------------------ threads
    def _watch(self) -> None:
        while not self._stop.wait(WATCHDOG_S):
            try:
                stale = [j for j in self.db.jobs.list(status="running", limit=None)
                         if is_stale(j)]
            except DatabaseError:
                log.exception("watchdog cannot list running jobs")
                continue
            for job in stale:
                self.submit(job.id)

    def _work(self) -> None:
        while True:
            job_id = self._queue.get()
            if job_id == _STOP or self._stop.is_set():
                return
            try:
                self._run(job_id)
            finally:
                with self._lock:
                    self._mine.discard(job_id)
                    self._specs.pop(job_id, None)

    def _run(self, job_id: str) -> None:
        self.hub.open(job_id)
        try:
            job = self.db.jobs.get(job_id)
            with self._lock:
                spec = self._specs.get(job_id)
            spec = spec if spec is not None else JobSpec.from_json(job.spec)
            pool = self.pool.view(spec.measure)

            def on_event(event: dict) -> None:
                self.hub.publish(job_id, event)
                if event.get("type") == "batch" and self.on_batch is not None:
                    self.on_batch(int(event.get("batch", 0)))

            if job.status == "queued":
                run_job(self.db, job_id, pool, on_event, spec=spec)
            elif job.status == "running" and is_stale(job):
                resume_job(self.db, job_id, pool, on_event, spec=spec)
        except JobStateError as err:  # cancelled, or taken by another process meanwhile
            log.info("job %s not run: %s", job_id, err)
        except SpecError as err:  # stored by an older version, no longer valid
            log.warning("job %s cannot be run: %s", job_id, err)
            self._fail(job_id, f"its specification is no longer valid: {err}")
        except DatabaseError:
            log.exception("job %s cannot be run", job_id)
        finally:
            self.hub.close(job_id)

    def _fail(self, job_id: str, reason: str) -> None:
        try:
            self.db.jobs.update(job_id, status="failed", error=reason)
        except (DatabaseError, JobStateError):
            log.exception("job %s could not be marked failed", job_id)
