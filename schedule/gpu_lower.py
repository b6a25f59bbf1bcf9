"""GPU lowering: a lowered function becomes kernels launched over grids of thread blocks.

Each nest at the function's root (one stage and what is computed inside it) is one
kernel. Its loops bound to ``blockIdx.*`` / ``threadIdx.*`` are not loops on a GPU: their
variable is the block's or the thread's index, the launch is as wide as the widest loop
bound to each index, and a narrower loop is guarded. Then, in order:

- virtual threads (loops bound to ``vthread``) are unrolled into interleaved independent
  streams inside each thread: the unrolling is pushed down through loops, sequences and
  branches that do not depend on the virtual thread, and a per-thread buffer allocated
  inside one is duplicated for each (as TVM's virtual-thread injection does);
- a reduction whose axis is bound to ``threadIdx.*`` becomes a cross-thread reduction:
  each thread accumulates its share in a register, the partial results meet in a shared
  array and are combined by a tree (a barrier per level), and one thread folds the result
  into the output. On CUDA, where the reduction runs along ``threadIdx.x`` over whole
  warps or a power of two below one, the block's whole x extent, the partials combine in
  registers by warp shuffles instead (``shfl_down``; see ``_warp_reduce``): no shared
  array and no barrier within a warp, one exchange through shared memory between warps;
- a ``shared`` buffer (one per block, its region spanning all the block's threads: see
  ``lower``) is filled cooperatively and fenced: a barrier after the fills and, where the
  fills repeat inside a loop, one before them, so no thread overwrites what another still
  reads. A barrier that not every thread of a block reaches (inside a condition or a loop
  that depends on the thread index) is an invalid schedule;
- the schedule is checked for what would race or not fit: a reduction whose output
  does not follow a bound index, a per-thread buffer written by a loop bound to threads,
  threads per block and shared memory per block against the target's limits.

The result is a :class:`GpuProgram` that ``codegen_gpu`` prints as CUDA or OpenCL.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from .expr import (
    Binary,
    Call,
    Compare,
    Const,
    Expr,
    Load,
    Select,
    Var,
    all_of,
    equal,
    free_vars,
    transform,
    walk,
)
from .loop_ir import (
    Allocate,
    Barrier,
    Buffer,
    For,
    IfThenElse,
    LoweredFunc,
    Seq,
    Stmt,
    StmtMutator,
    StmtVisitor,
    Store,
)
from .passes import substitute_stmt
from .schedule import ScheduleError
from .target import Target
from .vectorize import flatten

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
VIRTUAL_TAGS = ("vthread", "cthread")
# CUDA's grid limits per dimension (x, y, z); OpenCL devices allow at least as much.
MAX_GRID = (2**31 - 1, 65535, 65535)
# Virtual threads are unrolled copies of the code: more than this is a code-size bomb.
MAX_VIRTUAL_THREADS = 64
# Per-thread arrays larger than this would live in slow local memory at best.
MAX_LOCAL_BYTES = 64 * 1024


@dataclass
class Kernel:
    """One launch: a grid of ``grid`` blocks of ``block`` threads (x, y, z) running
    ``body``. ``params`` are the global buffers it touches, ``shared`` its block-shared
    buffers, ``indices`` the variables standing for block/thread indices (by tag)."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: list[Buffer]
    shared: list[Buffer]
    indices: dict[Var, str]
    body: Stmt

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def shared_bytes(self) -> int:
        return sum(b.nbytes for b in self.shared)


@dataclass
class GpuProgram:
    """Kernels run in order over the arguments and ``temporaries`` (global buffers for
    intermediate stages computed at the root, allocated by the host)."""

    name: str
    args: list[Buffer]
    temporaries: list[Buffer]
    kernels: list[Kernel] = field(default_factory=list)


