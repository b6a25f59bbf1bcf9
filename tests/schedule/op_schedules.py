"""Hand-written CPU schedules for every operator of ``schedule.ops``.

Each ``schedule_*`` function takes the op's te argument list ``[inputs..., output]`` (as
``ops.get_op(name).build(params)`` returns it, or as built from ``schedule.ops`` directly)
and returns the schedule. The building blocks are the ones a performance engineer uses:

* ``gemm_tile``: ``C = A @ B`` with ``B`` contiguous along the output columns: a packed
  column panel of ``B`` (``cache_read`` at the panel loop), a ``rows x cols`` register
  tile (``cache_write`` at the row-tile loop, unrolled rows, vectorized columns), the
  reduction outside the tile, the panels in parallel.
* ``dot_tile``: ``C = X @ W.T`` (both operands contiguous along ``k``, the dense layout):
  the reduction split by the vector width and ``rfactor``-ed so each output keeps one
  vector of partial sums, a ``rows x cols`` tile of such vectors in registers
  (``cache_write`` of the factored stage), then a horizontal sum per output.
* ``lane_reduce``: a reduction over the innermost axes with a small output (softmax rows,
  layer_norm rows, global pooling, ``reduce_*`` over the last axes): ``rfactor`` into one
  vector of partial results kept in a register, then a horizontal reduction.
* ``injective``: element-wise / layout stages: producers inlined, the leading axes fused
  and parallel, the last axis vectorized.
"""

from __future__ import annotations

from collections.abc import Sequence

from schedule import te
from schedule.target import Target
from schedule.tensor import ComputeOp, IterVar, Reduce, Tensor

LANES = Target.parse("cpu").vector_bits // 32
"""float32 lanes of one native vector (16 with AVX-512)."""

Schedule = te.Schedule
Stage = te.Stage


# ---------------------------------------------------------------------------- helpers


def _is_compute(stage: Stage) -> bool:
    return isinstance(stage.op, ComputeOp)


def _is_reduction(stage: Stage) -> bool:
    return _is_compute(stage) and isinstance(stage.op.body, Reduce)


def inline_injective(s: Schedule, keep: Sequence[str] = ()) -> None:
    """Inline every intermediate injective stage (bias_add, activations, exp, pad ...)
    except the stages named in ``keep``."""
    for stage in s.stages:
        if (_is_compute(stage) and not stage.is_output and not _is_reduction(stage)
                and stage.attach == "root" and stage.name not in keep
                and stage.op.is_injective):
            stage.compute_inline()


def vectorize_inner(stage: Stage, axis: IterVar, lanes: int = LANES) -> IterVar:
    """Vectorize ``axis`` (the innermost loop of ``stage``) by native vectors: split it by
    ``lanes`` when it is longer, so a long axis is a loop over vectors, not unrolled."""
    if axis.extent > lanes:
        axis_outer, axis = stage.split(axis, factor=lanes)
    stage.vectorize(axis)
    return axis


def unroll_unit_loops(stage: Stage, axes: Sequence[IterVar]) -> None:
    """Unroll the given loops of a stage computed at a tile (extent 1 there, e.g. the batch
    axis of a register tile): a loop of extent 1 is kept as a loop otherwise, and its
    variable in the indices stops the buffer from being promoted to registers."""
    for axis in axes:
        stage.unroll(axis)


def fuse_all(stage: Stage, axes: Sequence[IterVar]) -> IterVar:
    axes = list(axes)
    return axes[0] if len(axes) == 1 else stage.fuse(*axes)


# ---------------------------------------------------------------------------- building blocks


def injective(s: Schedule, out: Tensor, lanes: int = LANES, unroll: int = 4) -> None:
    """Element-wise / layout output: leading axes fused and parallel, the last axis in
    vectors (``unroll`` vectors per step). A 1-d or short-rowed tensor is flattened first."""
    stage = s[out]
    axes = list(stage.op.axis)
    if not axes:
        return
    if len(axes) > 1 and axes[-1].extent < lanes:
        axes = [stage.fuse(*axes)]  # rows shorter than a vector: one flat loop
    *rows, last = axes
    block = lanes * unroll
    if rows:
        stage.parallel(fuse_all(stage, rows))
        if last.extent > block:
            last_outer, last = stage.split(last, factor=block)
    else:
        last_outer, last = stage.split(last, factor=block)
        stage.parallel(last_outer)
    if last.extent > lanes:
        vec_outer, vec = stage.split(last, factor=lanes)
        stage.unroll(vec_outer)
        stage.vectorize(vec)
    else:
        stage.vectorize(last)


