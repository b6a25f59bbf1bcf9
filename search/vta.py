"""The ``sketch`` policy for ``vta`` targets.

An accelerator program has one sketch, the rules' fixed part (``schedule.vta.Template``):
tile the output to the GEMM core's blocks, keep the accumulator in the acc buffer and
compute it per output tile, cache the input and weight tiles into their buffers per
reduction tile, tensorize the innermost block with the core's GEMM intrinsic, and
requantize on the ALU before the store. Its annotations are the knobs: the output tile
(``tile_m`` x ``tile_n`` blocks, and ``tile_h`` x ``tile_w`` of a convolution's plane), the
reduction tile (``tile_k``), and 1 or 2 virtual threads over the m, n or h tiles. Every
knob is a divisor of its dimension and the buffers (duplicated
per virtual thread) must hold the tiles, which leaves a space of a few thousand points at
most: the policy enumerates it, scores every unmeasured point with the vta cost model
(``cost_model.vta``: analytic before measurements, XGBoost after), and proposes the best
ones plus an epsilon-greedy share of random ones. The untuned default
(``VtaCompute.default_template``: the smallest tiles, no virtual threads) is proposed first,
so a tuning run shows its gain over it.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Sequence
from typing import Any

from cost_model import VtaCostModel, vta_features
from schedule import Steps, vta

from .base import Candidate, PastMeasurement, SearchPolicy, SearchStats
from .registry import register_policy, register_task_check
from .task import SearchTask

_EXPLORE = 0.25


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def template_space(shape: vta.GemmShape, config: vta.VtaConfig) -> list[vta.Template]:
    """Every template whose tiles divide the shape and fit the buffers (duplicated per
    virtual thread) and whose GEMM micro-ops fit theirs."""
    g = shape
    space = []
    for tm, tn, tk, th, tw in itertools.product(*(_divisors(g.extent(a)) for a in "mnkhw")):
        tiles = {"m": g.m // tm, "n": g.n // tn, "h": g.h // th}
        inp = tm * tk * g.input_rows(th) * g.input_rows(tw)
        wgt, acc = tn * tk * g.r * g.s, tm * tn * th * tw
        if tn * tk * g.r * g.s * tm > config.uop_depth // 2:
            continue
        for lanes, axis in ((1, "n"), (2, "m"), (2, "n"), (2, "h")):
            if lanes > 1 and tiles[axis] % lanes:
                continue
            if lanes * inp > config.inp_depth or lanes * wgt > config.wgt_depth or \
                    lanes * acc > config.acc_depth:
                continue
            space.append(vta.Template(tm, tn, tk, lanes, axis, th, tw))
    return space


class VtaPolicy(SearchPolicy):
    """See the module docstring. ``scorer`` names a cost model for the interface's sake:
    ``random`` scores blindly, anything else uses the vta model. ``max_vthreads`` 1 leaves
    virtual threads out (to measure what they give)."""

    def __init__(self, task: SearchTask, scorer: str | None = None, seed: int = 0,
                 params: Any = None, max_vthreads: int = 2):
        self.task = task
        self.stats = SearchStats()
        self.rng = random.Random(seed)
        self.config = vta.VtaConfig.for_target(task.target)
        self.compute = vta.VtaCompute(task.workload, self.config)
        self.shape = self.compute.shape
        self.space = [t for t in template_space(self.shape, self.config)
                      if t.vthreads <= max_vthreads]
        self.model = VtaCostModel(seed) if scorer != "random" else None
        self._features = {t: vta_features(t, self.shape, self.config) for t in self.space}
        self._keys: dict[str, vta.Template] = {}
        self._done: set[vta.Template] = set()
        self._mapped = False

    def _steps(self, t: vta.Template) -> Steps:
        steps = self.compute.template_steps(t)
        self._keys[steps.key] = t
        return steps

    def _template_of(self, steps: Steps) -> vta.Template | None:
        if steps.key not in self._keys and not self._mapped:  # from elsewhere (a database)
            known = set(self._keys.values())
            for t in self.space:
                if t not in known:
                    self._steps(t)
            self._mapped = True  # steps of no template (another policy's) stay unknown
        return self._keys.get(steps.key)

    def propose(self, n: int) -> list[Candidate]:
        start = time.perf_counter()
        open_ = [t for t in self.space if t not in self._done]
        picks: list[vta.Template] = []
        default = self.compute.default_template()
        if default in open_:
            picks.append(default)
        if self.model is None:
            ranked = self.rng.sample(open_, len(open_))
        else:
            scores = self.model.predict([self._features[t] for t in open_])
            ranked = [open_[i] for i in sorted(range(len(open_)), key=lambda i: -scores[i])]
        explore = max(1, int(n * _EXPLORE)) if n > 1 else 0
        for t in ranked:
            if len(picks) >= n - explore:
                break
            if t not in picks:
                picks.append(t)
        # exploration: random picks from the better half of the ranking (the worst tiles
        # make programs of tens of thousands of instructions, and teach the model little)
        rest = [t for t in ranked[: max(len(ranked) // 2, n)] if t not in picks]
        picks += self.rng.sample(rest, min(len(rest), n - len(picks)))
        self._done.update(picks)
        self.stats.proposals += len(picks)
        self.stats.sampled += len(picks)
        self.stats.seconds += time.perf_counter() - start
        return [Candidate(self._steps(t)) for t in picks]

    def notify(self, candidates: Sequence[Candidate], costs: Sequence[float | None]) -> None:
        rows, seconds = [], []
        for cand, cost in zip(candidates, costs, strict=True):
            t = self._template_of(cand.steps)
            if t is None:
                continue
            self._done.add(t)
            rows.append(self._features[t])
            seconds.append(cost)
        if self.model is not None and rows:
            self.model.update(rows, seconds)

    def warm_start(self, past: Sequence[PastMeasurement]) -> int:
        self.notify([Candidate(Steps.of(p.steps)) for p in past], [p.cost for p in past])
        return 0


def _check_task(workload: Any, target: Any) -> None:
    vta.VtaCompute(workload, vta.VtaConfig.for_target(target))  # VtaUnsupported says why


register_task_check("vta", _check_task)
register_policy("sketch", VtaPolicy, ("vta",))
register_policy("random", lambda task, scorer=None, seed=0, params=None:
                VtaPolicy(task, "random", seed, params), ("vta",))