def lower_gpu(func: LoweredFunc, target: Target) -> GpuProgram:
    """The kernels of ``func`` (lowered with ``unroll=False``) for a cuda/opencl target;
    ``ScheduleError`` naming the stage and the reason when the schedule cannot run."""
    body = func.body
    temporaries: list[Buffer] = []
    while isinstance(body, Allocate):
        buf = body.buffer
        if buf.scope != "global":
            raise ScheduleError(f"{buf.name} is in {buf.scope} memory but computed at the "
                                "root: compute it at a loop inside a kernel (compute_at)")
        temporaries.append(buf)
        body = body.body
    parts = body.stmts if isinstance(body, Seq) else [body]
    program = GpuProgram(func.name, list(func.args), temporaries)
    globals_ = [*func.args, *temporaries]
    for i, part in enumerate(parts):
        program.kernels.append(_kernel(part, f"{func.name}_kernel{i}", globals_, target))
    return program


def _kernel(nest: Stmt, name: str, globals_: list[Buffer], target: Target) -> Kernel:
    launch = _launch_extents(nest)
    if not any(tag in launch for tag in (*BLOCK_TAGS, *THREAD_TAGS)):
        raise ScheduleError(f"{_first_output(nest)} is not bound to GPU threads: bind its "
                            "outer loops to blockIdx.* and threadIdx.* (a GPU target runs "
                            "nothing on the host)")
    grid = tuple(launch.get(tag, 1) for tag in BLOCK_TAGS)
    block = tuple(launch.get(tag, 1) for tag in THREAD_TAGS)
    # before anything is rewritten for them: the tree reductions are as wide as the block
    if math.prod(block) > target.max_threads_per_block:
        raise ScheduleError(f"{name} needs {math.prod(block)} threads per block "
                            f"({' x '.join(map(str, block))}); the target allows "
                            f"{target.max_threads_per_block}")
    nest = _CrossThreadReductions(launch, target).visit(nest)
    _RaceCheck().visit(nest)
    nest = _InjectVirtualThreads().visit(nest)
    indices = {tag: Var(tag.replace(".", "_"), "int32") for tag in launch
               if tag in BLOCK_TAGS or tag in THREAD_TAGS}
    nest = _BindIndices(launch, indices).visit(nest)
    fences = _Fences()
    nest = fences.visit(nest)
    nest = _place_barriers(nest, fences.fills, in_loop=False)
    index_vars = {v: tag for tag, v in indices.items()}
    _DivergenceCheck({v for v, tag in index_vars.items() if tag in THREAD_TAGS}).visit(nest)
    used = _Buffers()
    used.visit(nest)
    kernel = Kernel(name, grid, block, [b for b in globals_ if b in used.buffers],
                    fences.shared, index_vars, flatten(nest))
    _check_limits(kernel, used.local, target)
    return kernel


# ---------------------------------------------------------------------------- analysis


def _launch_extents(s: Stmt) -> dict[str, int]:
    """The widest constant extent bound to each thread tag; a loop nested inside one
    bound to the same block index is refused (it would run only its diagonal)."""
    launch: dict[str, int] = {}

    class Walk(StmtVisitor):
        def __init__(self) -> None:
            self.bound: list[str] = []

        def visit_for(self, loop: For) -> None:
            tag = loop.kind
            if tag in (*BLOCK_TAGS, *THREAD_TAGS, *VIRTUAL_TAGS):
                if not isinstance(loop.extent, Const):
                    raise ScheduleError(f"loop {loop.var.name} bound to {tag} has a variable "
                                        "extent; bound loops need a constant one")
                if tag in BLOCK_TAGS and tag in self.bound:
                    raise ScheduleError(f"loop {loop.var.name} is bound to {tag} inside "
                                        f"another loop bound to {tag}")
                launch[tag] = max(launch.get(tag, 1), int(loop.extent.value))
                if tag in VIRTUAL_TAGS and launch[tag] > MAX_VIRTUAL_THREADS:
                    raise ScheduleError(f"loop {loop.var.name} has {launch[tag]} virtual "
                                        f"threads; at most {MAX_VIRTUAL_THREADS} (each is a "
                                        "copy of the code)")
            elif loop.kind == For.PARALLEL:
                raise ScheduleError(f"loop {loop.var.name} is parallel, a cpu annotation: "
                                    "on a GPU bind it to blockIdx.* or threadIdx.* instead")
            elif loop.kind == For.TENSORIZED:
                raise ScheduleError(f"loop {loop.var.name} is tensorized with {loop.intrin}, "
                                    "which has no GPU code generation")
            self.bound.append(tag)
            super().visit_for(loop)
            self.bound.pop()

    Walk().visit(s)
    return launch


