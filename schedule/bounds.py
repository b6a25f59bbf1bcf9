"""Static bounds of the reads of a declarative computation.

A workload that arrives as JSON is checked before anything runs it: every index of every
load must provably stay inside its tensor's shape, over the whole iteration space (spatial
axes ``0..extent-1``, reduce axes likewise). Indices are bounded by interval arithmetic over
constants, axis variables, ``+ - *``, ``floordiv`` / ``floormod`` / ``min`` / ``max``,
casts between integer types, ``select`` and loads of small integer tensors (by their dtype's
range). The condition of a ``select`` (and the ``where`` of a reduction) narrows the ranges
on the side it guards, so padding written as ``select(i >= p && i < H + p, A[i - p], 0)`` is
accepted. An index that cannot be bounded this way (one that depends on floating-point data,
say) is rejected: the service never runs a computation whose reads it cannot prove safe.

The analysis is conservative: an intermediate integer value that could overflow its dtype
counts as unbounded, so wrap-around cannot sneak an index back into range.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from . import dtype as dt
from .expr import Binary, Call, Cast, Compare, Const, Expr, Load, Logic, Not, Select
from .printer import expr_str
from .tensor import IterVar, Reduce, Tensor

Interval = tuple[int, int] | None
Facts = dict[tuple, tuple[int, int]]  # structural key of an int expression -> its range

_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _dtype_range(dtype: str) -> tuple[int, int] | None:
    if dtype == "bool":
        return (0, 1)
    if dt.is_int(dtype):
        info = np.iinfo(dt.numpy_dtype(dtype))
        return (int(info.min), int(info.max))
    return None


def _intersect(a: Interval, b: Interval) -> Interval:
    if a is None:
        return b
    if b is None:
        return a
    return (max(a[0], b[0]), min(a[1], b[1]))


def _corners(fn, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    values = [fn(x, y) for x in a for y in b]
    return (min(values), max(values))


def _floormod(a: tuple[int, int], b: tuple[int, int]) -> Interval:
    lo, hi = a
    dlo, dhi = b
    if dlo == dhi:
        c = dlo
        if lo // c == hi // c:
            return (lo % c, hi % c)
        return (0, c - 1) if c > 0 else (c + 1, 0)
    if dlo > 0:
        return (0, min(hi, dhi - 1)) if lo >= 0 else (0, dhi - 1)
    return (dlo + 1, 0)


class _Bounds:
    """Ranges of integer expressions under a set of facts (axis ranges, guard conditions).

    ``strict`` (the default) treats a value that may overflow its dtype as unbounded; the
    non-strict variant computes the mathematical range, for error messages only."""

    def __init__(self, strict: bool = True):
        self.strict = strict

    def interval(self, e: Expr, facts: Facts) -> Interval:
        result = _intersect(self._raw(e, facts), facts.get(e.key()))
        if result is None:
            return None
        if result[0] > result[1]:
            return result  # empty: the expression is never evaluated under these facts
        limits = _dtype_range(e.dtype)
        if limits is None:
            return None  # a float
        if self.strict and (result[0] < limits[0] or result[1] > limits[1]):
            return None  # an integer that may overflow (and wrap around) its dtype
        return result

    def _raw(self, e: Expr, facts: Facts) -> Interval:
        if isinstance(e, Const):
            if isinstance(e.value, bool | int):
                return (int(e.value), int(e.value))
            return None
        if isinstance(e, Compare | Logic | Not):
            return (0, 1)
        if isinstance(e, Binary):
            return self._binary(e, facts)
        if isinstance(e, Cast):
            if dt.is_int(e.dtype) and _dtype_range(e.value.dtype) is not None:
                return self.interval(e.value, facts)  # None when it may not fit e.dtype
            return None
        if isinstance(e, Select):
            sides = []
            for positive, side in ((True, e.true_value), (False, e.false_value)):
                narrowed = self.narrow(e.cond, facts, positive)
                if narrowed is not None:
                    sides.append(self.interval(side, narrowed))
            if any(s is None for s in sides):
                return None
            sides = [s for s in sides if s[0] <= s[1]]
            if not sides:
                return (0, -1)
            return (min(s[0] for s in sides), max(s[1] for s in sides))
        if isinstance(e, Load):
            return _dtype_range(e.dtype)  # data: anything its dtype can hold
        if isinstance(e, Call) and e.name == "abs":
            inner = self.interval(e.args[0], facts)
            if inner is None:
                return None
            lo, hi = inner
            return (0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
        return None  # a variable without a known range, or a float computation

    def _binary(self, e: Binary, facts: Facts) -> Interval:
        a = self.interval(e.a, facts)
        b = self.interval(e.b, facts)
        if a is None or b is None:
            return None
        if a[0] > a[1] or b[0] > b[1]:
            return (0, -1)
        op = e.op
        if op == "+":
            return (a[0] + b[0], a[1] + b[1])
        if op == "-":
            return (a[0] - b[1], a[1] - b[0])
        if op == "*":
            return _corners(lambda x, y: x * y, a, b)
        if op == "min":
            return (min(a[0], b[0]), min(a[1], b[1]))
        if op == "max":
            return (max(a[0], b[0]), max(a[1], b[1]))
        if op in ("floordiv", "/", "floormod"):
            if b[0] <= 0 <= b[1]:
                return None  # may divide by zero
            if op == "floormod":
                return _floormod(a, b)
            if op == "/" and not (a[0] >= 0 and b[0] > 0):
                return None  # C's truncating division differs from floor division here
            return _corners(lambda x, y: x // y, a, b)
        return None

    # ------------------------------------------------------------------ guard conditions
    def narrow(self, cond: Expr, facts: Facts, positive: bool) -> Facts | None:
        """The facts that hold where ``cond`` is ``positive``; None where that never
        happens. Conditions it does not understand leave the facts as they are."""
        if isinstance(cond, Not):
            return self.narrow(cond.a, facts, not positive)
        if isinstance(cond, Const) and cond.dtype == "bool":
            return facts if bool(cond.value) == positive else None
        if isinstance(cond, Logic):
            conjunction = (cond.op == "and") == positive
            if conjunction:  # a && b holds, or a || b fails: both sides narrow
                first = self.narrow(cond.a, facts, positive)
                return None if first is None else self.narrow(cond.b, first, positive)
            return _hull(self.narrow(cond.a, facts, positive),
                         self.narrow(cond.b, facts, positive))
        if isinstance(cond, Compare) and dt.is_int(cond.a.dtype):
            op = cond.op if positive else _NEGATE[cond.op]
            narrowed = self._bound(cond.a, op, cond.b, facts)
            if narrowed is None:
                return None
            return self._bound(cond.b, _MIRROR[op], cond.a, narrowed)
        return facts

    def _bound(self, x: Expr, op: str, y: Expr, facts: Facts) -> Facts | None:
        """Facts narrowed by ``x op y`` (for ``x`` and, through ``x = u +- c``, for ``u``)."""
        other = self.interval(y, facts)
        if other is None or other[0] > other[1] or op == "!=":
            return facts
        lo, hi = other
        limit = {"<": (None, hi - 1), "<=": (None, hi), ">": (lo + 1, None),
                 ">=": (lo, None), "==": (lo, hi)}[op]
        facts = dict(facts)
        offset = 0
        node: Expr = x
        while True:
            current = self.interval(node, facts)
            if current is not None:
                new = (current[0] if limit[0] is None else max(current[0], limit[0] - offset),
                       current[1] if limit[1] is None else min(current[1], limit[1] - offset))
                if new[0] > new[1]:
                    return None
                facts[node.key()] = new
            # x = u + c, u - c or c + u: the same bound, shifted, holds for u
            if isinstance(node, Binary) and not isinstance(node, Compare | Logic) \
                    and node.op in ("+", "-"):
                if isinstance(node.b, Const) and isinstance(node.b.value, int):
                    offset += node.b.value if node.op == "+" else -node.b.value
                    node = node.a
                    continue
                if node.op == "+" and isinstance(node.a, Const) and isinstance(node.a.value, int):
                    offset += node.a.value
                    node = node.b
                    continue
            return facts


def _hull(a: Facts | None, b: Facts | None) -> Facts | None:
    if a is None:
        return b
    if b is None:
        return a
    return {k: (min(v[0], b[k][0]), max(v[1], b[k][1])) for k, v in a.items() if k in b}


def _short(e: Expr) -> str:
    text = expr_str(e)
    return text if len(text) <= 120 else text[:117] + "..."


def _unbounded(index: Expr, d: int, load: Load, where: Facts) -> ValueError:
    tensor, extent = load.source.name, load.source.shape[d]
    span = _Bounds(strict=False).interval(index, where)
    if span is not None and (span[0] < 0 or span[1] >= extent):
        return ValueError(
            f"reads {tensor} out of bounds: index {d} ({_short(index)}) ranges over "
            f"[{span[0]}, {span[1]}] (overflowing {index.dtype} on the way) but dimension {d} "
            f"of {tensor} has {extent} element(s) (valid: [0, {extent - 1}])")
    if span is not None:
        return ValueError(
            f"cannot bound index {d} of {tensor} ({_short(index)}): its {index.dtype} "
            f"arithmetic may overflow and wrap around; only reads that provably stay inside "
            f"[0, {extent}) are accepted")
    return ValueError(
        f"cannot bound index {d} of {tensor} ({_short(index)}): it depends on data or on a "
        f"value whose range is unknown; only reads that provably stay inside "
        f"[0, {extent}) are accepted")


def check_loads(axis: Iterable[IterVar], body: Expr, extra: Iterable[Expr] = ()) -> None:
    """Raise ``ValueError`` unless every load in ``body`` (a compute body over ``axis`` and,
    for a reduction, its reduce axes) and in ``extra`` (expressions evaluated with no known
    variable ranges, e.g. a reducer's combine) provably reads inside its tensor."""
    bounds = _Bounds()
    facts: Facts = {a.var.key(): (0, a.extent - 1) for a in axis}
    if isinstance(body, Reduce):
        facts.update({a.var.key(): (0, a.extent - 1) for a in body.axis})
    work: list[tuple[Expr, Facts]] = [(body, facts), *((e, {}) for e in extra)]
    while work:
        node, where = work.pop()
        if isinstance(node, Reduce):
            if node.condition is not None:
                work.append((node.condition, where))
                guarded = bounds.narrow(node.condition, where, True)
                if guarded is not None:
                    work.append((node.source, guarded))
            else:
                work.append((node.source, where))
            continue
        if isinstance(node, Select):
            work.append((node.cond, where))
            for positive, side in ((True, node.true_value), (False, node.false_value)):
                narrowed = bounds.narrow(node.cond, where, positive)
                if narrowed is not None:  # None: this side never runs
                    work.append((side, narrowed))
            continue
        if isinstance(node, Load) and isinstance(node.source, Tensor):
            shape = node.source.shape
            for d, index in enumerate(node.indices):
                span = bounds.interval(index, where)
                if span is None:
                    raise _unbounded(index, d, node, where)
                if span[0] <= span[1] and (span[0] < 0 or span[1] >= shape[d]):
                    raise ValueError(
                        f"reads {node.source.name} out of bounds: index {d} "
                        f"({_short(index)}) ranges over [{span[0]}, {span[1]}] but dimension "
                        f"{d} of {node.source.name} has {shape[d]} element(s) "
                        f"(valid: [0, {shape[d] - 1}])")
        work.extend((k, where) for k in node.children())
