"""Search layer: search tasks, sketch rules, annotation sampling and evolutionary search.

Imports only ``cost_model`` and ``schedule`` (their top-level packages). The tuner drives a
policy (``SearchPolicy``) through two calls::

    from search import SearchTask, make_policy
    policy = make_policy(SearchTask(workload, target), policy="sketch", cost_model="xgb")
    candidates = policy.propose(64)          # programs never measured before
    policy.notify(candidates, latencies)     # median seconds of each, None if it failed
"""

from cost_model import CostModel

from .base import Candidate, PastMeasurement, SearchPolicy, SearchStats, steps_key
from .policy import (
    RandomPolicy,
    Scorer,
    SearchParams,
    SketchCandidate,
    SketchPolicy,
    make_scorer,
    make_task_model,
)
from .registry import (
    POLICIES,
    PolicyFactory,
    policy_kinds,
    register_policy,
    searchable_kinds,
    unregister_policy,
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
from .vta import VtaPolicy, template_space

#: The cost models a policy can be guided by (``tensortune tune --cost-model``).
COST_MODELS = ("xgb", "sklearn", "analytic", "random")


def make_policy(task: SearchTask, policy: str = "sketch", cost_model: str = "xgb",
                seed: int = 0, params: SearchParams | None = None, *,
                shared_model: CostModel | None = None) -> SearchPolicy:
    """A search policy by name for ``task``, guided by the cost model ``cost_model``.
    ``shared_model`` (a ``cost_model`` of that name): the model several tasks train and
    predict with together, each under its own workload key (programs are only ranked
    within their task), so what one task measured guides the others' first trials;
    policies with a cost model of their own kind (vta's) ignore it."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; one of {', '.join(POLICIES)}")
    if cost_model not in COST_MODELS:
        raise ValueError(f"unknown cost model {cost_model!r}; one of {', '.join(COST_MODELS)}")
    if task.target.kind not in policy_kinds(policy):
        raise ValueError(f"policy {policy!r} cannot search {task.target.kind} targets "
                         f"(it searches: {', '.join(policy_kinds(policy))})")
    if policy == "random":  # samples blindly: a cost model would only cost training time
        cost_model, shared_model = "random", None
    scorer: str | Scorer = cost_model
    if shared_model is not None and cost_model != "random":
        scorer = make_scorer(task, cost_model, seed, model=shared_model)
    return POLICIES[policy](task, scorer, seed=seed, params=params)


__all__ = [
    "COST_MODELS",
    "POLICIES",
    "Candidate",
    "ChoiceDecision",
    "Decision",
    "InvalidProgram",
    "PastMeasurement",
    "PolicyFactory",
    "RandomPolicy",
    "RuleResult",
    "Scorer",
    "SearchParams",
    "SearchPolicy",
    "SearchStats",
    "SearchTask",
    "Sketch",
    "SketchCandidate",
    "SketchContext",
    "SketchOp",
    "SketchPolicy",
    "TileDecision",
    "VtaPolicy",
    "decision_space",
    "generate_sketches",
    "instantiate",
    "make_policy",
    "make_scorer",
    "make_task_model",
    "policy_kinds",
    "register_policy",
    "register_sketch_rule",
    "sampler",
    "searchable_kinds",
    "steps_key",
    "template_space",
    "unregister_policy",
    "unregister_sketch_rule",
]
