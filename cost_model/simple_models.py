"""Models that need no training: the random baseline and an analytic roofline rule.

``RandomModel`` scores uniformly at random (the baseline of the benchmarks, and Ansor's
cold start). ``AnalyticModel`` sums the store sites' cycle estimates (the ``est_cycles`` feature:
``max(compute, FMA latency, memory) + loop overhead`` with the SIMD lanes the code gets and
the traffic at each cache capacity, see FEATURES.md), each divided by the cores of its
parallel loops, and scores a program by minus the log of the sum. It is the cold-start rule
of the learned models: with no measurements the search still prefers vectorised, parallel,
cache-friendly programs instead of picking at random.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from . import snapshot
from .base import CostModel, check_features, empty_scores
from .features import FEATURE_NAMES, inverse_log2p

_COL = {name: i for i, name in enumerate(FEATURE_NAMES)}


class RandomModel(CostModel):
    """Uniform random scores; training only counts the data."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)

    def _train(self) -> None:
        pass

    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        scores = self._rng.random(len(features))
        return np.where(np.isneginf(empty_scores(features)), -np.inf, scores)

    def save(self, include_data: bool = False) -> bytes:
        return self._pack({"seed": self.seed}, include_data=include_data)

    def load(self, data: bytes) -> None:
        meta, _, self.data = self._unpack(data, learned=False)
        with snapshot.reading(self.name):
            self.seed = int(meta.get("seed", 0))
        self._rng = np.random.default_rng(self.seed)


def analytic_scores(features: Sequence[np.ndarray], cores: int | None = None) -> np.ndarray:
    """Minus the log2 of each program's estimated cycles: the sum over its store sites of
    the ``est_cycles`` feature divided by the cores its parallel loops can use."""
    cores = max(1, int(cores or os.cpu_count() or 1))
    out = np.empty(len(features))
    est, par = _COL["est_cycles"], _COL["par_prod"]
    for n, f in enumerate(features):
        rows = check_features(f)
        if rows.shape[0] == 0:
            out[n] = -np.inf
            continue
        x = inverse_log2p(rows[:, [est, par]].astype(np.float64))
        cycles = x[:, 0] / np.clip(x[:, 1], 1.0, cores)
        out[n] = -np.log2(cycles.sum() + 1.0)
    return out


class AnalyticModel(CostModel):
    """The roofline rule of ``analytic_scores``; training only counts the data."""

    name = "analytic"

    def __init__(self, cores: int | None = None) -> None:
        super().__init__()
        self.cores = int(cores or os.cpu_count() or 1)

    def _train(self) -> None:
        pass

    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        return analytic_scores(features, self.cores)

    def save(self, include_data: bool = False) -> bytes:
        return self._pack({"cores": self.cores}, include_data=include_data)

    def load(self, data: bytes) -> None:
        meta, _, self.data = self._unpack(data, learned=False)
        with snapshot.reading(self.name):
            self.cores = int(meta.get("cores") or os.cpu_count() or 1)
