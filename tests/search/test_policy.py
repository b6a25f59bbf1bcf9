"""The search policies' interface: propose / notify, no program proposed twice, variation
operators that keep programs valid, and guidance by the scorer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from schedule import Workload, loop_ir
from search.policy import RandomPolicy, SearchParams, SketchPolicy, steps_key
from search.task import SearchTask

SMALL = SearchParams(population=24, generations=2)


def _task() -> SearchTask:
    return SearchTask(Workload.op("matmul", M=64, N=64, K=32), "cpu")


def test_propose_never_repeats_a_program_across_rounds():
    policy = SketchPolicy(_task(), seed=1, params=SMALL)
    seen: set[str] = set()
    for _ in range(3):
        batch = policy.propose(8)
        assert len(batch) == 8
        keys = {c.key for c in batch}
        assert len(keys) == 8 and not keys & seen
        seen |= keys
        policy.notify(batch, [1e-3 for _ in batch])
    assert policy.stats.proposals == 24


def test_the_policy_keeps_lowered_programs_only_for_what_it_proposed():
    # a long search must not hold every program its populations ever contained
    policy = SketchPolicy(_task(), seed=2, params=SMALL)
    proposed = 0
    for _ in range(4):
        batch = policy.propose(4)
        proposed += len(batch)
        policy.notify(batch, [1e-3 for _ in batch])
        assert len(policy._programs) <= proposed
    assert policy.stats.sampled > proposed  # the populations were much larger than that


def test_notify_accepts_failures_and_programs_it_did_not_build():
    task = _task()
    policy = SketchPolicy(task, seed=2, params=SMALL)
    other = RandomPolicy(task, seed=3, params=SMALL).propose(2)
    policy.notify(other, [2.1e-3, None])
    assert policy.measured[other[0].key] > 0 and policy.measured[other[1].key] == 0
    assert steps_key(other[0].steps) not in {c.key for c in policy.propose(6)}


def test_mutation_and_crossover_give_valid_programs_of_the_same_sketch():
    policy = SketchPolicy(_task(), seed=4, params=SMALL)
    parents = [c for c in (policy.sample() for _ in range(12)) if c is not None]
    for parent in parents:
        child = policy._mutate(parent)
        assert child is not None and child.sketch == parent.sketch
    same = [c for c in parents if c.sketch == parents[0].sketch]
    if len(same) >= 2:
        child = policy._crossover(same[0], same[1])
        assert child is not None
        for name, value in child.decisions.items():
            assert value in (same[0].decisions.get(name), same[1].decisions.get(name)) \
                or name not in same[0].decisions or name not in same[1].decisions


class VectorLoving:
    """A scorer that prefers programs with more vectorized loops (a stand-in for a trained
    model): the evolutionary search must follow it."""

    def predict(self, programs):
        return np.array([sum(isinstance(st, loop_ir.For) and st.kind == "vectorized"
                             for st in loop_ir.walk_stmts(p.body)) for p in programs], float)

    def update(self, programs, throughputs):
        return None


def test_the_search_follows_its_scorer():
    guided = SketchPolicy(_task(), VectorLoving(), seed=5, params=SMALL).propose(8)
    random_ = RandomPolicy(_task(), seed=5, params=SMALL).propose(8)
    scorer = VectorLoving()
    pg = SketchPolicy(_task(), seed=6, params=SMALL)
    score = lambda cands: scorer.predict([pg._lower_steps(c.steps) for c in cands]).mean()  # noqa: E731
    assert score(guided) >= score(random_)


def test_warm_start_rebuilds_past_programs_as_seeds_and_never_reproposes_them():
    from search import PastMeasurement, make_policy

    task = SearchTask(Workload.op("matmul", M=32, N=32, K=32), "cpu")
    first = make_policy(task, "sketch", "random", seed=1)
    cands = first.propose(8)
    past = [PastMeasurement(c.steps, 1e-3 * (n + 1), json.loads(json.dumps(c.origin)))
            for n, c in enumerate(cands)]
    past.append(PastMeasurement(cands[0].steps, None, None))  # a failure without origin
    second = make_policy(task, "sketch", "random", seed=2)
    assert second.warm_start(past) == len(cands)
    seeds = {k for k, c in second.known.items() if second.measured.get(k, 0) > 0}
    assert {c.key for c in cands[1:]} <= seeds
    fresh = second.propose(16)
    assert not {c.key for c in fresh} & {c.key for c in cands}


def test_make_policy_rejects_unknown_names():
    from search import make_policy

    task = SearchTask(Workload.op("matmul", M=8, N=8, K=8), "cpu")
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy(task, "genetic")
    with pytest.raises(ValueError, match="unknown cost model"):
        make_policy(task, "sketch", "lightgbm")


def test_the_first_round_tries_every_sketch():
    """The cold cost model cannot compare structures it has never measured: a tensorized
    int8 nest and plain vector loops. Each sketch is proposed once early, whatever the
    model's ranking; later rounds follow the ranking alone."""
    wl = Workload.op("conv2d_nchw4c_int8", N=1, C=32, H=14, W=14, K=32, R=3, S=3, padding=1)
    task = SearchTask(wl, "cpu -isa=avx512 -cores=2")
    for seed in range(3):
        policy = SketchPolicy(task, seed=seed, params=SMALL)
        assert len(policy.sketches) == 5
        first = policy.propose(10)
        assert {c.sketch for c in first} == set(range(5))
    # fewer picks than sketches: at most half of them are given to untried sketches
    policy = SketchPolicy(task, seed=0, params=SMALL)
    assert len(policy.propose(1)) == 1


def test_a_related_tasks_best_program_is_adapted_and_measured_here():
    donor = SketchPolicy(_task(), seed=4, params=SMALL)
    batch = donor.propose(8)
    donor.notify(batch, [1e-3 * (n + 1) for n in range(len(batch))])  # the first is fastest
    (best,) = donor.best_candidates(1)
    assert best.key == batch[0].key
    # another K: the reduction tile may not fit 40 and is then drawn again
    here = SketchPolicy(SearchTask(Workload.op("matmul", M=64, N=64, K=40), "cpu"), seed=5,
                        params=SMALL)
    here.suggest([best])
    picks = here.propose(8)  # an eighth of the batch is kept for adapted suggestions
    k_name = next(name for name in best.decisions if name.startswith("tile:")
                  and name.endswith(":k"))
    kept = [name for name in best.decisions if name != k_name]
    adapted = [c for c in picks if c.sketch_name == best.sketch_name
               and all(c.decisions[name] == best.decisions[name] for name in kept)]
    assert adapted
    assert here.spaces[adapted[0].sketch][k_name].is_valid(adapted[0].decisions[k_name])
    # measured here, it is never proposed again
    here.notify(picks, [1e-3] * len(picks))
    assert not {c.key for c in here.propose(8)} & {c.key for c in picks}


def test_suggestions_of_an_unrelated_kind_of_program_are_ignored():
    softmax = SketchPolicy(SearchTask(Workload.op("softmax", M=16, N=64), "cpu"), seed=6,
                           params=SMALL)
    batch = softmax.propose(4)
    softmax.notify(batch, [1e-4] * len(batch))
    here = SketchPolicy(_task(), seed=7, params=SMALL)
    here.suggest(softmax.best_candidates(2))
    assert here._adapt_suggestions() == []  # no decision of a softmax fits a matmul
    assert len(here.propose(8)) == 8
