"""A cost model over lowered programs: what a search policy calls.

``ProgramScorer(make_cost_model("xgb", cores=target.cores), group=task_key)`` has
``predict(programs)`` and ``update(programs, throughputs)`` on ``LoweredFunc`` objects (the
``Scorer`` protocol of ``search.policy``): it extracts their features, once per program
object, and delegates to the model. Lower with ``unroll=False`` for both, the cheaper
analysis form (see FEATURES.md).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from schedule import LoweredFunc

from .base import CostModel
from .features import extract_features
from .registry import make_cost_model


class ProgramScorer:
    """Scores lowered programs with ``model`` (a ``CostModel`` or a registered name); their
    measurements train it under ``group`` (the task)."""

    def __init__(self, model: CostModel | str = "xgb", group: str = "default"):
        self.model = make_cost_model(model) if isinstance(model, str) else model
        self.group = group
        self._cache: weakref.WeakKeyDictionary[LoweredFunc, np.ndarray] = (
            weakref.WeakKeyDictionary())

    def features(self, programs: Sequence[LoweredFunc]) -> list[np.ndarray]:
        """The features of each program, computed once per program object."""
        out = []
        for func in programs:
            rows = self._cache.get(func)
            if rows is None:
                rows = self._cache[func] = extract_features(func)
            out.append(rows)
        return out

    def predict(self, programs: Sequence[LoweredFunc]) -> np.ndarray:
        return self.model.predict(self.features(programs))

    def update(self, programs: Sequence[LoweredFunc], throughputs: Sequence[float]) -> None:
        """Train on measured programs (throughput 0 for a failed measurement)."""
        self.model.update(self.features(programs), throughputs, group=self.group)
