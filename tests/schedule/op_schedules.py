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
from schedule.expr import Load, Select, free_vars, walk
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


def inline_injective(s: Schedule) -> None:
    """Inline every intermediate injective stage (bias_add, activations, pad, the stages of
    an element-wise chain) into its consumers."""
    for stage in s.stages:
        if (_is_compute(stage) and not stage.is_output and not _is_reduction(stage)
                and stage.attach == "root" and stage.op.is_injective):
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


def injective(s: Schedule, out: Tensor, lanes: int = LANES, block: int = 4 * LANES,
              selects: bool = False) -> None:
    """Element-wise / layout output: the leading axes fused and parallel, the last axis in
    blocks of ``block`` elements, each block in native vectors (a narrower vector for the
    tail of a short row).

    With ``selects`` (pad, concatenate: a select between loads), the vectors of a block are
    unrolled one by one instead, so each vector's condition folds to a constant where it
    does not depend on the lane and only the vectors straddling a boundary stay scalar.
    The last axis is never fused with the others: a fused index reaches the loads through
    floordiv/floormod, which the vectorizer cannot see as contiguous."""
    stage = s[out]
    *rows, last = stage.op.axis
    if rows:
        stage.parallel(fuse_all(stage, rows))
        if last.extent > block:
            _, last = stage.split(last, factor=block)
    elif last.extent > block:
        blocks, last = stage.split(last, factor=block)
        stage.parallel(blocks)
    if selects and last.extent > lanes:
        vec_outer, last = stage.split(last, factor=lanes)
        stage.unroll(vec_outer)
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


def lane_reduce(s: Schedule, red: Tensor, at: Stage | None = None,
                axis: IterVar | None = None) -> Tensor:
    """A reduction over the innermost axes with few outputs: the (fused) reduction is split
    by the vector width and factored out (``rfactor``) so the partial results are one
    vector in a register (``cache_write``), then each output reduces that vector.

    The three stages are computed at ``at.axis``; without ``at`` they are computed at the
    reduction's own spatial loops, fused and parallel. Returns the register stage."""
    stage = s[red]
    k = fuse_all(stage, stage.op.reduce_axis)
    ko, ki = stage.split(k, factor=LANES)
    rf = s.rfactor(red, ki, factor_axis=len(stage.op.axis))
    rfl = s.cache_write(rf, "local")
    if at is None:
        at, axis = stage, fuse_all(stage, stage.op.axis)
        stage.parallel(axis)
    else:
        stage.compute_at(at, axis)
        unroll_unit_loops(stage, stage.op.axis)
    (kr,) = stage.op.reduce_axis
    stage.unroll(kr)
    for t in (rfl, rf):
        s[t].compute_at(at, axis)
    *rf_lead, rf_lane = s[rf].op.axis
    unroll_unit_loops(s[rf], rf_lead)
    s[rf].vectorize(rf_lane)
    *rfl_lead, lk = s[rfl].op.axis
    (lko,) = s[rfl].op.reduce_axis
    s[rfl].reorder(lko, lk)
    unroll_unit_loops(s[rfl], rfl_lead)
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


# ---------------------------------------------------------------------------- convolution


def _pad_stage(s: Schedule) -> Stage | None:
    return next((st for st in s.stages if st.name == "pad"), None)


def compute_pad_at(s: Schedule, stage: Stage, axis: IterVar, unit_dims: int) -> None:
    """Compute the ``pad`` stage of a window op (if any) at ``stage.axis`` instead of
    inlining it (inlined into a loop vectorized along the width, its select would depend on
    the lane and keep the whole loop scalar). The first ``unit_dims`` axes have extent 1
    at ``axis`` and are unrolled away."""
    pad = _pad_stage(s)
    if pad is None:
        return
    pad.compute_at(stage, axis)
    unroll_unit_loops(pad, pad.op.axis[:unit_dims])


def _channel_tile(channels: int) -> int:
    """Output channels per register tile when vectorizing along channels: two vectors,
    or one when all channels fit in one."""
    return LANES if channels <= LANES else 2 * LANES


