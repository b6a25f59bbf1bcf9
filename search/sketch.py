"""Sketches: program structures derived by rules, and their instantiation with decisions.

A sketch is a list of ``SketchOp``s (inline a stage, add a cache stage, tile a stage with
or without fusing its consumer, pack an operand per tile, factor a reduction, leave a
stage's location open),
derived by visiting stages from the outputs to the inputs and applying the first rules
that match (``rules.py``). A sketch leaves decisions open: tile factors, compute
locations, how many outer loops run in parallel, vectorization splits, the
auto-unroll depth and whether a pass over a row fetches the next row ahead.
``instantiate`` applies a sketch with one value per decision to a fresh schedule; every
program is a plain step list in the end.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schedule import ScheduleError, expr, make_schedule, te
from schedule import dtype as dt

from . import analysis, gpu_sketch
from .space import ChoiceDecision, Decision, TileDecision
from .task import SearchTask

UNROLL_STEPS = (0, 16, 64, 512)
VECTOR_SPLITS = (4, 8, 16, 32, 64)
MAX_VECTOR_EXTENT = 64
#: the longest inner tile of a tiled reduction; of one whose operands are packed (``_pack``):
#: a slice of a panel is contiguous, and one this long can stay in L1 across row groups
REDUCE_TILE, PACKED_REDUCE_TILE = 64, 256
#: the tile levels a packed operand's panel may be copied at (``_pack``)
PACK_LEVELS = (0, 1)
#: below this many FLOPs a program may also run on one thread (no parallel loop)
SERIAL_FLOPS = 4e6


@dataclass(frozen=True)
class SketchOp:
    kind: str  # inline | cache_write | tile | pack | gpu_tile | cross_thread | rfactor | location
    stage: str
    fuse_level: int = 0  # tile: 0 = no consumer fusion, 1 or 2 = compute at that tile level
    consumer: str = ""
    at_rows: bool = False  # rfactor: the partial results are computed per output point
    #: rfactor at rows: per block of output points (their dot products interleaved)
    row_block: bool = False
    #: pack: the tensor copied into panels
    operand: str = ""
    #: tile: a ``pack`` op follows (the reduction may be tiled longer)
    packed: bool = False
    #: tile: the tensor intrinsic computing the innermost spatial x reduce loops (kept
    #: whole, innermost); location: a stage such a nest reads stays a buffer (no inline)
    intrin: str = ""
    #: cache_write: the accumulator's axes in this order (the copy-out transposes);
    #: pack: a whole transposed copy of the operand, its dimensions in this order
    axis_order: tuple[int, ...] = ()


@dataclass
class Sketch:
    name: str
    ops: list[SketchOp] = field(default_factory=list)

    def __str__(self) -> str:
        return self.name


Decide = Callable[[str, Decision], Any]


class InvalidProgram(Exception):
    """A decision combination that gives no valid program (rejected before measuring)."""


# ---------------------------------------------------------------------------- instantiation


def instantiate(task: SearchTask, sketch: Sketch, decide: Decide) -> tuple[te.Schedule,
                                                                            list[te.Tensor]]:
    s, args = make_schedule(task.workload)
    try:
        for op in sketch.ops:
            _APPLY[op.kind](task, s, op, decide)
        if task.target.is_gpu:
            gpu_sketch.annotate(s, analysis.compute_stages(s), task.target, decide)
        else:
            _annotate(task, s, decide)
    except ScheduleError as err:
        raise InvalidProgram(str(err)) from None
    return s, args


def decision_space(task: SearchTask, sketch: Sketch) -> dict[str, Decision]:
    """The decisions a sketch leaves open (found by instantiating it with defaults)."""
    space: dict[str, Decision] = {}

    def record(name: str, decision: Decision) -> Any:
        space[name] = decision
        return default_value(decision)

    instantiate(task, sketch, record)
    return space


def default_value(decision: Decision) -> Any:
    if isinstance(decision, TileDecision):
        return (1,) * decision.parts
    return decision.choices[0]


def sampler(decisions: dict[str, Any], space: dict[str, Decision],
            rng: random.Random) -> Decide:
    """A ``decide`` that takes given values, samples missing ones (and records them).

    ``space`` records each decision; a location's choices depend on where its consumers
    went, so the widest set of choices seen is kept (mutation may then propose a choice
    another program makes possible; where it is not, the value is drawn again)."""

    def decide(name: str, decision: Decision) -> Any:
        value = decisions.get(name)
        if value is None or not decision.is_valid(value):
            value = decision.sample(rng)
            decisions[name] = value
        known = space.get(name)
        if known is None or (isinstance(known, ChoiceDecision)
                             and isinstance(decision, ChoiceDecision)
                             and set(decision.choices) > set(known.choices)):
            space[name] = decision
        return value

    return decide


# ---------------------------------------------------------------------------- sketch ops


def _inline(task: SearchTask, s: te.Schedule, op: SketchOp, decide: Decide) -> None:
    s[op.stage].compute_inline()


def _cache_write(task: SearchTask, s: te.Schedule, op: SketchOp, decide: Decide) -> None:
    s.cache_write(s[op.stage].op.output, "local", op.axis_order or None)


def _tile(task: SearchTask, s: te.Schedule, op: SketchOp, decide: Decide) -> None:
    """Multi-level tiling "SSRSRS": spatial axes in 4 levels, reduce axes in 2, ordered
    s0 s1 r0 s2 r1 s3; with fusion, the consumer is tiled alike at its outer levels and
    this stage is computed at the consumer's level-``fuse_level`` tile. With ``intrin``,
    the last spatial and the last reduce axis are the intrinsic's: untiled, innermost, and
    tensorized."""
    stage = s[op.stage]
    spatial = list(stage.op.axis)
    reduce_axes = list(stage.op.reduce_axis)
    kept = [spatial.pop(), reduce_axes.pop()] if op.intrin else []
    tiles = {a.name: decide(f"tile:{stage.name}:{a.name}", TileDecision(
        a.extent, 3, innermost_multiple=analysis.read_block(stage, a))) for a in spatial}
    levels: list[list[te.IterVar]] = [[], [], [], []]
    for a in spatial:
        f1, f2, f3 = tiles[a.name]
        o0, rest = stage.split(a, factor=f1 * f2 * f3)
        o1, rest = stage.split(rest, factor=f2 * f3)
        o2, o3 = stage.split(rest, factor=f3)
        for level, iv in zip(levels, (o0, o1, o2, o3), strict=True):
            level.append(iv)
    r_levels: list[list[te.IterVar]] = [[], []]
    for a in reduce_axes:
        (g,) = decide(f"tile:{stage.name}:{a.name}", TileDecision(
            a.extent, 1, max_innermost=PACKED_REDUCE_TILE if op.packed else REDUCE_TILE))
        r0, r1 = stage.split(a, factor=g)
        r_levels[0].append(r0)
        r_levels[1].append(r1)
    *unrolled, last = levels[3]
    unrolled.sort(key=lambda iv: -iv.extent)
    stage.reorder(*levels[0], *levels[1], *r_levels[0], *levels[2], *r_levels[1], *unrolled,
                  last, *kept)
    if op.intrin:
        stage.tensorize(kept[0], op.intrin)
    if op.fuse_level:
        _fuse_into_consumer(s[op.consumer], stage, spatial, tiles, op.fuse_level)


def _fuse_into_consumer(consumer: te.Stage, stage: te.Stage, spatial: list[te.IterVar],
                        tiles: dict[str, Any], fuse_level: int) -> None:
    """Tile the consumer like ``stage``'s outer ``fuse_level`` levels and compute ``stage``
    at the last of them. The consumer's axes pair with ``stage``'s spatial ones by name
    (a transposing accumulator lists them in another order: the consumer's tile loops
    follow the stage's order, its innermost loops its own, so its stores stay contiguous);
    axes past the stage's (an intrinsic's, untiled) come last."""
    by_name = {a.name: a for a in consumer.op.axis}
    if not all(a.name in by_name for a in spatial):  # an element-wise consumer's own names
        by_name = {a.name: a_c for a, a_c in zip(spatial, consumer.op.axis, strict=False)}
    c_levels: list[list[te.IterVar]] = [[] for _ in range(fuse_level)]
    inner: dict[int, te.IterVar] = {}
    for a in spatial:
        f1, f2, f3 = tiles[a.name]
        rest = by_name[a.name]
        for lvl, factor in enumerate([f1 * f2 * f3, f2 * f3][:fuse_level]):
            outer, rest = consumer.split(rest, factor=factor)
            c_levels[lvl].append(outer)
        inner[id(by_name[a.name])] = rest
    last = [inner.get(id(a), a) for a in consumer.op.axis]
    consumer.reorder(*[iv for lvl in c_levels for iv in lvl], *last)
    stage.compute_at(consumer, c_levels[fuse_level - 1][-1])


def _pack(task: SearchTask, s: te.Schedule, op: SketchOp, decide: Decide) -> None:
    """Copy ``op.operand`` (``analysis.panel_operands``) into a buffer read by the tiled
    stage instead, computed where a tile of the stage begins (a decision: its outermost
    tile, or the next level's, narrower and repacked more often): once per tile, a panel of
    the rows and columns that tile reads, its rows a tile's width apart instead of the
    operand's. The copy is repeated for every tile of the other axes, so the search weighs
    it against the tile's reuse."""
    stage = s[op.stage]
    (tensor,) = {load.source for load in analysis.reads(stage) if load.source.name == op.operand}
    if op.axis_order:
        # a transposed copy, made once per call at the root, a block of the new innermost
        # axis at a time: each vector gathers one element from each of ``lanes`` rows of
        # the operand, and a block walks those rows in step. Walking the whole new
        # innermost axis per step instead (the copy in its own order) read 256 weight rows
        # 4.6 KB apart, which share 8 of the L1's sets: the copy of a 128->256 3x3 conv's
        # weights took 0.2 ms of a 0.5 ms program, 0.04 ms this way
        copy = s[s.cache_read(tensor, "global", [stage], op.axis_order)]
        *axes, last = copy.op.axis
        lanes = _stage_lanes(task, copy)
        if last.extent > lanes and last.extent % lanes == 0:
            across, lanes_iv = copy.split(last, factor=lanes)
            copy.reorder(across, *axes, lanes_iv)
        return
    panel = s[s.cache_read(tensor, "global", [stage])]
    level = decide(f"pack:{stage.name}", ChoiceDecision(PACK_LEVELS))
    if level == 0 and stage.attach == "at":
        panel.compute_at(stage.attach_stage, stage.attach_ivar)
    else:
        panel.compute_at(stage, stage.leaf_iter_vars[(level + 1) * len(stage.op.axis) - 1])


def _gpu_tile(task: SearchTask, s: te.Schedule, op: SketchOp, decide: Decide) -> None:
    gpu_sketch.tile(s, op.stage, op.consumer, task.target, decide,
                    fused=not op.stage.endswith(".local"))


def _cross_thread(task: SearchTask, s: te.Schedule, op: SketchOp, decide: Decide) -> None:
    gpu_sketch.cross_thread(s, op.stage, task.target, decide)


def _rfactor(task: SearchTask, s: te.Schedule, op: SketchOp, decide: Decide) -> None:
    stage = s[op.stage]
    reduce_axes = list(stage.op.reduce_axis)
    k = stage.fuse(*reduce_axes) if len(reduce_axes) > 1 else reduce_axes[0]
    lanes = _stage_lanes(task, stage)
    # the partial results in whole vectors (where the extent has such factors)
    (factor,) = decide(f"rfactor:{stage.name}", TileDecision(
        k.extent, 1, max_innermost=lanes * 4, innermost_multiple=lanes))
    ko, ki = stage.split(k, factor=factor)
    blocked = op.at_rows and op.row_block and bool(stage.op.axis)
    if blocked:  # the lanes last in the partial results: one vector per row
        rf = s.rfactor(stage.op.output, ki, factor_axis=len(stage.op.axis))
        *spatial, rf_axis = s[rf].op.axis
    else:
        rf = s.rfactor(stage.op.output, ki)
        rf_axis, *spatial = s[rf].op.axis
    rf_stage = s[rf]
    rows = [iv for iv in stage.leaf_iter_vars if not iv.is_reduce] if op.at_rows else []
    if rows and blocked:
        # a block of rows inside the reduction loop: independent accumulators, one per row
        (block,) = decide(f"rows:{stage.name}", TileDecision(rows[-1].extent, 1,
                                                              max_innermost=16))
        rows[-1], _ = stage.split(rows[-1], factor=block)
        rf_stage.reorder(*spatial[:-1], *rf_stage.op.reduce_axis, spatial[-1], rf_axis)
    else:
        rf_stage.reorder(*spatial, *rf_stage.op.reduce_axis, rf_axis)
    if rows:
        rf_stage.compute_at(stage, rows[-1])


def _location(task: SearchTask, s: te.Schedule, op: SketchOp, decide: Decide) -> None:
    """Choose where a stage without a tiling structure is computed: at the root, inlined,
    or at a loop of the consumer that hosts all its consumers (``_host_loops``)."""
    stage = s[op.stage]
    if stage.is_output:
        return
    choices: list[Any] = ["root"]
    if analysis.is_injective(stage) and not op.intrin:
        choices.append("inline")
    # on a GPU a stage at the root is a kernel of its own; inside another's threads, the
    # region would be recomputed per thread (a later rule may stage it in shared memory)
    host, depth = _host_loops(s, stage) if not task.target.is_gpu else (None, 0)
    if host is not None:
        depth = _without_repeats(host, stage, depth)
    if host is not None:
        choices += list(range(depth))
    choice = decide(f"location:{stage.name}", ChoiceDecision(tuple(choices)))
    if choice == "inline":
        stage.compute_inline()
    elif choice != "root":
        stage.compute_at(host, host.leaf_iter_vars[choice])


def _host_loops(s: te.Schedule, stage: te.Stage) -> tuple[te.Stage | None, int]:
    """A consumer whose loops ``stage`` may be computed at, and how many of its outer loops
    qualify: those outside the consumer's reduction loops (inside one, the stage would be
    computed again at every step of the reduction: a conv's padding recomputed per input
    channel made most of a stride-2 conv's samples 4x slower than its best), and every
    other consumer must be computed inside that consumer (directly or through stages
    computed there), so ``stage`` can only go at or above the outermost of those attach
    loops (computed deeper, it would be read before it is written)."""
    consumers = s.consumers(stage)
    for host in consumers:
        if host.attach == "inline":
            continue
        depth = next((n for n, iv in enumerate(host.leaf_iter_vars) if iv.is_reduce),
                     len(host.leaf_iter_vars))
        for other in consumers:
            if other is host:
                continue
            loop = _attach_loop_in(other, host)
            if loop is None:
                break
            depth = min(depth, host.leaf_iter_vars.index(loop) + 1)
        else:
            return host, depth
    return None, 0


def _without_repeats(host: te.Stage, stage: te.Stage, depth: int) -> int:
    """How many of ``host``'s first ``depth`` loops a reduction ``stage`` may be computed in
    without computing the same values again: inside a loop (of more than one iteration)
    whose axes index none of the host's reads of ``stage``, every iteration would redo the
    whole reduction the last one did (a softmax's row maximum computed in the loop over the
    row's vectors was reduced again for every vector: those programs took minutes to
    measure). An element-wise stage keeps every loop: recomputing a convolution's padding
    per tile of output channels is cheap, and keeps the tile's inputs in cache. Where the
    host reads ``stage`` only through other stages, all ``depth`` loops stay."""
    if not stage.op.reduce_axis:
        return depth
    output = stage.op.output
    reads = [node for node in expr.walk(host.op.body)
             if isinstance(node, expr.Load) and node.source.name == output.name]
    if not reads:
        return depth
    read_vars = set().union(*(expr.free_vars(i) for load in reads for i in load.indices))
    leaves = list(host.leaf_iter_vars)
    values = host.root_values({iv: iv.var for iv in leaves})
    axes = list(host.op.axis) + list(host.op.reduce_axis)
    for d, leaf in enumerate(leaves[:depth]):
        fed = [axis for axis in axes if leaf.var in expr.free_vars(values[axis])]
        if leaf.extent > 1 and not any(axis.var in read_vars for axis in fed):
            return d
    return depth


def _attach_loop_in(stage: te.Stage, host: te.Stage) -> te.IterVar | None:
    """The loop of ``host`` inside which ``stage`` is computed, if it is."""
    while stage.attach == "at":
        if stage.attach_stage is host:
            return stage.attach_ivar
        stage = stage.attach_stage
    return None


_APPLY: dict[str, Callable[[SearchTask, te.Schedule, SketchOp, Decide], None]] = {
    "inline": _inline, "cache_write": _cache_write, "tile": _tile, "gpu_tile": _gpu_tile,
    "rfactor": _rfactor, "location": _location, "cross_thread": _cross_thread, "pack": _pack,
}


# ---------------------------------------------------------------------------- annotations


def _stage_lanes(task: SearchTask, stage: te.Stage) -> int:
    """The target's vector lanes for the stage's output dtype."""
    return task.vector_lanes(dt.itemsize(stage.op.output.dtype))


def _attach_points(s: te.Schedule, stage: te.Stage) -> set[te.IterVar]:
    return {st.attach_ivar for st in s.stages if st.attach == "at" and st.attach_stage is stage}


def _annotate(task: SearchTask, s: te.Schedule, decide: Decide) -> None:
    for stage in analysis.compute_stages(s):
        if stage.attach == "inline":
            continue
        _unroll_branches(task, s, stage)
        _window_outside_lanes(s, stage)
        if stage.attach == "root":
            _parallel(task, s, stage, decide)
        _vectorize(task, s, stage, decide)
        _prefetch(s, stage, decide)
        if stage.op.reduce_axis or stage.relations:
            depth = decide(f"unroll:{stage.name}", ChoiceDecision(UNROLL_STEPS))
            if depth:
                stage.pragma(stage.leaf_iter_vars[0], "auto_unroll_max_step", depth)


#: a reduction over at most this many values with no tiling of its own is a window (a
#: pooling's): it runs outside the last spatial loop, which then takes the vector lanes
MAX_WINDOW = 64


def _window_outside_lanes(s: te.Schedule, stage: te.Stage) -> None:
    """A pooling reduces a small window per output: with the window loops innermost (as
    the stage is written) its output is computed one lane at a time; with them just
    outside the last spatial loop, which every read walks along, a vector of outputs is
    reduced at once. A stage that something is computed at keeps its order: a softmax's
    row maximum over per-row partial results (``rfactor`` at rows) has them computed at
    its row loop, and moving the lanes' loop outside it recomputed them one lane at a time
    (a strided scalar pass over the row per lane)."""
    axes, window = list(stage.op.axis), list(stage.op.reduce_axis)
    if not window or stage.relations or stage.annotations or not axes or \
            list(stage.leaf_iter_vars) != axes + window or _attach_points(s, stage) or \
            axes[-1].extent < 2 or math.prod(a.extent for a in window) > MAX_WINDOW:
        return  # (a loop order a rule chose, or too long a reduction to be a window)
    lanes = axes[-1].var
    # each read walks along the lanes (a softmax's row maximum does not: it reads x[i, k])
    if all(load.indices and lanes in expr.free_vars(load.indices[-1])
           for load in analysis.reads(stage)):
        stage.reorder(*axes[:-1], *window, axes[-1])


def _unroll_branches(task: SearchTask, s: te.Schedule, stage: te.Stage) -> None:
    """A stage that chooses between computations by the value of an axis (``analysis.
    branch_axes``: Winograd's transforms, a sum of its own for each position in a tile)
    runs those positions innermost but for the vector lanes, unrolled: each copy's choice
    is then known when compiled, and the copies share their loads. A position taken
    modulo ``m`` splits its axis by ``m``; the last axis is split by the vector lanes
    first, so that the copies sit right around one vector."""
    axes = list(stage.op.axis)
    if stage.relations or stage.annotations or len(axes) < 2 or \
            not analysis.is_injective(stage):
        return
    branches = analysis.branch_axes(stage, s)
    branches.pop(len(axes) - 1, None)
    if not branches or math.prod(branches.values()) > analysis.MAX_BRANCH_COPIES:
        return
    *axes, last = axes
    outer, copies = [], []
    for pos, iv in enumerate(axes):
        if pos not in branches:
            outer.append(iv)
        elif branches[pos] >= iv.extent:
            copies.append(iv)
        else:
            o, i = stage.split(iv, factor=branches[pos])
            outer.append(o)
            copies.append(i)
    lanes = _stage_lanes(task, stage)
    if last.extent > lanes and last.extent % lanes == 0:
        o, last = stage.split(last, factor=lanes)
        outer.append(o)
    stage.reorder(*outer, *copies, last)
    for iv in copies:
        stage.unroll(iv)


def _parallel(task: SearchTask, s: te.Schedule, stage: te.Stage, decide: Decide) -> None:
    """Fuse the outermost spatial loops (up to the first loop something is computed at) and
    run the fused loop in parallel; how many (loops of more than one iteration) is a
    decision, and for a small workload
    (under ``SERIAL_FLOPS``) none is one too: waking the threads can cost more than the
    work (a 128 x 128 GEMV took 3 us in parallel). The innermost loop stays out where a
    loop outside it has work to share: it is the vector lanes' (a GEMM's operand copied
    into panels at run time with all three loops fused and parallel ran 10x slower than
    parallel panels of vector copies)."""
    attach = _attach_points(s, stage)
    leaves = stage.leaf_iter_vars
    if any(iv.extent > 1 for iv in leaves[:-1]):
        leaves = leaves[:-1]
    leading = []
    for iv in leaves:
        if iv.is_reduce or iv in stage.annotations:
            break
        leading.append(iv)
        if iv in attach and iv.extent > 1:
            break
    # a loop of one iteration (a batch of 1) is fused along but not counted
    ends = [n + 1 for n, iv in enumerate(leading) if iv.extent > 1]
    if not ends:
        return
    first = 0 if task.workload.flops < SERIAL_FLOPS else 1
    count = decide(f"parallel:{stage.name}",
                   ChoiceDecision(tuple(range(first, min(len(ends), 3) + 1))))
    if count == 0:
        return
    chosen = leading[:ends[count - 1]]
    if len(chosen) > 1 and any(iv in attach for iv in chosen):
        # a loop something is computed at cannot be fused: with only loops of one
        # iteration outside (a batch of 1), the last loop alone runs in parallel (a layer
        # norm's rows, each computing its own variance); else the loops before it
        if all(iv.extent == 1 for iv in chosen[:-1]):
            chosen = chosen[-1:]
        elif any(iv in attach for iv in chosen[:-1]):
            chosen = chosen[:1]
        else:
            chosen = chosen[:-1]
    loop = stage.fuse(*chosen) if len(chosen) > 1 else chosen[0]
    stage.parallel(loop)


def _prefetch(s: te.Schedule, stage: te.Stage, decide: Decide) -> None:
    """A pass with vector math computed once per row at a row loop (a softmax's
    exponentials) may prefetch the next row of the inputs it reads while it computes this
    one (``Stage.prefetch``): whether is a decision. In a fused softmax 128x3072 (Zen 4) the
    exponentials' pass ran 1.10x faster so, the next row arriving from L2 while the core
    computed exponentials; the row maximum's pass, which only streams, ran 1.03x slower
    fetching ahead (offered both, a 256-trial tune took both: 1.02x). Only where neither
    the stage's consumers nor the stages it is computed in are tiled: a tile's operands are
    reused from cache, and packed where that pays."""
    if not any(isinstance(node, expr.Call) and node.name in analysis.EXPENSIVE_CALLS
               for node in expr.walk(stage.op.body)):
        return
    if stage.attach != "at" or any(map(analysis.needs_multi_level_tiling, s.consumers(stage))):
        return
    host = stage
    while True:
        if analysis.needs_multi_level_tiling(host):
            return
        if host.attach != "at":
            break
        host = host.attach_stage
    spatial = {axis.var for axis in stage.op.axis}
    inputs: list[te.Stage] = []
    for load in analysis.reads(stage):
        source = s.stage_of(load.source)
        if source.is_placeholder and source not in inputs and any(
                spatial & expr.free_vars(index) for index in load.indices):
            inputs.append(source)
    if inputs and decide(f"prefetch:{stage.name}", ChoiceDecision((0, 1))):
        for source in inputs:
            stage.prefetch(source.op.output, 1)


def _vectorize(task: SearchTask, s: te.Schedule, stage: te.Stage, decide: Decide) -> None:
    if not stage.leaf_iter_vars:  # a scalar (0-d) stage has no loop
        return
    inner = stage.leaf_iter_vars[-1]
    if inner.is_reduce or inner in stage.annotations or inner in _attach_points(s, stage):
        return
    if inner.extent > MAX_VECTOR_EXTENT:
        # whole vectors of the target's lanes (4 lanes on AVX2 leave half of each idle)
        lanes = _stage_lanes(task, stage)
        widths = tuple(w for w in VECTOR_SPLITS if w % lanes == 0) or VECTOR_SPLITS
        width = decide(f"vector:{stage.name}", ChoiceDecision(widths))
        _, inner = stage.split(inner, factor=width)
    if inner.extent > 1:
        stage.vectorize(inner)
