"""Cost-model layer: program features, the XGBoost cost model and baselines.

    from cost_model import extract_features, make_cost_model
    rows = extract_features(lower(s, args))        # (store sites, N_FEATURES) float32
    model = make_cost_model("xgb")                  # or "sklearn", "analytic", "random"
    model.update([rows, ...], throughputs, group=task_key)   # after each measured batch
    scores = model.predict([rows, ...])             # higher = predicted faster
    blob = model.save(); load_cost_model(blob)      # snapshots as bytes, no pickle
    scorer = ProgramScorer(make_cost_model("xgb", cores=target.cores), group=task_key)
    scorer.predict([lower(s, args, unroll=False), ...])   # on lowered programs (the search)

The features are documented in ``FEATURES.md``; ``cost_model.vta`` has the accelerator's
(``vta_features``, ``VtaCostModel``). Imports only ``schedule`` (its top-level
package).
"""

from .base import CostModel, TrainingData
from .features import (
    FEATURE_NAMES,
    N_FEATURES,
    N_PROGRAM_FEATURES,
    PROGRAM_FEATURE_NAMES,
    extract_features,
    program_features,
)
from .metrics import average_peak, pairwise_accuracy, top_k_recall
from .registry import (
    available_cost_models,
    load_cost_model,
    make_cost_model,
    register_cost_model,
)
from .scorer import ProgramScorer
from .simple_models import AnalyticModel, RandomModel, analytic_scores
from .sklearn_model import SklearnModel
from .snapshot import SnapshotError
from .vta import VTA_FEATURE_NAMES, VtaCostModel, template_facts, vta_features
from .xgb_model import XGBModel

__all__ = [
    "FEATURE_NAMES",
    "N_FEATURES",
    "N_PROGRAM_FEATURES",
    "PROGRAM_FEATURE_NAMES",
    "VTA_FEATURE_NAMES",
    "AnalyticModel",
    "CostModel",
    "ProgramScorer",
    "RandomModel",
    "SklearnModel",
    "SnapshotError",
    "TrainingData",
    "VtaCostModel",
    "XGBModel",
    "analytic_scores",
    "available_cost_models",
    "average_peak",
    "extract_features",
    "load_cost_model",
    "make_cost_model",
    "pairwise_accuracy",
    "program_features",
    "register_cost_model",
    "template_facts",
    "top_k_recall",
    "vta_features",
]
