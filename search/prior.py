"""A prior over register tiles: where the search samples a CPU multi-level tiling, half the
samples draw its innermost tile from the shapes that keep a vector unit busy.

The innermost spatial tile of a tiled stage is unrolled into registers: its vector axis
(the last) gives ``V`` vectors, the other axes' inner factors ``B`` rows, and each step of
the reduction loads ``V`` vectors and broadcasts ``B`` values for ``V x B`` multiply-adds.
A uniform draw mostly lands on tiles with too few accumulators to hide the FMA latency, or
too many for the register file (a BERT dense layer's search settled on 8 rows x 1 vector,
0.6 of the FMA peak, where 8 x 3 runs at 0.7). The prior draws ``V`` from 1 to 3 vectors and
``B`` so that ``V x B`` fills between half and all of the registers left for accumulators,
and the reduction's inner tile as long as its decision allows (so the accumulators stay in
registers over a long run); every outer level is drawn uniformly, and evolution takes it
from there.
"""

from __future__ import annotations

import random
from typing import Any

from .sketch import Sketch
from .space import Decision, TileDecision
from .task import SearchTask

#: vector registers kept for the operands of one step (weight vectors, a broadcast value)
OPERAND_REGISTERS = 4


def register_tile(task: SearchTask, sketch: Sketch, space: dict[str, Decision],
                  rng: random.Random) -> dict[str, Any]:
    """Tile decisions for the stages ``sketch`` tiles on a CPU, their innermost factors from
    well-shaped register tiles and their outer levels at random; empty where there is
    nothing to shape (a GPU, a tensorized nest, a stage of one spatial axis, a vector axis
    no whole vector divides)."""
    if task.target.is_gpu:
        return {}
    lanes = task.vector_lanes(4)
    accumulators = (32 if lanes >= 16 else 16) - OPERAND_REGISTERS
    out: dict[str, Any] = {}
    for op in sketch.ops:
        if op.kind != "tile" or op.intrin:
            continue
        prefix = f"tile:{op.stage}:"
        tiles = [(name, d) for name, d in space.items()
                 if name.startswith(prefix) and isinstance(d, TileDecision)]
        spatial = [(name, d) for name, d in tiles if d.parts == 3]
        if len(spatial) < 2:
            continue
        (vector_name, vector), rows = spatial[-1], spatial[:-1]
        widths = [f for f in vector.innermost_choices() if f % lanes == 0 and f <= 3 * lanes]
        if not widths:
            continue
        width = rng.choice(widths)
        out[vector_name] = vector.sample_around(width, rng)
        budget = rng.randint(accumulators // 2, accumulators) // (width // lanes)
        for name, d in rng.sample(rows, len(rows)):
            fits = [f for f in d.innermost_choices() if f <= budget] or [1]
            factor = max(fits) if rng.random() < 0.5 else rng.choice(fits)
            out[name] = d.sample_around(factor, rng)
            budget = max(1, budget // factor)
        for name, d in tiles:
            if d.parts == 1:
                out[name] = (max(d.innermost_choices()),)
    return out
