"""Schedules: stages, loop transformations and their JSON step record.

A ``Schedule`` holds one ``Stage`` per operation. Each primitive (split, reorder,
fuse, annotations, compute locations, cache stages, rfactor, ...) validates its
arguments, changes the stage, and appends a plain-JSON step to ``s.steps``.
``create_schedule(C).replay(steps)`` applies the same steps by name, so a step
list recorded in one process rebuilds the identical program in another.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .dag import post_order
from .expr import Const, Expr, Load, Var, select, substitute, transform
from .intrin import body_signature, get_tensor_intrin
from .tensor import ComputeOp, IterVar, Operation, PlaceholderOp, Reduce, Tensor, compute

ANNOTATIONS = ("parallel", "vectorize", "unroll")
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z", "vthread", "cthread")
SCOPES = ("global", "local", "shared", "inp", "wgt", "acc")
"""Buffer scopes: memory, a thread's registers, a GPU block's shared memory, and the vta
accelerator's input, weight and accumulator buffers."""
PRAGMAS = ("auto_unroll_max_step", "unroll_explicit")
#: the most iterations ahead a ``prefetch`` may fetch
MAX_PREFETCH_DISTANCE = 8


class ScheduleError(ValueError):
    """An invalid schedule primitive; the message names the step and the reason."""


class Split:
    __slots__ = ("factor", "inner", "nparts", "outer", "parent")

    def __init__(self, parent: IterVar, outer: IterVar, inner: IterVar, factor: int | None,
                 nparts: int | None):
        self.parent, self.outer, self.inner = parent, outer, inner
        self.factor, self.nparts = factor, nparts


class Fuse:
    __slots__ = ("fused", "inner", "outer")

    def __init__(self, outer: IterVar, inner: IterVar, fused: IterVar):
        self.outer, self.inner, self.fused = outer, inner, fused


