"""Loop-IR passes run after lowering: simplification and loop unrolling."""

from __future__ import annotations

from . import arith
from .expr import Const, Expr, Var, substitute
from .loop_ir import Allocate, For, IfThenElse, Seq, Stmt, Store, seq

# Explicitly unrolled loops larger than this are kept as loops (code size guard).
MAX_UNROLL_STEPS = 4096


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


def simplify_stmt(s: Stmt, ranges: arith.Ranges) -> Stmt | None:
    """Simplify every expression using the ranges of the enclosing loops; drop guards that
    always hold, code under guards that never hold, and loops of extent 0."""
    if isinstance(s, Seq):
        stmts = [simplify_stmt(c, ranges) for c in s.stmts]
        kept = [c for c in stmts if c is not None]
        return Seq(kept) if kept else None
    if isinstance(s, For):
        extent = arith.simplify(s.extent, ranges)
        bounds = arith.const_bounds(extent, ranges)
        if bounds is not None and bounds[1] <= 0:
            return None
        inner = dict(ranges)
        inner[s.var] = (0, (bounds[1] if bounds else 1 << 30) - 1)
        body = simplify_stmt(s.body, inner)
        if body is None:
            return None
        return For(s.var, extent, s.kind, body, s.pragmas)
    if isinstance(s, Store):
        return Store(s.buffer, [arith.simplify(i, ranges) for i in s.indices],
                     arith.simplify(s.value, ranges))
    if isinstance(s, IfThenElse):
        cond = arith.simplify(s.cond, ranges)
        if isinstance(cond, Const):
            chosen = s.then_body if cond.value else s.else_body
            return None if chosen is None else simplify_stmt(chosen, ranges)
        then_body = simplify_stmt(s.then_body, ranges)
        else_body = None if s.else_body is None else simplify_stmt(s.else_body, ranges)
        if then_body is None and else_body is None:
            return None
        if then_body is None:
            from .expr import Not

            return IfThenElse(Not(cond), else_body)
        return IfThenElse(cond, then_body, else_body)
    if isinstance(s, Allocate):
        body = simplify_stmt(s.body, ranges)
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
