"""The scikit-learn cost model: ``HistGradientBoostingRegressor`` on one aggregated vector per
program (``program_features``), regressing the log2 of the throughput normalised per task.

After each fit the trees are exported to plain arrays (``_TreeArrays``) and predictions
always come from those arrays, so a snapshot (the arrays as raw bytes, no pickle) predicts
exactly like the model that was saved.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import snapshot
from .base import CostModel, check_features, empty_scores
from .features import N_PROGRAM_FEATURES, program_features
from .simple_models import analytic_scores

_LOG_FLOOR = -6.0  # failed / very slow programs count as 1/64 of the task's best
_FIELDS = ("feature", "threshold", "left", "right", "missing_left", "value", "is_leaf")
_DTYPES = {"feature": "<i4", "threshold": "<f8", "left": "<i4", "right": "<i4",
           "missing_left": "u1", "value": "<f8", "is_leaf": "u1"}


class _TreeArrays:
    """All trees of a fitted ensemble as flat node arrays (node ids global across trees)."""

    def __init__(self, fields: dict[str, np.ndarray], roots: np.ndarray, baseline: float,
                 max_depth: int):
        self.fields = fields
        self.roots = roots
        self.baseline = baseline
        self.max_depth = max_depth

    @classmethod
    def from_estimator(cls, est: Any) -> _TreeArrays:
        parts: dict[str, list[np.ndarray]] = {f: [] for f in _FIELDS}
        roots, offset, depth = [], 0, 0
        for (predictor,) in est._predictors:
            nodes = predictor.nodes
            if np.any(nodes["is_categorical"]):
                raise ValueError("categorical splits are not exported")
            roots.append(offset)
            parts["feature"].append(nodes["feature_idx"].astype(np.int32))
            parts["threshold"].append(nodes["num_threshold"].astype(np.float64))
            parts["left"].append(nodes["left"].astype(np.int32) + offset)
            parts["right"].append(nodes["right"].astype(np.int32) + offset)
            parts["missing_left"].append(nodes["missing_go_to_left"].astype(np.uint8))
            parts["value"].append(nodes["value"].astype(np.float64))
            parts["is_leaf"].append(nodes["is_leaf"].astype(np.uint8))
            depth = max(depth, int(nodes["depth"].max()))
            offset += len(nodes)
        fields = {f: (np.concatenate(v) if v else np.zeros(0, _DTYPES[f]))
                  for f, v in parts.items()}
        baseline = float(np.ravel(est._baseline_prediction)[0])
        return cls(fields, np.asarray(roots, dtype=np.int64), baseline, depth)

    def predict(self, x: np.ndarray) -> np.ndarray:
        if len(self.roots) == 0:
            return np.full(x.shape[0], self.baseline)
        f = self.fields
        idx = np.broadcast_to(self.roots, (x.shape[0], len(self.roots))).copy()
        rows = np.arange(x.shape[0])[:, None]
        for _ in range(self.max_depth + 1):
            leaf = f["is_leaf"][idx].astype(bool)
            if leaf.all():
                break
            values = x[rows, f["feature"][idx]]
            left = np.where(np.isnan(values), f["missing_left"][idx].astype(bool),
                            values <= f["threshold"][idx])
            idx = np.where(leaf, idx, np.where(left, f["left"][idx], f["right"][idx]))
        return self.baseline + f["value"][idx].sum(axis=1)

    def to_blobs(self) -> tuple[dict[str, Any], dict[str, bytes]]:
        meta = {"nodes": len(self.fields["value"]), "roots": self.roots.tolist(),
                "baseline": self.baseline, "max_depth": self.max_depth}
        blobs = {f"tree_{k}": snapshot.array_to_bytes(v, _DTYPES[k])
                 for k, v in self.fields.items()}
        return meta, blobs

    @classmethod
    def from_blobs(cls, meta: dict[str, Any], blobs: dict[str, bytes]) -> _TreeArrays:
        n = int(meta["nodes"])
        fields = {k: snapshot.array_from_bytes(blobs[f"tree_{k}"], (n,), _DTYPES[k])
                  for k in _FIELDS}
        roots = np.asarray([int(r) for r in meta["roots"]], dtype=np.int64)
        for k in ("left", "right"):
            leaf = fields["is_leaf"].astype(bool)
            if np.any((fields[k][~leaf] < 0) | (fields[k][~leaf] >= n)):
                raise snapshot.SnapshotError("malformed tree arrays in the snapshot")
        if np.any((fields["feature"][~fields["is_leaf"].astype(bool)] < 0)
                  | (fields["feature"][~fields["is_leaf"].astype(bool)] >= N_PROGRAM_FEATURES)):
            raise snapshot.SnapshotError("malformed tree arrays in the snapshot (features)")
        if np.any((roots < 0) | (roots >= max(n, 1))):
            raise snapshot.SnapshotError("malformed tree arrays in the snapshot (roots)")
        return cls(fields, roots, float(meta["baseline"]), int(meta["max_depth"]))


class SklearnModel(CostModel):
    """Gradient-boosted trees (scikit-learn) on program-level features."""

    name = "sklearn"

    def __init__(self, max_iter: int = 100, learning_rate: float = 0.1,
                 max_leaf_nodes: int = 31, min_samples_leaf: int = 5, seed: int = 0,
                 cold_start: str = "analytic", nthread: int = 1, cores: int | None = None):
        super().__init__()
        if cold_start not in ("analytic", "random"):
            raise ValueError("cold_start must be 'analytic' or 'random'")
        self.config: dict[str, Any] = {
            "max_iter": int(max_iter), "learning_rate": float(learning_rate),
            "max_leaf_nodes": int(max_leaf_nodes), "min_samples_leaf": int(min_samples_leaf),
            "seed": int(seed), "cold_start": cold_start, "nthread": int(nthread),
            "cores": int(cores or os.cpu_count() or 1)}
        self.trees: _TreeArrays | None = None
        self._rng = np.random.default_rng(seed)

    def _train(self) -> None:
        if len(self.data) < 2:
            return
        try:
            from sklearn.ensemble import HistGradientBoostingRegressor
            from threadpoolctl import threadpool_limits
        except ImportError as err:  # pragma: no cover - the search extra installs it
            raise ImportError("the sklearn cost model needs scikit-learn: "
                              "pip install 'tensortune[search]'") from err
        c = self.config
        x = np.stack([program_features(f) for f in self.data.features]).astype(np.float64)
        labels = self.data.labels()
        y = np.maximum(np.log2(np.maximum(labels, 2.0 ** _LOG_FLOOR)), _LOG_FLOOR)
        est = HistGradientBoostingRegressor(
            max_iter=c["max_iter"], learning_rate=c["learning_rate"],
            max_leaf_nodes=c["max_leaf_nodes"],
            min_samples_leaf=min(c["min_samples_leaf"], max(1, len(y) // 4)),
            early_stopping=False, random_state=c["seed"])
        with threadpool_limits(limits=int(c.get("nthread", 1))):
            est.fit(x, y)
        self.trees = _TreeArrays.from_estimator(est)

    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        feats = [check_features(f) for f in features]
        if not feats:
            return np.zeros(0)
        if self.trees is None:
            if self.config["cold_start"] == "random":
                scores = self._rng.random(len(feats))
                return np.where(np.isneginf(empty_scores(feats)), -np.inf, scores)
            return analytic_scores(feats, int(self.config.get("cores") or 1))
        x = np.stack([program_features(f) for f in feats]).astype(np.float64)
        scores = self.trees.predict(x)
        return np.where(np.isneginf(empty_scores(feats)), -np.inf, scores)

    def save(self, include_data: bool = False) -> bytes:
        meta: dict[str, Any] = {"config": self.config}
        blobs: dict[str, bytes] = {}
        if self.trees is not None:
            meta["trees"], blobs = self.trees.to_blobs()
        return self._pack(meta, blobs, include_data)

    def load(self, data: bytes) -> None:
        meta, blobs, training = self._unpack(data)
        with snapshot.reading(self.name):
            config = {str(k): v for k, v in dict(meta["config"]).items()}
            trees = _TreeArrays.from_blobs(meta["trees"], blobs) if "trees" in meta else None
        self.config, self.trees, self.data = config, trees, training
