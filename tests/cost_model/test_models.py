"""The cost models behind one interface: registry, training, cold start, snapshots."""

from __future__ import annotations

import json
import pickle
import random

import numpy as np
import pytest

import cost_model
from cost_model import (
    N_FEATURES,
    CostModel,
    ProgramScorer,
    SnapshotError,
    TrainingData,
    analytic_scores,
    available_cost_models,
    average_peak,
    extract_features,
    load_cost_model,
    make_cost_model,
    pairwise_accuracy,
    register_cost_model,
    top_k_recall,
)
from cost_model.sklearn_model import _TreeArrays
from cost_model.xgb_model import _PackSumObjective, ranking_pairs
from schedule import lower

from .gemm_family import build_schedule, sample_config

LEARNED = ["xgb", "sklearn"]


@pytest.fixture(scope="module")
def programs() -> tuple[list[np.ndarray], np.ndarray]:
    """Features of 60 GEMM 64 schedules with a synthetic throughput: the analytic estimate
    times a feature-dependent factor and noise (no timing needed to test the plumbing)."""
    rng = random.Random(5)
    feats = []
    while len(feats) < 60:
        s, args = build_schedule(sample_config(rng, 64), 64)
        feats.append(extract_features(lower(s, args)))
    noise = np.random.default_rng(0).uniform(0.8, 1.25, len(feats))
    thr = np.exp2(analytic_scores(feats, cores=1)) * noise
    thr *= np.array([1.0 + f.shape[0] % 3 for f in feats])
    return feats, thr


