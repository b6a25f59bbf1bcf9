"""Tuner layer: jobs, the task scheduler, the tuning loop, applying best schedules, and the
``tensortune`` CLI.

    from tuner import tune, Workload
    wl = Workload.op("matmul", M=1024, N=1024, K=1024)
    result = tune([wl], target="cpu", trials=1000, db="sqlite:///tuning.db")
    result.best(wl)        # steps, latency, GFLOP/s

May import ``ir``, ``search``, ``cost_model``, ``workers``, ``db`` and ``schedule``
(their top-level packages only).
"""

from importlib import metadata

from schedule import Workload

from .apply import UntunedWarning, apply_best, build_best, default_steps
from .callbacks import (
    MeasureCallback,
    ReportProgress,
    StoreRecords,
    UpdatePolicy,
    default_callbacks,
)
from .cli_service import is_loopback
from .jobs import cancel_job, requeue_job, resume_job, run_job, submit_job
from .model_compile import CompileError, best_schedules, compile, model_tasks
from .model_import import ModelImportError, ModelTasks, file_sha256, import_model_tasks
from .model_tune import model_best, model_job_tasks, tune_model
from .progress import TASK_STATES, BestSchedule, TaskProgress, TimeSplit, TuneResult
from .runner import JobRunner, is_stale
from .scheduler import SCHEDULERS, TaskScheduler
from .shared_pool import FairLock, SharedPool, measurement_pool
from .spec import JobSpec, ModelInfo, SpecError, TaskSpec
from .trial import Trial
from .tune import open_database, tune
from .vta_offload import VtaCodegen, VtaRegion, use_vta

try:
    __version__ = metadata.version("tensortune")
except metadata.PackageNotFoundError:  # a source tree that was never pip-installed
    __version__ = "0+unknown"

__all__ = [
    "SCHEDULERS",
    "TASK_STATES",
    "BestSchedule",
    "CompileError",
    "FairLock",
    "JobRunner",
    "JobSpec",
    "MeasureCallback",
    "ModelImportError",
    "ModelInfo",
    "ModelTasks",
    "ReportProgress",
    "SharedPool",
    "SpecError",
    "StoreRecords",
    "TaskProgress",
    "TaskScheduler",
    "TaskSpec",
    "TimeSplit",
    "Trial",
    "TuneResult",
    "UntunedWarning",
    "UpdatePolicy",
    "VtaCodegen",
    "VtaRegion",
    "Workload",
    "__version__",
    "apply_best",
    "best_schedules",
    "build_best",
    "cancel_job",
    "compile",
    "default_callbacks",
    "default_steps",
    "file_sha256",
    "import_model_tasks",
    "is_loopback",
    "is_stale",
    "measurement_pool",
    "model_best",
    "model_job_tasks",
    "model_tasks",
    "open_database",
    "requeue_job",
    "resume_job",
    "run_job",
    "submit_job",
    "tune",
    "tune_model",
    "use_vta",
]