def schedule_conv2d_nchw(args: Sequence[Tensor], k_tile: int = 4,
                         w_tile: int = 2 * LANES) -> Schedule:
    """conv2d NCHW (also grouped): a register tile of ``k_tile`` output channels x
    ``w_tile`` output columns (vectorized along the width, channels unrolled), the whole
    (C, R, S) reduction inside the tile; the padded input rows computed once per output
    row and reused by every tile of the row; output rows in parallel."""
    out = args[-1]
    s = te.create_schedule(out)
    CL = s.cache_write(out, "local")
    n, k, oh, ow = s[out].op.axis
    owo, owi = s[out].split(ow, factor=w_tile)
    ko, ki = s[out].split(k, factor=k_tile)
    s[out].reorder(n, oh, owo, ko, ki, owi)
    rows = s[out].fuse(n, oh)
    s[out].parallel(rows)
    s[out].unroll(ki)
    s[out].vectorize(owi)
    # the padded rows an output row reads, once per output row (inlined, the padding
    # select would depend on the vectorized width lane and stay scalar)
    compute_pad_at(s, s[out], rows, unit_dims=1)
    s[CL].compute_at(s[out], ko)
    cn, ck, coh, cow = s[CL].op.axis
    rc, ry, rx = s[CL].op.reduce_axis
    s[CL].reorder(rc, ry, rx, cn, ck, coh, cow)
    unroll_unit_loops(s[CL], [cn, coh])
    s[CL].unroll(ck)
    s[CL].vectorize(cow)
    return s


def schedule_conv2d_nhwc(args: Sequence[Tensor], w_tile: int = 6) -> Schedule:
    """conv2d NHWC (also grouped): a register tile of ``w_tile`` output columns x one or two
    vectors of output channels (HWIO kernel rows are contiguous along K), the reduction
    inside the tile; image rows in parallel. The padding is inlined: its condition does
    not depend on the vectorized channel, so it selects one scalar per column. Grouped, the
    input channel does depend on the output channel lane (a gather), and the select would
    be over vector loads (see ``compute_pad_at``): the padded rows are computed per output
    row instead."""
    data, kernel, out = args
    s = te.create_schedule(out)
    grouped = kernel.shape[2] != data.shape[3]
    if not grouped:
        inline_injective(s)
    K = out.shape[-1]
    CL = s.cache_write(out, "local")
    n, oh, ow, k = s[out].op.axis
    ko, ki = s[out].split(k, factor=_channel_tile(K))
    owo, owi = s[out].split(ow, factor=w_tile)
    s[out].reorder(n, oh, owo, ko, owi, ki)
    rows = s[out].fuse(n, oh)
    s[out].parallel(rows)
    s[out].unroll(owi)
    s[out].vectorize(ki)
    if grouped:
        compute_pad_at(s, s[out], rows, unit_dims=1)
    s[CL].compute_at(s[out], ko)
    cn, coh, cow, ck = s[CL].op.axis
    ry, rx, rc = s[CL].op.reduce_axis
    s[CL].reorder(ry, rx, rc, cn, coh, cow, ck)
    unroll_unit_loops(s[CL], [cn, coh])
    s[CL].unroll(cow)
    s[CL].vectorize(ck)
    return s


def schedule_depthwise_conv2d_nchw(args: Sequence[Tensor], h_tile: int = 4,
                                   w_tile: int = LANES) -> Schedule:
    """depthwise conv2d NCHW: channels (of all images) in parallel, the padded rows of a
    row tile computed once per tile, a register tile of ``h_tile`` rows x ``w_tile``
    columns (rows unrolled, columns vectorized) with the small R x S window inside."""
    out = args[-1]
    s = te.create_schedule(out)
    CL = s.cache_write(out, "local")
    n, k, oh, ow = s[out].op.axis
    oho, ohi = s[out].split(oh, factor=h_tile)
    owo, owi = s[out].split(ow, factor=w_tile)
    s[out].reorder(n, k, oho, owo, ohi, owi)
    planes = s[out].fuse(n, k)
    s[out].parallel(planes)
    s[out].unroll(ohi)
    s[out].vectorize(owi)
    compute_pad_at(s, s[out], oho, unit_dims=2)
    s[CL].compute_at(s[out], owo)
    cn, ck, coh, cow = s[CL].op.axis
    ry, rx = s[CL].op.reduce_axis
    s[CL].reorder(ry, rx, cn, ck, coh, cow)
    unroll_unit_loops(s[CL], [cn, ck])
    s[CL].unroll(coh)
    s[CL].vectorize(cow)
    return s


# ---------------------------------------------------------------------------- pooling


def _pool(s: Schedule, out: Tensor, red: Tensor, w_tile: int) -> None:
    """A pooling output with its window reduction ``red`` in registers: (image, channel)
    planes in parallel, the padded plane computed once per plane, each ``w_tile`` output
    columns accumulated in vectors over the window."""
    RL = s.cache_write(red, "local")
    if red is not out:
        s[red].compute_inline()  # the copy-out of the accumulator feeds the average
    n, c, oh, ow = s[out].op.axis
    planes = s[out].fuse(n, c)
    s[out].parallel(planes)
    owo, owi = s[out].split(ow, factor=w_tile)
    s[out].vectorize(owi)
    compute_pad_at(s, s[out], planes, unit_dims=2)
    s[RL].compute_at(s[out], owo)
    rn, rc, roh, row = s[RL].op.axis
    ry, rx = s[RL].op.reduce_axis
    s[RL].reorder(ry, rx, rn, rc, roh, row)
    unroll_unit_loops(s[RL], [rn, rc, roh])
    s[RL].vectorize(row)


