"""The XGBoost cost model: per-store predictions summed per program ("pack-sum"), trained
with a pairwise ranking objective on the throughput normalised per task.

Objectives (``objective=``):

* ``"pack-rank"`` (default): score(P) = sum of the tree ensemble's output over P's store
  rows; loss = the RankNet logistic loss over pairs of programs of the same task, each pair
  weighted by how much their throughputs differ (``|log2 y_i - log2 y_j|``, capped), so the
  noise-level pairs weigh little. Gradients reach each row through the sum; the Newton step
  is taken at program level (each row's hessian is scaled by its program's row count), so a
  program with many rows does not overshoot.
* ``"pack-mse"``: Ansor's objective, the throughput-weighted squared error of the summed
  score against the normalised throughput.
* ``"rank"``: XGBoost's ``rank:pairwise`` on one aggregated vector per program
  (``program_features``), tasks as query groups.

See ``FEATURES.md`` for why pack-rank is the default. With no training data the model scores
with the analytic rule of ``simple_models`` (or at random: ``cold_start="random"``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import snapshot
from .base import CostModel, check_features, empty_scores
from .features import program_features
from .simple_models import analytic_scores

OBJECTIVES = ("pack-rank", "pack-mse", "rank")
_MAX_PAIRS_PER_GROUP = 200_000
_WEIGHT_CAP = 4.0  # log2 ratios beyond 16x weigh like 16x


def _xgb() -> Any:
    try:
        import xgboost
    except ImportError as err:  # pragma: no cover - the search extra installs it
        raise ImportError("the xgb cost model needs xgboost: pip install 'tensortune[search]'"
                          ) from err
    return xgboost


def ranking_pairs(labels: np.ndarray, groups: np.ndarray, seed: int = 0,
                  max_pairs: int = _MAX_PAIRS_PER_GROUP
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(better, worse, weight)`` of programs of the same group with different labels;
    weight = ``min(|log2 better - log2 worse|, 4)`` (a failed program counts as 1/64 of the
    best). At most ``max_pairs`` per group, sampled without replacement beyond that."""
    rng = np.random.default_rng(seed)
    better, worse, weight = [], [], []
    logy = np.log2(np.maximum(labels, 1.0 / 64))
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        if len(idx) < 2:
            continue
        i, j = np.triu_indices(len(idx), k=1)
        if len(i) > max_pairs:
            pick = rng.choice(len(i), size=max_pairs, replace=False)
            i, j = i[pick], j[pick]
        a, b = idx[i], idx[j]
        diff = logy[a] - logy[b]
        keep = diff != 0
        a, b, diff = a[keep], b[keep], diff[keep]
        swap = diff < 0
        better.append(np.where(swap, b, a))
        worse.append(np.where(swap, a, b))
        weight.append(np.minimum(np.abs(diff), _WEIGHT_CAP))
    if not better:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    return np.concatenate(better), np.concatenate(worse), np.concatenate(weight)


class _PackSumObjective:
    """The custom objective over store rows: program scores are the sums of their rows."""

    def __init__(self, kind: str, program_of_row: np.ndarray, labels: np.ndarray,
                 groups: np.ndarray, seed: int):
        self.kind = kind
        self.program_of_row = program_of_row
        self.n_programs = len(labels)
        self.labels = labels
        self.rows_per_program = np.bincount(program_of_row, minlength=self.n_programs)
        self.row_scale = self.rows_per_program[program_of_row].astype(np.float64)
        if kind == "pack-rank":
            self.better, self.worse, self.weight = ranking_pairs(labels, groups, seed)
            # each task's pairs together weigh like its programs (pairs grow with the square)
            pair_group = groups[self.better]
            total = np.bincount(pair_group, self.weight, minlength=groups.max() + 1)
            size = np.bincount(groups, minlength=groups.max() + 1)
            self.weight = self.weight * (size[pair_group] / np.maximum(total[pair_group], 1e-12))

    def __call__(self, preds: np.ndarray, dtrain: Any) -> tuple[np.ndarray, np.ndarray]:
        s = np.bincount(self.program_of_row, weights=preds, minlength=self.n_programs)
        if self.kind == "pack-mse":
            w = np.maximum(self.labels, 1e-3)
            g = (s - self.labels) * w
            h = w
        else:
            d = s[self.better] - s[self.worse]
            p = 1.0 / (1.0 + np.exp(np.clip(d, -50.0, 50.0)))  # sigmoid(-d)
            gw = self.weight * p
            hw = np.maximum(self.weight * p * (1.0 - p), 1e-16)
            n = self.n_programs
            g = np.bincount(self.worse, gw, n) - np.bincount(self.better, gw, n)
            h = np.bincount(self.better, hw, n) + np.bincount(self.worse, hw, n) + 1e-6
        rows = self.program_of_row
        return g[rows], h[rows] * self.row_scale