def _first_output(s: Stmt) -> str:
    for node in _stores(s):
        return node.buffer.name
    return "the stage"


def _stores(s: Stmt) -> list[Store]:
    out: list[Store] = []

    class Collect(StmtVisitor):
        def visit_store(self, st: Store) -> None:
            out.append(st)

    Collect().visit(s)
    return out


class _RaceCheck(StmtVisitor):
    """Refuses what would make threads race: a per-thread buffer filled by a loop bound to
    threads or blocks (each thread would compute only its slice of its own copy), and an
    accumulation whose element does not depend on every bound index around it (threads
    would add into one element at once: a reduction axis bound without ``rfactor``)."""

    def __init__(self) -> None:
        self.bound: list[tuple[Var, str]] = []
        self.allocated_at: dict[Buffer, int] = {}  # buffer -> depth of bound loops there

    def visit_for(self, loop: For) -> None:
        bound = loop.kind in (*BLOCK_TAGS, *THREAD_TAGS, *VIRTUAL_TAGS)
        if bound:
            self.bound.append((loop.var, loop.kind))
        super().visit_for(loop)
        if bound:
            self.bound.pop()

    def visit_allocate(self, s: Allocate) -> None:
        self.allocated_at[s.buffer] = len(self.bound)
        super().visit_allocate(s)

    def visit_if(self, s: IfThenElse) -> None:
        """Under ``index == constant`` one thread runs the branch: no race over it."""
        pinned = s.cond.a if isinstance(s.cond, Compare) and s.cond.op == "==" \
            and isinstance(s.cond.b, Const) else None
        saved = self.bound
        if isinstance(pinned, Var):
            self.bound = [(v, t) if v is not pinned else (v, "pinned") for v, t in self.bound]
        super().visit_if(s)
        self.bound = saved

    def visit_store(self, s: Store) -> None:
        buf = s.buffer
        depth = self.allocated_at.get(buf, 0)
        private = buf in self.allocated_at and buf.scope != "shared"
        inside = self.bound[depth:] if private else self.bound
        if private:
            for var, tag in inside:
                if tag not in (*VIRTUAL_TAGS, "pinned"):
                    raise ScheduleError(
                        f"{buf.name} is a per-thread buffer ({buf.scope}) but the loop "
                        f"{var.name} that fills it is bound to {tag}: put it in shared "
                        "memory (scope 'shared') to fill it across threads")
        reads_itself = any(isinstance(n, Load) and n.source is buf for n in walk(s.value))
        if not reads_itself:
            return
        used = set().union(*(free_vars(i) for i in s.indices)) if s.indices else set()
        relevant = [(v, t) for v, t in inside if t != "pinned"
                    and (buf.scope != "shared" or t in THREAD_TAGS)]
        for var, tag in relevant:
            if var not in used:
                raise ScheduleError(
                    f"threads race on {buf.name}: it accumulates over loop {var.name}, "
                    f"which is bound to {tag}; bind only axes that index the output (or "
                    "rfactor the reduction first)")


class _Buffers(StmtVisitor):
    """Buffers a kernel touches, and its per-thread allocations."""

    def __init__(self) -> None:
        self.buffers: set[Buffer] = set()
        self.local: list[Buffer] = []

    def visit_expr(self, e: Expr) -> None:
        self.buffers.update(n.source for n in walk(e) if isinstance(n, Load)
                            and isinstance(n.source, Buffer))

    def visit_store(self, s: Store) -> None:
        self.buffers.add(s.buffer)
        super().visit_store(s)

    def visit_allocate(self, s: Allocate) -> None:
        self.local.append(s.buffer)
        super().visit_allocate(s)