def schedule_max_pool2d(args: Sequence[Tensor], w_tile: int = 2 * LANES) -> Schedule:
    out = args[-1]
    s = te.create_schedule(out)
    _pool(s, out, out, w_tile)
    return s


def schedule_avg_pool2d(args: Sequence[Tensor], w_tile: int = 2 * LANES) -> Schedule:
    """avg_pool2d: the window sums in registers, divided by the window counts as they are
    stored (``pool_sum``'s copy-out inlined into ``pool_avg``)."""
    out = args[-1]
    s = te.create_schedule(out)
    _pool(s, out, s["pool_sum"].op.output, w_tile)
    return s


def schedule_global_avg_pool2d(args: Sequence[Tensor]) -> Schedule:
    """global_avg_pool2d: a long reduction (H x W) with one output per channel: channels in
    parallel, each plane summed by ``lane_reduce`` (one vector of partial sums)."""
    out = args[-1]
    s = te.create_schedule(out)
    planes = s[out].fuse(*s[out].op.axis)
    s[out].parallel(planes)
    lane_reduce(s, s["global_pool_sum"].op.output, s[out], planes)
    return s


# ---------------------------------------------------------------------------- normalisation


def _rows(s: Schedule, out: Tensor) -> IterVar:
    """Rows of a last-axis normalisation output in parallel, each row in vectors."""
    *lead, last = s[out].op.axis
    rows = s[out].fuse(*lead) if len(lead) > 1 else lead[0]
    s[out].parallel(rows)
    vectorize_inner(s[out], last)
    return rows


def schedule_softmax(args: Sequence[Tensor]) -> Schedule:
    """softmax: rows in parallel; per row the max and the sum of exponentials by
    ``lane_reduce``, the exponentials of the row computed once (vectorized), the
    normalisation vectorized."""
    out = args[-1]
    s = te.create_schedule(out)
    rows = _rows(s, out)
    lane_reduce(s, s["T_softmax_maxelem"].op.output, s[out], rows)
    ex = s["T_softmax_exp"]
    ex.compute_at(s[out], rows)
    *ex_lead, ex_last = ex.op.axis
    unroll_unit_loops(ex, ex_lead)
    vectorize_inner(ex, ex_last)
    lane_reduce(s, s["T_softmax_expsum"].op.output, s[out], rows)
    return s


def schedule_log_softmax(args: Sequence[Tensor]) -> Schedule:
    """log_softmax: rows in parallel, the row max and the row sum of exponentials by
    ``lane_reduce`` at the row, the output vectorized."""
    out = args[-1]
    s = te.create_schedule(out)
    rows = _rows(s, out)
    lane_reduce(s, s["T_log_softmax_maxelem"].op.output, s[out], rows)
    lane_reduce(s, s["T_log_softmax_expsum"].op.output, s[out], rows)
    return s


def schedule_layer_norm(args: Sequence[Tensor]) -> Schedule:
    """layer_norm: rows in parallel, the row sum and the sum of squared deviations by
    ``lane_reduce`` at the row, the normalisation (with gamma, beta) vectorized."""
    out = args[-1]
    s = te.create_schedule(out)
    rows = _rows(s, out)
    lane_reduce(s, s["T_layer_norm_sum"].op.output, s[out], rows)
    lane_reduce(s, s["T_layer_norm_varsum"].op.output, s[out], rows)
    return s


# ---------------------------------------------------------------------------- reductions


