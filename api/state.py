"""What one server holds for its lifetime: settings, the database, the shared measurement
pool, the job executor and its event hub, the submission guard, the metrics and the slots
for model imports."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from db import Database

from .auth import TokenCache
from .events import EventHub
from .executor import JobExecutor
from .metrics import Metrics
from .settings import Settings
from .submissions import SubmissionGuard


@dataclass
class ServiceState:
    settings: Settings
    db: Database
    hub: EventHub
    executor: JobExecutor | None
    guard: SubmissionGuard
    metrics: Metrics
    tokens: TokenCache
    model_imports: threading.BoundedSemaphore  # model uploads being imported (sandboxed)