def test_registry_names_and_errors() -> None:
    assert {"xgb", "sklearn", "random", "analytic"} <= set(available_cost_models())
    for name in available_cost_models():
        model = make_cost_model(name)
        assert isinstance(model, CostModel) and model.name == name
    with pytest.raises(ValueError, match="unknown cost model 'nope'"):
        make_cost_model("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_cost_model("xgb", cost_model.XGBModel)
    with pytest.raises(ValueError, match="unknown objective"):
        make_cost_model("xgb", objective="hinge")


def test_a_user_model_can_be_registered() -> None:
    class Constant(cost_model.RandomModel):
        name = "constant-test"

        def predict(self, features):
            return np.ones(len(features))

    register_cost_model("constant-test", Constant)
    model = make_cost_model("constant-test")
    assert model.predict([np.zeros((1, N_FEATURES), np.float32)]).tolist() == [1.0]


@pytest.mark.parametrize("name", ["xgb", "sklearn", "analytic", "random"])
def test_cold_start_predicts_without_data(name: str, programs) -> None:
    feats, thr = programs
    scores = make_cost_model(name).predict(feats)
    assert scores.shape == (len(feats),) and np.isfinite(scores).all()
    if name != "random":  # the analytic rule orders programs before any measurement
        assert pairwise_accuracy(scores, thr, 1.1) > 0.6


@pytest.mark.parametrize("name", LEARNED)
def test_training_learns_the_order(name: str, programs) -> None:
    feats, thr = programs
    model = make_cost_model(name)
    model.update(feats[:25], thr[:25], group="task")
    model.update(feats[25:45], thr[25:45], group="task")  # online: data accumulates
    assert model.num_samples == 45
    assert pairwise_accuracy(model.predict(feats[:45]), thr[:45], 1.1) > 0.85
    assert pairwise_accuracy(model.predict(feats[45:]), thr[45:], 1.1) > 0.6


@pytest.mark.parametrize("name", [*LEARNED, "analytic", "random"])
@pytest.mark.parametrize("include_data", [False, True])
def test_snapshot_round_trip_predicts_identically(name: str, include_data: bool,
                                                   programs) -> None:
    feats, thr = programs
    model = make_cost_model(name)
    model.fit(feats[:40], thr[:40], group="task")
    blob = model.save(include_data=include_data)
    assert isinstance(blob, bytes)
    json.loads(blob)  # plain JSON, no pickle
    restored = load_cost_model(blob)
    assert type(restored) is type(model)
    if name != "random":
        np.testing.assert_array_equal(model.predict(feats), restored.predict(feats))
    assert restored.num_samples == (40 if include_data else 0)
    if include_data:
        restored.update(feats[40:], thr[40:], group="task")  # keeps training on old + new
        assert restored.num_samples == len(feats)
    again = make_cost_model(name)
    again.load(blob)  # in place, into a fresh model
    if name != "random":
        np.testing.assert_array_equal(model.predict(feats), again.predict(feats))


def test_training_is_deterministic(programs) -> None:
    feats, thr = programs
    a, b = make_cost_model("xgb"), make_cost_model("xgb")
    a.fit(feats, thr)
    b.fit(feats, thr)
    np.testing.assert_array_equal(a.predict(feats), b.predict(feats))


def test_snapshots_are_checked_before_use(programs) -> None:
    feats, thr = programs
    model = make_cost_model("xgb")
    model.fit(feats[:20], thr[:20])
    blob = model.save()
    for bad in (b"", b"not json", pickle.dumps({"kind": "xgb"}), b"[1, 2]",
                json.dumps({"format": "something-else"}).encode()):
        with pytest.raises(SnapshotError):
            load_cost_model(bad)
    with pytest.raises(SnapshotError, match="holds a 'xgb' cost model"):
        make_cost_model("sklearn").load(blob)
    doc = json.loads(blob)
    doc["meta"]["feature_set"] = "0" * 16
    with pytest.raises(SnapshotError, match="other features"):
        load_cost_model(json.dumps(doc).encode())
    doc = json.loads(blob)
    doc["blobs"]["booster"] = "AAAA"
    with pytest.raises(SnapshotError):
        load_cost_model(json.dumps(doc).encode())
    doc = json.loads(blob)
    doc["version"] = 99
    with pytest.raises(SnapshotError, match="version"):
        load_cost_model(json.dumps(doc).encode())


def test_labels_are_normalised_per_group_and_failures_are_zero() -> None:
    data = TrainingData()
    row = np.zeros((1, N_FEATURES), np.float32)
    data.add([row] * 3, [10.0, 5.0, 0.0], group="a")
    data.add([row] * 3, [2.0, float("nan"), 1.0], group=["b", "b", "b"])
    np.testing.assert_allclose(data.labels(), [1.0, 0.5, 0.0, 1.0, 0.0, 0.5])
    with pytest.raises(ValueError, match="throughputs"):
        data.add([row], [1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        data.add([np.zeros((1, 3))], [1.0])


def test_programs_without_rows_score_minus_infinity(programs) -> None:
    feats, thr = programs
    empty = np.zeros((0, N_FEATURES), np.float32)
    for name in ("xgb", "analytic", "random"):
        model = make_cost_model(name)
        if name == "xgb":
            model.fit(feats[:20], thr[:20])
        scores = model.predict([feats[0], empty])
        assert np.isfinite(scores[0]) and scores[1] == -np.inf
    assert make_cost_model("xgb").predict([]).shape == (0,)


def test_sklearn_tree_export_matches_sklearn(programs) -> None:
    from sklearn.ensemble import HistGradientBoostingRegressor

    x = np.random.default_rng(1).normal(size=(200, 6))
    x[::9, 2] = np.nan
    y = x[:, 0] * 2 + np.nan_to_num(x[:, 2]) + np.random.default_rng(2).normal(size=200)
    est = HistGradientBoostingRegressor(max_iter=30, random_state=0).fit(x, y)
    trees = _TreeArrays.from_estimator(est)
    np.testing.assert_allclose(trees.predict(x), est.predict(x), rtol=1e-9, atol=1e-9)


def test_pairwise_objective_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(3)
    rows_per_program = np.array([1, 3, 2, 1, 2])
    program_of_row = np.repeat(np.arange(5), rows_per_program)
    labels = np.array([1.0, 0.5, 0.25, 0.0, 0.8])
    groups = np.array([0, 0, 0, 1, 1])
    obj = _PackSumObjective("pack-rank", program_of_row, labels, groups, seed=0)

    def loss(preds: np.ndarray) -> float:
        s = np.bincount(program_of_row, weights=preds)
        d = s[obj.better] - s[obj.worse]
        return float(np.sum(obj.weight * np.log1p(np.exp(-d))))

    preds = rng.normal(size=len(program_of_row))
    grad, hess = obj(preds, None)
    eps = 1e-6
    for r in range(len(preds)):
        step = np.zeros_like(preds)
        step[r] = eps
        numeric = (loss(preds + step) - loss(preds - step)) / (2 * eps)
        assert grad[r] == pytest.approx(numeric, rel=1e-4, abs=1e-8)
    assert (hess > 0).all()
    better, worse, weight = ranking_pairs(labels, groups)
    assert set(zip(better.tolist(), worse.tolist(), strict=True)) == {
        (0, 1), (0, 2), (1, 2), (4, 3)}
    assert weight.max() == 4.0  # a failed program is capped at 16x worse


def test_metrics() -> None:
    t = np.array([1.0, 2.0, 4.0, 4.2])
    assert pairwise_accuracy(t, t) == 1.0
    assert pairwise_accuracy(-t, t) == 0.0
    assert pairwise_accuracy(np.zeros(4), t) == 0.5  # ties count half
    # (4.0, 4.2) differ by 5%: ignored at min_ratio 1.1
    assert pairwise_accuracy(np.array([1.0, 2.0, 4.2, 4.0]), t, min_ratio=1.1) == 1.0
    assert pairwise_accuracy(np.array([1.0, 2.0, 4.2, 4.0]), t) == pytest.approx(5 / 6)
    assert np.isnan(pairwise_accuracy(np.ones(2), np.ones(2)))
    assert top_k_recall(t, t, 2) == 1.0
    assert average_peak(-t, t, 1) == pytest.approx(0.25 / 1.05, rel=1e-2)


def test_program_scorer_works_on_lowered_programs(programs) -> None:
    """The search's interface: predict / update on lowered programs, features computed once
    per program object."""
    _, thr = programs
    rng = random.Random(5)
    funcs = [lower(*build_schedule(sample_config(rng, 64), 64), unroll=False)
             for _ in range(12)]
    scorer = ProgramScorer("xgb", group="gemm64")
    cold = scorer.predict(funcs)
    assert cold.shape == (12,) and np.isfinite(cold).all()
    scorer.update(funcs[:8], list(thr[:8]))
    assert scorer.model.num_samples == 8
    first = scorer.features(funcs[:1])[0]
    assert scorer.features(funcs[:1])[0] is first  # cached
    assert scorer.predict(funcs).shape == (12,)
    assert isinstance(ProgramScorer(make_cost_model("random")).model, cost_model.RandomModel)
