"""The structure of GPU programs the sketch search instantiates (cuda and opencl targets).

``tile`` is Ansor's GPU multi-level tiling, "SSSRRSRS": each spatial axis of a stage with
data reuse is split in five (block, virtual thread, thread, and two levels inside a
thread), each reduction axis in three. The stage that carries the tile (the reduction's
``local`` accumulator, or the reduction itself computed into registers when an
element-wise consumer is fused) is computed at the thread level of the stage that writes
the result, whose block, virtual-thread and thread levels are fused and bound to
``blockIdx.x``, ``vthread`` and ``threadIdx.x``. Inside a thread the order is
r0 r1 s3 r2 s4. Every input the stage reads is staged in shared memory at the outer
reduction tile and fetched cooperatively by all the block's threads, each copying 1, 2 or 4
neighbouring elements per step (a decision; vector loads where aligned).

``cross_thread`` lets a block's threads reduce an output together (for reductions with
few outputs and long rows: softmax, layer norm, a norm), 1 to 8 outputs per block side by
side on ``threadIdx.y`` (a decision). ``bind_root`` gives any other stage
computed at the root one thread per output element (how many threads per block is a
decision), and ``annotate`` adds the auto-unroll depth.
Decisions that exceed the target's threads per block, more than ``MAX_VTHREADS`` virtual
threads or more than ``MAX_THREAD_TILE`` outputs per thread are invalid programs
(``ScheduleError``); shared memory over the limit is found by the GPU lowering, which the
policy runs on every program it builds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from schedule import ScheduleError, Target, te

from .space import ChoiceDecision, Decision, TileDecision

Decide = Callable[[str, Decision], Any]

MAX_VTHREADS = 8
#: Output elements one thread accumulates, for all its virtual threads: its registers on a
#: GPU (a CUDA thread has at most 255).
MAX_THREAD_TILE = 64
#: The largest factor of each of the two levels inside a thread, per axis.
MAX_INNER_FACTOR = 8
THREADS_PER_BLOCK = (32, 64, 128, 256, 512, 1024)
UNROLL_STEPS = (0, 16, 64, 512, 1024)
#: Elements each thread copies per step of a cooperative fetch (2 and 4: vector loads).
FETCH_WIDTHS = (1, 2, 4)
#: Outputs a block's threads reduce side by side in a cross-thread reduction.
ROWS_PER_BLOCK = (1, 2, 4, 8)
_BOUND = ("blockIdx.x", "vthread", "threadIdx.x")


def tile(s: te.Schedule, stage_name: str, consumer_name: str, target: Target,
         decide: Decide, fused: bool) -> None:
    """Tile ``stage_name`` at the thread level of ``consumer_name`` (see the module
    docstring); ``fused``: the stage is the reduction itself, kept in registers."""
    stage, out = s[stage_name], s[consumer_name]
    if fused:
        stage.set_scope("local")
    spatial = list(stage.op.axis)
    limits = (MAX_VTHREADS, target.max_threads_per_block, MAX_INNER_FACTOR, MAX_INNER_FACTOR)
    tiles = {a.name: decide(f"tile:{stage.name}:{a.name}",
                            TileDecision(a.extent, 4, level_max=limits)) for a in spatial}
    vthreads = math.prod(t[0] for t in tiles.values())
    threads = math.prod(t[1] for t in tiles.values())
    if vthreads > MAX_VTHREADS:
        raise ScheduleError(f"{vthreads} virtual threads; at most {MAX_VTHREADS}")
    per_thread = math.prod(t[0] * t[2] * t[3] for t in tiles.values())
    if per_thread > MAX_THREAD_TILE:  # its virtual threads' tiles included
        raise ScheduleError(f"{per_thread} outputs per thread; at most {MAX_THREAD_TILE}")
    if threads > target.max_threads_per_block:
        raise ScheduleError(f"{threads} threads per block; the target allows "
                            f"{target.max_threads_per_block}")
    levels: list[list[te.IterVar]] = [[], [], [], []]
    for a_c, a in zip(out.op.axis, spatial, strict=False):
        fv, ft, f3, f4 = tiles[a.name]
        block, rest = out.split(a_c, factor=fv * ft * f3 * f4)
        vthread, rest = out.split(rest, factor=ft * f3 * f4)
        thread, inner = out.split(rest, factor=f3 * f4)
        for level, iv in zip(levels, (block, vthread, thread, inner), strict=True):
            level.append(iv)
    out.reorder(*[iv for level in levels for iv in level])
    bound = [out.fuse(*level) if len(level) > 1 else level[0] for level in levels[:3]]
    for iv, tag in zip(bound, _BOUND, strict=True):
        out.bind(iv, tag)
    stage.compute_at(out, bound[2])

    inner_levels: list[list[te.IterVar]] = [[], []]
    for a in spatial:
        _, _, _, f4 = tiles[a.name]
        s3, s4 = stage.split(a, factor=f4)
        inner_levels[0].append(s3)
        inner_levels[1].append(s4)
    r_levels: list[list[te.IterVar]] = [[], [], []]
    for a in stage.op.reduce_axis:
        g1, g2 = decide(f"tile:{stage.name}:{a.name}", TileDecision(a.extent, 2))
        r0, rest = stage.split(a, factor=g1 * g2)
        r1, r2 = stage.split(rest, factor=g2)
        for level, iv in zip(r_levels, (r0, r1, r2), strict=True):
            level.append(iv)
    stage.reorder(*r_levels[0], *r_levels[1], *inner_levels[0], *r_levels[2],
                  *inner_levels[1])
    if not r_levels[0]:
        return
    for tensor in dict.fromkeys(stage.op.input_tensors):
        shared = s[s.cache_read(tensor, "shared", [stage])]
        shared.compute_at(stage, r_levels[0][-1])
        axes = list(shared.op.axis)
        fused_axis = shared.fuse(*axes) if len(axes) > 1 else axes[0]
        width = decide(f"vector:{shared.name}", ChoiceDecision(FETCH_WIDTHS))
        _, rest = shared.split(fused_axis, factor=threads * width)
        lane, vector = shared.split(rest, factor=width)
        shared.bind(lane, "threadIdx.x")
        if width > 1:  # each thread copies ``width`` neighbours: one float4 where aligned
            shared.vectorize(vector)


def cross_thread(s: te.Schedule, stage_name: str, target: Target, decide: Decide) -> None:
    """A reduction with one output per block at a time: the spatial axes fused onto
    ``blockIdx.x``, the (fused) reduction split so that its inner part runs across the
    block's threads (a cross-thread reduction, see ``schedule.gpu_lower``), each thread
    accumulating every ``threads``-th element."""
    stage = s[stage_name]
    spatial = [iv for iv in stage.leaf_iter_vars if not iv.is_reduce]
    reduce_axes = [iv for iv in stage.leaf_iter_vars if iv.is_reduce]
    k = stage.fuse(*reduce_axes) if len(reduce_axes) > 1 else reduce_axes[0]
    choices = tuple(n for n in THREADS_PER_BLOCK
                    if n <= target.max_threads_per_block and n // 2 < k.extent) or (1,)
    threads = decide(f"threads:{stage.name}", ChoiceDecision(choices))
    outer, lane = stage.split(k, factor=threads)
    if not spatial:
        stage.reorder(lane, outer)
        stage.bind(lane, "threadIdx.x")
        return
    block = stage.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    # several rows per block side by side on threadIdx.y; only counts that divide the
    # rows (a partial last block would leave threads out of the reduction's barriers)
    rows = decide(f"rows:{stage.name}", ChoiceDecision(tuple(
        r for r in ROWS_PER_BLOCK if block.extent % r == 0
        and r * threads <= target.max_threads_per_block) or (1,)))
    if rows > 1:
        block, row = stage.split(block, factor=rows)
        stage.reorder(block, row, lane, outer)
        stage.bind(row, "threadIdx.y")
    else:
        stage.reorder(block, lane, outer)
    stage.bind(block, "blockIdx.x")
    stage.bind(lane, "threadIdx.x")


def bind_root(stage: te.Stage, target: Target, decide: Decide) -> None:
    """One thread per output element of a stage computed at the root."""
    spatial = [iv for iv in stage.leaf_iter_vars if not iv.is_reduce]
    if not spatial:
        raise ScheduleError(f"{stage.name} has no spatial axis to bind to GPU threads")
    fused = stage.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    choices = tuple(n for n in THREADS_PER_BLOCK if n <= target.max_threads_per_block) or (1,)
    threads = decide(f"threads:{stage.name}", ChoiceDecision(choices))
    block, thread = stage.split(fused, factor=threads)
    stage.bind(block, "blockIdx.x")
    stage.bind(thread, "threadIdx.x")


def annotate(s: te.Schedule, stages: list[te.Stage], target: Target, decide: Decide) -> None:
    """Bind what no tile bound, and choose each tiled or reducing stage's unroll depth."""
    for stage in stages:
        if stage.attach == "inline":
            continue
        if stage.attach == "root" and not any(tag in _BOUND
                                              for tag in stage.annotations.values()):
            bind_root(stage, target, decide)
        if stage.op.reduce_axis and stage.scope != "shared":
            depth = decide(f"unroll:{stage.name}", ChoiceDecision(UNROLL_STEPS))
            if depth:
                first = next(iv for iv in stage.leaf_iter_vars if iv not in stage.annotations)
                stage.pragma(first, "auto_unroll_max_step", depth)
