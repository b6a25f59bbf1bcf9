"""The issue's acceptance test: after training on the measured programs of one search, the
cost model ranks held-out measured programs of the same task (GEMM 256) correctly.

About 200 distinct schedules of one GEMM (``gemm_family``) are built and timed here, in this
run (nothing is cached across runs). They are timed for a single-core target: on a shared
two-core machine multi-threaded timings are dominated by contention, which no model can
predict. Each program is timed in three passes interleaved over all programs, and its time is
the minimum (load bursts slow whole stretches of a pass, not one program in every pass).
70% of the programs train the model in batches of 32, as a search feeds it after each
measured batch; the rest are held out. Pairs of held-out programs whose times differ by less
than 10% (noise level) are not scored.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from cost_model import analytic_scores, extract_features, make_cost_model, pairwise_accuracy
from schedule import compile_schedule, lower

from .gemm_family import build_schedule, sample_config

N = 256
PROGRAMS = 200
TARGET = "cpu -cores=1"
CORES = 1  # the models' analytic rule and prior assume the target's cores
BATCH = 32
PASSES = 3


def _measure(configs) -> tuple[list[np.ndarray], np.ndarray]:
    def compile_one(cfg):
        s, args = build_schedule(cfg, N)
        # features from the analysis form of lowering, as the search computes them
        return compile_schedule(s, args, target=TARGET), lower(s, args, unroll=False)

    with ThreadPoolExecutor(max_workers=2) as pool:  # the C compiler runs outside the GIL
        artifacts, funcs = zip(*pool.map(compile_one, configs), strict=True)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((N, N), dtype=np.float32)
    b = rng.standard_normal((N, N), dtype=np.float32)
    c = np.zeros((N, N), dtype=np.float32)
    expected = a @ b
    modules = []
    for art in artifacts:
        mod = art.load()
        mod(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3)
        modules.append(mod)
    best = np.full(len(modules), np.inf)
    for _ in range(PASSES):
        for i, mod in enumerate(modules):
            repeat = 2 if best[i] < 0.02 else 1  # slow programs: one timing per pass
            best[i] = min(best[i], *mod.time(a, b, c, number=1, repeat=repeat))
    features = [extract_features(func) for func in funcs]
    return features, 1.0 / best


@pytest.fixture(scope="module")
def measured_search() -> tuple[list[np.ndarray], np.ndarray]:
    rng = random.Random(2024)
    configs, seen = [], set()
    while len(configs) < PROGRAMS:
        cfg = sample_config(rng, N)
        if cfg not in seen:
            seen.add(cfg)
            configs.append(cfg)
    return _measure(configs)


def _split(n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(7).permutation(n)
    k = int(0.7 * n)
    return order[:k], order[k:]


def _train_online(name: str, features, throughputs, train: np.ndarray):
    model = make_cost_model(name, cores=CORES)
    for start in range(0, len(train), BATCH):
        batch = train[start:start + BATCH]
        model.update([features[i] for i in batch], throughputs[batch], group="gemm256")
    return model


@pytest.mark.slow
def test_xgb_ranks_held_out_programs_of_the_same_task(measured_search) -> None:
    features, throughputs = measured_search
    train, test = _split(len(features))
    spread = throughputs.max() / throughputs.min()
    assert spread > 10, f"the programs should range from poor to good, got {spread:.1f}x"
    model = _train_online("xgb", features, throughputs, train)
    held_out = [features[i] for i in test]
    accuracy = pairwise_accuracy(model.predict(held_out), throughputs[test], min_ratio=1.1)
    cold = pairwise_accuracy(analytic_scores(held_out, CORES), throughputs[test], 1.1)
    assert accuracy >= 0.8, f"pairwise accuracy {accuracy:.3f} (analytic rule: {cold:.3f})"


@pytest.mark.slow
def test_sklearn_model_and_cold_start_rule_rank_better_than_chance(measured_search) -> None:
    features, throughputs = measured_search
    train, test = _split(len(features))
    held_out = [features[i] for i in test]
    model = _train_online("sklearn", features, throughputs, train)
    accuracy = pairwise_accuracy(model.predict(held_out), throughputs[test], min_ratio=1.1)
    assert accuracy >= 0.75, f"sklearn pairwise accuracy {accuracy:.3f}"
    # the untrained models' cold-start rule already orders most pairs
    cold = make_cost_model("xgb", cores=CORES).predict(held_out)
    assert pairwise_accuracy(cold, throughputs[test], min_ratio=1.1) >= 0.65
