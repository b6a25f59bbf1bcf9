"""Search layer: search tasks, sketch rules, annotation sampling and evolutionary search.

Imports only ``cost_model`` and ``schedule`` (their top-level packages). The tuner drives a
policy through two calls::

    from search import SearchTask, make_policy
    policy = make_policy(SearchTask(workload, "cpu"), policy="sketch", cost_model="xgb")
    candidates = policy.propose(64)          # programs never measured before
    policy.update([c.steps for c in candidates], costs)   # costs: seconds, [] if failed
"""

from .policy import (
    Candidate,
    PastMeasurement,
    RandomPolicy,
    Scorer,
    SearchParams,
    SearchStats,
    SketchPolicy,
    make_scorer,
    steps_key,
)
from .rules import (
    RuleResult,
    SketchContext,
    generate_sketches,
    register_sketch_rule,
    unregister_sketch_rule,
)
from .sketch import InvalidProgram, Sketch, SketchOp, decision_space, instantiate, sampler
from .space import ChoiceDecision, Decision, TileDecision
from .task import SearchTask

#: The policies by name (``tensortune tune --policy``).
POLICIES = {"sketch": SketchPolicy, "random": RandomPolicy}
#: The cost models a policy can be guided by (``tensortune tune --cost-model``).
COST_MODELS = ("xgb", "sklearn", "analytic", "random")


def make_policy(task: SearchTask, policy: str = "sketch", cost_model: str = "xgb",
                seed: int = 0, params: SearchParams | None = None) -> SketchPolicy:
    """A search policy by name for ``task``, guided by the cost model ``cost_model``."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; one of {', '.join(POLICIES)}")
    if cost_model not in COST_MODELS:
        raise ValueError(f"unknown cost model {cost_model!r}; one of {', '.join(COST_MODELS)}")
    if policy == "random":  # samples blindly: a cost model would only cost training time
        cost_model = "random"
    return POLICIES[policy](task, cost_model, seed=seed, params=params)


__all__ = [
    "COST_MODELS",
    "POLICIES",
    "Candidate",
    "ChoiceDecision",
    "Decision",
    "InvalidProgram",
    "PastMeasurement",
    "RandomPolicy",
    "RuleResult",
    "Scorer",
    "SearchParams",
    "SearchStats",
    "SearchTask",
    "Sketch",
    "SketchContext",
    "SketchOp",
    "SketchPolicy",
    "TileDecision",
    "decision_space",
    "generate_sketches",
    "instantiate",
    "make_policy",
    "make_scorer",
    "register_sketch_rule",
    "sampler",
    "steps_key",
    "unregister_sketch_rule",
]
