"""Loop-IR passes run after lowering: simplification and loop unrolling."""

from __future__ import annotations

from . import arith
from .chains import pairwise, reduction_chain
from .expr import (
    Compare,
    Const,
    Expr,
    Load,
    Not,
    Var,
    all_of,
    conjuncts,
    free_vars,
    substitute,
    transform,
)
from .loop_ir import (
    Allocate,
    Buffer,
    For,
    IfThenElse,
    Seq,
    Stmt,
    StmtMutator,
    StmtVisitor,
    Store,
    UnrolledSize,
    seq,
)
from .tighten import live_extent

# Explicitly unrolled loops larger than this are kept as loops (code size guard).
MAX_UNROLL_STEPS = 4096
# A loop's values tried one by one to find its edge tile when its full-tile test is not
# linear (lowering runs for every candidate the search scores, so this stays small).
MAX_EDGE_SCAN = 64


class _Substitute(StmtMutator):
    def __init__(self, mapping: dict[Var, Expr]):
        self.mapping = mapping

    def visit_expr(self, e: Expr) -> Expr:
        return substitute(e, self.mapping)


def substitute_stmt(s: Stmt, mapping: dict[Var, Expr]) -> Stmt:
    return _Substitute(mapping).visit(s)


def simplify_stmt(s: Stmt, ranges: arith.Ranges,
                  zeros: dict[Var, Expr] | None = None) -> Stmt | None:
    """Simplify every expression using the ranges of the enclosing loops; drop guards that
    always hold, code under guards that never hold, and loops of extent 0. A loop of one
    iteration becomes its body with the variable 0 (so indices fold); ``zeros`` carries
    those variables down so each expression is substituted once, however deep the nest."""
    return _Simplify(ranges, zeros or {}).visit(s)


class _Simplify(StmtMutator):
    def __init__(self, ranges: arith.Ranges, zeros: dict[Var, Expr]):
        self.ranges = ranges
        self.zeros = zeros

    def visit_expr(self, e: Expr) -> Expr:
        return arith.simplify(substitute(e, self.zeros) if self.zeros else e, self.ranges)

    def visit_seq(self, s: Seq) -> Stmt | None:
        kept = [c for c in map(self.visit, s.stmts) if c is not None]
        return Seq(kept) if kept else None

    def visit_for(self, s: For) -> Stmt | None:
        extent = self.visit_expr(s.extent)
        bounds = arith.const_bounds(extent, self.ranges)
        if bounds is not None and bounds[1] <= 0:
            return None
        if isinstance(extent, Const) and extent.value == 1 and s.kind in (
                For.SERIAL, For.PARALLEL, For.UNROLLED, For.VECTORIZED):
            body = simplify_stmt(s.body, self.ranges,
                                 {**self.zeros, s.var: Const(0, s.var.dtype)})
            return body if body is None or not s.pragmas else \
                _PushPragmas(s.pragmas).visit(body)
        inner = dict(self.ranges)
        inner[s.var] = (0, (bounds[1] if bounds else 1 << 30) - 1)
        body = simplify_stmt(s.body, inner, self.zeros)
        if body is None:
            return None
        return For(s.var, extent, s.kind, body, s.pragmas, s.intrin)

    def visit_if(self, s: IfThenElse) -> Stmt | None:
        cond = self.visit_expr(s.cond)
        if isinstance(cond, Const):
            chosen = s.then_body if cond.value else s.else_body
            return None if chosen is None else self.visit(chosen)
        then_body = self.visit(s.then_body)
        else_body = None if s.else_body is None else self.visit(s.else_body)
        if then_body is None and else_body is None:
            return None
        if then_body is None:
            return IfThenElse(Not(cond), else_body)
        return IfThenElse(cond, then_body, else_body)

    def visit_allocate(self, s: Allocate) -> Stmt | None:
        body = self.visit(s.body)
        return None if body is None else Allocate(s.buffer, body)


class _PushPragmas(StmtMutator):
    """Hand a dropped one-iteration loop's pragmas to the outermost loops inside it (an
    ``auto_unroll_max_step`` on a cache stage's outer tile, whose loops all have one
    iteration once it is computed at its consumer, still governs the nest below). Where
    both carry a pragma the larger value holds, as it does for nested pragmas when
    unrolling."""

    def __init__(self, pragmas: dict[str, int]):
        self.pragmas = pragmas

    def visit_for(self, s: For) -> Stmt:
        merged = dict(s.pragmas)
        for name, value in self.pragmas.items():
            merged[name] = max(value, merged.get(name, value))
        return For(s.var, s.extent, s.kind, s.body, merged, s.intrin)


def unroll_loops(s: Stmt, auto_max_step: int = 0, ranges: arith.Ranges | None = None) -> Stmt:
    """Unroll loops marked ``unrolled`` and, under an ``auto_unroll_max_step`` pragma, every
    serial loop whose fully unrolled body runs at most that many statements."""
    return _Unroll(auto_max_step, ranges or {}).visit(s)