def _check_limits(kernel: Kernel, local: list[Buffer], target: Target) -> None:
    if kernel.shared_bytes > target.shared_memory_bytes:
        names = ", ".join(f"{b.name} {b.nbytes} B" for b in kernel.shared)
        raise ScheduleError(f"{kernel.name} needs {kernel.shared_bytes} bytes of shared memory "
                            f"per block ({names}); the target allows "
                            f"{target.shared_memory_bytes}")
    for extent, limit, axis in zip(kernel.grid, MAX_GRID, "xyz", strict=True):
        if extent > limit:
            raise ScheduleError(f"{kernel.name} needs {extent} blocks along {axis}; at most "
                                f"{limit}")
    per_thread = sum(b.nbytes for b in local)
    if per_thread > MAX_LOCAL_BYTES:
        raise ScheduleError(f"{kernel.name} needs {per_thread} bytes of per-thread buffers "
                            f"({', '.join(b.name for b in local)}); at most {MAX_LOCAL_BYTES}")


# ---------------------------------------------------------------------------- cross-thread


_COMBINERS = ("+", "max", "min")


class _CrossThreadReductions(StmtMutator):
    """A loop bound to ``threadIdx.*`` that a reduction accumulates over (its one store is
    ``out[i] = out[i] op v`` with ``i`` independent of the loop) becomes: each thread's
    partial result in a register, the partials in a shared array (one row per thread of
    the other thread axes around it, which reduce other outputs), a tree of barriers and
    combines, and the first thread of the row folding the total into ``out[i]``; or, where
    ``_warp_reduce`` applies, the same with the combines done by warp shuffles."""

    def __init__(self, launch: dict[str, int], target: Target) -> None:
        self.around: list[For] = []  # the enclosing loops bound to threads
        self.launch = launch
        self.warp = target.warp_size  # 1 on OpenCL: no shuffles there

    def visit_for(self, s: For) -> Stmt:
        bound = s.kind in (*THREAD_TAGS, *VIRTUAL_TAGS)
        if bound:
            self.around.append(s)
        body = self.visit(s.body)
        if bound:
            self.around.pop()
        loop = For(s.var, s.extent, s.kind, body, s.pragmas, s.intrin)
        if s.kind not in THREAD_TAGS:
            return loop
        stores = _stores(body)
        if not (len(stores) == 1 and _accumulates_over(stores[0], s.var)):
            return loop
        unsupported = [lp.kind for lp in self.around if lp.kind in VIRTUAL_TAGS
                       or lp.kind == s.kind]
        if unsupported:
            raise ScheduleError(
                f"a cross-thread reduction over {s.kind} (loop {s.var.name}) inside loops "
                f"bound to {', '.join(unsupported)} is not supported: bind the other axes to "
                "blockIdx.* or to other threadIdx axes")
        threads = int(s.extent.value)
        if (s.kind == "threadIdx.x" and threads == self.launch[s.kind] and self.warp > 1
                and (threads % self.warp == 0
                     or (threads < self.warp and threads & (threads - 1) == 0))):
            return _warp_reduce(loop, stores[0], list(self.around), self.warp)
        return _tree_reduce(loop, stores[0], list(self.around))


def _accumulates_over(store: Store, var: Var) -> bool:
    value = store.value
    return (isinstance(value, Binary) and not isinstance(value, Compare)
            and value.op in _COMBINERS and isinstance(value.a, Load)
            and value.a.source is store.buffer
            and all(x.key() == y.key() for x, y in zip(value.a.indices, store.indices,
                                                       strict=True))
            and var not in set().union(*map(free_vars, store.indices)))


def _identity(op: str, dtype: str) -> Const:
    import numpy as np

    from . import dtype as dt

    if op == "+":
        return Const(0, dtype)
    if dt.is_float(dtype):
        return Const(float("-inf") if op == "max" else float("inf"), dtype)
    info = np.iinfo(dt.numpy_dtype(dtype))
    return Const(int(info.min if op == "max" else info.max), dtype)