class Stage:
    """The schedule of one operation: its loop structure and where it is computed."""

    def __init__(self, op: Operation, schedule: Schedule, name: str):
        self.schedule = schedule
        self.name = name
        self.origin_op = op
        self.is_output = False
        self.scope = "global"
        self.attach: str = "root"  # "root" | "inline" | "at"
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.align: dict[int, tuple[int, int]] = {}
        self._set_op(op)

    def _set_op(self, op: Operation) -> None:
        self.op = op
        self.relations: list[Split | Fuse] = []
        self.annotations: dict[IterVar, str] = {}
        self.pragmas: dict[IterVar, dict[str, int]] = {}
        self.tensorized: dict[IterVar, str] = {}
        #: (input's stage, distance): reads prefetched ahead (``prefetch``)
        self.prefetches: list[tuple[Stage, int]] = []
        if isinstance(op, ComputeOp):
            self.root_iter_vars = [*op.axis, *op.reduce_axis]
        else:
            self.root_iter_vars = []
        self.leaf_iter_vars = list(self.root_iter_vars)
        self._by_name = {iv.name: iv for iv in self.root_iter_vars}

    # ------------------------------------------------------------------ helpers
    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    def __repr__(self) -> str:
        return f"Stage({self.name})"

    def _fail(self, step: str, why: str) -> ScheduleError:
        return ScheduleError(f"{step} on stage {self.name}: {why}")

    def _check_schedulable(self, step: str) -> None:
        if self.is_placeholder:
            raise self._fail(step, "it is an input placeholder and has no loops to schedule")

    def axis(self, ref: IterVar | str) -> IterVar:
        """Resolve an axis given as an IterVar or by name."""
        if isinstance(ref, str):
            iv = self._by_name.get(ref)
            if iv is None:
                raise ScheduleError(f"stage {self.name} has no axis named {ref!r}")
            return iv
        if isinstance(ref, IterVar):
            return ref
        raise ScheduleError(f"stage {self.name}: expected an axis, got {ref!r}")

    def _leaf(self, step: str, ref: IterVar | str) -> IterVar:
        self._check_schedulable(step)
        iv = self.axis(ref)
        if iv not in self.leaf_iter_vars:
            if self._by_name.get(iv.name) is iv:
                raise self._fail(step, f"axis {iv.name} was already split or fused away")
            raise self._fail(step, f"axis {iv.name} does not belong to this stage")
        return iv

    def _new_ivar(self, name: str, extent: int, kind: str) -> IterVar:
        base, n = name, 1
        while name in self._by_name:
            name = f"{base}.{n}"
            n += 1
        iv = IterVar(Var(name), extent, kind)
        self._by_name[name] = iv
        return iv

    def _record(self, step: list[Any]) -> None:
        self.schedule.steps.append(step)

    # ------------------------------------------------------------------ loop transforms
    def split(self, parent: IterVar | str, factor: int | None = None,
              nparts: int | None = None) -> tuple[IterVar, IterVar]:
        """Split an axis into (outer, inner) with ``inner`` of extent ``factor`` or ``outer``
        of extent ``nparts``; a non-dividing factor leaves a guarded tail."""
        parent = self._leaf("split", parent)
        if (factor is None) == (nparts is None):
            raise self._fail("split", "give exactly one of factor= or nparts=")
        value = factor if factor is not None else nparts
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self._fail("split", f"factor/nparts must be a positive integer, got {value!r}")
        if factor is not None:
            inner_ext, outer_ext = factor, math.ceil(parent.extent / factor)
        else:
            outer_ext, inner_ext = nparts, math.ceil(parent.extent / nparts)
        outer = self._new_ivar(f"{parent.name}.outer", outer_ext, parent.kind)
        inner = self._new_ivar(f"{parent.name}.inner", inner_ext, parent.kind)
        self.relations.append(Split(parent, outer, inner, factor, nparts))
        pos = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        if factor is not None:
            self._record(["split", self.name, parent.name, factor])
        else:
            self._record(["split_nparts", self.name, parent.name, nparts])
        return outer, inner

    def tile(self, x: IterVar | str, y: IterVar | str, x_factor: int,
             y_factor: int) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split two axes and order them (xo, yo, xi, yi)."""
        xo, xi = self.split(x, factor=x_factor)
        yo, yi = self.split(y, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def reorder(self, *axes: IterVar | str) -> None:
        """Put the given axes in this order, in the positions they occupy together."""
        if len(axes) == 1 and isinstance(axes[0], list | tuple):
            axes = tuple(axes[0])
        ivs = [self._leaf("reorder", a) for a in axes]
        if len(set(ivs)) != len(ivs):
            raise self._fail("reorder", "an axis is listed twice")
        positions = sorted(self.leaf_iter_vars.index(iv) for iv in ivs)
        for pos, iv in zip(positions, ivs, strict=True):
            self.leaf_iter_vars[pos] = iv
        self._record(["reorder", self.name, [iv.name for iv in ivs]])

    def fuse(self, *axes: IterVar | str) -> IterVar:
        """Fuse adjacent axes (outer to inner) into one."""
        if len(axes) == 1 and isinstance(axes[0], list | tuple):
            axes = tuple(axes[0])
        ivs = [self._leaf("fuse", a) for a in axes]
        if len(ivs) < 2:
            raise self._fail("fuse", "needs at least two axes")
        positions = [self.leaf_iter_vars.index(iv) for iv in ivs]
        if positions != list(range(positions[0], positions[0] + len(ivs))):
            raise self._fail("fuse", "the axes must be adjacent and given from outer to inner: "
                             f"{[iv.name for iv in ivs]}")
        if len({iv.kind for iv in ivs}) != 1:
            raise self._fail("fuse", "cannot fuse a reduction axis with a spatial axis")
        fused = ivs[0]
        for inner in ivs[1:]:
            new = self._new_ivar(f"{fused.name}.{inner.name}.fused",
                                 fused.extent * inner.extent, fused.kind)
            self.relations.append(Fuse(fused, inner, new))
            fused = new
        self.leaf_iter_vars[positions[0]:positions[-1] + 1] = [fused]
        self._record(["fuse", self.name, [iv.name for iv in ivs]])
        return fused

    # ------------------------------------------------------------------ annotations
    def _annotate(self, step: str, ref: IterVar | str, kind: str) -> None:
        iv = self._leaf(step, ref)
        if iv.is_reduce and step in ("parallel", "vectorize"):
            raise self._fail(step, f"axis {iv.name} is a reduction axis")
        if iv.is_reduce and step == "bind" and not kind.startswith("threadIdx."):
            raise self._fail(step, f"axis {iv.name} is a reduction axis: only threadIdx.* "
                             "may be bound to one (the threads then reduce together)")
        if iv in self.annotations and self.annotations[iv] != kind:
            raise self._fail(step, f"axis {iv.name} is already annotated "
                             f"{self.annotations[iv]}")
        self.annotations[iv] = kind

    def parallel(self, ref: IterVar | str) -> None:
        self._annotate("parallel", ref, "parallel")
        self._record(["parallel", self.name, self.axis(ref).name])

    def vectorize(self, ref: IterVar | str) -> None:
        self._annotate("vectorize", ref, "vectorize")
        self._record(["vectorize", self.name, self.axis(ref).name])

    def unroll(self, ref: IterVar | str) -> None:
        self._annotate("unroll", ref, "unroll")
        self._record(["unroll", self.name, self.axis(ref).name])

    def bind(self, ref: IterVar | str, thread: str) -> None:
        """Bind an axis to a GPU block/thread index or a virtual thread (``"vthread"``)."""
        tag = getattr(thread, "name", thread)
        if tag not in THREAD_TAGS:
            raise self._fail("bind", f"unknown thread tag {tag!r}; known: {', '.join(THREAD_TAGS)}")
        iv = self._leaf("bind", ref)
        for other, kind in self.annotations.items():
            if kind == tag and other is not iv and tag not in ("vthread", "cthread"):
                raise self._fail("bind", f"{tag} is already bound to axis {other.name}")
        self._annotate("bind", iv, tag)
        self._record(["bind", self.name, iv.name, tag])

    def pragma(self, ref: IterVar | str, key: str, value: int = 1) -> None:
        iv = self._leaf("pragma", ref)
        if key not in PRAGMAS:
            raise self._fail("pragma", f"unknown pragma {key!r}; known: {', '.join(PRAGMAS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self._fail("pragma", f"{key} needs a non-negative integer, got {value!r}")
        self.pragmas.setdefault(iv, {})[key] = value
        self._record(["pragma", self.name, iv.name, key, value])

    def storage_align(self, ref: IterVar | str, factor: int, offset: int) -> None:
        """Pad the row stride of the dimension *outside* ``axis`` (a root axis of this stage's
        buffer) so that ``stride % factor == offset`` (avoids cache-set conflicts)."""
        self._check_schedulable("storage_align")
        iv = self.axis(ref)
        op = self.op
        axis = op.axis if isinstance(op, ComputeOp) else []
        if iv not in axis:
            raise self._fail("storage_align", f"axis {iv.name} is not a spatial root axis")
        dim = axis.index(iv)
        if dim == 0:
            raise self._fail("storage_align", "the outermost dimension has no stride to pad")
        if factor < 1 or not 0 <= offset < factor:
            raise self._fail("storage_align", f"need factor >= 1 and 0 <= offset < factor, "
                             f"got factor={factor}, offset={offset}")
        self.align[dim - 1] = (factor, offset)
        self._record(["storage_align", self.name, iv.name, factor, offset])

    def set_scope(self, scope: str) -> None:
        """Keep this (intermediate) stage's buffer in ``scope`` (e.g. the accelerator's
        accumulator) instead of memory."""
        if scope not in SCOPES:
            raise self._fail("set_scope", f"unknown scope {scope!r}; known: {', '.join(SCOPES)}")
        if self.is_output or self.is_placeholder:
            raise self._fail("set_scope", "inputs and outputs stay in memory")
        self.scope = scope
        self._record(["set_scope", self.name, scope])

    def tensorize(self, ref: IterVar | str, intrin: Any) -> None:
        """Replace the loop nest from ``axis`` inward by a declared tensor intrinsic."""
        iv = self._leaf("tensorize", ref)
        try:
            intrin = get_tensor_intrin(intrin) if isinstance(intrin, str) else intrin
        except KeyError as err:
            raise self._fail("tensorize", str(err)) from None
        inner = self.leaf_iter_vars[self.leaf_iter_vars.index(iv):]
        if not isinstance(self.op, ComputeOp):
            raise self._fail("tensorize", "only compute stages can be tensorized")
        extents = [a.extent for a in inner]
        if sorted(extents) != sorted(intrin.extents) or len(inner) != len(intrin.extents):
            raise self._fail("tensorize", f"the loops from {iv.name} inward have extents "
                             f"{extents}, the intrinsic {intrin.name} has {intrin.extents}")
        leaf_values: dict[IterVar, Expr] = {
            iv: (iv.var if iv in inner else Const(0, "int32")) for iv in self.leaf_iter_vars}
        values = self.root_values(leaf_values)
        roots = {a.var: values[a] for a in self.root_iter_vars}
        names = {iv.var: f"s{n}" for n, iv in enumerate(x for x in inner if not x.is_reduce)}
        names.update({iv.var: f"r{n}" for n, iv in enumerate(x for x in inner if x.is_reduce)})
        ours, theirs = body_signature(self.op, roots, names), intrin.body_signature()
        if ours != theirs:
            raise self._fail("tensorize", f"the loops from {iv.name} inward compute {ours}, "
                             f"which does not match intrinsic {intrin.name}: {theirs}")
        self.tensorized[iv] = intrin.name
        self._record(["tensorize", self.name, iv.name, intrin.name])

    # ------------------------------------------------------------------ compute location
    def prefetch(self, tensor: Tensor | str, distance: int = 1) -> None:
        """Fetch what this stage reads of the input ``tensor`` ``distance`` iterations
        ahead of the loop it is computed at (``compute_at``, checked when lowered): each
        read is preceded by a prefetch of the element the same read touches that many
        iterations of that loop later (the first loop outward, through the stages it is
        computed in, that runs more than once and moves the read; where none does, every
        run reads the same elements and no hint is made). A softmax's exponentials,
        computed once per row at the row loop, then bring the next row into the L1 cache
        while the core is busy with this one's."""
        step = "prefetch"
        self._check_schedulable(step)
        source = self.schedule[tensor]
        if not source.is_placeholder:
            raise self._fail(step, f"{source.name} is not an input (only inputs, which no "
                             "stage of this program writes, are prefetched)")
        if isinstance(distance, bool) or not isinstance(distance, int) or \
                not 1 <= distance <= MAX_PREFETCH_DISTANCE:
            raise self._fail(step, f"distance must be an integer in 1..{MAX_PREFETCH_DISTANCE}, "
                             f"got {distance!r}")
        self.prefetches = [(t, d) for t, d in self.prefetches if t is not source]
        self.prefetches.append((source, distance))
        self._record(["prefetch", self.name, source.name, distance])

    def compute_at(self, parent: Stage | Tensor, ref: IterVar | str) -> None:
        target = self.schedule[parent]
        step = "compute_at"
        self._check_schedulable(step)
        if target is self:
            raise self._fail(step, "a stage cannot be computed at itself")
        if self.is_output:
            raise self._fail(step, "an output stage must be computed at the root")
        iv = target._leaf(step, ref) if not isinstance(ref, str) else target.axis(ref)
        if iv not in target.leaf_iter_vars:
            raise self._fail(step, f"{iv.name} is not a current loop of {target.name}")
        if target.attach == "inline":
            raise self._fail(step, f"{target.name} is inlined; it has no loops")
        if not self.schedule._reaches(self, target):
            raise self._fail(step, f"{target.name} does not consume {self.name}")
        self.attach, self.attach_stage, self.attach_ivar = "at", target, iv
        self._record(["compute_at", self.name, target.name, iv.name])

    def compute_inline(self) -> None:
        step = "compute_inline"
        self._check_schedulable(step)
        if self.is_output:
            raise self._fail(step, "an output stage cannot be inlined")
        if not self.op.is_injective:
            raise self._fail(step, "a reduction cannot be inlined into its consumers")
        if self.relations or self.annotations:
            raise self._fail(step, "the stage already has loop transformations")
        self.attach, self.attach_stage, self.attach_ivar = "inline", None, None
        self._record(["compute_inline", self.name])

    def compute_root(self) -> None:
        self._check_schedulable("compute_root")
        self.attach, self.attach_stage, self.attach_ivar = "root", None, None
        self._record(["compute_root", self.name])

    # ------------------------------------------------------------------ derived structure
    def root_values(self, leaf_values: dict[IterVar, Expr],
                    extents: dict[IterVar, int] | None = None) -> dict[IterVar, Expr]:
        """Express every iteration variable through the given leaf values. ``extents``
        overrides the axes' own extents (lowering narrows a stage computed at another's
        loop to its region there)."""
        ext = extents if extents is not None else {}
        values: dict[IterVar, Expr] = dict(leaf_values)
        for rel in reversed(self.relations):
            if isinstance(rel, Split):
                stride = rel.factor if rel.factor is not None else \
                    ext.get(rel.inner, rel.inner.extent)
                values[rel.parent] = values[rel.outer] * stride + values[rel.inner]
            else:
                inner = ext.get(rel.inner, rel.inner.extent)
                values[rel.outer] = values[rel.fused] // inner
                values[rel.inner] = values[rel.fused] % inner
        return values

    def inexact_splits(self, extents: dict[IterVar, int] | None = None) -> list[Split]:
        """Splits whose parts cover more than the parent: their tails need a guard."""
        ext = extents if extents is not None else {}

        def extent(iv: IterVar) -> int:
            return ext.get(iv, iv.extent)

        out = []
        for r in self.relations:
            if not isinstance(r, Split):
                continue
            stride = r.factor if r.factor is not None else extent(r.inner)
            covered = extent(r.outer) * stride
            if covered != extent(r.parent) and not (
                    extent(r.outer) == 1 and extent(r.inner) == extent(r.parent)):
                out.append(r)
        return out


