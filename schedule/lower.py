"""Lowering: a schedule and its argument tensors become a loop-IR function.

The steps, in order:
1. inline the stages marked compute_inline into their consumers;
2. infer, for every stage computed at a loop of another, the region it must
   produce there (symbolic start in the enclosing loop variables, constant extent);
3. build each stage's loop nest from its leaf axes, placing attached stages and
   their buffers inside the loop they are attached to, the reduction init before
   the outermost reduction loop, and guards for non-dividing splits and regions
   that reach outside a tensor;
4. simplify indices, version loops so that full tiles run without edge guards (the edge
   version specialised to its single edge tile where there is one), and unroll
   (explicit and ``auto_unroll_max_step``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import arith
from .expr import Binary, Const, Expr, Load, Var, all_of, substitute, transform, walk
from .loop_ir import Allocate, Buffer, For, IfThenElse, LoweredFunc, Prefetch, Seq, Stmt, Store, seq
from .passes import partition_guards, simplify_stmt, unroll_loops
from .schedule import Schedule, ScheduleError, Split, Stage
from .tensor import IterVar, Reduce, Tensor

_KIND = {"parallel": For.PARALLEL, "vectorize": For.VECTORIZED, "unroll": For.UNROLLED}
# The thread bindings whose threads share one block's shared memory.
_BLOCK_SHARED = frozenset({"threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread", "cthread"})


@dataclass
class _Region:
    mins: list[Expr]
    extents: list[int]


class _Lowering:
    """The state of one lowering: inlined bodies, regions, loop extents and buffers."""

    def __init__(self, s: Schedule, args: Sequence[Tensor], name: str):
        self.s = s
        self.name = name
        self.stages = [st for st in s.stages if not st.is_placeholder]
        self.arg_stages = self._check_args(args)
        self.bodies: dict[Stage, Expr] = {}
        self.regions: dict[Stage, _Region] = {}
        self.buffers: dict[Stage, Buffer] = {}
        self.ranges: arith.Ranges = {}
        self.extents: dict[IterVar, int] = {}

    # ------------------------------------------------------------------ validation
    def _check_args(self, args: Sequence[Tensor]) -> list[Stage]:
        stages: list[Stage] = []
        for t in args:
            if not isinstance(t, Tensor):
                raise ScheduleError(f"lower/build arguments must be tensors, got {t!r}")
            stage = self.s[t]
            if stage in stages:
                raise ScheduleError(f"tensor {stage.name} is passed twice in the arguments")
            stages.append(stage)
        for st in self.s.stages:
            if st.is_output and st not in stages:
                raise ScheduleError(f"output {st.name} must be one of the arguments")
        for st in self.stages:
            if st.attach == "inline" and st in stages:
                raise ScheduleError(f"{st.name} is inlined, so it cannot be an argument")
        return stages

    def _check_attach(self) -> None:
        for st in self.stages:
            if st.attach != "at":
                continue
            target, iv = st.attach_stage, st.attach_ivar
            if target.attach == "inline":
                raise ScheduleError(f"{st.name} is computed at {target.name}, which is inlined")
            if iv not in target.leaf_iter_vars:
                raise ScheduleError(f"{st.name} is computed at {target.name}.{iv.name}, but that "
                                    "axis was split or fused afterwards")
            if target.annotations.get(iv) == "vectorize":
                raise ScheduleError(f"{st.name} is computed at the vectorized loop "
                                    f"{target.name}.{iv.name}")
            seen = {st}
            cur = target
            while cur.attach == "at":
                if cur in seen:
                    raise ScheduleError(f"compute_at forms a cycle through {st.name}")
                seen.add(cur)
                cur = cur.attach_stage

    # ------------------------------------------------------------------ inlining
    def _inline(self) -> None:
        for st in self.stages:
            self.bodies[st] = transform(st.op.body, self._inline_load)

    def _inline_load(self, node: Expr) -> Expr | None:
        if not (isinstance(node, Load) and isinstance(node.source, Tensor)):
            return None
        producer = self.s.stage_of(node.source)
        if producer.attach != "inline":
            return None
        body = self.bodies[producer]
        mapping = {a.var: i for a, i in zip(producer.op.axis, node.indices, strict=True)}
        return substitute(body, mapping)

    def _reads(self, consumer: Stage, producer: Stage) -> list[Load]:
        body = self.bodies[consumer]
        return [n for n in walk(body) if isinstance(n, Load) and isinstance(n.source, Tensor)
                and self.s.stage_of(n.source) is producer]

    # ------------------------------------------------------------------ bound inference
    def _enclosing_vars(self, stage: Stage, iv: IterVar, scope: str = "global") -> set[Var]:
        """The loop variables fixed where a stage is computed at ``stage.iv``. A GPU block
        shares a ``shared`` buffer: its region spans every thread (and virtual thread) of
        the block, so those loops do not count as fixed for it."""
        out: set[Var] = set()
        cur, cur_iv = stage, iv
        while True:
            leaves = cur.leaf_iter_vars
            out.update(v.var for v in leaves[:leaves.index(cur_iv) + 1]
                       if not (scope == "shared" and cur.annotations.get(v) in _BLOCK_SHARED))
            if cur.attach != "at":
                return out
            cur, cur_iv = cur.attach_stage, cur.attach_ivar

    def _inside(self, consumer: Stage, target: Stage, iv: IterVar) -> bool:
        if consumer is target:
            return True
        cur = consumer
        while cur.attach == "at":
            if cur.attach_stage is target:
                leaves = target.leaf_iter_vars
                return leaves.index(cur.attach_ivar) >= leaves.index(iv)
            cur = cur.attach_stage
        return False

    def _set_extents(self, st: Stage, root_extents: list[int]) -> None:
        """Loop extents of a stage once its region is known (a stage computed at another's
        loop iterates over its region there, not over its whole shape)."""
        ext = self.extents
        for iv, e in zip(st.root_iter_vars, root_extents, strict=True):
            ext[iv] = e
        for rel in st.relations:
            if isinstance(rel, Split):
                parent = ext[rel.parent]
                if rel.factor is not None:
                    ext[rel.inner] = min(rel.factor, parent)
                    ext[rel.outer] = -(-parent // rel.factor)
                else:
                    ext[rel.inner] = -(-parent // rel.nparts)
                    ext[rel.outer] = min(rel.nparts, parent)
            else:
                ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
        for iv in st.leaf_iter_vars:
            self.ranges[iv.var] = (0, ext[iv] - 1)

    def leaf_values(self, st: Stage) -> dict[IterVar, Expr]:
        """Every iteration variable of a stage in terms of its loop (leaf) variables."""
        return st.root_values({iv: iv.var for iv in st.leaf_iter_vars}, self.extents)

    def root_values(self, st: Stage) -> dict[Var, Expr]:
        """Global coordinates of the stage's root axes in terms of its loop variables."""
        values = self.leaf_values(st)
        region = self.regions[st]
        out: dict[Var, Expr] = {}
        for d, axis in enumerate(st.op.axis):
            out[axis.var] = region.mins[d] + values[axis] if not _is_zero(region.mins[d]) \
                else values[axis]
        for axis in st.op.reduce_axis:
            out[axis.var] = values[axis]
        return out

    def _infer_bounds(self) -> None:
        for st in reversed(self.stages):
            if st.attach == "inline":
                continue
            shape = st.op.shape
            reduce_extents = [a.extent for a in st.op.reduce_axis]
            if st.attach != "at":
                self.regions[st] = _Region([Const(0, "int32")] * len(shape), list(shape))
                self._set_extents(st, [*shape, *reduce_extents])
                continue
            target, iv = st.attach_stage, st.attach_ivar
            fixed = self._enclosing_vars(target, iv, st.scope)
            lows: list[list[Expr]] = [[] for _ in shape]
            highs: list[list[Expr]] = [[] for _ in shape]
            unbounded = [False] * len(shape)
            consumers = [c for c in self.stages if c.attach != "inline" and self._reads(c, st)]
            for c in consumers:
                if not self._inside(c, target, iv):
                    raise ScheduleError(
                        f"{st.name} is computed at {target.name}.{iv.name} but {c.name} also "
                        "reads it outside that loop")
                values = self.root_values(c)
                for load in self._reads(c, st):
                    for d, index in enumerate(load.indices):
                        interval = arith.symbolic_interval(substitute(index, values), fixed,
                                                           self.ranges)
                        if interval is None:
                            unbounded[d] = True
                        else:
                            lows[d].append(interval[0])
                            highs[d].append(interval[1])
            mins: list[Expr] = []
            extents: list[int] = []
            for d, full in enumerate(shape):
                lo, ext = self._union(lows[d], highs[d], full) if not unbounded[d] and lows[d] \
                    else (Const(0, "int32"), full)
                mins.append(lo)
                extents.append(ext)
            self.regions[st] = _Region(mins, extents)
            self._set_extents(st, [*extents, *reduce_extents])

    def _union(self, lows: list[Expr], highs: list[Expr], full: int) -> tuple[Expr, int]:
        lo = _fold_extreme("min", lows, self.ranges)
        hi = _fold_extreme("max", highs, self.ranges)
        diff = arith.simplify(hi - lo, self.ranges)
        if isinstance(diff, Const):
            extent = int(diff.value) + 1
        else:
            bounds = arith.const_bounds(diff, self.ranges)
            if bounds is None:
                return Const(0, "int32"), full
            extent = bounds[1] + 1
        if extent >= full:
            return Const(0, "int32"), full
        return arith.simplify(lo, self.ranges), max(extent, 1)

    # ------------------------------------------------------------------ buffers
    def _make_buffers(self) -> list[Buffer]:
        args: list[Buffer] = []
        for st in self.arg_stages:
            buf = Buffer(_c_safe(st.name), st.op.shape, st.op.dtype, "global", st.align)
            if st.align:
                raise ScheduleError(f"storage_align on {st.name}: an argument's layout is fixed")
            self.buffers[st] = buf
            args.append(buf)
        for st in self.stages:
            if st.attach == "inline" or st in self.buffers:
                continue
            if st.is_output:
                raise ScheduleError(f"output {st.name} must be one of the arguments")
            self.buffers[st] = Buffer(_c_safe(st.name), self.regions[st].extents, st.op.dtype,
                                      st.scope, st.align)
        for st in self.s.stages:
            if st.is_placeholder and any(self._reads(c, st) for c in self.stages
                                         if c.attach != "inline") and st not in self.buffers:
                raise ScheduleError(f"input {st.name} is read but is not one of the arguments")
        return args

    def _load(self, node: Expr) -> Expr | None:
        if not (isinstance(node, Load) and isinstance(node.source, Tensor)):
            return None
        producer = self.s.stage_of(node.source)
        buf = self.buffers[producer]
        region = self.regions.get(producer)
        if region is None:  # placeholder
            return Load(buf, node.indices, node.dtype)
        idx = [i - m if not _is_zero(m) else i
               for i, m in zip(node.indices, region.mins, strict=True)]
        return Load(buf, tuple(idx), node.dtype)

    # ------------------------------------------------------------------ loop nests
    def _attached(self, st: Stage, iv: IterVar) -> list[Stage]:
        return [p for p in self.stages if p.attach == "at" and p.attach_stage is st
                and p.attach_ivar is iv]

    def _guards(self, st: Stage, values: dict[IterVar, Expr]) -> list[Expr]:
        guards: list[Expr] = []
        for split in st.inexact_splits(self.extents):
            guards.append(values[split.parent] < self.extents[split.parent])
        if st.attach == "at" and not self._reads_in_bounds(st):
            # Computing a few elements past the tensor's edge is harmless when every read
            # stays inside its buffer: consumers never read them. Otherwise guard the edge.
            region = self.regions[st]
            for d, axis in enumerate(st.op.axis):
                coord = region.mins[d] + values[axis]
                bounds = arith.const_bounds(arith.simplify(coord, self.ranges), self.ranges)
                if bounds is None or bounds[0] < 0:
                    guards.append(coord >= 0)
                if bounds is None or bounds[1] >= st.op.shape[d]:
                    guards.append(coord < st.op.shape[d])
        return [g for g in (arith.simplify(g, self.ranges) for g in guards)
                if not (isinstance(g, Const) and g.value)]

    def _reads_in_bounds(self, st: Stage) -> bool:
        body = transform(substitute(self.bodies[st], self.root_values(st)), self._load)
        for node in walk(body):
            if isinstance(node, Load) and isinstance(node.source, Buffer):
                for index, size in zip(node.indices, node.source.shape, strict=True):
                    bounds = arith.const_bounds(arith.simplify(index, self.ranges), self.ranges)
                    if bounds is None or bounds[0] < 0 or bounds[1] >= size:
                        return False
        return True

    def _nest(self, st: Stage) -> Stmt:
        leaves = st.leaf_iter_vars
        values = self.leaf_values(st)
        coords = self.root_values(st)
        buf = self.buffers[st]
        local = [values[a] for a in st.op.axis]
        body = transform(substitute(self.bodies[st], coords), self._load)
        guards = self._guards(st, values)
        prefetches = self._prefetches(st, body)
        if isinstance(body, Reduce):
            acc = buf.load(local)
            update: Expr = st.op.body.reducer.combine(acc, body.source)
            store: Stmt = Store(buf, local, update)
            if body.condition is not None:
                store = IfThenElse(body.condition, store)
            store = seq(*prefetches, store)
            first = next(i for i, iv in enumerate(leaves) if iv.is_reduce)
            init_leaves = [iv for iv in leaves[first:] if not iv.is_reduce]
            reduce_vars = {iv.var for iv in leaves if iv.is_reduce}
            spatial_guards = [g for g in guards if not (_vars(g) & reduce_vars)]
            init_store = Store(buf, local, st.op.body.reducer.identity(st.op.dtype))
            init = self._wrap(st, init_leaves, init_store, spatial_guards, attach=False)
            return self._wrap(st, leaves, store, guards, attach=True,
                              init=(leaves[first], init))
        return self._wrap(st, leaves, seq(*prefetches, Store(buf, local, body)), guards,
                          attach=True)

    def _prefetches(self, st: Stage, body: Expr) -> list[Stmt]:
        """The ``prefetch`` hints of a stage: for each read of a prefetched input, the same
        read ``distance`` iterations later of the loop it looks ahead in."""
        out: list[Stmt] = []
        seen: set[tuple] = set()
        for source, distance in st.prefetches:
            buf = self.buffers[source]
            reads = [n for n in walk(body) if isinstance(n, Load) and n.source is buf]
            if not reads:
                raise ScheduleError(f"prefetch of {source.name} on stage {st.name}: it reads "
                                    "nothing of it")
            loop = self._prefetch_loop(st, reads)
            if loop is None:  # every run reads the same elements: nothing ahead to fetch
                continue
            ahead = {loop: loop + distance}
            for load in reads:
                indices = tuple(substitute(i, ahead) for i in load.indices)
                key = (id(buf), *(i.key() for i in indices))
                if key not in seen and any(loop in _vars(i) for i in load.indices):
                    seen.add(key)
                    out.append(Prefetch(buf, indices))
        return out

    def _prefetch_loop(self, st: Stage, reads: list[Load]) -> Var | None:
        """The loop a stage's prefetches look ahead in: the innermost loop around the
        stage's own nest (outward through the stages it is computed in) that runs more than
        once and moves one of ``reads``; None where none does (a stage that computes its
        whole region at every iteration reads the same elements each time)."""
        if st.attach != "at":
            raise ScheduleError(f"prefetch on stage {st.name}: it is computed at the root; "
                                "prefetching looks ahead in the loop a stage is computed at")
        moved = set().union(*(_vars(i) for load in reads for i in load.indices))
        cur = st
        while cur.attach == "at":
            host = cur.attach_stage
            enclosing = host.leaf_iter_vars[:host.leaf_iter_vars.index(cur.attach_ivar) + 1]
            for iv in reversed(enclosing):
                if self.extents[iv] > 1 and iv.var in moved:
                    return iv.var
            cur = host
        return None

    def _wrap(self, st: Stage, leaves: list[IterVar], inner: Stmt, guards: list[Expr],
              attach: bool, init: tuple[IterVar, Stmt] | None = None) -> Stmt:
        position = {iv.var: i for i, iv in enumerate(leaves)}
        by_level: dict[int, list[Expr]] = {}
        for g in guards:
            levels = [position[v] for v in _vars(g) if v in position]
            by_level.setdefault(max(levels) if levels else -1, []).append(g)
        for i in range(len(leaves) - 1, -1, -1):
            iv = leaves[i]
            if by_level.get(i):
                inner = IfThenElse(all_of(by_level[i]), inner)
            if attach:
                for producer in reversed(self._attached(st, iv)):
                    inner = Allocate(self.buffers[producer], seq(self._nest(producer), inner))
            kind = _KIND.get(st.annotations.get(iv, ""), For.SERIAL)
            if iv in st.annotations and st.annotations[iv] not in _KIND:
                kind = st.annotations[iv]  # a thread binding: only GPU targets accept it
            if iv in st.tensorized:  # the nest from here inward is the intrinsic's
                kind = For.TENSORIZED
            inner = For(iv.var, self.extents[iv], kind, inner, st.pragmas.get(iv),
                        st.tensorized.get(iv))
            if init is not None and iv is init[0]:
                inner = Seq([init[1], inner])
        if by_level.get(-1):
            inner = IfThenElse(all_of(by_level[-1]), inner)
        return inner

    # ------------------------------------------------------------------ driver
    def run(self, unroll: bool = True) -> LoweredFunc:
        self._check_attach()
        self._inline()
        self._infer_bounds()
        args = self._make_buffers()
        body: list[Stmt] = []
        allocs: list[Buffer] = []
        for st in self.stages:
            if st.attach != "root":
                continue
            if st not in self.arg_stages:
                allocs.append(self.buffers[st])
            body.append(self._nest(st))
        stmt: Stmt = Seq(body)
        for buf in reversed(allocs):
            stmt = Allocate(buf, stmt)
        stmt = simplify_stmt(stmt, {})
        if unroll:  # the full form for code generation
            stmt = simplify_stmt(partition_guards(stmt), {})
            stmt = unroll_loops(stmt)
        return LoweredFunc(self.name, args, stmt)


def _vars(e: Expr) -> set[Var]:
    return {n for n in walk(e) if isinstance(n, Var)}


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _fold_extreme(op: str, exprs: list[Expr], ranges: arith.Ranges) -> Expr:
    result = exprs[0]
    for e in exprs[1:]:
        diff = arith.simplify(e - result, ranges)
        if isinstance(diff, Const):
            if (op == "min" and diff.value < 0) or (op == "max" and diff.value > 0):
                result = e
        else:
            result = Binary(op, result, e, result.dtype)
    return result


def _c_safe(name: str) -> str:
    out = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return out if out and not out[0].isdigit() else f"t_{out}"


def lower(s: Schedule, args: Sequence[Tensor], name: str = "main",
          unroll: bool = True) -> LoweredFunc:
    """Lower a schedule to a loop-IR function over ``args`` (inputs and outputs).

    With ``unroll=False`` loops to unroll stay loops (marked ``unrolled``, or carrying an
    ``auto_unroll_max_step`` pragma) and edge guards stay in place (loops are not versioned
    into full and partial tiles): a much cheaper form for analysis such as cost-model
    features. Code generation needs the full form."""
    return _Lowering(s, args, name).run(unroll)