class XGBModel(CostModel):
    """XGBoost on per-store features with a ranking-aware objective (module docstring).

    ``prior`` (pack-rank only) starts every program's score at ``prior`` times its analytic
    score, so the trees learn a correction of the analytic rule (it helps most when few
    programs are measured); ``cores`` is the core count that rule assumes (default: this
    machine's, fixed at construction and saved in snapshots). ``min_retrain_growth`` > 0
    skips a retrain until the data has grown by that fraction (Ansor's adaptive training).
    ``nthread`` defaults to 1: the search runs next to measurements and other jobs."""

    name = "xgb"

    def __init__(self, objective: str = "pack-rank", num_rounds: int = 200,
                 max_depth: int = 4, eta: float = 0.1, min_child_weight: float = 0.0,
                 subsample: float = 0.8, colsample_bytree: float = 0.5, seed: int = 43,
                 nthread: int = 1, cold_start: str = "analytic", prior: float = 0.5,
                 min_retrain_growth: float = 0.0, cores: int | None = None,
                 num_parallel_tree: int = 1):
        super().__init__()
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}")
        if cold_start not in ("analytic", "random"):
            raise ValueError("cold_start must be 'analytic' or 'random'")
        self.objective = objective
        self.num_rounds = int(num_rounds)
        self.params: dict[str, Any] = {
            "max_depth": int(max_depth), "eta": float(eta),
            "min_child_weight": float(min_child_weight), "subsample": float(subsample),
            "colsample_bytree": float(colsample_bytree), "seed": int(seed),
            "gamma": 0.0, "lambda": 1.0, "tree_method": "hist",
            "num_parallel_tree": int(num_parallel_tree),
        }
        self.nthread = int(nthread)
        self.cold_start = cold_start
        self.prior = float(prior)
        self.min_retrain_growth = float(min_retrain_growth)
        self.cores = int(cores or os.cpu_count() or 1)
        self.booster: Any = None
        self._trained_on = 0
        self._rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------ training
    def _xgb_params(self) -> dict[str, Any]:
        params = dict(self.params)
        params["nthread"] = self.nthread
        params["verbosity"] = 0
        if self.objective == "rank":
            params["objective"] = "rank:pairwise"
            params["lambdarank_pair_method"] = "mean"
            params["lambdarank_num_pair_per_sample"] = 8
        else:
            params["disable_default_eval_metric"] = 1
            params["base_score"] = 0.0
        return params

    def _train(self) -> None:
        n = len(self.data)
        if n < 2:
            return
        if self.booster is not None and self.min_retrain_growth > 0 and \
                n < self._trained_on * (1.0 + self.min_retrain_growth):
            return
        xgb = _xgb()
        labels = self.data.labels()
        groups = self.data.group_ids()
        if self.objective == "rank":
            order = np.argsort(groups, kind="stable")
            x = np.stack([program_features(self.data.features[i]) for i in order])
            dtrain = xgb.DMatrix(x, label=labels[order], qid=groups[order])
            self.booster = xgb.train(self._xgb_params(), dtrain, self.num_rounds)
        else:
            feats = self.data.features
            program_of_row = np.repeat(np.arange(n), [f.shape[0] for f in feats])
            dtrain = xgb.DMatrix(np.concatenate(feats), base_margin=self._prior_margin(feats))
            obj = _PackSumObjective(self.objective, program_of_row, labels, groups,
                                    int(self.params["seed"]))
            self.booster = xgb.train(self._xgb_params(), dtrain, self.num_rounds, obj=obj)
        self._trained_on = n

    def _prior_margin(self, feats: Sequence[np.ndarray]) -> np.ndarray | None:
        """Each row's share of its program's analytic score, times ``prior``."""
        if not self.prior or self.objective != "pack-rank":
            return None
        scores = analytic_scores(feats, self.cores)
        scores = np.where(np.isfinite(scores), scores, 0.0) * self.prior
        counts = np.array([f.shape[0] for f in feats])
        return np.repeat(scores / np.maximum(counts, 1), counts)

    # ------------------------------------------------------------------ prediction
    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        feats = [check_features(f) for f in features]
        if not feats:
            return np.zeros(0)
        empty = np.isneginf(empty_scores(feats))
        if self.booster is None:
            if self.cold_start == "random":
                return np.where(empty, -np.inf, self._rng.random(len(feats)))
            return analytic_scores(feats, self.cores)
        xgb = _xgb()
        if self.objective == "rank":
            x = np.stack([program_features(f) for f in feats])
            scores = self.booster.predict(xgb.DMatrix(x), output_margin=True).astype(np.float64)
        else:
            dmat = xgb.DMatrix(np.concatenate(feats), base_margin=self._prior_margin(feats))
            preds = self.booster.predict(dmat, output_margin=True).astype(np.float64)
            program_of_row = np.repeat(np.arange(len(feats)), [f.shape[0] for f in feats])
            scores = np.bincount(program_of_row, weights=preds, minlength=len(feats))
        return np.where(empty, -np.inf, scores)

    # ------------------------------------------------------------------ snapshots
    def save(self, include_data: bool = False) -> bytes:
        config = {"objective": self.objective, "num_rounds": self.num_rounds,
                  "params": self.params, "nthread": self.nthread,
                  "cold_start": self.cold_start, "prior": self.prior,
                  "min_retrain_growth": self.min_retrain_growth, "cores": self.cores}
        meta: dict[str, Any] = {"config": config, "trained_on": self._trained_on}
        blobs: dict[str, bytes] = {}
        if self.booster is not None:
            blobs["booster"] = bytes(self.booster.save_raw("ubj"))
        return self._pack(meta, blobs, include_data)

    def load(self, data: bytes) -> None:
        meta, blobs, training = self._unpack(data)
        with snapshot.reading(self.name):
            config = meta["config"]
            objective = str(config["objective"])
            if objective not in OBJECTIVES:
                raise ValueError(f"unknown objective {objective!r}")
            self.objective = objective
            self.num_rounds = int(config["num_rounds"])
            self.params = {str(k): v for k, v in dict(config["params"]).items()}
            self.nthread = int(config.get("nthread", 1))
            self.cold_start = str(config.get("cold_start", "analytic"))
            self.prior = float(config.get("prior", 0.0))
            self.min_retrain_growth = float(config.get("min_retrain_growth", 0.0))
            self.cores = int(config.get("cores") or os.cpu_count() or 1)
            self._trained_on = int(meta.get("trained_on", 0))
        self.booster = None
        if "booster" in blobs:
            xgb = _xgb()
            booster = xgb.Booster(params={"nthread": self.nthread})
            try:
                booster.load_model(bytearray(blobs["booster"]))
            except xgb.core.XGBoostError as err:
                raise snapshot.SnapshotError(f"malformed XGBoost model in the snapshot: "
                                             f"{str(err).splitlines()[0]}") from None
            self.booster = booster
        self.data = training
