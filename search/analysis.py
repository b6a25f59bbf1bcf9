"""Static facts about the stages of a computation that the sketch rules ask for."""

from __future__ import annotations

import math

from schedule import expr, te

EXPENSIVE_CALLS = frozenset({"exp", "log", "tanh", "erf", "sigmoid", "pow", "sqrt", "rsqrt"})


def compute_stages(s: te.Schedule) -> list[te.Stage]:
    return [st for st in s.stages if not st.is_placeholder]


def reads(stage: te.Stage) -> list[expr.Load]:
    return [n for n in expr.walk(stage.op.body) if isinstance(n, expr.Load)]


def reads_of(consumer: te.Stage, producer: te.Stage, s: te.Schedule) -> list[expr.Load]:
    """The reads of ``producer``'s output in ``consumer``'s body."""
    return [n for n in reads(consumer) if s.stage_of(n.source) is producer]


def is_injective(stage: te.Stage) -> bool:
    return isinstance(stage.op, te.ComputeOp) and stage.op.is_injective


def is_strictly_inlinable(stage: te.Stage) -> bool:
    """Element-wise with every read indexed by the stage's own axes in order (or by 0 on a
    dimension of extent 1: a broadcast operand such as a per-channel bias; or by a single
    one of its axes: a 1-d per-channel vector read along that axis), no branches and no
    expensive math: inlining it can only save memory traffic."""
    return is_elementwise_inlinable(stage) and not any(
        isinstance(node, expr.Call) and node.name in EXPENSIVE_CALLS
        for node in expr.walk(stage.op.body))


def is_elementwise_inlinable(stage: te.Stage) -> bool:
    """As :func:`is_strictly_inlinable`, expensive math allowed: inlined where its value is
    read more than once, such a stage would compute it more than once."""
    if stage.is_output or not is_injective(stage):
        return False
    axis_vars = [a.var for a in stage.op.axis]
    for node in expr.walk(stage.op.body):
        if isinstance(node, expr.Select):
            return False
        if isinstance(node, expr.Load):
            idx = list(node.indices)
            if len(idx) == 1 and any(idx[0] is v for v in axis_vars):
                continue
            tail = axis_vars[len(axis_vars) - len(idx):] if len(idx) <= len(axis_vars) else None
            if tail is None or not all(
                    i is v or _broadcast_index(i, extent)
                    for i, v, extent in zip(idx, tail, node.source.shape, strict=True)):
                return False
    return True


def _broadcast_index(index: expr.Expr, extent: int) -> bool:
    return isinstance(index, expr.Const) and index.value == 0 and extent == 1


def needs_multi_level_tiling(stage: te.Stage) -> bool:
    """Data reuse: some read misses at least two spatial axes of extent > 1, or misses one
    and the stage reduces (each element read is used by many output points); a read of a
    single element (a scalar constant) does not count."""
    op = stage.op
    if not isinstance(op, te.ComputeOp):
        return False
    spatial = [a for a in op.axis if a.extent > 1]
    for load in reads(stage):
        used = set().union(*(expr.free_vars(i) for i in load.indices))
        if not used:  # a scalar operand (a constant of the graph): nothing to tile for
            continue
        missing = [a for a in spatial if a.var not in used]
        if len(missing) >= 2 or (missing and op.reduce_axis):
            return True
    return False


def reduces_contiguously(stage: te.Stage) -> bool:
    """The innermost reduce axis indexes only the last dimension of every read that uses it
    (a row-wise reduction such as softmax's sum or layer_norm's mean): its inner part can
    run across vector lanes."""
    if not stage.op.reduce_axis:
        return False
    k = stage.op.reduce_axis[-1].var
    users = [load for load in reads(stage)
             if any(k in expr.free_vars(i) for i in load.indices)]
    return bool(users) and all(
        k in expr.free_vars(load.indices[-1])
        and not any(k in expr.free_vars(i) for i in load.indices[:-1]) for load in users)


def spatial_size(stage: te.Stage) -> int:
    return math.prod(a.extent for a in stage.op.axis)


def reduce_size(stage: te.Stage) -> int:
    return math.prod(a.extent for a in stage.op.reduce_axis)


def elementwise_matched(consumer: te.Stage, producer: te.Stage, s: te.Schedule) -> bool:
    """The consumer is element-wise, has the producer's shape and reads it at its own index."""
    if not is_injective(consumer) or consumer.op.shape != producer.op.shape:
        return False
    axis_vars = [a.var for a in consumer.op.axis]
    loads = reads_of(consumer, producer, s)
    return bool(loads) and all(
        len(n.indices) == len(axis_vars)
        and all(i is v for i, v in zip(n.indices, axis_vars, strict=True)) for n in loads)


def read_block(stage: te.Stage, axis: te.IterVar) -> int:
    """The block an axis is read in: ``c`` where a read divides an index of it by the
    constant ``c`` (``W[j // 16, k, j % 16]``, a weight packed in panels), the least common
    multiple of several; 1 if none."""
    block = 1
    for load in reads(stage):
        for index in load.indices:
            for node in expr.walk(index):
                if (isinstance(node, expr.Binary) and node.op in ("floordiv", "floormod")
                        and isinstance(node.b, expr.Const)
                        and axis.var in expr.free_vars(node.a)):
                    block = math.lcm(block, int(node.b.value))
    return block


