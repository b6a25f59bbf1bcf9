"""Reading an uploaded model's tuning tasks without trusting it: the import runs in the
sandbox.

A model file sent to the service is user input. ``import_model_tasks(data, name, target)``
writes its bytes (or copies an open file, in chunks: an upload is never held in memory
whole) to a private temporary file and runs :func:`extract_in_child` in a
``workers.Sandbox`` child (its own process, with the sandbox's memory, CPU-time and
environment limits, killed at the timeout). The child parses the bytes with the onnx package
(bytes, never a path: no external-data file the model names is ever opened), converts,
optimises and fuses them as ``tensortune compile`` does, and answers with the tasks'
workloads as JSON. Back in the caller, each workload is read with ``Workload.from_json``
(declarative, bounded) — nothing the child says is executed. Import errors come back as
:class:`ModelImportError` with the importer's message (op type, node, attribute).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from schedule import Target, Workload
from workers import Sandbox

from .spec import MAX_WORKLOADS, ModelInfo, TaskSpec, error_message

EXTRACT_FN = "tuner.model_import:extract_in_child"
#: Seconds an import may take in the sandbox (parse, optimise, fuse, lower).
IMPORT_TIMEOUT_S = 300.0
_CHUNK = 1 << 20


class ModelImportError(ValueError):
    """The model cannot be imported for tuning; the message says why."""


@dataclass(frozen=True)
class ModelTasks:
    """A model's tuning tasks (weights: occurrences) and what identifies the model."""

    info: ModelInfo
    tasks: tuple[TaskSpec, ...]


def extract_in_child(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list]:
    """Sandbox job: the tasks of the ONNX model at ``job["path"]`` on ``job["target"]``."""
    started()
    from ir import extract_tasks, from_onnx

    with open(job["path"], "rb") as f:
        module = from_onnx(f.read())
    tasks = extract_tasks(module, job["target"], int(job.get("opt_level", 3)))
    return {"tasks": [{"workload": t.workload.to_json(), "weight": t.weight}
                      for t in tasks]}, []


def import_model_tasks(data: bytes | BinaryIO, name: str, target: Target | str = "cpu", *,
                       timeout: float = IMPORT_TIMEOUT_S, sha256: str | None = None
                       ) -> ModelTasks:
    """The tuning tasks of the ONNX model ``data`` (its bytes, or a binary file open at its
    start; uploaded as ``name``), extracted in a sandbox process (see the module
    docstring). ``sha256``: the hex digest of the model, when the caller has it already."""
    target = Target.parse(target)
    with tempfile.TemporaryDirectory(prefix="tensortune-model-") as tmp:
        path = os.path.join(tmp, "model.onnx")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            if isinstance(data, bytes | bytearray):
                f.write(data)
            else:
                shutil.copyfileobj(data, f, _CHUNK)
        if sha256 is None:
            with open(path, "rb") as f:
                sha256 = file_sha256(f)
        sandbox = Sandbox()
        try:
            outcome = sandbox.call(EXTRACT_FN, {"path": path, "target": str(target)},
                                   start_timeout=60.0, timeout=timeout)
        finally:
            sandbox.close()
    info = ModelInfo(display_name(name), sha256)
    if outcome.status == "raised":
        raise ModelImportError(f"the model cannot be imported: "
                               f"{_without_type(outcome.message)}")
    if outcome.status != "ok":
        raise ModelImportError(f"importing the model failed: {outcome.message}")
    return ModelTasks(info, _tasks(outcome.value))


def file_sha256(file: BinaryIO) -> str:
    """The SHA-256 (hex) of what is left to read of a binary file, read in chunks."""
    digest = hashlib.sha256()
    while chunk := file.read(_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def _tasks(value: Any) -> tuple[TaskSpec, ...]:
    raw = value.get("tasks") if isinstance(value, dict) else None
    if not isinstance(raw, list):
        raise ModelImportError("importing the model failed: a malformed answer")
    if not raw:
        raise ModelImportError("the model has no tunable task (no fused function of it has "
                               "a tensor-expression lowering)")
    if len(raw) > MAX_WORKLOADS:
        raise ModelImportError(f"the model has {len(raw)} distinct tasks; one job tunes at "
                               f"most {MAX_WORKLOADS}")
    tasks = []
    for n, entry in enumerate(raw):
        try:
            tasks.append(TaskSpec(Workload.from_json(entry["workload"]),
                                  float(entry["weight"])))
        except (TypeError, ValueError, KeyError, RecursionError) as err:
            raise ModelImportError(f"task {n} of the model: {error_message(err)}") from None
    return tuple(tasks)


def display_name(name: str) -> str:
    """The file name as shown: its last path part, printable, at most 255 characters."""
    base = os.path.basename(name.replace("\\", "/")) or "model.onnx"
    return "".join(c if c.isprintable() else "?" for c in base)[:255]


def _without_type(message: str) -> str:
    """``OnnxImportError: text`` -> ``text`` (the importer's messages stand alone)."""
    kind, sep, rest = message.partition(": ")
    return rest if sep and kind.isidentifier() else message