def gemm_tile(s: Schedule, out: Tensor, b: Tensor, rows: int = 8, cols: int = 32) -> Tensor:
    """Register-tiled GEMM for ``out[..., i, j] = sum_k A[.., i, k] * B[.., k, j]`` (any
    layout of A; B ideally contiguous along ``j``). Returns the register tile."""
    C = out
    CL = s.cache_write(C, "local")
    BB = s.cache_read(b, "global", [CL])
    *batch, i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=cols)
    io, ii = s[C].split(i, factor=rows)
    s[C].reorder(*batch, jo, io, ii, ji)
    panel = fuse_all(s[C], [*batch, jo])
    s[C].parallel(panel)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    # packed column panel of B: contiguous rows of `cols` floats, reused by every row tile
    s[BB].compute_at(s[C], panel)
    vectorize_inner(s[BB], s[BB].op.axis[-1])
    # the register tile: k outermost, rows unrolled, columns in vectors
    s[CL].compute_at(s[C], io)
    *cb, ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    s[CL].reorder(ck, ci, cj)
    unroll_unit_loops(s[CL], cb)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    return CL


def dot_tile(s: Schedule, out: Tensor, red: Tensor, rows: int = 4, cols: int = 4) -> Tensor:
    """``red[..., i, j] = sum_k X[.., i, k] * W[.., j, k]`` (both contiguous along k), then
    optional injective stages up to ``out``: k is split by the vector width and factored
    out (``rfactor``), a ``rows x cols`` tile of partial-sum vectors lives in registers,
    each output sums its vector once. Returns the register tile."""
    inline_injective(s)
    (k,) = s[red].op.reduce_axis
    ko, ki = s[red].split(k, factor=LANES)
    rf = s.rfactor(red, ki, factor_axis=len(s[red].op.axis))
    rfl = s.cache_write(rf, "local")
    *batch, i, j = s[out].op.axis
    io, jo, ii, ji = s[out].tile(i, j, rows, cols)
    tile = fuse_all(s[out], [*batch, io, jo])
    s[out].parallel(tile)
    if red is not out:
        # bias / activation epilogue on the finished tile, a short vector per row
        s[out].vectorize(ji)
        s[red].compute_at(s[out], tile)
    (kr,) = s[red].op.reduce_axis
    s[red].unroll(kr)
    # the partial sums, copied out of registers once per tile
    s[rf].compute_at(s[out], tile)
    *fb, fi, fj, fk = s[rf].op.axis
    unroll_unit_loops(s[rf], fb)
    s[rf].unroll(fi)
    s[rf].unroll(fj)
    s[rf].vectorize(fk)
    # the register tile of partial-sum vectors
    s[rfl].compute_at(s[out], tile)
    *lb, li, lj, lk = s[rfl].op.axis
    (lko,) = s[rfl].op.reduce_axis
    s[rfl].reorder(lko, li, lj, lk)
    unroll_unit_loops(s[rfl], lb)
    s[rfl].unroll(li)
    s[rfl].unroll(lj)
    s[rfl].vectorize(lk)
    return rfl


def lane_reduce(s: Schedule, red: Tensor, at: Stage, axis: IterVar) -> Tensor:
    """A reduction over the innermost axes with few outputs, computed at ``at.axis``: the
    (fused) reduction is split by the vector width and factored out so the partial results
    are one vector in a register; each output then reduces that vector. Returns the
    register stage."""
    stage = s[red]
    k = fuse_all(stage, stage.op.reduce_axis)
    ko, ki = stage.split(k, factor=LANES)
    rf = s.rfactor(red, ki, factor_axis=len(stage.op.axis))
    rfl = s.cache_write(rf, "local")
    for t in (rfl, rf, red):
        if s[t] is not at:
            s[t].compute_at(at, axis)
    (kr,) = s[red].op.reduce_axis
    s[red].unroll(kr)
    s[rf].vectorize(s[rf].op.axis[-1])
    lk = s[rfl].op.axis[-1]
    (lko,) = s[rfl].op.reduce_axis
    s[rfl].reorder(lko, lk)
    s[rfl].vectorize(lk)
    return rfl


# ---------------------------------------------------------------------------- linear algebra


def schedule_matmul(args: Sequence[Tensor], transpose_a: bool = False,
                    transpose_b: bool = False) -> Schedule:
    """matmul: B contiguous along j (``transpose_b=False``, or both operands transposed,
    where the packed panel is read with gathers): the GEMM register tile; ``A @ B.T``:
    the dot-product tile."""
    a, b, out = args
    s = te.create_schedule(out)
    if transpose_b and not transpose_a:
        dot_tile(s, out, out)
    else:
        gemm_tile(s, out, b)
    return s


def schedule_dense(args: Sequence[Tensor]) -> Schedule:
    """dense (``X @ W.T`` + bias + activation): the dot-product tile with the bias and the
    activation inlined into the epilogue of each tile."""
    out = args[-1]
    s = te.create_schedule(out)
    dot_tile(s, out, s["T_dense"].op.output)
    return s


def schedule_batch_matmul(args: Sequence[Tensor], transpose_b: bool = False) -> Schedule:
    """batch_matmul: the GEMM tile per batch (panels of all batches in parallel), or the
    dot-product tile with ``transpose_b``."""
    a, b, out = args
    s = te.create_schedule(out)
    if transpose_b:
        dot_tile(s, out, out)
    else:
        gemm_tile(s, out, b, rows=4)
    return s
