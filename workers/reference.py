"""A workload's expected outputs, for checking what a device computed.

They are derived from user input (a declarative DAG is compiled and run; an operator's
numpy reference allocates what its shapes say), so they are computed in a sandbox, once
per workload and seed, and a device's runner only compares bytes. The sandbox is ended
after each computation: a BLAS or OpenMP runtime left spinning by the reference would slow
the kernels timed after it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from schedule import KernelSignature, Workload, aligned_empty

from .measure import MeasureSettings
from .sandbox import Sandbox

#: The sandbox job that computes a workload's reference outputs.
REFERENCE_JOB = "workers.reference:reference_outputs"
_KEPT = 4


def reference_outputs(started: Callable[[], None],
                      job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: the workload's expected outputs for its inputs of ``seed``, as
    (dtype, shape) pairs and their bytes."""
    workload = Workload.from_json(job["workload"])
    inputs = workload.random_inputs(job["seed"])
    started()
    outputs = [np.ascontiguousarray(out) for out in workload.reference(inputs)]
    return [[str(out.dtype), list(out.shape)] for out in outputs], [o.tobytes() for o in outputs]


def kernel_arrays(signature: KernelSignature, workload: dict[str, Any],
                  seed: int) -> list[np.ndarray]:
    """A kernel's arguments in its signature's order: the workload's inputs of ``seed`` and
    zeroed outputs."""
    inputs = iter(Workload.from_json(workload).random_inputs(seed))
    return [_zeros(arg.shape, arg.dtype) if arg.is_output else next(inputs)
            for arg in signature.args]


def _zeros(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    out = aligned_empty(shape, dtype)
    out[...] = 0
    return out


def output_bytes(arrays: list[np.ndarray], signature: KernelSignature) -> list[bytes]:
    """The bytes of a kernel's outputs among its arguments (what ``compare_outputs`` takes)."""
    return [a.tobytes() for a, arg in zip(arrays, signature.args, strict=True) if arg.is_output]


def compare_outputs(blobs: list[bytes], reference: list[np.ndarray]) -> str:
    """Why the outputs differ from the reference, or ``""`` when they match."""
    if len(blobs) != len(reference):
        return f"the kernel returned {len(blobs)} outputs, the reference has {len(reference)}"
    for n, (blob, ref) in enumerate(zip(blobs, reference, strict=True)):
        if len(blob) != ref.nbytes:
            return f"output {n} has {len(blob)} bytes, expected {ref.nbytes}"
        out = np.frombuffer(blob, dtype=ref.dtype).reshape(ref.shape)
        if np.issubdtype(ref.dtype, np.floating):
            rtol = 1e-2 if ref.dtype == np.float16 else 1e-3
            scale = float(np.nanmax(np.abs(ref), initial=1.0))
            close = np.isclose(out, ref, rtol=rtol, atol=rtol * max(1.0, scale),
                               equal_nan=True)
        else:
            close = out == ref
        if not close.all():
            bad = int(np.argmin(close.reshape(-1)))
            return (f"output {n} differs from the reference at {int((~close).sum())} of "
                    f"{close.size} elements (first at flat index {bad}: "
                    f"{out.reshape(-1)[bad]!r} != {ref.reshape(-1)[bad]!r})")
    return ""


class ReferenceOutputs:
    """The reference outputs of the last few workloads a device checked, computed by
    ``job`` in a sandbox of their own."""

    def __init__(self, job: str = REFERENCE_JOB):
        self.job = job
        self._sandbox = Sandbox()
        self._kept: OrderedDict[tuple[str, int], list[np.ndarray]] = OrderedDict()

    def get(self, workload: Workload, settings: MeasureSettings
            ) -> list[np.ndarray] | tuple[str, bool]:
        """The expected outputs, or why they could not be computed and whether that is for
        good. A reference that raised or crashed keeps failing without running again; one
        that timed out (a busy machine, perhaps) is tried again. Raises ``SandboxError``
        when no sandbox can be started."""
        key = (workload.key, settings.seed)
        if key not in self._kept:
            answer = self._compute(workload, settings)
            if isinstance(answer, tuple) and not answer[1]:
                return answer
            self._kept[key] = answer  # type: ignore[assignment]
            while len(self._kept) > _KEPT:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        return self._kept[key]

    def _compute(self, workload: Workload, settings: MeasureSettings
                 ) -> list[np.ndarray] | tuple[str, bool]:
        job = {"workload": workload.to_json(), "seed": settings.seed}
        try:
            outcome = self._sandbox.call(self.job, job, start_timeout=settings.load_timeout,
                                         timeout=settings.load_timeout + settings.run_timeout)
        finally:
            self._sandbox.close()  # nothing of it stays running beside the timing
        why = "the workload's reference outputs could not be computed: "
        if outcome.status == "raised":
            return why + outcome.message, True
        if outcome.status == "crashed":
            return why + f"it crashed its sandbox ({outcome.message})", True
        if outcome.status != "ok":
            return why + f"it {outcome.message}", False
        try:
            return [np.frombuffer(blob, dtype=np.dtype(dtype)).reshape(shape) for (dtype, shape),
                    blob in zip(outcome.value, outcome.blobs, strict=True)]
        except (TypeError, ValueError):
            return why + "the sandbox answered with malformed outputs", True

    def close(self) -> None:
        self._sandbox.close()
