"""Loop-IR passes run after lowering: simplification and loop unrolling."""

from __future__ import annotations

from . import arith
from .expr import (
    Compare,
    Const,
    Expr,
    Load,
    Logic,
    Not,
    Var,
    all_of,
    free_vars,
    substitute,
    transform,
)
from .loop_ir import Allocate, Buffer, For, IfThenElse, Seq, Stmt, Store, seq

# Explicitly unrolled loops larger than this are kept as loops (code size guard).
MAX_UNROLL_STEPS = 4096
# A loop's values tried one by one to find its edge tile when its full-tile test is not
# linear (lowering runs for every candidate the search scores, so this stays small).
MAX_EDGE_SCAN = 64


def _map_exprs(s: Stmt, fn) -> Stmt:
    if isinstance(s, Seq):
        return Seq([_map_exprs(c, fn) for c in s.stmts])
    if isinstance(s, For):
        return For(s.var, fn(s.extent), s.kind, _map_exprs(s.body, fn), s.pragmas)
    if isinstance(s, Store):
        return Store(s.buffer, [fn(i) for i in s.indices], fn(s.value))
    if isinstance(s, IfThenElse):
        return IfThenElse(fn(s.cond), _map_exprs(s.then_body, fn),
                          None if s.else_body is None else _map_exprs(s.else_body, fn))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _map_exprs(s.body, fn))
    raise TypeError(f"unknown statement {type(s).__name__}")


def substitute_stmt(s: Stmt, mapping: dict[Var, Expr]) -> Stmt:
    return _map_exprs(s, lambda e: substitute(e, mapping))


def simplify_stmt(s: Stmt, ranges: arith.Ranges,
                  zeros: dict[Var, Expr] | None = None) -> Stmt | None:
    """Simplify every expression using the ranges of the enclosing loops; drop guards that
    always hold, code under guards that never hold, and loops of extent 0. A loop of one
    iteration becomes its body with the variable 0 (so indices fold); ``zeros`` carries
    those variables down so each expression is substituted once, however deep the nest."""
    zeros = zeros or {}

    def fix(e: Expr) -> Expr:
        return arith.simplify(substitute(e, zeros) if zeros else e, ranges)

    if isinstance(s, Seq):
        stmts = [simplify_stmt(c, ranges, zeros) for c in s.stmts]
        kept = [c for c in stmts if c is not None]
        return Seq(kept) if kept else None
    if isinstance(s, For):
        extent = fix(s.extent)
        bounds = arith.const_bounds(extent, ranges)
        if bounds is not None and bounds[1] <= 0:
            return None
        if isinstance(extent, Const) and extent.value == 1 and s.kind in (
                For.SERIAL, For.PARALLEL, For.UNROLLED, For.VECTORIZED):
            return simplify_stmt(s.body, ranges, {**zeros, s.var: Const(0, s.var.dtype)})
        inner = dict(ranges)
        inner[s.var] = (0, (bounds[1] if bounds else 1 << 30) - 1)
        body = simplify_stmt(s.body, inner, zeros)
        if body is None:
            return None
        return For(s.var, extent, s.kind, body, s.pragmas)
    if isinstance(s, Store):
        return Store(s.buffer, [fix(i) for i in s.indices], fix(s.value))
    if isinstance(s, IfThenElse):
        cond = fix(s.cond)
        if isinstance(cond, Const):
            chosen = s.then_body if cond.value else s.else_body
            return None if chosen is None else simplify_stmt(chosen, ranges, zeros)
        then_body = simplify_stmt(s.then_body, ranges, zeros)
        else_body = None if s.else_body is None else simplify_stmt(s.else_body, ranges, zeros)
        if then_body is None and else_body is None:
            return None
        if then_body is None:
            return IfThenElse(Not(cond), else_body)
        return IfThenElse(cond, then_body, else_body)
    if isinstance(s, Allocate):
        body = simplify_stmt(s.body, ranges, zeros)
        return None if body is None else Allocate(s.buffer, body)
    raise TypeError(f"unknown statement {type(s).__name__}")


def _steps(s: Stmt) -> int | None:
    """Statements executed by ``s`` if fully unrolled; None when a loop extent is dynamic."""
    if isinstance(s, Seq):
        total = 0
        for c in s.stmts:
            n = _steps(c)
            if n is None:
                return None
            total += n
        return total
    if isinstance(s, For):
        if not isinstance(s.extent, Const):
            return None
        n = _steps(s.body)
        return None if n is None else int(s.extent.value) * n
    if isinstance(s, IfThenElse):
        a = _steps(s.then_body)
        b = 0 if s.else_body is None else _steps(s.else_body)
        return None if a is None or b is None else max(a, b)
    if isinstance(s, Allocate):
        return _steps(s.body)
    return 1


