"""The cost-model interface the search drives, and the training data it accumulates.

A cost model scores programs from their features (``extract_features`` rows, one array per
program): ``predict`` returns one score per program, higher = predicted faster; only the
order of the scores within one task means something. ``update`` adds measured programs
(their throughput: any unit, 1/seconds or FLOP/s, as long as one task uses one unit; 0 or
NaN for a failed measurement) to the data of a ``group`` (a task: labels are normalised per
group) and retrains; ``fit`` replaces the data first. ``save`` returns a snapshot as bytes
(see ``snapshot``) and ``load`` restores one in place. A snapshot predicts exactly like the
saved model; it carries the training data only with ``save(include_data=True)`` -- without
it, the next ``update`` retrains on the new data alone, so a resumed search first feeds the
task's measured records back (as it does anyway to rebuild its state).
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from . import snapshot
from .features import FEATURE_SET, N_FEATURES

Groups = str | Sequence[str]


class TrainingData:
    """Measured programs: features (one array per program), throughput and group each."""

    def __init__(self) -> None:
        self.features: list[np.ndarray] = []
        self.throughputs: list[float] = []
        self.groups: list[str] = []

    def __len__(self) -> int:
        return len(self.features)

    def clear(self) -> None:
        self.features.clear()
        self.throughputs.clear()
        self.groups.clear()

    def add(self, features: Sequence[np.ndarray], throughputs: Sequence[float],
            group: Groups = "default") -> None:
        feats = [check_features(f) for f in features]
        thr = [float(t) for t in throughputs]
        if len(thr) != len(feats):
            raise ValueError(f"{len(feats)} feature arrays but {len(thr)} throughputs")
        groups = [group] * len(feats) if isinstance(group, str) else [str(g) for g in group]
        if len(groups) != len(feats):
            raise ValueError(f"{len(feats)} feature arrays but {len(groups)} groups")
        self.features += feats
        self.throughputs += [t if np.isfinite(t) and t > 0 else 0.0 for t in thr]
        self.groups += groups

    def labels(self) -> np.ndarray:
        """Throughput normalised per group: the fastest program of a group gets 1, a failed
        one 0."""
        thr = np.asarray(self.throughputs, dtype=np.float64)
        groups = np.asarray(self.groups)
        out = np.zeros_like(thr)
        for g in np.unique(groups):
            mask = groups == g
            best = thr[mask].max()
            if best > 0:
                out[mask] = thr[mask] / best
        return out

    def group_ids(self) -> np.ndarray:
        _, ids = np.unique(np.asarray(self.groups), return_inverse=True)
        return ids.astype(np.int64)

    # --- snapshot form (raw arrays, no pickle)
    def to_blobs(self) -> tuple[dict[str, Any], dict[str, bytes]]:
        rows = [f.shape[0] for f in self.features]
        stacked = (np.concatenate(self.features) if self.features
                   else np.zeros((0, N_FEATURES), np.float32))
        meta = {"rows": rows, "groups": self.groups, "n": len(self)}
        blobs = {"data_features": snapshot.array_to_bytes(stacked),
                 "data_throughputs": snapshot.array_to_bytes(
                     np.asarray(self.throughputs), "<f8")}
        return meta, blobs

    @classmethod
    def from_blobs(cls, meta: dict[str, Any], blobs: dict[str, bytes]) -> TrainingData:
        data = cls()
        rows = [int(r) for r in meta["rows"]]
        stacked = snapshot.array_from_bytes(blobs["data_features"], (sum(rows), N_FEATURES))
        thr = snapshot.array_from_bytes(blobs["data_throughputs"], (len(rows),), "<f8")
        bounds = np.cumsum([0, *rows])
        data.features = [stacked[a:b] for a, b in itertools.pairwise(bounds)]
        data.throughputs = [float(t) for t in thr]
        data.groups = [str(g) for g in meta["groups"]]
        if len(data.groups) != len(rows):
            raise snapshot.SnapshotError("snapshot training data: groups and rows disagree")
        return data


def check_features(f: np.ndarray) -> np.ndarray:
    """A program's feature rows as float32 (rows, N_FEATURES); raises on another width."""
    a = np.asarray(f, dtype=np.float32)
    if a.ndim != 2 or a.shape[1] != N_FEATURES:
        raise ValueError(f"expected features of shape (rows, {N_FEATURES}) from "
                         f"extract_features, got {a.shape}")
    return a