def schedule_reduce(args: Sequence[Tensor], col_tile: int = 2 * LANES) -> Schedule:
    """reduce_sum / reduce_max over ``axis``:

    * every output element from the whole input (axis None, or all axes kept as 1s): two
      ``rfactor`` levels, the outer one over parallel chunks, the inner one over lanes;
    * the input's last axis reduced (rows of a matrix, planes of NCHW): output elements in
      parallel, each by ``lane_reduce``;
    * the last axis kept: the reduction loops outside a register tile of ``col_tile``
      output columns (vectorized), accumulated in registers.
    """
    data, out = args
    s = te.create_schedule(out)
    stage = s[out]
    spatial = [a for a in stage.op.axis if a.extent > 1]
    (load,) = [e for e in walk(stage.op.body.source) if isinstance(e, Load)]
    last_reduced = load.indices[-1] in {iv.var for iv in stage.op.reduce_axis}
    if not spatial:
        _full_reduce(s, out)
    elif last_reduced:
        lane_reduce(s, out)
    else:
        RL = s.cache_write(out, "local")
        *lead, last = stage.op.axis
        jo, ji = stage.split(last, factor=col_tile)
        tiles = fuse_all(stage, [*lead, jo])
        stage.parallel(tiles)
        stage.vectorize(ji)
        s[RL].compute_at(stage, tiles)
        *rlead, rlast = s[RL].op.axis
        s[RL].reorder(*s[RL].op.reduce_axis, *rlead, rlast)
        unroll_unit_loops(s[RL], rlead)
        s[RL].vectorize(rlast)
    return s


def _full_reduce(s: Schedule, out: Tensor, chunks: int = 8) -> None:
    """A reduction of the whole input to one value: the flattened reduction is cut into
    ``chunks`` parallel parts (first ``rfactor``), each reduced into one vector of partial
    results (second ``rfactor``, vectorized, in a register), then the lanes and the parts."""
    stage = s[out]
    k = fuse_all(stage, stage.op.reduce_axis)
    kp, kr = stage.split(k, nparts=chunks)
    part = s.rfactor(out, kp, factor_axis=0)  # part[p, ...]: the sum of chunk p
    pst = s[part]
    (inner,) = pst.op.reduce_axis
    ko, ki = pst.split(inner, factor=LANES)
    lanes = s.rfactor(part, ki, factor_axis=len(pst.op.axis))
    pst.parallel(pst.op.axis[0])
    lanes_reg = s.cache_write(lanes, "local")
    for t in (lanes_reg, lanes):
        s[t].compute_at(pst, pst.op.axis[0])
    s[lanes].vectorize(s[lanes].op.axis[-1])
    unroll_unit_loops(s[lanes], s[lanes].op.axis[:-1])
    lk = s[lanes_reg].op.axis[-1]
    (lko,) = s[lanes_reg].op.reduce_axis
    s[lanes_reg].reorder(lko, lk)
    unroll_unit_loops(s[lanes_reg], s[lanes_reg].op.axis[:-1])
    s[lanes_reg].vectorize(lk)
    (kl,) = pst.op.reduce_axis
    pst.unroll(kl)


# ---------------------------------------------------------------------------- layout


def schedule_injective(args: Sequence[Tensor]) -> Schedule:
    """Element-wise ops (also broadcasting and chains), bias_add, reshape: everything
    inlined into the output, ``injective`` on the output."""
    out = args[-1]
    s = te.create_schedule(out)
    inline_injective(s)
    injective(s, out)
    return s


def schedule_select(args: Sequence[Tensor]) -> Schedule:
    """pad, concatenate (a select between a load and a value / another load): leading
    axes fused and parallel; when every select condition depends on the last axis only
    (padding or concatenating along it), the last axis in vector chunks that are unrolled,
    so each chunk's condition folds to a constant away from the boundaries (no select
    left) and only the chunks straddling a boundary stay scalar. A condition on another
    axis would leave a lane-invariant select over vector loads, which currently loads the
    untaken side too (out of bounds; see ``test_vectorized_select_loads_only_the_chosen_side``),
    so such a row stays scalar."""
    out = args[-1]
    s = te.create_schedule(out)
    inline_injective(s)
    stage = s[out]
    last = stage.op.axis[-1].var
    conditions = [e.cond for e in walk(stage.op.body) if isinstance(e, Select)]
    if all(free_vars(c) <= {last} for c in conditions):
        injective(s, out, selects=True)
    else:
        *rows, _ = stage.op.axis
        if rows:
            stage.parallel(fuse_all(stage, rows))
    return s


def schedule_transpose(args: Sequence[Tensor], axes: Sequence[int] | None = None,
                       tile: int = LANES) -> Schedule:
    """transpose: when the last axis stays last, a plain injective copy; otherwise the last
    two output axes in ``tile x tile`` blocks (every input line of a block is read from
    cache), blocks in parallel, the output rows of a block in vectors."""
    data, out = args
    nd = data.ndim
    perm = list(reversed(range(nd))) if axes is None else [a % nd for a in axes]
    s = te.create_schedule(out)
    if perm[-1] == nd - 1:
        injective(s, out)
        return s
    stage = s[out]
    *lead, i, j = stage.op.axis
    io, jo, ii, ji = stage.tile(i, j, tile, tile)
    stage.parallel(fuse_all(stage, [*lead, io]))
    stage.vectorize(ji)
    return s