def panel_operands(stage: te.Stage) -> list[str]:
    """The tensors (by name) ``stage`` reads along its vector axis (the last spatial one,
    as the last index, alone) and down a reduction in another index: a GEMM's ``B[k, j]``.
    Each step of a register tile reads a row piece of them a whole row further on, so the
    steps' reads map to few cache sets (rows 4 KB apart all fall in one); a packed copy of
    the rows a tile reads (the ``pack`` sketch op) puts them next to each other."""
    if not stage.op.axis or not stage.op.reduce_axis:
        return []
    vector = stage.op.axis[-1].var
    reduce_vars = {a.var for a in stage.op.reduce_axis}
    out: list[str] = []
    for load in reads(stage):
        *outer, last = load.indices
        if last is vector and load.source.name not in out and any(
                expr.free_vars(i) & reduce_vars for i in outer):
            out.append(load.source.name)
    return out


def transposed_vector_layout(stage: te.Stage, lanes: int
                             ) -> tuple[list[int], list[tuple[str, list[int]]]] | None:
    """Where the stage's last spatial axis fills no whole number of vectors (an NCHW
    convolution's 55 or 56 output columns on 16 lanes) but another spatial axis does (its
    output channels), and every read along that axis indexes it alone in one dimension:
    the axis order that puts that axis last (the order of a transposing cache-write
    accumulator, whose copy-out writes the original layout), and for each operand read
    along the axis in an outer dimension, the dimension order that makes it innermost (a
    transposed copy of the convolution's weights). None where no axis qualifies."""
    axes = stage.op.axis
    if len(axes) < 2 or not stage.op.reduce_axis or axes[-1].extent % lanes == 0:
        return None
    candidates = [i for i, a in enumerate(axes[:-1]) if a.extent % lanes == 0]
    for i in sorted(candidates, key=lambda i: -axes[i].extent):
        operands = _operands_along(stage, axes[i].var)
        if operands is not None:
            return [d for d in range(len(axes)) if d != i] + [i], sorted(operands.items())
    return None


def _operands_along(stage: te.Stage, var: expr.Var) -> dict[str, list[int]] | None:
    """For each tensor the stage reads with ``var`` as a whole outer index, the dimension
    order moving that index last; None if some read uses ``var`` otherwise."""
    operands: dict[str, list[int]] = {}
    for load in reads(stage):
        dims = [d for d, idx in enumerate(load.indices) if var in expr.free_vars(idx)]
        if not dims:
            continue
        if len(dims) != 1 or load.indices[dims[0]] is not var:
            return None
        (d,) = dims
        if d == len(load.indices) - 1:
            continue
        order = [x for x in range(len(load.indices)) if x != d] + [d]
        if operands.setdefault(load.source.name, order) != order:
            return None
    return operands


#: at most this many copies of a stage's body are unrolled to settle its branches
MAX_BRANCH_COPIES = 64
_ORDER = ("<", "<=", ">", ">=")


def branch_axes(stage: te.Stage, s: te.Schedule) -> dict[int, int]:
    """The axes on whose value the stage chooses between computations (Winograd's
    transforms: a different sum for each position of a tile), by position, each with the
    number of values that decide: ``m`` where a choice compares ``axis % m`` with a constant,
    the axis's extent where it compares the axis itself. A choice counts where both of its
    sides compute something (a padding's ``cond ? x : 0`` or a concatenation's
    ``cond ? a[i] : b[i]`` does not). Producers inlined into the stage and read at its own
    index are looked through; an axis that also decides in another form gives nothing."""
    found: dict[int, int] = {}
    axis_vars = [a.var for a in stage.op.axis]
    for node in expr.walk(stage.op.body):
        if isinstance(node, expr.Select) and _computes(node.true_value) \
                and _computes(node.false_value):
            decided = _decided_axis(node.cond, axis_vars, stage)
            if decided is None:
                return {}
            pos, values = decided
            if found.setdefault(pos, values) != values:
                return {}
    for load in reads(stage):
        producer = s.stage_of(load.source)
        if producer.attach == "inline" and len(load.indices) == len(axis_vars) and all(
                i is v for i, v in zip(load.indices, axis_vars, strict=True)):
            for pos, values in branch_axes(producer, s).items():
                if found.setdefault(pos, values) != values:
                    return {}
    return found


def _computes(value: expr.Expr) -> bool:
    return not isinstance(value, expr.Load | expr.Const)


def _decided_axis(cond: expr.Expr, axis_vars: list[expr.Var],
                  stage: te.Stage) -> tuple[int, int] | None:
    """``(position, values)`` of a condition ``axis < c`` or ``axis % m < c``; None for any
    other condition."""
    if not (isinstance(cond, expr.Compare) and cond.op in _ORDER
            and isinstance(cond.b, expr.Const)):
        return None
    index = cond.a
    modulus = None
    if isinstance(index, expr.Binary) and index.op == "floormod" \
            and isinstance(index.b, expr.Const):
        index, modulus = index.a, int(index.b.value)
    for pos, var in enumerate(axis_vars):
        if index is var:
            return pos, modulus or stage.op.axis[pos].extent
    return None
