"""Canonical text of a computation and its workload key.

The text lists every operation reachable from the outputs in a fixed topological
order, with shapes, dtypes, axis extents and bodies printed structurally, and axis
variables renamed by position (``a0, a1`` spatial, ``r0`` reduce) so that the
lambda argument names a user happened to pick do not change the key. Tensor names
are kept: schedule steps refer to stages by name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .expr import Var, substitute
from .printer import expr_str
from .tensor import ComputeOp, Operation, PlaceholderOp, Reduce, Tensor


def post_order(outputs: Sequence[Tensor]) -> list[Operation]:
    """Operations reachable from ``outputs``, each after its inputs, in a fixed order.

    Iterative (an explicit stack), so a long chain of tensors cannot exhaust Python's
    recursion limit; the order is that of a depth-first visit of inputs in order."""
    order: list[Operation] = []
    seen: set[int] = set()
    for t in outputs:
        if id(t.op) in seen:
            continue
        seen.add(id(t.op))
        # each frame: an operation and the iterator over its not yet visited inputs
        stack = [(t.op, iter(t.op.input_tensors))]
        while stack:
            op, inputs = stack[-1]
            for inp in inputs:
                if id(inp.op) not in seen:
                    seen.add(id(inp.op))
                    stack.append((inp.op, iter(inp.op.input_tensors)))
                    break
            else:
                stack.pop()
                order.append(op)
    return order


def canonical_text(outputs: Tensor | Sequence[Tensor]) -> str:
    """One line per operation, inputs first; equal computations give equal text."""
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    lines = []
    for op in post_order(outputs):
        if isinstance(op, PlaceholderOp):
            lines.append(f"placeholder {op.name} {op.dtype}{list(op.shape)}")
            continue
        assert isinstance(op, ComputeOp)
        rename = {a.var: Var(f"a{i}") for i, a in enumerate(op.axis)}
        rename.update({a.var: Var(f"r{i}") for i, a in enumerate(op.reduce_axis)})
        body = op.body
        if isinstance(body, Reduce):
            source = substitute(body.source, rename)
            cond = "" if body.condition is None else \
                f" where {expr_str(substitute(body.condition, rename))}"
            reduce_ext = [a.extent for a in body.axis]
            text = (f"{body.reducer.name}{list(body.reducer.key(op.dtype)[1:])} "
                    f"over {reduce_ext} of {expr_str(source)}{cond}")
        else:
            text = expr_str(substitute(body, rename))
        lines.append(f"compute {op.name} {op.dtype}{list(op.shape)} = {text}")
    lines.append("outputs " + " ".join(t.name for t in outputs))
    return "\n".join(lines)


def workload_key(outputs: Tensor | Sequence[Tensor]) -> str:
    """A stable hash of the canonical text (the same computation gets the same key in every
    process and on every machine)."""
    return hashlib.sha256(canonical_text(outputs).encode()).hexdigest()[:32]