class _Unroll(StmtMutator):
    def __init__(self, auto_max_step: int, ranges: arith.Ranges):
        self.auto_max_step = auto_max_step
        self.ranges = ranges

    def visit_seq(self, s: Seq) -> Stmt:
        return seq(*[c for c in map(self.visit, s.stmts) if c is not None])

    def visit_for(self, s: For) -> Stmt:
        return _unroll_loop(s, self.auto_max_step, self.ranges)


def _unroll_loop(s: For, auto_max_step: int, ranges: arith.Ranges) -> Stmt:
    if s.kind == For.TENSORIZED:  # one intrinsic: its code generator owns the nest
        return s
    max_step = max(auto_max_step, s.pragmas.get("auto_unroll_max_step", 0))
    body = unroll_loops(s.body, max_step, ranges)
    loop = For(s.var, s.extent, s.kind, body, s.pragmas, s.intrin)
    steps = UnrolledSize().visit(loop)
    explicit = s.kind == For.UNROLLED
    auto = s.kind == For.SERIAL and max_step > 0 and steps is not None and steps <= max_step
    if (explicit or auto) and isinstance(s.extent, Const) and steps is not None \
            and steps <= MAX_UNROLL_STEPS:
        chain = reduction_chain(loop)
        if chain is not None:
            return simplify_stmt(pairwise(chain), ranges)
        copies = []
        for v in range(int(s.extent.value)):
            copy = simplify_stmt(substitute_stmt(body, {s.var: Const(v, s.var.dtype)}), ranges)
            if copy is not None:
                copies.append(copy)
        return Seq(copies) if copies else Seq([])
    if explicit:
        loop.kind = For.SERIAL if steps is None or steps > MAX_UNROLL_STEPS else loop.kind
    return loop


def _all_iterations(cond: Expr, fixed: set[Var], ranges: arith.Ranges) -> Expr | None:
    """A condition on the ``fixed`` variables under which ``cond`` (an integer comparison)
    holds for every value of the other variables in ``ranges``; None if none is found."""
    if not isinstance(cond, Compare) or cond.op not in ("<", "<=", ">", ">="):
        return None
    diff = arith.simplify(cond.a - cond.b) if cond.op in ("<", "<=") else \
        arith.simplify(cond.b - cond.a)
    strict = cond.op in ("<", ">")
    if not free_vars(diff) - fixed:
        return None
    interval = arith.symbolic_interval(diff, fixed, ranges)
    if interval is None:
        return None
    lin = arith.linear(interval[1])
    bound = -lin.const
    lin.const = 0
    hi = arith.from_linear(lin, diff.dtype)
    return hi < bound if strict else hi <= bound


def partition_guards(s: Stmt, fixed: set[Var] | None = None,
                     ranges: arith.Ranges | None = None,
                     done: dict[int, IfThenElse] | None = None) -> Stmt:
    """Version loops whose body has guards (from non-dividing splits or regions reaching past a
    tensor's edge): inside the outermost loop a guard depends on, ``if (the guard holds for all
    inner iterations) { body without it } else { body }``. The common full tiles then run
    without per-element checks, so they vectorize and keep register tiles."""
    fixed = set() if fixed is None else fixed
    ranges = {} if ranges is None else ranges
    # guards already versioned, by id; holding them keeps their ids from being reused
    done = {} if done is None else done
    return _PartitionGuards(fixed, ranges, done).visit(s)


class _PartitionGuards(StmtMutator):
    def __init__(self, fixed: set[Var], ranges: arith.Ranges, done: dict[int, IfThenElse]):
        self.fixed = fixed
        self.ranges = ranges
        self.done = done

    def visit_for(self, s: For) -> Stmt:
        return _version_loop(s, self.fixed, self.ranges, self.done)


def _version_loop(s: For, fixed: set[Var], ranges: arith.Ranges,
                  done: dict[int, IfThenElse]) -> Stmt:
    live = live_extent(s, ranges)
    if live is not None:
        s = For(s.var, live, s.kind, s.body, s.pragmas, s.intrin)
    inner_fixed = fixed | {s.var}
    bounds = arith.const_bounds(s.extent, ranges)
    inner_ranges = dict(ranges)
    inner_ranges[s.var] = (0, (bounds[1] if bounds else 1 << 30) - 1)
    conditions: list[Expr] = []
    versioned: dict[int, list[Expr]] = {}
    for guard, loop_ranges in _guards_in(s.body, inner_ranges):
        if id(guard) in done:
            continue
        keep = []
        for c in conjuncts(guard.cond):
            if s.var in free_vars(c) and not (free_vars(c) - set(loop_ranges) - inner_fixed):
                full = _all_iterations(c, inner_fixed, loop_ranges)
                if full is not None:
                    full = arith.simplify(full, inner_ranges)
                    if not isinstance(full, Const):
                        conditions.append(full)
                        continue
            keep.append(c)
        if len(keep) < len(conjuncts(guard.cond)):
            versioned[id(guard)] = keep
            done[id(guard)] = guard
    body = s.body
    if conditions:
        fast = clone_allocations(_DropGuards(versioned).visit(body))
        unique = {c.key(): c for c in conditions}
        full_tile = all_of(unique.values())
        body = IfThenElse(full_tile, fast,
                          _edge_tile(body, full_tile, s.var, bounds, inner_ranges))
    body = partition_guards(body, inner_fixed, inner_ranges, done)
    return For(s.var, s.extent, s.kind, body, s.pragmas, s.intrin)