def _partial_loop(loop: For, store: Store, acc: Buffer,
                  after: Callable[[Var], list[Stmt]]) -> For:
    """``loop`` with each thread accumulating its share of ``store`` into the register
    ``acc`` (from the reduction's identity), then running ``after(thread)``."""
    value = store.value
    zero = (Const(0, "int32"),)

    class ToPartial(StmtMutator):
        def visit_store(self, st: Store) -> Stmt:
            if st is not store:
                return st
            return Store(acc, zero, Binary(value.op, acc.load(zero), value.b, acc.dtype))

    var = Var(loop.var.name, loop.var.dtype)
    return For(var, loop.extent, loop.kind, Allocate(acc, Seq([
        Store(acc, zero, _identity(value.op, acc.dtype)),
        substitute_stmt(ToPartial().visit(loop.body), {loop.var: var}),
        *after(var)])))


def _warp_reduce(loop: For, store: Store, around: list[For], warp: int) -> Stmt:
    """The cross-thread form of ``loop`` by warp shuffles. Its threads are the block's whole
    x extent, a power of two below a warp or a multiple of one, so each output's threads
    are consecutive lanes from a multiple of their count: below a warp, a group of lanes
    that halves its register partials onto the lower half (``shfl_down`` within the
    group's width) until lane 0 holds the total; whole warps, each warp does so, its lane 0
    writes the warp's total into a shared row (one per output: the other thread axes
    around), and after a barrier (which also orders the threads' initialisation of the
    output before the fold) the first warp of each output reduces that row the same way
    (the row padded with the identity to a power of two). Conditions around the
    reduction cannot depend on ``threadIdx.x`` (no loop around it is bound to it), so an
    output's lanes are all active or all idle."""
    op, dtype, threads = store.value.op, store.buffer.dtype, int(loop.extent.value)
    acc = Buffer(f"{store.buffer.name}_partial", (1,), dtype, "local")
    zero = (Const(0, "int32"),)

    def shuffles(width: int, fence: bool) -> list[Stmt]:
        """``fence``: the first exchange also orders the group's earlier memory writes
        before its later ones (``__syncwarp``): every thread initialised the output that
        the first lane folds into."""
        steps, offset = [], width // 2
        while offset >= 1:
            moved = Call("shfl_down", (acc.load(zero), Const(offset, "int32"),
                                       Const(width, "int32"), Const(fence, "bool")), dtype)
            steps.append(Store(acc, zero, Binary(op, acc.load(zero), moved, dtype)))
            offset //= 2
            fence = False
        return steps

    def fold(t: Var) -> Stmt:
        return IfThenElse(equal(t, 0), Store(store.buffer, store.indices, Binary(
            op, store.value.a, acc.load(zero), dtype)))

    if threads <= warp:
        return _partial_loop(loop, store, acc, lambda t: [*shuffles(threads, fence=True),
                                                             fold(t)])
    warps = threads // warp
    rows = tuple(lp.var for lp in around)
    totals = Buffer(f"{store.buffer.name}_red", (*(int(lp.extent.value) for lp in around),
                                                 warps), dtype, "shared")
    per_warp = _partial_loop(loop, store, acc, lambda t: [*shuffles(warp, fence=False), IfThenElse(
        equal(Binary("floormod", t, Const(warp, "int32"), "int32"), 0),
        Store(totals, (*rows, Binary("floordiv", t, Const(warp, "int32"), "int32")),
              acc.load(zero)))])
    # after the barrier that fences the fill above (``_Fences``), the first warp of each
    # output reduces the warps' totals; the condition is uniform across each warp
    t = Var(loop.var.name, loop.var.dtype)
    second = IfThenElse(t < warp, Allocate(acc, Seq([
        Store(acc, zero, Select(t < warps, totals.load((*rows, t)), _identity(op, dtype))),
        *shuffles(1 << (warps - 1).bit_length(), fence=False), fold(t)])))
    return Allocate(totals, Seq([per_warp, For(t, loop.extent, loop.kind, second)]))


