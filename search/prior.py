"""A prior over register tiles: where the search samples a CPU multi-level tiling, half the
samples draw its innermost tile from the shapes that keep a vector unit busy.

The innermost spatial tile of a tiled stage is unrolled into registers. Its vector axis
(the last) and the other axes the vector operands are indexed by (a packed conv's output
channel blocks, which pick the weight vectors) give ``V`` vectors per step; the remaining
axes (a dense layer's rows, a conv's output pixels), whose values are broadcast, give ``B``
rows; each step of the reduction loads ``V`` vectors and ``B`` broadcast values for
``V x B`` multiply-adds. A uniform draw mostly lands on tiles with too few accumulators to
hide the FMA latency, or too many for the register file, or too many loads per
multiply-add (a BERT dense layer's search settled on 8 rows x 1 vector, 0.6 of the FMA
peak, where 8 x 3 runs at 0.7). The prior draws ``V`` from 1 to 3 vectors (to 4 with
AVX-512's 32 registers) and ``B`` so that
``V x B`` fills between three quarters and all of the registers left for accumulators, and the
reduction's inner tile as long as its decision allows up to ``REDUCE_TILE`` (the
accumulators stay in registers over a long run), or any longer one a packed operand allows
(how long a slice of the panel stays in L1 depends on the other tiles). In half the draws
the spatial level just outside the register tile is 1, so the reduction's outer loop wraps
its inner one directly and the accumulators stay in registers across the whole reduction
(GEMM 1024, packed, replayed: a 6 x 4-vector tile held so 327 GFLOP/s; an 8 x 2-vector
tile with 128 x 8 such tiles between the two reduction loops, its accumulators stored and
reloaded at each outer step, 294; a uniform draw holds a 6 x 4-vector tile in one of 30).
Every other level is drawn uniformly, and evolution takes it from there.
Where the axes allow partial last tiles, widths and row counts that divide nothing are
drawn too: whole vectors with the last tile partial (383 columns, or 3 vectors of 1024
columns), one mostly full masked vector on a target with masked vectors where that is all
the axis holds (a stride-2 conv's 14 output columns), and any row count (16 registers on
AVX2 hold 12 accumulators: 6 rows x 2 vectors or 4 x 3, neither of which divides 1024).
"""

from __future__ import annotations

import random
from typing import Any

from schedule import expr, make_schedule, te

from . import analysis
from .sketch import REDUCE_TILE, Sketch
from .space import Decision, TileDecision
from .task import SearchTask

#: vector registers kept for the operands of one step (weight vectors, a broadcast value)
OPERAND_REGISTERS = 4
#: the most vectors one step of a register tile loads, by the target's vector registers:
#: with AVX-512's 32, four (GEMM 1024 on a Sapphire Rapids-class core, the same packed
#: tiling replayed: 6 rows x 4 vectors 327 GFLOP/s, 8 x 2 312, 8 x 3 310; a tune that drew
#: 8 x 2 ended 0.88x PyTorch, one that drew 7 x 4 0.99x); with AVX2's 16, three
MAX_VECTORS = {16: 3, 32: 4}
#: the share of draws whose register tile accumulates across the whole reduction
HELD_ACROSS_REDUCTION = 0.5


