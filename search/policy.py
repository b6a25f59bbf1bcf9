"""The sketch search policies: ``SketchPolicy`` and ``RandomPolicy`` (see ``search.base``
for the interface the tuner drives: ``propose(n)``, ``notify(candidates, costs)``).

``SketchPolicy`` keeps a population of programs (sketch + decisions), evolves it with
mutations (tile sizes, parallel granularity, auto-unroll depth, compute locations) and
crossover between programs of the same sketch (each stage's decisions taken from one
parent: the node-based crossover of the Ansor paper, which its released code never had),
ranks offspring with a cost model, and proposes the best programs not measured yet, plus
an epsilon-greedy share of random ones. ``RandomPolicy`` samples programs uniformly.
"""

from __future__ import annotations

import collections
import heapq
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from cost_model import CostModel, ProgramScorer, make_cost_model
from schedule import Steps, lower, lower_gpu, make_schedule

from .base import (
    Candidate,
    PastMeasurement,
    SearchPolicy,
    SearchStats,
    steps_key,
)
from .prior import RegisterTiles
from .registry import register_policy
from .rules import generate_sketches
from .sketch import InvalidProgram, Sketch, decision_space, instantiate, sampler
from .space import ChoiceDecision, Decision, TileDecision
from .task import SearchTask


@dataclass(frozen=True, eq=False)
class SketchCandidate(Candidate):
    """A program of a sketch policy: its sketch (index and name) and decision values."""

    sketch: int = 0
    sketch_name: str = ""
    decisions: dict[str, Any] = field(default_factory=dict)

    @property
    def origin(self) -> dict[str, Any]:
        """How this program was made, as JSON (stored with its record for warm starts)."""
        return {"sketch": self.sketch_name,
                "decisions": {name: _to_json(value) for name, value in self.decisions.items()}}


class Scorer(Protocol):
    """What the policy needs from a cost model: scores (higher is faster) for lowered
    programs, and training on measured ones. A scorer with a ``model`` (a
    ``cost_model.CostModel``, as ``ProgramScorer`` has) lets the policy export and import
    what it learned."""

    def predict(self, programs: list[Any]) -> np.ndarray: ...

    def update(self, programs: list[Any], throughputs: list[float]) -> None: ...


class RandomScorer:
    """The baseline: random scores, learns nothing."""

    def __init__(self, seed: int = 0):
        self._rng = np.random.default_rng(seed)

    def predict(self, programs: list[Any]) -> np.ndarray:
        return self._rng.random(len(programs))

    def update(self, programs: list[Any], throughputs: list[float]) -> None:
        return None


def make_task_model(task: SearchTask, name: str) -> CostModel:
    """A new cost model by name for programs of ``task``'s target."""
    kwargs = {"cores": task.cores if task.target.kind == "cpu" else 1}
    try:
        return make_cost_model(name, **kwargs)
    except TypeError:  # a model that does not take the core count
        return make_cost_model(name)


def make_scorer(task: SearchTask, name: str, seed: int = 0,
                model: CostModel | None = None) -> Scorer:
    """A cost model by name, wrapped to score lowered programs of ``task``. ``model``: an
    existing cost model to use instead of a new one (shared by the tasks of a job: each
    trains it under its own workload key, so labels are normalised per task)."""
    if name == "random":
        return RandomScorer(seed)
    return ProgramScorer(model if model is not None else make_task_model(task, name),
                         group=task.workload.key)


@dataclass
class SearchParams:
    population: int = 128
    generations: int = 3
    mutation_probability: float = 0.85
    crossover_probability: float = 0.15
    eps_greedy: float = 0.05
    measured_seed_ratio: float = 0.2
    #: the share of random samples whose register tiles come from ``prior.RegisterTiles``
    register_prior: float = 0.5
    mutation_weights: dict[str, float] = field(default_factory=lambda: {
        "tile": 0.85, "unroll": 0.05, "location": 0.05, "parallel": 0.03, "other": 0.02})