def _edge_tile(body: Stmt, full_tile: Expr, var: Var, bounds: tuple[int, int] | None,
               ranges: arith.Ranges) -> Stmt | None:
    """The slow version of a versioned loop body, specialised to the one value of ``var``
    that reaches it when the full-tile test depends on ``var`` alone (the usual case: the
    last tile of a non-dividing split). Its guards then compare inner loop variables with
    constants, so the loop that was vectorized is cut at the edge (``partition_loop``)
    instead of running scalar code."""
    if bounds is None or bounds[1] < 2 or free_vars(full_tile) != {var}:
        return body

    def holds(value: int) -> bool:
        return bool(arith.simplify(substitute(full_tile, {var: Const(value, var.dtype)})).value)

    last = bounds[1] - 1
    if all(_linear_in(c, var) for c in conjuncts(full_tile)):
        # the values failing linear comparisons are a prefix or a suffix of the range
        if holds(0) and not holds(last) and (last == 1 or holds(last - 1)):
            edges = [last]
        elif not holds(0) and holds(1) and holds(last):
            edges = [0]
        else:
            return body
    elif bounds[1] <= MAX_EDGE_SCAN:  # e.g. a fused loop's floormod: try every value
        edges = [v for v in range(bounds[1]) if not holds(v)]
    else:
        return body
    if len(edges) != 1:
        return body
    return simplify_stmt(substitute_stmt(body, {var: Const(edges[0], var.dtype)}), ranges)


def _linear_in(cond: Expr, var: Var) -> bool:
    """``cond`` is an integer comparison whose sides differ by ``a * var + c``."""
    if not isinstance(cond, Compare) or cond.op not in ("<", "<=", ">", ">="):
        return False
    diff = arith.linear(arith.simplify(cond.a - cond.b))
    return diff is not None and set(diff.terms) == {var.key()}


def _guards_in(s: Stmt, ranges: arith.Ranges) -> list[tuple[IfThenElse, arith.Ranges]]:
    """(guard, ranges of the loops around it) for every else-less IfThenElse in ``s`` (not
    looking into loops whose extent has no constant bound)."""
    finder = _FindGuards(ranges)
    finder.visit(s)
    return finder.found


class _FindGuards(StmtVisitor):
    def __init__(self, ranges: arith.Ranges):
        self.ranges = ranges
        self.found: list[tuple[IfThenElse, arith.Ranges]] = []

    def visit_if(self, s: IfThenElse) -> None:
        if s.else_body is None:
            self.found.append((s, self.ranges))
        super().visit_if(s)

    def visit_for(self, s: For) -> None:
        bounds = arith.const_bounds(s.extent, self.ranges)
        if bounds is not None:
            outer = self.ranges
            self.ranges = dict(outer)
            self.ranges[s.var] = (0, bounds[1] - 1)
            self.visit(s.body)
            self.ranges = outer


class _DropGuards(StmtMutator):
    """Versioned guards reduced to their kept conjuncts (gone when none is kept)."""

    def __init__(self, versioned: dict[int, list[Expr]]):
        self.versioned = versioned

    def visit_if(self, s: IfThenElse) -> Stmt:
        then_body = self.visit(s.then_body)
        else_body = None if s.else_body is None else self.visit(s.else_body)
        if id(s) in self.versioned:
            keep = self.versioned[id(s)]
            return IfThenElse(all_of(keep), then_body) if keep else then_body
        return IfThenElse(s.cond, then_body, else_body)


def clone_allocations(s: Stmt) -> Stmt:
    """A copy of ``s`` whose allocated buffers are new objects (so two versions of a loop
    body can be register-promoted independently)."""
    return _CloneAllocations().visit(s)


class _CloneAllocations(StmtMutator):
    def __init__(self) -> None:
        self.mapping: dict[int, Buffer] = {}  # id of an old buffer -> its copy

    def visit_expr(self, e: Expr) -> Expr:
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, Load) and id(node.source) in self.mapping:
                return Load(self.mapping[id(node.source)], node.indices, node.dtype)
            return None

        return transform(e, fn)

    def visit_allocate(self, s: Allocate) -> Stmt:
        old = s.buffer
        new = Buffer(old.name, old.shape, old.dtype, old.scope)
        new.strides = old.strides
        self.mapping[id(old)] = new
        return Allocate(new, self.visit(s.body))

    def visit_store(self, s: Store) -> Stmt:
        return Store(self.mapping.get(id(s.buffer), s.buffer),
                     [self.visit_expr(i) for i in s.indices], self.visit_expr(s.value))