class Schedule:
    """Stages of a computation in topological order and the steps applied to them."""

    def __init__(self, outputs: Sequence[Tensor]):
        self.outputs = list(outputs)
        self.steps: list[list[Any]] = []
        self.stages: list[Stage] = []
        self._stage_of_op: dict[int, Stage] = {}
        names: set[str] = set()
        for op in post_order(self.outputs):
            name, n = op.name, 1
            while name in names:
                name = f"{op.name}_{n}"
                n += 1
            names.add(name)
            stage = Stage(op, self, name)
            self.stages.append(stage)
            self._stage_of_op[id(op)] = stage
        for t in self.outputs:
            self[t].is_output = True

    # ------------------------------------------------------------------ lookup
    def __getitem__(self, key: Tensor | Operation | Stage | str) -> Stage:
        if isinstance(key, Stage):
            return key
        if isinstance(key, str):
            for stage in self.stages:
                if stage.name == key:
                    return stage
            raise ScheduleError(f"the schedule has no stage named {key!r}; stages: "
                                f"{', '.join(s.name for s in self.stages)}")
        op = key.op if isinstance(key, Tensor) else key
        stage = self._stage_of_op.get(id(op))
        if stage is None:
            raise ScheduleError(f"{getattr(op, 'name', op)!r} is not part of this schedule")
        return stage

    def stage_of(self, tensor: Tensor) -> Stage:
        return self._stage_of_op[id(tensor.op)]

    def consumers(self, stage: Stage) -> list[Stage]:
        return [s for s in self.stages if stage in self.producers(s)]

    def producers(self, stage: Stage) -> list[Stage]:
        result: list[Stage] = []
        for t in stage.op.input_tensors:
            p = self.stage_of(t)
            if p not in result:
                result.append(p)
        return result

    def _reaches(self, producer: Stage, consumer: Stage) -> bool:
        frontier = [producer]
        seen: set[int] = set()
        while frontier:
            s = frontier.pop()
            for c in self.consumers(s):
                if c is consumer:
                    return True
                if id(c) not in seen:
                    seen.add(id(c))
                    frontier.append(c)
        return False

    def _unique_name(self, base: str) -> str:
        names = {s.name for s in self.stages}
        name, n = base, 1
        while name in names:
            name = f"{base}_{n}"
            n += 1
        return name

    def _insert(self, stage: Stage, before: Stage) -> None:
        self.stages.insert(self.stages.index(before), stage)
        self._stage_of_op[id(stage.op)] = stage

    def _retarget(self, stage: Stage, new_op: Operation) -> None:
        """Give a stage a rewritten operation, keeping its loop structure."""
        stage.op = new_op
        self._stage_of_op[id(new_op)] = stage

    # ------------------------------------------------------------------ cache stages
    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Tensor | Stage],
                   axis_order: Sequence[int] | None = None) -> Tensor:
        """A copy of ``tensor`` in ``scope`` that the given readers read instead. With
        ``axis_order``, the copy's dimensions are the tensor's in that order (dimension
        ``i`` of the copy is dimension ``axis_order[i]`` of the tensor): a layout change,
        e.g. a convolution's weights with the output channels innermost."""
        step = "cache_read"
        source = self[tensor]
        if scope not in SCOPES:
            raise ScheduleError(f"{step} of {source.name}: unknown scope {scope!r}; known: "
                                f"{', '.join(SCOPES)}")
        reader_stages = [self[r] for r in readers]
        if not reader_stages:
            raise ScheduleError(f"{step} of {source.name}: give at least one reader")
        for r in reader_stages:
            if source not in self.producers(r):
                raise ScheduleError(f"{step} of {source.name}: {r.name} does not read it")
        src = source.op.output
        order = _axis_order(step, source.name, axis_order, len(src.shape))
        name = self._unique_name(f"{source.name}.{scope}")
        place = [order.index(d) for d in range(len(order))]  # tensor dim -> copy dim
        cache = compute([src.shape[d] for d in order],
                        lambda *idx: src[tuple(idx[p] for p in place)], name=name)
        cache_stage = Stage(cache.op, self, name)
        cache_stage.scope = scope
        self._insert(cache_stage, min(reader_stages, key=self.stages.index))
        # readers may still refer to an older op of the source stage (e.g. before a
        # cache_write replaced it): every op that ever was this stage's is redirected
        old_ops = {key: cache for key, st in self._stage_of_op.items() if st is source}
        for r in reader_stages:
            self._retarget(r, _replace_reads(r.op, old_ops, order))
        self.steps.append([step, source.name, scope, [r.name for r in reader_stages],
                           *([order] if axis_order is not None else [])])
        return cache

    def cache_write(self, tensor: Tensor, scope: str,
                    axis_order: Sequence[int] | None = None) -> Tensor:
        """Compute ``tensor`` into a ``scope`` buffer first; the stage becomes a copy-out.
        With ``axis_order``, the buffer's dimensions (and the computing stage's axes) are
        the tensor's in that order, and the copy-out transposes: e.g. a convolution that
        accumulates along output channels and writes rows of output columns."""
        step = "cache_write"
        stage = self[tensor]
        if scope not in SCOPES:
            raise ScheduleError(f"{step} of {stage.name}: unknown scope {scope!r}")
        if not isinstance(stage.op, ComputeOp):
            raise ScheduleError(f"{step} of {stage.name}: only a compute can be cached")
        if stage.relations or stage.annotations or stage.attach == "inline":
            raise ScheduleError(f"{step} of {stage.name}: apply cache_write before any other "
                                "primitive on this stage")
        old = stage.op
        order = _axis_order(step, stage.name, axis_order, len(old.axis))
        name = self._unique_name(f"{stage.name}.{scope}")
        cache_op = ComputeOp(name, [old.axis[d] for d in order], old.body, old.tag, old.attrs)
        cache_stage = Stage(cache_op, self, name)
        cache_stage.scope = scope
        self._insert(cache_stage, stage)
        cache = cache_op.output
        copy = compute(old.shape, lambda *idx: cache[tuple(idx[d] for d in order)],
                       name=old.name)
        for iv_new, iv_old in zip(copy.op.axis, old.axis, strict=True):
            iv_new.var.name = iv_old.name  # keep axis names (compute names them ax0..)
        stage._set_op(copy.op)
        self._stage_of_op[id(copy.op)] = stage
        self.steps.append([step, stage.name, scope,
                           *([order] if axis_order is not None else [])])
        return cache

    def rfactor(self, tensor: Tensor, axis: IterVar | str, factor_axis: int = 0) -> Tensor:
        """Factor a reduction: a new stage reduces all but ``axis``, keeping ``axis`` as a
        spatial dimension (at position ``factor_axis``); the stage then reduces over it."""
        step = "rfactor"
        stage = self[tensor]
        op = stage.op
        if not isinstance(op, ComputeOp) or not isinstance(op.body, Reduce):
            raise ScheduleError(f"{step} on {stage.name}: the stage is not a reduction")
        kiv = stage._leaf(step, axis)
        if not kiv.is_reduce:
            raise ScheduleError(f"{step} on {stage.name}: {kiv.name} is not a reduction axis")
        if any(not (r.parent if isinstance(r, Split) else r.outer).is_reduce
               for r in stage.relations) or stage.annotations:
            raise ScheduleError(f"{step} on {stage.name}: only reduction axes may be split "
                                "before rfactor, and no annotations")
        if not 0 <= factor_axis <= len(op.axis):
            raise ScheduleError(f"{step} on {stage.name}: factor_axis {factor_axis} out of "
                                f"range 0..{len(op.axis)}")
        reduce_leaves = [iv for iv in stage.leaf_iter_vars if iv.is_reduce]
        rf_axis = IterVar(Var(f"{kiv.name}.rf"), kiv.extent, IterVar.SPATIAL)
        new_reduce = [IterVar(Var(iv.name), iv.extent, IterVar.REDUCE)
                      for iv in reduce_leaves if iv is not kiv]
        leaf_values: dict[IterVar, Expr] = {kiv: rf_axis.var}
        for old_iv, new_iv in zip([iv for iv in reduce_leaves if iv is not kiv], new_reduce,
                                  strict=True):
            leaf_values[old_iv] = new_iv.var
        values = stage.root_values(leaf_values)
        mapping = {iv.var: values[iv] for iv in op.reduce_axis}
        body = op.body
        cond = body.condition
        for split in stage.inexact_splits():
            guard = values[split.parent] < split.parent.extent
            cond = guard if cond is None else cond & guard
        source = substitute(body.source, mapping)
        if cond is not None:
            cond = substitute(cond, mapping)
        spatial = [IterVar(Var(a.name), a.extent, IterVar.SPATIAL) for a in op.axis]
        spatial_map = {a.var: n.var for a, n in zip(op.axis, spatial, strict=True)}
        source = substitute(source, spatial_map)
        cond = None if cond is None else substitute(cond, spatial_map)
        rf_axes = list(spatial)
        rf_axes.insert(factor_axis, rf_axis)
        name = self._unique_name(f"{stage.name}.rf")
        if new_reduce:
            rf_body: Expr = Reduce(body.reducer, source, tuple(new_reduce), cond)
        else:
            rf_body = source if cond is None else _select_identity(cond, source, body.reducer)
        rf_op = ComputeOp(name, rf_axes, rf_body)
        rf_stage = Stage(rf_op, self, name)
        self._insert(rf_stage, stage)
        rf = rf_op.output
        kr = IterVar(Var(kiv.name), kiv.extent, IterVar.REDUCE)
        out_axes = [IterVar(Var(a.name), a.extent, IterVar.SPATIAL) for a in op.axis]
        idx = [a.var for a in out_axes]
        idx.insert(factor_axis, kr.var)
        new_op = ComputeOp(op.name, out_axes, body.reducer(rf[tuple(idx)], kr), op.tag, op.attrs)
        stage._set_op(new_op)
        self._stage_of_op[id(new_op)] = stage
        self.steps.append([step, stage.name, kiv.name, factor_axis])
        return rf

    # ------------------------------------------------------------------ replay
    def replay(self, steps: Sequence[Sequence[Any]]) -> Schedule:
        """Apply recorded steps (by stage and axis names; JSON lists, or the tuples of a
        ``Steps`` value); returns ``self``."""
        for n, step in enumerate(steps):
            try:
                _apply_step(self, _as_lists(step))
            except ScheduleError as err:
                raise ScheduleError(f"step {n} {list(step)!r}: {err}") from None
            except (TypeError, ValueError, IndexError, KeyError) as err:
                raise ScheduleError(f"step {n} {list(step)!r} is malformed: {err}") from None
        return self


