"""Loop partitioning: cut a loop where a condition on its variable changes its outcome.

A padding stage reads ``x >= 1 && x < 57 ? data[x - 1] : 0`` for ``x`` in 0..57. As one
loop its lanes disagree about the condition, so it cannot become vector code (the load
would read out of bounds in the lanes that select zero). Cut at 1 and 57, each piece
decides the condition once: the middle piece is a plain vectorizable copy and the edges
store zeros. Only conditions that compare the loop variable with constants cut a loop;
a loop is cut into at most ``MAX_PIECES`` pieces.
"""

from __future__ import annotations

from . import arith
from .dtype import is_int
from .expr import Compare, Const, Expr, Var, walk
from .loop_ir import For, Stmt, StmtVisitor

MAX_PIECES = 5


def partition_loop(loop: For) -> list[For]:
    """``loop`` as consecutive loops over sub-ranges on which every condition comparing
    its variable with a constant has one outcome (``[loop]`` when there is nothing to cut
    or it would take more than ``MAX_PIECES`` pieces)."""
    from .passes import simplify_stmt, substitute_stmt

    if not isinstance(loop.extent, Const):
        return [loop]
    extent = int(loop.extent.value)
    cuts = sorted({p for p in _flip_points(loop.body, loop.var) if 0 < p < extent})
    if not cuts or len(cuts) + 1 > MAX_PIECES:
        return [loop]
    var = loop.var
    pieces = []
    for lo, hi in zip([0, *cuts], [*cuts, extent], strict=True):
        body = substitute_stmt(loop.body, {var: var + lo}) if lo else loop.body
        body = simplify_stmt(body, {var: (0, hi - lo - 1)})
        if body is not None:
            pieces.append(For(var, hi - lo, loop.kind, body, loop.pragmas, loop.intrin))
    return pieces


def _flip_points(s: Stmt, var: Var) -> set[int]:
    """Values of ``var`` at which a comparison ``var + c <op> 0`` (or ``-var + c``) in
    ``s`` can change its outcome."""
    points: set[int] = set()
    for e in _expressions(s):
        for node in walk(e):
            if not isinstance(node, Compare) or not is_int(node.a.dtype):
                continue
            diff = arith.linear(node.a - node.b)
            if diff is None or set(diff.terms) != {var.key()}:
                continue
            coeff, c = diff.terms[var.key()], diff.const
            if coeff == 1:  # var + c <op> 0 flips at -c (< and >=) or -c + 1 (<= and >)
                points.update({-c, -c + 1} if node.op in ("==", "!=") else
                              {-c if node.op in ("<", ">=") else -c + 1})
            elif coeff == -1:  # c - var <op> 0 flips at c + 1 (< and >=) or c (<= and >)
                points.update({c, c + 1} if node.op in ("==", "!=") else
                              {c + 1 if node.op in ("<", ">=") else c})
    return points


class _Expressions(StmtVisitor):
    def __init__(self) -> None:
        self.exprs: list[Expr] = []

    def visit_expr(self, e: Expr) -> None:
        self.exprs.append(e)


def _expressions(s: Stmt) -> list[Expr]:
    """Every expression the statements of ``s`` hold, in program order."""
    collect = _Expressions()
    collect.visit(s)
    return collect.exprs


__all__ = ["MAX_PIECES", "partition_loop"]
