"""Prometheus metrics of one server (its own registry, so several apps can live in one
process): jobs by status, trials measured and errors by kind (counted in the database at
scrape time), measurement batches run here, and request latency by route."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from db import ERROR_KINDS, JOB_STATUSES, Database

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _DatabaseCollector(Collector):
    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily("tensortune_jobs", "jobs by status", labels=["status"])
        for status in JOB_STATUSES:
            jobs.add_metric([status], len(self.db.jobs.list(status=status, limit=None)))
        yield jobs
        yield GaugeMetricFamily("tensortune_trials_measured",
                                "measurements stored in the database",
                                value=self.db.count_records())
        errors = GaugeMetricFamily("tensortune_measurement_errors",
                                   "failed measurements stored, by error kind", labels=["kind"])
        for kind in ERROR_KINDS:
            if kind != "none":
                errors.add_metric([kind], self.db.count_records(error_kind=kind))
        yield errors


class Metrics:
    """The metrics of one app."""

    def __init__(self, db: Database) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_DatabaseCollector(db))
        self.requests = Histogram(
            "tensortune_http_request_duration_seconds",
            "time to the response's first byte, by route", ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10))
        self.batches = Counter("tensortune_batches_measured",
                               "measurement batches run by this server", registry=self.registry)
        self.candidates = Counter("tensortune_candidates_measured",
                                  "candidates measured by this server's jobs",
                                  registry=self.registry)

    def batch(self, size: int) -> None:
        self.batches.inc()
        self.candidates.inc(size)

    def render(self) -> bytes:
        return generate_latest(self.registry)