def _tree_reduce(loop: For, store: Store, around: list[For]) -> Stmt:
    """The cross-thread form of ``loop`` (see ``_CrossThreadReductions``); ``around``: the
    loops bound to other thread axes it is inside (a row of partials each)."""
    value = store.value
    op, dtype, threads = value.op, store.buffer.dtype, int(loop.extent.value)
    acc = Buffer(f"{store.buffer.name}_partial", (1,), dtype, "local")
    rows = tuple(lp.var for lp in around)
    red = Buffer(f"{store.buffer.name}_red", (*(int(lp.extent.value) for lp in around),
                                              threads), dtype, "shared")
    zero = (Const(0, "int32"),)
    first = (*rows, Const(0, "int32"))

    def on_threads(body_of: Callable[[Var], Stmt]) -> For:
        var = Var(loop.var.name, loop.var.dtype)
        return For(var, threads, loop.kind, body_of(var))

    partial = _partial_loop(loop, store, acc, lambda t: [Store(red, (*rows, t),
                                                               acc.load(zero))])
    # the partials' fill is fenced like any shared fill (``_Fences``); each level after
    steps: list[Stmt] = [partial]
    half = 1 << max(0, (threads - 1).bit_length() - 1)
    while half >= 1:
        def combine(t: Var, half: int = half) -> Stmt:
            mine, other = (*rows, t), (*rows, t + half)
            update = Store(red, mine, Binary(op, red.load(mine), red.load(other), dtype))
            return IfThenElse(all_of([t < half, t + half < threads]), update)

        steps += [on_threads(combine), Barrier()]
        half //= 2
    steps += [on_threads(lambda t: IfThenElse(
        equal(t, 0), Store(store.buffer, store.indices,
                      Binary(op, value.a, red.load(first), dtype))))]
    return Allocate(red, Seq(steps))


# ---------------------------------------------------------------------------- virtual threads


def _stmt_vars(s: Stmt) -> set[Var]:
    found: set[Var] = set()

    class Collect(StmtVisitor):
        def visit_expr(self, e: Expr) -> None:
            found.update(free_vars(e))

    Collect().visit(s)
    return found


class _InjectVirtualThreads(StmtMutator):
    def visit_for(self, s: For) -> Stmt:
        body = self.visit(s.body)
        if s.kind not in VIRTUAL_TAGS:
            return For(s.var, s.extent, s.kind, body, s.pragmas, s.intrin)
        return _interleave(body, s.var, int(s.extent.value))


def _interleave(s: Stmt, var: Var, n: int) -> Stmt:
    """``for var in 0..n: s`` as ``n`` interleaved copies, pushed as deep as possible."""
    if var not in _stmt_vars(s):
        return s
    if isinstance(s, Seq):
        return Seq([_interleave(c, var, n) for c in s.stmts])
    if isinstance(s, For) and var not in free_vars(s.extent):
        return For(s.var, s.extent, s.kind, _interleave(s.body, var, n), s.pragmas, s.intrin)
    if isinstance(s, IfThenElse) and var not in free_vars(s.cond):
        return IfThenElse(s.cond, _interleave(s.then_body, var, n),
                          None if s.else_body is None else _interleave(s.else_body, var, n))
    if isinstance(s, Allocate):
        if s.buffer.scope == "shared":  # one per block, shared by its virtual threads too
            return Allocate(s.buffer, _interleave(s.body, var, n))
        copies = Buffer(s.buffer.name, (n, *s.buffer.shape), s.buffer.dtype, s.buffer.scope)
        return Allocate(copies, _interleave(_Rebuffer(s.buffer, copies, var).visit(s.body),
                                            var, n))
    return Seq([substitute_stmt(s, {var: Const(i, var.dtype)}) for i in range(n)])


class _Rebuffer(StmtMutator):
    """Accesses to ``old`` become accesses to ``new``'s copy number ``var``."""

    def __init__(self, old: Buffer, new: Buffer, var: Var):
        self.old, self.new, self.var = old, new, var

    def visit_expr(self, e: Expr) -> Expr:
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, Load) and node.source is self.old:
                return Load(self.new, (self.var, *(transform(i, fn) for i in node.indices)),
                            node.dtype)
            return None

        return transform(e, fn)

    def visit_store(self, s: Store) -> Stmt:
        if s.buffer is not self.old:
            return super().visit_store(s)
        return Store(self.new, (self.var, *map(self.visit_expr, s.indices)),
                     self.visit_expr(s.value))