def _as_lists(value: Any) -> Any:
    """A step with its tuples as lists (the form its primitives record)."""
    return [_as_lists(v) for v in value] if isinstance(value, list | tuple) else value


def _select_identity(cond: Expr, value: Expr, reducer: Any) -> Expr:
    return select(cond, value, reducer.identity(value.dtype))


def _replace_reads(op: ComputeOp, mapping: dict[int, Tensor],
                   order: Sequence[int] | None = None) -> ComputeOp:
    """``op`` reading the mapped tensors instead; with ``order``, they hold the original's
    dimensions in that order, so each read's indices are permuted alike."""
    def fn(node: Expr) -> Expr | None:
        if isinstance(node, Load) and isinstance(node.source, Tensor):
            new = mapping.get(id(node.source.op))
            if new is not None:
                indices = node.indices if order is None \
                    else tuple(node.indices[d] for d in order)
                return Load(new, indices, node.dtype)
        return None

    return ComputeOp(op.name, op.axis, transform(op.body, fn), op.tag, op.attrs)


def _axis_order(step: str, name: str, axis_order: Sequence[int] | None,
                ndim: int) -> list[int]:
    """A cache step's dimension order, checked: a permutation of ``range(ndim)``."""
    if axis_order is None:
        return list(range(ndim))
    order = list(axis_order) if isinstance(axis_order, list | tuple) else [axis_order]
    if not all(type(d) is int for d in order) or sorted(order) != list(range(ndim)):
        raise ScheduleError(f"{step} of {name}: axis_order {axis_order!r} is not a permutation of "
                            f"its {ndim} dimensions (0..{ndim - 1})")
    return order


