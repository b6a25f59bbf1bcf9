"""Shared helpers for the schedule tests: build a schedule and compare with numpy."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from schedule import build, te


def random_array(shape: Sequence[int], dtype: str, rng: np.random.Generator) -> np.ndarray:
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -50), min(info.max, 50), size=shape).astype(dtype)


def run(s: te.Schedule, args: Sequence[te.Tensor], seed: int = 0,
        inputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """Build ``s`` and run it on random inputs; returns all argument arrays."""
    mod = build(s, args, target="cpu")
    rng = np.random.default_rng(seed)
    arrays = []
    for i, t in enumerate(args):
        if inputs is not None and i < len(inputs):
            arrays.append(inputs[i])
        elif isinstance(t.op, te.PlaceholderOp):
            arrays.append(random_array(t.shape, t.dtype, rng))
        else:
            arrays.append(np.zeros(t.shape, dtype=t.dtype))
    mod(*arrays)
    return arrays


def check(s: te.Schedule, args: Sequence[te.Tensor], reference: Callable[..., np.ndarray],
          rtol: float = 1e-4, atol: float = 1e-4, seed: int = 0) -> None:
    """Build ``s``, run it, and compare its last argument with ``reference(*inputs)``."""
    n_in = sum(isinstance(t.op, te.PlaceholderOp) for t in args)
    arrays = run(s, args, seed)
    expected = reference(*arrays[:n_in])
    np.testing.assert_allclose(arrays[-1], expected, rtol=rtol, atol=atol)


def matmul(M: int, N: int, K: int, dtype: str = "float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C