# ---------------------------------------------------------------------------- thread indices


class _BindIndices(StmtMutator):
    """Loops bound to a block or thread index become that index (guarded where the loop is
    narrower than the launch)."""

    def __init__(self, launch: dict[str, int], indices: dict[str, Var]):
        self.launch, self.indices = launch, indices

    def visit_for(self, s: For) -> Stmt:
        body = self.visit(s.body)
        if s.kind not in self.indices:
            return For(s.var, s.extent, s.kind, body, s.pragmas, s.intrin)
        index = self.indices[s.kind]
        body = substitute_stmt(body, {s.var: index})
        extent = int(s.extent.value)
        if extent < self.launch[s.kind]:
            body = IfThenElse(index < extent, body)
        return body


# ---------------------------------------------------------------------------- barriers


class _Fences(StmtMutator):
    """Hoists the shared allocations out of the kernel body (``shared``) and remembers the
    statements that fill them (``fills``: the first statement under each allocation)."""

    def __init__(self) -> None:
        self.shared: list[Buffer] = []
        self.fills: set[int] = set()

    def visit_allocate(self, s: Allocate) -> Stmt:
        body = self.visit(s.body)
        if s.buffer.scope != "shared":
            return Allocate(s.buffer, body)
        if s.buffer not in self.shared:
            self.shared.append(s.buffer)
        first = body.stmts[0] if isinstance(body, Seq) else body
        self.fills.add(id(first))
        return body


def _place_barriers(s: Stmt, fills: set[int], in_loop: bool) -> Stmt:
    """A barrier after each run of consecutive fills and, inside a loop, one before it."""
    if isinstance(s, Seq):
        out: list[Stmt] = []
        run: list[Stmt] = []
        for child in s.stmts:
            if id(child) in fills:
                run.append(_place_barriers(child, fills, in_loop))
                continue
            if run:
                out += [Barrier()] * in_loop + run + [Barrier()]
                run = []
            out.append(_place_barriers(child, fills, in_loop))
        if run:
            out += [Barrier()] * in_loop + run + [Barrier()]
        return Seq(out)
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, _place_barriers(s.body, fills, True), s.pragmas,
                   s.intrin)
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, _place_barriers(s.then_body, fills, in_loop),
                          None if s.else_body is None
                          else _place_barriers(s.else_body, fills, in_loop))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _place_barriers(s.body, fills, in_loop))
    if id(s) in fills:  # a fill that is the whole body of its allocation
        return Seq([Barrier()] * in_loop + [s, Barrier()])
    return s


class _DivergenceCheck(StmtVisitor):
    """A barrier must be reached by every thread of the block: none under a condition or
    inside a loop whose extent depends on the thread index (or on data)."""

    def __init__(self, thread_vars: set[Var]):
        self.thread_vars = thread_vars
        self.divergent: list[str] = []

    def _depends(self, e: Expr) -> bool:
        return bool(free_vars(e) & self.thread_vars) or any(isinstance(n, Load)
                                                            for n in walk(e))

    def visit_if(self, s: IfThenElse) -> None:
        from .printer import expr_str

        diverges = self._depends(s.cond)
        if diverges:
            self.divergent.append(f"the condition {expr_str(s.cond)}")
        super().visit_if(s)
        if diverges:
            self.divergent.pop()

    def visit_for(self, s: For) -> None:
        diverges = self._depends(s.extent)
        if diverges:
            self.divergent.append(f"loop {s.var.name}, whose extent depends on the thread")
        super().visit_for(s)
        if diverges:
            self.divergent.pop()

    def visit_barrier(self, s: Barrier) -> None:
        if self.divergent:
            raise ScheduleError(
                f"a barrier that shared memory needs would sit inside {self.divergent[-1]}, "
                "which not every thread of the block reaches: make the loops bound to "
                "threadIdx divide their extents exactly (or bind the same extent everywhere) "
                "so the shared-memory fill is not guarded")