def unroll_loops(s: Stmt, auto_max_step: int = 0, ranges: arith.Ranges | None = None) -> Stmt:
    """Unroll loops marked ``unrolled`` and, under an ``auto_unroll_max_step`` pragma, every
    serial loop whose fully unrolled body runs at most that many statements."""
    ranges = ranges or {}
    if isinstance(s, Seq):
        return seq(*[c for c in (unroll_loops(c, auto_max_step, ranges) for c in s.stmts)
                     if c is not None])
    if isinstance(s, Allocate):
        return Allocate(s.buffer, unroll_loops(s.body, auto_max_step, ranges))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, unroll_loops(s.then_body, auto_max_step, ranges),
                          None if s.else_body is None
                          else unroll_loops(s.else_body, auto_max_step, ranges))
    if not isinstance(s, For):
        return s
    max_step = max(auto_max_step, s.pragmas.get("auto_unroll_max_step", 0))
    body = unroll_loops(s.body, max_step, ranges)
    loop = For(s.var, s.extent, s.kind, body, s.pragmas)
    steps = _steps(loop)
    explicit = s.kind == For.UNROLLED
    auto = s.kind == For.SERIAL and max_step > 0 and steps is not None and steps <= max_step
    if (explicit or auto) and isinstance(s.extent, Const) and steps is not None \
            and steps <= MAX_UNROLL_STEPS:
        copies = []
        for v in range(int(s.extent.value)):
            copy = simplify_stmt(substitute_stmt(body, {s.var: Const(v, s.var.dtype)}), ranges)
            if copy is not None:
                copies.append(copy)
        return Seq(copies) if copies else Seq([])
    if explicit:
        loop.kind = For.SERIAL if steps is None or steps > MAX_UNROLL_STEPS else loop.kind
    return loop


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Logic) and e.op == "and":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


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
    if isinstance(s, Seq):
        return Seq([partition_guards(c, fixed, ranges, done) for c in s.stmts])
    if isinstance(s, Allocate):
        return Allocate(s.buffer, partition_guards(s.body, fixed, ranges, done))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, partition_guards(s.then_body, fixed, ranges, done),
                          None if s.else_body is None
                          else partition_guards(s.else_body, fixed, ranges, done))
    if not isinstance(s, For):
        return s
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
        for c in _conjuncts(guard.cond):
            if s.var in free_vars(c) and not (free_vars(c) - set(loop_ranges) - inner_fixed):
                full = _all_iterations(c, inner_fixed, loop_ranges)
                if full is not None:
                    full = arith.simplify(full, inner_ranges)
                    if not isinstance(full, Const):
                        conditions.append(full)
                        continue
            keep.append(c)
        if len(keep) < len(_conjuncts(guard.cond)):
            versioned[id(guard)] = keep
            done[id(guard)] = guard
    body = s.body
    if conditions:
        fast = clone_allocations(_drop_guards(body, versioned))
        unique = {c.key(): c for c in conditions}
        full_tile = all_of(unique.values())
        body = IfThenElse(full_tile, fast,
                          _edge_tile(body, full_tile, s.var, bounds, inner_ranges))
    body = partition_guards(body, inner_fixed, inner_ranges, done)
    return For(s.var, s.extent, s.kind, body, s.pragmas)


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
    if all(_linear_in(c, var) for c in _conjuncts(full_tile)):
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


def _guards_in(s: Stmt, ranges: arith.Ranges):
    """(guard, ranges of the loops around it) for every else-less IfThenElse in ``s``."""
    if isinstance(s, IfThenElse):
        if s.else_body is None:
            yield s, ranges
        yield from _guards_in(s.then_body, ranges)
        if s.else_body is not None:
            yield from _guards_in(s.else_body, ranges)
    elif isinstance(s, Seq):
        for c in s.stmts:
            yield from _guards_in(c, ranges)
    elif isinstance(s, Allocate):
        yield from _guards_in(s.body, ranges)
    elif isinstance(s, For):
        bounds = arith.const_bounds(s.extent, ranges)
        if bounds is not None:
            inner = dict(ranges)
            inner[s.var] = (0, bounds[1] - 1)
            yield from _guards_in(s.body, inner)


def _drop_guards(s: Stmt, versioned: dict[int, list[Expr]]) -> Stmt:
    if isinstance(s, IfThenElse):
        then_body = _drop_guards(s.then_body, versioned)
        else_body = None if s.else_body is None else _drop_guards(s.else_body, versioned)
        if id(s) in versioned:
            keep = versioned[id(s)]
            return IfThenElse(all_of(keep), then_body) if keep else then_body
        return IfThenElse(s.cond, then_body, else_body)
    if isinstance(s, Seq):
        return Seq([_drop_guards(c, versioned) for c in s.stmts])
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _drop_guards(s.body, versioned))
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, _drop_guards(s.body, versioned), s.pragmas)
    return s


def clone_allocations(s: Stmt) -> Stmt:
    """A copy of ``s`` whose allocated buffers are new objects (so two versions of a loop
    body can be register-promoted independently)."""
    mapping: dict[int, Buffer] = {}

    def fresh(buf: Buffer) -> Buffer:
        return mapping.get(id(buf), buf)

    def rewrite(e: Expr) -> Expr:
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, Load) and id(node.source) in mapping:
                return Load(mapping[id(node.source)], node.indices, node.dtype)
            return None

        return transform(e, fn)

    def visit(st: Stmt) -> Stmt:
        if isinstance(st, Allocate):
            old = st.buffer
            new = Buffer(old.name, old.shape, old.dtype, old.scope)
            new.strides = old.strides
            mapping[id(old)] = new
            return Allocate(new, visit(st.body))
        if isinstance(st, Seq):
            return Seq([visit(c) for c in st.stmts])
        if isinstance(st, For):
            return For(st.var, rewrite(st.extent), st.kind, visit(st.body), st.pragmas)
        if isinstance(st, IfThenElse):
            return IfThenElse(rewrite(st.cond), visit(st.then_body),
                              None if st.else_body is None else visit(st.else_body))
        if isinstance(st, Store):
            return Store(fresh(st.buffer), [rewrite(i) for i in st.indices], rewrite(st.value))
        return st

    return visit(s)
