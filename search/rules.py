"""Sketch derivation rules, and the registry users extend with their own.

Stages are visited from the outputs to the inputs. For each stage the rules are tried in
order; a rule returns the alternatives it creates (each a list of ``SketchOp``s for that
stage) and whether the remaining rules are skipped. Every combination of alternatives
across stages is a sketch.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from schedule import cpu_intrin, make_schedule, te
from schedule import dtype as dt

from . import analysis
from .sketch import Sketch, SketchOp
from .task import SearchTask


@dataclass
class RuleResult:
    alternatives: list[list[SketchOp]]
    skip_rest: bool = False


@dataclass
class SketchContext:
    """What a rule may look at: the task, its default schedule, and the ops chosen so far
    for the stages already visited (the consumers of the current stage)."""

    task: SearchTask
    schedule: te.Schedule
    chosen: dict[str, list[SketchOp]]

    def inlined(self, name: str) -> bool:
        return any(op.kind == "inline" for op in self.chosen.get(name, []))

    def effective_consumers(self, stage: te.Stage) -> list[te.Stage]:
        """Consumers once inlined stages are looked through."""
        out: list[te.Stage] = []
        for c in self.schedule.consumers(stage):
            if self.inlined(c.name):
                out += [x for x in self.effective_consumers(c) if x not in out]
            elif c not in out:
                out.append(c)
        return out

    def read_once(self, stage: te.Stage) -> bool:
        """Each value of ``stage`` is read once: by its only consumer, at the consumer's own
        index, by a single read (through consumers inlined the same way)."""
        consumers = self.schedule.consumers(stage)
        if len(consumers) != 1:
            return False
        (consumer,) = consumers
        if len(analysis.reads_of(consumer, stage, self.schedule)) != 1 or \
                not analysis.elementwise_matched(consumer, stage, self.schedule):
            return False
        return not self.inlined(consumer.name) or self.read_once(consumer)

    def fusible_consumer(self, stage: te.Stage) -> te.Stage | None:
        consumers = self.effective_consumers(stage)
        if len(consumers) != 1:
            return None
        (c,) = consumers
        if self.chosen.get(c.name) and any(op.kind != "location" for op in self.chosen[c.name]):
            return None
        direct = self.schedule.consumers(stage)
        if direct != [c] and not all(self.inlined(d.name) for d in direct):
            return None
        if c.op.shape != stage.op.shape or not analysis.is_injective(c):
            return None
        if direct == [c] and not analysis.elementwise_matched(c, stage, self.schedule):
            return None
        return c


Rule = Callable[[SketchContext, te.Stage], RuleResult | None]


def always_inline(ctx: SketchContext, stage: te.Stage) -> RuleResult | None:
    """Inline cheap element-wise stages; one with expensive math (a GELU's erf), or one
    that chooses its computation by position (``analysis.branch_axes``: a Winograd output
    transform before its bias and ReLU), only where each of its values is read once, so
    inlining computes nothing twice and leaves the producer before it free to fuse into
    the consumer (or the consumer unrolls the positions)."""
    if not ctx.effective_consumers(stage):
        return None
    if analysis.is_strictly_inlinable(stage) or (
            (analysis.is_elementwise_inlinable(stage)
             or (analysis.is_injective(stage) and analysis.branch_axes(stage, ctx.schedule)))
            and ctx.read_once(stage)):
        return RuleResult([[SketchOp("inline", stage.name)]], skip_rest=True)
    return None


#: at most this many outputs, a tiled stage reducing along rows (``x @ W.T`` of a batch-1
#: dense layer) may also factor each output's reduction across vector lanes
GEMV_OUTPUTS = 4096


def add_rfactor(ctx: SketchContext, stage: te.Stage) -> RuleResult | None:
    """Factor a long reduction so its inner part runs across vector lanes; the plain form
    stays as an alternative. A reduction whose output is small next to it (a norm, a few
    long rows) factors once for all outputs; a row-wise one over many rows (softmax,
    layer_norm) factors per row, the partial results computed at the row's loop, so the
    passes over a row can be fused where its consumer runs. A stage that is tiled for
    reuse but has few outputs and reduces along rows (a batch-1 dense layer) gets the
    per-row factoring as one more alternative to its tilings."""
    if not stage.op.reduce_axis:
        return None
    spatial, reduce = analysis.spatial_size(stage), analysis.reduce_size(stage)
    if analysis.needs_multi_level_tiling(stage):
        # a matrix-vector product: too few outputs for register tiles to pay; each
        # output's dot product can run across the lanes instead
        if len(stage.op.reduce_axis) == 1 and reduce >= 64 and spatial <= GEMV_OUTPUTS \
                and analysis.reduces_contiguously(stage):
            return RuleResult([[SketchOp("rfactor", stage.name, at_rows=True,
                                         row_block=True),
                                SketchOp("location", stage.name)]])
        return None
    if reduce < 64:
        return None
    plain = [SketchOp("location", stage.name)]
    if spatial <= ctx.task.cores * 16 and spatial < reduce:
        return RuleResult([[SketchOp("rfactor", stage.name)], plain], skip_rest=True)
    if analysis.reduces_contiguously(stage):
        return RuleResult([[SketchOp("rfactor", stage.name, at_rows=True), *plain], plain],
                          skip_rest=True)
    return None


def multi_level_tiling(ctx: SketchContext, stage: te.Stage) -> RuleResult | None:
    """Tile stages with data reuse; fuse an element-wise consumer into the tile (at level
    1 or 2), or add a cache-write accumulator stage fused the same way; keep the plain
    tiling as an alternative. A fused tiling that reads an operand a row apart per step
    (``analysis.panel_operands``: a GEMM's right-hand side) is also offered with that
    operand packed per tile (the ``pack`` op). Where the output's rows fill no whole
    number of vectors but another axis does (``transposed_accumulators``), that axis is
    also offered as the vector axis."""
    if not analysis.needs_multi_level_tiling(stage):
        return None
    plain = [SketchOp("tile", stage.name)]
    consumer = ctx.fusible_consumer(stage)
    if consumer is not None:
        fused = [[SketchOp("tile", stage.name, level, consumer.name)] for level in (1, 2)]
    else:
        local = f"{stage.name}.local"
        fused = [[SketchOp("cache_write", stage.name),
                  SketchOp("tile", local, level, stage.name)] for level in (1, 2)]
    panels = analysis.panel_operands(stage)
    packed = [[*ops[:-1], dataclasses.replace(ops[-1], packed=True),
               *(SketchOp("pack", ops[-1].stage, operand=name) for name in panels)]
              for ops in fused] if panels else []
    transposed = transposed_accumulators(ctx, stage) if consumer is None else []
    return RuleResult([*fused, *packed, *transposed, plain], skip_rest=True)


#: a transposed copy of operands is offered only to a program of at least this many FLOPs
#: per byte copied: a depthwise convolution (4 FLOPs per byte of its padded input, which
#: it would copy too) spent every call's time twice over, and its tune, drawn to those
#: programs, ended 1.8x slower than one that had stayed with channel-row vectors; the
#: convolutions that gain copy only their weights (100-1500 FLOPs per byte)
MIN_FLOPS_PER_COPIED_BYTE = 16


def transposed_accumulators(ctx: SketchContext, stage: te.Stage) -> list[list[SketchOp]]:
    """On a cpu target, a stage whose last axis fills no whole number of vectors while
    another axis does (``analysis.transposed_vector_layout``: an NCHW convolution's 55
    output columns, its 64 output channels) accumulates in a cache-write tile whose axes
    put that other axis last, so the register tiles are whole vectors of it; the copy-out
    writes the original layout, and operands read along that axis in an outer dimension
    (the weights) are read from a transposed copy, made once per call (where that copy
    is cheap beside the work: ``MIN_FLOPS_PER_COPIED_BYTE``)."""
    if ctx.task.target.kind != "cpu":
        return []
    lanes = ctx.task.vector_lanes(dt.itemsize(stage.op.output.dtype))
    layout = analysis.transposed_vector_layout(stage, lanes)
    if layout is None:
        return []
    order, operands = layout
    copied = {load.source.name: load.source for load in analysis.reads(stage)
              if load.source.name in dict(operands)}
    copied_bytes = sum(math.prod(t.shape) * dt.itemsize(t.dtype) for t in copied.values())
    if ctx.task.workload.flops < MIN_FLOPS_PER_COPIED_BYTE * copied_bytes:
        return []
    local = f"{stage.name}.local"
    return [[SketchOp("cache_write", stage.name, axis_order=tuple(order)),
             SketchOp("tile", local, level, stage.name),
             *(SketchOp("pack", local, operand=name, axis_order=tuple(o))
               for name, o in operands)] for level in (1, 2)]


def tensorize_int8_dot(ctx: SketchContext, stage: te.Stage) -> RuleResult | None:
    """On an AVX-512 cpu target, a stage whose innermost loops can be the 8-bit dot product
    (``conv2d_nchw4c_int8``: 16 output channels by 4 input channels) is also tiled around
    it, accumulating in a cache-write tile fused into the output at level 1 or 2 (the
    accumulators stay in vector registers); the plain tilings stay alternatives, and the
    measurements choose (the instruction is VNNI's, where the CPU has it)."""
    target, intrin = ctx.task.target, cpu_intrin.DOT_U8I8
    if target.kind != "cpu" or target.isa != "avx512" \
            or not intrin.matches_innermost(stage.op):
        return None
    local = f"{stage.name}.local"
    return RuleResult([[SketchOp("cache_write", stage.name),
                        SketchOp("tile", local, level, stage.name, intrin=intrin.name)]
                       for level in (1, 2)])


def keep_tensorized_inputs(ctx: SketchContext, stage: te.Stage) -> RuleResult | None:
    """A stage a tensorized nest reads (a convolution's padding) stays a buffer: inlined,
    its reads would not be the plain loads the intrinsic takes."""
    for consumer in ctx.effective_consumers(stage):
        for op in ctx.chosen.get(consumer.name, []):
            if op.intrin:
                return RuleResult([[SketchOp("location", stage.name, intrin=op.intrin)]],
                                  skip_rest=True)
    return None


def gpu_multi_level_tiling(ctx: SketchContext, stage: te.Stage) -> RuleResult | None:
    """On a GPU, a stage with data reuse is tiled "SSSRRSRS" at the thread level of the
    stage that writes its result (``gpu_sketch.tile``): its element-wise consumer when
    there is one (the stage then accumulates in registers), else a cache-write copy-out."""
    if not analysis.needs_multi_level_tiling(stage):
        return None
    consumer = ctx.fusible_consumer(stage)
    if consumer is not None:
        return RuleResult([[SketchOp("gpu_tile", stage.name, consumer=consumer.name)]],
                          skip_rest=True)
    return RuleResult([[SketchOp("cache_write", stage.name),
                        SketchOp("gpu_tile", f"{stage.name}.local", consumer=stage.name)]],
                      skip_rest=True)


#: On a GPU, reductions at least this long may also be reduced by a block's threads together.
CROSS_THREAD_MIN_REDUCE = 32


def gpu_cross_thread_reduction(ctx: SketchContext, stage: te.Stage) -> RuleResult | None:
    """On a GPU, a long reduction without data reuse (a softmax's row max and sum, a norm)
    may be reduced by all the threads of a block together, one output per block; one
    thread per output stays the alternative."""
    if not stage.op.reduce_axis or analysis.needs_multi_level_tiling(stage) \
            or analysis.reduce_size(stage) < CROSS_THREAD_MIN_REDUCE:
        return None
    return RuleResult([[SketchOp("cross_thread", stage.name)],
                       [SketchOp("location", stage.name)]], skip_rest=True)


def open_location(ctx: SketchContext, stage: te.Stage) -> RuleResult | None:
    return RuleResult([[SketchOp("location", stage.name)]], skip_rest=True)


DEFAULT_RULES: list[tuple[str, Rule]] = [
    ("keep_tensorized_inputs", keep_tensorized_inputs),
    ("always_inline", always_inline),
    ("tensorize_int8_dot", tensorize_int8_dot),
    ("add_rfactor", add_rfactor),
    ("multi_level_tiling", multi_level_tiling),
    ("open_location", open_location),
]

GPU_RULES: list[tuple[str, Rule]] = [
    ("always_inline", always_inline),
    ("gpu_multi_level_tiling", gpu_multi_level_tiling),
    ("gpu_cross_thread_reduction", gpu_cross_thread_reduction),
    ("open_location", open_location),
]
"""The rules for cuda and opencl targets (no CPU vector or tensor-instruction rules)."""

_USER_RULES: list[tuple[str, Rule]] = []


def register_sketch_rule(name: str, rule: Rule) -> None:
    """Add a rule, tried before the built-in ones (a rule returning None does not apply)."""
    if any(n == name for n, _ in _USER_RULES):
        raise ValueError(f"a sketch rule named {name!r} is already registered")
    _USER_RULES.append((name, rule))


def unregister_sketch_rule(name: str) -> None:
    _USER_RULES[:] = [(n, r) for n, r in _USER_RULES if n != name]


MAX_SKETCHES = 64


def generate_sketches(task: SearchTask) -> list[Sketch]:
    """All sketches of a task (every combination of the rules' alternatives per stage)."""
    s, _ = make_schedule(task.workload)
    stages = list(reversed(analysis.compute_stages(s)))
    builtin = GPU_RULES if task.target.is_gpu else DEFAULT_RULES
    partial: list[tuple[dict[str, list[SketchOp]], list[str]]] = [({}, [])]
    for stage in stages:
        grown = []
        for chosen, names in partial:
            ctx = SketchContext(task, s, chosen)
            alternatives: list[tuple[str, list[SketchOp]]] = []
            for rule_name, rule in [*_USER_RULES, *builtin]:
                result = rule(ctx, stage)
                if result is None:
                    continue
                alternatives += [(rule_name, alt) for alt in result.alternatives]
                if result.skip_rest:
                    break
            for rule_name, ops in alternatives:
                grown.append(({**chosen, stage.name: ops}, [*names, _describe(rule_name, ops)]))
        partial = grown[:MAX_SKETCHES]
    sketches = []
    for chosen, names in partial:
        ops = list(itertools.chain.from_iterable(chosen[st.name] for st in stages))
        sketches.append(Sketch(" | ".join(n for n in names if n), ops))
    return sketches


def _describe(rule: str, ops: list[SketchOp]) -> str:
    if all(op.kind == "location" for op in ops):
        return ""
    parts = []
    for op in ops:
        text = f"{op.kind} {op.stage}"
        if op.fuse_level:
            text += f" fused@{op.consumer}:L{op.fuse_level}"
        if op.at_rows:
            text += " per row"
        if op.kind == "gpu_tile":
            text += f" SSSRRSRS@{op.consumer} (blocks, vthreads, threads; shared inputs)"
        if op.axis_order and op.kind == "cache_write":
            text += f" transposed {list(op.axis_order)}"
        if op.kind == "pack":
            text = f"pack {op.operand} for {op.stage}"
            if op.axis_order:
                text = f"transpose {op.operand} {list(op.axis_order)} for {op.stage}"
        if op.intrin and op.kind == "tile":
            text += f" tensorized {op.intrin}"
        parts.append(text)
    return ", ".join(parts)