class RegisterTiles:
    """Draws register tiles for the sketches of one task (see the module docstring)."""

    def __init__(self, task: SearchTask):
        cpu = task.target.kind == "cpu"
        self.lanes = task.vector_lanes(4) if cpu else 1
        self.masked = cpu and task.target.masked_vectors
        registers = 32 if self.lanes >= 16 else 16
        self.accumulators = registers - OPERAND_REGISTERS
        self.max_vectors = MAX_VECTORS[registers]
        self._vector_axes: dict[str, set[str]] = {}  # stays empty but on a CPU
        if cpu:
            s, _ = make_schedule(task.workload)
            for stage in analysis.compute_stages(s):
                if stage.op.reduce_axis and len(stage.op.axis) >= 2:
                    self._vector_axes[stage.name] = _vector_operand_axes(stage)

    def vector_axes(self, stage: str) -> set[str]:
        """The spatial axes of ``stage`` (or of the stage it caches) that pick the vector
        operands' vectors (empty for a stage that is not tiled for reuse)."""
        return set(self._vector_axes.get(stage.removesuffix(".local"), ()))

    def draw(self, sketch: Sketch, space: dict[str, Decision],
             rng: random.Random) -> dict[str, Any]:
        """Tile decisions for the stages ``sketch`` tiles, their innermost factors from
        well-shaped register tiles and their outer levels at random; empty where there is
        nothing to shape (a GPU, a tensorized nest, a vector axis shorter than a vector that
        no mostly full masked one fits)."""
        out: dict[str, Any] = {}
        for op in sketch.ops:
            vector_axes = self._vector_axes.get(op.stage.removesuffix(".local"))
            if op.kind != "tile" or op.intrin or vector_axes is None:
                continue
            prefix = f"tile:{op.stage}:"
            tiles = [(name, d) for name, d in space.items()
                     if name.startswith(prefix) and isinstance(d, TileDecision)]
            spatial = [(name, d) for name, d in tiles if d.parts == 3]
            if len(spatial) < 2:
                continue
            (vector_name, vector), rows = spatial[-1], spatial[:-1]
            widths = [f for f in vector.innermost_choices()
                      if self._fills_vectors(f) and f <= self.max_vectors * self.lanes]
            if vector.inexact_probability > 0:
                # whole vectors that divide nothing too (383 columns; 3 vectors of 1024),
                # the last tile partial
                widths += [v * self.lanes for v in range(1, self.max_vectors + 1)
                           if v * self.lanes <= min(vector.extent, vector.max_innermost)
                           and v * self.lanes not in widths]
            if not widths:
                continue
            width = rng.choice(widths)
            held = 1 if rng.random() < HELD_ACROSS_REDUCTION else None
            out[vector_name] = vector.sample_around(width, rng, held)
            vectors = -(-width // self.lanes)
            picks_vectors = [(n, d) for n, d in rows if n[len(prefix):] in vector_axes]
            broadcast = [(n, d) for n, d in rows if n[len(prefix):] not in vector_axes]
            for name, d in rng.sample(picks_vectors, len(picks_vectors)):
                factor = rng.choice([f for f in d.innermost_choices()
                                     if vectors * f <= self.max_vectors] or [1])
                vectors *= factor
                out[name] = d.sample_around(factor, rng, held)
            budget = rng.randint(self.accumulators * 3 // 4, self.accumulators) // vectors
            for name, d in rng.sample(broadcast, len(broadcast)):
                fits = [f for f in d.innermost_choices() if f <= budget] or [1]
                if d.inexact_probability > 0:  # 6 rows of 1024, the last tile partial
                    fits = sorted({*fits, *range(1, min(budget, d.extent, d.max_innermost) + 1)})
                factor = max(fits) if rng.random() < 0.5 else rng.choice(fits)
                out[name] = d.sample_around(factor, rng, held)
                budget = max(1, budget // factor)
            for name, d in tiles:
                if d.parts == 1:  # the reduction: long (beyond REDUCE_TILE a choice)
                    choices = d.innermost_choices()
                    longest = max(choices)
                    out[name] = (rng.choice([f for f in choices
                                             if f >= min(longest, REDUCE_TILE)]),)
        return out

    def _fills_vectors(self, width: int) -> bool:
        """Whether ``width`` lanes fill whole vectors, or, with masked vectors, leave a last
        one more than half full (14 output columns of a stride-2 conv on 16 lanes)."""
        tail = width % self.lanes
        return tail == 0 or (self.masked and tail > self.lanes // 2)


def _vector_operand_axes(stage: te.Stage) -> set[str]:
    """The spatial axes (by name) that index a read which the vector axis (the last) also
    indexes: a factor of theirs in the register tile adds vector loads, not broadcasts."""
    vector = stage.op.axis[-1].var
    out: set[str] = set()
    for load in analysis.reads(stage):
        used = set().union(*(expr.free_vars(i) for i in load.indices))
        if vector in used:
            out |= {a.var.name for a in stage.op.axis[:-1] if a.var in used}
    return out