class SketchPolicy(SearchPolicy):
    """Evolutionary search over the sketches of one task, guided by a cost model."""

    def __init__(self, task: SearchTask, scorer: Scorer | str | None = None, seed: int = 0,
                 params: SearchParams | None = None):
        """``scorer``: a Scorer, or a cost model name (``xgb`` by default, ``sklearn``,
        ``analytic``, ``random``) trained on this task's measurements."""
        self.task = task
        self.scorer: Scorer = make_scorer(task, scorer or "xgb", seed) \
            if not hasattr(scorer, "predict") else scorer
        self.params = params or SearchParams()
        self.rng = random.Random(seed)
        self.sketches: list[Sketch] = generate_sketches(task)
        self.spaces: list[dict[str, Decision]] = [decision_space(task, sk)
                                                  for sk in self.sketches]
        self.measured: dict[str, float] = {}  # steps key -> throughput (0 for failures)
        self.known: dict[str, SketchCandidate] = {}  # every candidate this policy built
        self.stats = SearchStats()
        self._programs: dict[str, Any] = {}  # steps key -> lowered program (features input)
        self._tried_sketches: set[int] = set()  # sketches with a program proposed or known
        self._suggested: list[dict[str, Any]] = []  # origins of related tasks' programs
        self._register_tiles = RegisterTiles(task)

    # ------------------------------------------------------------------ building programs
    def _build(self, sketch: int, decisions: dict[str, Any]) -> SketchCandidate | None:
        decisions = dict(decisions)
        space = self.spaces[sketch]
        try:
            s, args = instantiate(self.task, self.sketches[sketch],
                                  sampler(decisions, space, self.rng))
            cand = SketchCandidate(Steps(s.steps), sketch, self.sketches[sketch].name,
                                   decisions)
            if cand.key not in self._programs:  # evolution often meets a program again
                program = lower(s, args, unroll=False)
                if self.task.target.is_gpu:  # over a limit, racing: never measured
                    lower_gpu(program, self.task.target)
                self._programs[cand.key] = program
        except (InvalidProgram, ValueError):
            self.stats.invalid += 1
            return None
        self.known.setdefault(cand.key, cand)
        return cand

    def sample(self) -> SketchCandidate | None:
        """A random program: a random sketch with every decision drawn at random (its
        register tiles, ``register_prior`` of the time, from ``prior.RegisterTiles``)."""
        self.stats.sampled += 1
        sketch = self.rng.randrange(len(self.sketches))
        decisions = self._register_tiles.draw(self.sketches[sketch], self.spaces[sketch],
                                               self.rng) \
            if self.rng.random() < self.params.register_prior else {}
        return self._build(sketch, decisions)

    def _sample_many(self, n: int, attempts: int | None = None) -> list[SketchCandidate]:
        out: list[SketchCandidate] = []
        for _ in range(attempts or n * 4):
            if len(out) >= n:
                break
            cand = self.sample()
            if cand is not None:
                out.append(cand)
        return out

    # ------------------------------------------------------------------ variation
    def _mutate(self, parent: SketchCandidate) -> SketchCandidate | None:
        space = self.spaces[parent.sketch]
        if not space:
            return None
        groups: dict[str, list[str]] = {}
        for name in space:
            kind = name.split(":", 1)[0]
            groups.setdefault(kind if kind in self.params.mutation_weights else "other",
                              []).append(name)
        kinds = [k for k in groups if any(_mutable(space[n]) for n in groups[k])]
        if not kinds:
            return None
        weights = [self.params.mutation_weights[k] for k in kinds]
        kind = self.rng.choices(kinds, weights)[0]
        name = self.rng.choice([n for n in groups[kind] if _mutable(space[n])])
        decisions = dict(parent.decisions)
        decisions[name] = space[name].mutate(parent.decisions.get(name), self.rng) \
            if name in parent.decisions else space[name].sample(self.rng)
        return self._build(parent.sketch, decisions)

    def _crossover(self, a: SketchCandidate, b: SketchCandidate) -> SketchCandidate | None:
        """Per stage, take all of that stage's decisions from one parent."""
        by_stage: dict[str, list[str]] = {}
        for name in sorted(set(a.decisions) | set(b.decisions)):  # same order in any process
            by_stage.setdefault(name.split(":")[1] if ":" in name else name, []).append(name)
        child: dict[str, Any] = {}
        for names in by_stage.values():
            donor = a if self.rng.random() < 0.5 else b
            for name in names:
                if name in donor.decisions:
                    child[name] = donor.decisions[name]
        return self._build(a.sketch, child)

    # ------------------------------------------------------------------ scoring
    def _scores(self, cands: list[SketchCandidate]) -> np.ndarray:
        if not cands:
            return np.zeros(0)
        return np.asarray(self.scorer.predict([self._programs[c.key] for c in cands]),
                          dtype=float)

    def _select(self, population: list[SketchCandidate], scores: np.ndarray) -> SketchCandidate:
        weights = np.maximum(scores - scores.min(), 0) + 1e-9
        return population[self.rng.choices(range(len(population)), weights.tolist())[0]]

    # ------------------------------------------------------------------ the interface
    def propose(self, n: int) -> list[Candidate]:
        start = time.perf_counter()
        p = self.params
        population = self._sample_many(p.population)
        adapted = self._adapt_suggestions()
        population += adapted
        population += self.best_candidates(int(p.population * p.measured_seed_ratio))
        best: dict[str, tuple[float, SketchCandidate]] = {}
        for generation in range(p.generations + 1):
            if not population:
                break
            scores = self._scores(population)
            for cand, score in zip(population, scores, strict=True):
                if cand.key not in self.measured:
                    best[cand.key] = (float(score), cand)
            if generation == p.generations:
                break
            offspring: list[SketchCandidate] = []
            for _ in range(p.population * 2):
                if len(offspring) >= p.population:
                    break
                parent = self._select(population, scores)
                roll = self.rng.random()
                if roll < p.crossover_probability:
                    mates = [c for c in population if c.sketch == parent.sketch and c is not parent]
                    child = self._crossover(parent, self.rng.choice(mates)) if mates else None
                elif roll < p.crossover_probability + p.mutation_probability:
                    child = self._mutate(parent)
                else:
                    child = parent
                if child is not None:
                    offspring.append(child)
            population = offspring
        n_random = min(n, max(0, math.floor(n * p.eps_greedy)))
        ranked = heapq.nlargest(n - n_random, best.values(), key=lambda item: item[0])
        picks = self._cover_sketches([cand for _, cand in ranked], best)
        picks = self._fill_randomly(self._include_adapted(picks, adapted, best, n), n)
        self._tried_sketches.update(c.sketch for c in picks)
        # keep the lowered programs only of what was proposed or measured (the cost model
        # retrains on those); the rest of this round's population is rebuilt if met again
        self._programs = {key: func for key, func in self._programs.items()
                          if key in self.measured}
        self.stats.seconds += time.perf_counter() - start
        return picks

    def _cover_sketches(self, picks: list[SketchCandidate],
                        best: dict[str, tuple[float, SketchCandidate]]
                        ) -> list[SketchCandidate]:
        """``picks`` with the best-scored program of each sketch never tried before in place
        of the lowest-ranked ones (at most half of them): until it has measured a structure
        the cost model cannot compare it with others (a tensorized nest with plain vector
        loops), and a sketch it happens to rank low would never be tried at all."""
        untried: dict[int, tuple[float, SketchCandidate]] = {}
        for score, cand in best.values():
            if cand.sketch not in self._tried_sketches and (
                    cand.sketch not in untried or score > untried[cand.sketch][0]):
                untried[cand.sketch] = (score, cand)
        covered = {c.sketch for c in picks}
        extra = [cand for sketch, (_, cand) in sorted(untried.items()) if sketch not in covered]
        out = list(picks)
        for cand in extra[:len(picks) // 2]:
            counts = collections.Counter(c.sketch for c in out)
            # in place of the lowest-ranked pick of a sketch picked more than once
            spare = [i for i, c in enumerate(out) if counts[c.sketch] > 1]
            if not spare:
                break
            out[spare[-1]] = cand
        return out

    # ------------------------------------------------------------------ related tasks
    def best_candidates(self, k: int) -> list[Candidate]:
        # from the measured keys: ``known`` holds every program the populations ever built
        fastest = heapq.nlargest(k, (key for key, throughput in self.measured.items()
                                     if throughput > 0 and key in self.known),
                                 key=self.measured.__getitem__)
        return [self.known[key] for key in fastest]

    def suggest(self, candidates: Sequence[Candidate]) -> None:
        self._suggested = [origin for origin in (c.origin for c in candidates)
                           if isinstance(origin, dict) and isinstance(origin.get("sketch"), str)
                           and isinstance(origin.get("decisions"), dict)]

    def _adapt_suggestions(self) -> list[SketchCandidate]:
        """The suggested programs rebuilt in this task's space: in the sketch of the same
        name, else the one that shares most decision names with them (at least half);
        decisions this sketch lacks are dropped, and those it cannot take (a tile of another
        extent) drawn at random. Programs measured already are left out."""
        out: dict[str, SketchCandidate] = {}
        by_name = {sketch.name: n for n, sketch in enumerate(self.sketches)}
        for origin in self._suggested:
            decisions = {name: _from_json(v) for name, v in origin["decisions"].items()}
            sketch = by_name.get(origin["sketch"])
            if sketch is None and decisions:
                overlap = [len(decisions.keys() & space.keys()) for space in self.spaces]
                best = max(range(len(overlap)), key=overlap.__getitem__)
                sketch = best if 2 * overlap[best] >= len(decisions) else None
            if sketch is None:
                continue
            space = self.spaces[sketch]
            cand = self._build(sketch, {k: v for k, v in decisions.items() if k in space})
            if cand is not None and cand.key not in self.measured:
                out.setdefault(cand.key, cand)
        return list(out.values())

    def _include_adapted(self, picks: list[SketchCandidate], adapted: list[SketchCandidate],
                         best: dict[str, tuple[float, SketchCandidate]], n: int
                         ) -> list[SketchCandidate]:
        """``picks`` with the best-scored adapted suggestions (up to an eighth of the batch)
        in place of the lowest-ranked picks: what did well on a related task is measured
        here even when this task's cost model has too little data to rank it."""
        taken = {c.key for c in picks}
        wanted = sorted((c for c in adapted if c.key not in taken and c.key in best),
                        key=lambda c: -best[c.key][0])[:n // 8]
        return picks[:n - len(wanted)] + wanted

    def _fill_randomly(self, picks: list[SketchCandidate], n: int) -> list[Candidate]:
        """Top up ``picks`` with random unmeasured programs; mark all as proposed (a program
        is never proposed twice)."""
        taken = {c.key for c in picks}
        for _ in range(n * 20):
            if len(picks) >= n:
                break
            cand = self.sample()
            if cand is not None and cand.key not in self.measured and cand.key not in taken:
                picks.append(cand)
                taken.add(cand.key)
        for cand in picks:
            self.measured.setdefault(cand.key, 0.0)
        self.stats.proposals += len(picks)
        return list(picks)

    def notify(self, candidates: Sequence[Candidate], costs: Sequence[float | None]) -> None:
        """Feed measurements back (retrains the cost model)."""
        programs, throughputs = [], []
        for cand, cost in zip(candidates, costs, strict=True):
            key = cand.key
            throughput = 1.0 / cost if cost else 0.0
            self.measured[key] = throughput
            func = self._programs.get(key) or self._lower_steps(cand.steps)
            if func is not None:
                self._programs[key] = func
                programs.append(func)
                throughputs.append(throughput)
        if programs:
            self.scorer.update(programs, throughputs)

    def notify_disturbed(self, candidates: Sequence[Candidate],
                         costs: Sequence[float | None]) -> None:
        """Noted as measured, their rough figures may seed evolution; the cost model does
        not train on them."""
        for cand, cost in zip(candidates, costs, strict=True):
            self.measured[cand.key] = 1.0 / cost if cost else 0.0

    def export_model(self) -> bytes | None:
        model = getattr(self.scorer, "model", None)
        return model.save() if model is not None and model.num_samples else None

    def import_model(self, data: bytes) -> None:
        model = getattr(self.scorer, "model", None)
        if model is not None:
            model.load(data)

    def warm_start(self, past: Sequence[PastMeasurement]) -> int:
        """Learn from earlier measurements of this task: the cost model trains on them, they
        are never proposed again, and those whose origin still names one of this policy's
        sketches (and rebuilds to the same steps) join the population's measured seeds.
        Returns how many were rebuilt as seeds."""
        rebuilt = 0
        by_name = {sketch.name: n for n, sketch in enumerate(self.sketches)}
        for item in past:
            origin = item.origin or {}
            sketch = by_name.get(origin.get("sketch"))
            decisions = origin.get("decisions")
            if sketch is None or not isinstance(decisions, dict):
                continue
            cand = self._build(sketch, {k: _from_json(v) for k, v in decisions.items()})
            if cand is not None and cand.key == steps_key(item.steps):
                rebuilt += 1
                self._tried_sketches.add(sketch)
        super().warm_start(past)
        return rebuilt

    def _lower_steps(self, steps: Steps) -> Any:
        """Lower a measured program that this policy did not build (e.g. from the database)."""
        try:
            s, args = make_schedule(self.task.workload, steps)
            return lower(s, args, unroll=False)
        except ValueError:
            return None


def _to_json(value: Any) -> Any:
    return [_to_json(v) for v in value] if isinstance(value, tuple | list) else value


def _from_json(value: Any) -> Any:
    """Decision values come back from JSON with lists where they were tuples."""
    return tuple(_from_json(v) for v in value) if isinstance(value, list) else value


def _mutable(decision: Decision) -> bool:
    if isinstance(decision, ChoiceDecision):
        return len(decision.choices) > 1
    return isinstance(decision, TileDecision) and decision.extent > 1


class RandomPolicy(SketchPolicy):
    """Pure random sampling of sketches and decisions (the baseline)."""

    def __init__(self, task: SearchTask, scorer: Scorer | str | None = None, seed: int = 0,
                 params: SearchParams | None = None):
        super().__init__(task, scorer or "random", seed, params)

    def propose(self, n: int) -> list[Candidate]:
        start = time.perf_counter()
        picks = self._fill_randomly([], n)
        self.stats.seconds += time.perf_counter() - start
        return picks


register_policy("sketch", SketchPolicy, ("cpu", "cuda", "opencl"))
register_policy("random", RandomPolicy, ("cpu", "cuda", "opencl"))
