"""Loop tightening: end a loop where its remaining iterations would do nothing.

The last tile of a non-dividing split keeps its inner loops' full extents, each iteration
under a guard. A GEMM's 1024 columns in tiles of 8 x 24 leave a last tile of 64 columns,
and its loop over 8 groups of 24 runs 5 groups whose every store is guarded off: on an
AVX2 machine that made the 4 x 24 register tile 5x slower than the 4 x 16 one. Where every
effect in a loop's body sits under a guard that fails for all values of the loop variable
from some ``v0`` on (whatever the inner loops' variables are), the loop ends at ``v0``;
the edge-tile versioning that follows then sees the one partial group alone.
"""

from __future__ import annotations

from . import arith
from .expr import Compare, Expr, Logic, Var
from .loop_ir import Allocate, For, IfThenElse, Seq, Stmt

#: loops whose extent may change (a thread-bound loop's extent is the launch's shape, and a
#: vectorized loop's is its vector width)
TIGHTENABLE = (For.SERIAL, For.UNROLLED, For.PARALLEL)


def live_extent(loop: For, ranges: arith.Ranges) -> int | None:
    """The number of leading iterations of ``loop`` that can have an effect, when that is
    fewer than its constant extent; None otherwise. ``ranges`` bounds the enclosing loops'
    variables."""
    bounds = arith.const_bounds(loop.extent, ranges)
    if loop.kind not in TIGHTENABLE or bounds is None or bounds[0] != bounds[1]:
        return None
    inner = dict(ranges)
    inner[loop.var] = (0, bounds[1] - 1)
    dead_from = _dead_from(loop.body, loop.var, inner)
    if dead_from is None or not 1 <= dead_from < bounds[1]:
        return None
    return dead_from


def _dead_from(s: Stmt, var: Var, ranges: arith.Ranges) -> int | None:
    """A value from which on (``var >= value``) ``s`` has no effect; None when none is
    known. Only guards, sequences, allocations and loops are looked through: any other
    statement is an effect."""
    if isinstance(s, IfThenElse):
        then = _min(_guard_dead_from(s.cond, var, ranges), _dead_from(s.then_body, var, ranges))
        if s.else_body is None:
            return then
        otherwise = _dead_from(s.else_body, var, ranges)
        return None if then is None or otherwise is None else max(then, otherwise)
    if isinstance(s, Seq):  # stops at the first statement that may be live throughout
        latest = 0
        for part in s.stmts:
            dead = _dead_from(part, var, ranges)
            if dead is None:
                return None
            latest = max(latest, dead)
        return latest
    if isinstance(s, Allocate):
        return _dead_from(s.body, var, ranges)
    if isinstance(s, For):
        bounds = arith.const_bounds(s.extent, ranges)
        if bounds is None:
            return None
        inner = dict(ranges)
        inner[s.var] = (0, max(0, bounds[1] - 1))
        return _dead_from(s.body, var, inner)
    return None


def _guard_dead_from(cond: Expr, var: Var, ranges: arith.Ranges) -> int | None:
    """The least value of ``var`` from which ``cond`` fails for every value the other
    variables take in ``ranges`` (through one of its conjuncts ``a * var + rest < 0``,
    ``a > 0``); None when none is found."""
    if isinstance(cond, Logic) and cond.op == "and":
        return _min(_guard_dead_from(cond.a, var, ranges), _guard_dead_from(cond.b, var, ranges))
    if not isinstance(cond, Compare) or cond.op not in ("<", "<=", ">", ">="):
        return None
    # live while diff < 0 (strict) or diff <= 0
    diff = cond.a - cond.b if cond.op in ("<", "<=") else cond.b - cond.a
    lin = arith.linear(arith.simplify(diff))
    if lin is None:
        return None
    coeff = lin.terms.pop(var.key(), 0)
    lin.atoms.pop(var.key(), None)
    if coeff <= 0:
        return None
    rest = arith.const_bounds(arith.from_linear(lin, var.dtype), ranges)
    if rest is None:
        return None
    # dead once coeff * var + min(rest) >= 0 (strict), or > 0
    if cond.op in ("<", ">"):
        return -(rest[0] // coeff)
    return -rest[0] // coeff + 1


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


__all__ = ["live_extent"]