def create_schedule(outputs: Tensor | Sequence[Tensor]) -> Schedule:
    """A default schedule (every stage at the root, loops in definition order)."""
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    outputs = list(outputs)
    for t in outputs:
        if not isinstance(t, Tensor):
            raise ScheduleError(f"create_schedule expects tensors, got {t!r}")
    return Schedule(outputs)


# ---------------------------------------------------------------------------- step replay

_STEP_ARITY = {
    "split": 4, "split_nparts": 4, "reorder": 3, "fuse": 3, "parallel": 3, "vectorize": 3,
    "unroll": 3, "bind": 4, "pragma": 5, "storage_align": 5, "tensorize": 4, "compute_at": 4,
    "compute_inline": 2, "compute_root": 2, "cache_read": 4, "cache_write": 3, "rfactor": 4,
    "set_scope": 3, "prefetch": 4,
}
#: steps that may end with one more argument (the cache steps' axis order)
_OPTIONAL_LAST = {"cache_read", "cache_write"}


def _apply_step(s: Schedule, step: Sequence[Any]) -> None:
    if not isinstance(step, list | tuple) or not step or not isinstance(step[0], str):
        raise ScheduleError(f"a step must be a list starting with its name, got {step!r}")
    kind = step[0]
    if kind not in _STEP_ARITY:
        raise ScheduleError(f"unknown step {kind!r}; known: {', '.join(_STEP_ARITY)}")
    arity = _STEP_ARITY[kind]
    if len(step) != arity and not (kind in _OPTIONAL_LAST and len(step) == arity + 1):
        takes = f"{arity - 1} or {arity}" if kind in _OPTIONAL_LAST else f"{arity - 1}"
        raise ScheduleError(f"{kind} takes {takes} arguments, got {len(step) - 1}")
    stage = s[step[1]]
    args = list(step[2:])
    if kind == "split":
        stage.split(args[0], factor=args[1])
    elif kind == "split_nparts":
        stage.split(args[0], nparts=args[1])
    elif kind in ("reorder", "fuse"):
        if not isinstance(args[0], list):
            raise ScheduleError(f"{kind} needs a list of axis names")
        getattr(stage, kind)(*args[0])
    elif kind in ANNOTATIONS:
        getattr(stage, kind)(args[0])
    elif kind == "bind":
        stage.bind(args[0], args[1])
    elif kind == "pragma":
        stage.pragma(args[0], args[1], args[2])
    elif kind == "storage_align":
        stage.storage_align(args[0], args[1], args[2])
    elif kind == "tensorize":
        stage.tensorize(args[0], args[1])
    elif kind == "set_scope":
        stage.set_scope(args[0])
    elif kind == "prefetch":
        stage.prefetch(args[0], args[1])
    elif kind == "compute_at":
        stage.compute_at(s[args[0]], args[1])
    elif kind == "compute_inline":
        stage.compute_inline()
    elif kind == "compute_root":
        stage.compute_root()
    elif kind == "cache_read":
        s.cache_read(stage.op.output, args[0], [s[r] for r in args[1]], *args[2:])
    elif kind == "cache_write":
        s.cache_write(stage.op.output, args[0], *args[1:])
    elif kind == "rfactor":
        s.rfactor(stage.op.output, args[0], args[1])