def check_snapshot_features(meta: dict[str, Any]) -> None:
    """Raise unless a snapshot was made with this version's features."""
    if meta.get("feature_set") != FEATURE_SET:
        raise snapshot.SnapshotError(
            "the snapshot's model was trained on other features than this version extracts "
            f"(feature set {meta.get('feature_set')!r}, here {FEATURE_SET!r}): retrain it "
            "from the measurement records")


class CostModel(ABC):
    """Scores programs from their features; retrained online from measurements."""

    name: ClassVar[str] = "base"

    def __init__(self) -> None:
        self.data = TrainingData()

    @property
    def num_samples(self) -> int:
        """Measured programs in the training data (restored from a snapshot only when it
        was saved with ``include_data``)."""
        return len(self.data)

    def update(self, features: Sequence[np.ndarray], throughputs: Sequence[float],
               group: Groups = "default") -> None:
        """Add measured programs of ``group`` (a task) and retrain."""
        self.data.add(features, throughputs, group)
        self._train()

    def fit(self, features: Sequence[np.ndarray], throughputs: Sequence[float],
            group: Groups = "default") -> None:
        """Train on exactly these measured programs (earlier data is dropped)."""
        self.data.clear()
        self.update(features, throughputs, group)

    @abstractmethod
    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        """One score per program (float64), higher = predicted faster."""

    @abstractmethod
    def _train(self) -> None:
        """Retrain from ``self.data`` (called after each update)."""

    @abstractmethod
    def save(self, include_data: bool = False) -> bytes:
        """A snapshot of the model (and its training data when asked) as bytes."""

    @abstractmethod
    def load(self, data: bytes) -> None:
        """Restore a snapshot made by ``save`` of the same kind of model."""

    # --- the part of save/load every kind of model shares

    def _pack(self, meta: dict[str, Any], blobs: dict[str, bytes] | None = None,
              include_data: bool = False) -> bytes:
        """A snapshot of this kind of model: its own ``meta`` and ``blobs``, plus the feature
        set, the number of samples and, with ``include_data``, the training data."""
        meta = {**meta, "feature_set": FEATURE_SET, "samples": self.num_samples}
        blobs = dict(blobs or {})
        if include_data:
            meta["data"], data_blobs = self.data.to_blobs()
            blobs.update(data_blobs)
        return snapshot.pack(self.name, meta, blobs)

    def _unpack(self, data: bytes, *, learned: bool = True
                ) -> tuple[dict[str, Any], dict[str, bytes], TrainingData]:
        """``(meta, blobs, training data)`` of a snapshot made by ``_pack`` for this kind of
        model (the training data is empty unless it was saved). The feature set must be this
        version's when the model was ``learned`` from features, or data was saved."""
        _, meta, blobs = snapshot.unpack(data, self.name)
        if learned or "data" in meta:
            check_snapshot_features(meta)
        training = (TrainingData.from_blobs(meta["data"], blobs) if "data" in meta
                    else TrainingData())
        return meta, blobs, training

    def __repr__(self) -> str:
        return f"{type(self).__name__}(samples={self.num_samples})"


def empty_scores(features: Sequence[np.ndarray]) -> np.ndarray:
    """The score of programs with no store rows (nothing to run, or unanalysable): -inf."""
    return np.array([-np.inf if np.asarray(f).shape[0] == 0 else 0.0 for f in features])
