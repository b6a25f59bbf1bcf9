"""Hand-written schedules that show what the primitives can do, and the demo report.

``matmul_schedule`` is the reference GEMM schedule: a 32-column packed copy of B
per column panel (cache_read computed at the panel loop: contiguous rows, no
4 KiB-stride cache conflicts), a register tile of ``rows x 32`` accumulators
(cache_write computed at the tile loop, promoted to vector registers), the
reduction loop outside the unrolled rows and the vectorized columns, and the
column panels in parallel.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from . import te
from .build import Module, build
from .target import Target


def matmul(M: int, N: int, K: int, dtype: str = "float32") -> tuple[te.Tensor, ...]:
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def schedule_matmul(s: te.Schedule, B: te.Tensor, C: te.Tensor, rows: int = 8,
                    cols: int = 32, k_block: int | None = None) -> None:
    """Apply the hand-tuned GEMM schedule to ``C = A @ B`` in ``s`` (see the module
    docstring)."""
    CL = s.cache_write(C, "local")
    BB = s.cache_read(B, "global", [CL])
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=cols)
    io, ii = s[C].split(i, factor=rows)
    s[C].reorder(jo, io, ii, ji)
    s[C].parallel(jo)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    s[BB].compute_at(s[C], jo)
    s[BB].vectorize(s[BB].op.axis[1])
    s[CL].compute_at(s[C], io)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    if k_block:
        ko, ki = s[CL].split(ck, factor=k_block)
        s[CL].reorder(ko, ki, ci, cj)
    else:
        s[CL].reorder(ck, ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)


def matmul_schedule(M: int, N: int, K: int, rows: int = 8, cols: int = 32,
                    k_block: int | None = None) -> tuple[te.Schedule, list[te.Tensor]]:
    """A GEMM with the hand-tuned schedule applied; returns the schedule and its tensors."""
    A, B, C = matmul(M, N, K)
    s = te.create_schedule(C)
    schedule_matmul(s, B, C, rows, cols, k_block)
    return s, [A, B, C]


def time_call(fn: Any, repeat: int, number: int = 1) -> float:
    """Median seconds of ``fn()`` over ``repeat`` timings of ``number`` calls each."""
    fn()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return float(np.median(times))


def matmul_report(size: int = 1024, repeat: int = 5) -> dict[str, Any]:
    """Build the hand-scheduled GEMM, check it against numpy, and time both."""
    n = int(size)
    s, args = matmul_schedule(n, n, n)
    mod: Module = build(s, args, target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((n, n), dtype=np.float32)
    mod(a, b, c)
    expected = a @ b
    max_abs_err = float(np.abs(c - expected).max())
    flops = 2.0 * n * n * n
    ours = time_call(lambda: mod(a, b, c), repeat)
    ref = time_call(lambda: np.matmul(a, b), repeat)
    return {
        "target": str(Target.parse("cpu")),
        "gflops": flops / ours / 1e9,
        "numpy_gflops": flops / ref / 1e9,
        "ratio": ref / ours,
        "max_abs_err": max_abs_err,
        "build_seconds": mod.build_seconds,
        "schedule": "\n".join(str(step) for step in s.steps),
    }
