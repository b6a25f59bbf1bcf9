"""Ranking metrics of a cost model's scores against measured throughputs of one task."""

from __future__ import annotations

import numpy as np


def pairwise_accuracy(scores: np.ndarray, throughputs: np.ndarray,
                      min_ratio: float = 1.0) -> float:
    """The share of program pairs that the scores order like the throughputs, over the pairs
    whose throughputs differ by more than ``min_ratio`` (1.1: ignore noise-level pairs).
    Tied scores count half. NaN when no pair qualifies."""
    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(throughputs, dtype=np.float64)
    if s.shape != t.shape:
        raise ValueError(f"{s.size} scores but {t.size} throughputs")
    i, j = np.triu_indices(len(t), k=1)
    hi, lo = np.maximum(t[i], t[j]), np.minimum(t[i], t[j])
    keep = hi > lo * min_ratio
    if min_ratio <= 1.0:
        keep &= hi > lo
    if not keep.any():
        return float("nan")
    i, j = i[keep], j[keep]
    sign_t = np.sign(t[i] - t[j])
    sign_s = np.sign(s[i] - s[j])
    agree = np.where(sign_s == 0, 0.5, (sign_s == sign_t).astype(np.float64))
    return float(agree.mean())


def top_k_recall(scores: np.ndarray, throughputs: np.ndarray, k: int) -> float:
    """The share of the k fastest programs that are among the k best-scored."""
    s = np.asarray(scores)
    t = np.asarray(throughputs)
    k = min(k, len(t))
    if k == 0:
        return float("nan")
    best = set(np.argsort(-t, kind="stable")[:k].tolist())
    picked = set(np.argsort(-s, kind="stable")[:k].tolist())
    return len(best & picked) / k


def average_peak(scores: np.ndarray, throughputs: np.ndarray, k: int) -> float:
    """Ansor's a-peak@k: the best throughput among the k best-scored programs, over the best
    throughput of all (1.0 = the model's top k contain the fastest program)."""
    s = np.asarray(scores)
    t = np.asarray(throughputs, dtype=np.float64)
    if len(t) == 0 or t.max() <= 0:
        return float("nan")
    picked = np.argsort(-s, kind="stable")[:k]
    return float(t[picked].max() / t.max())
