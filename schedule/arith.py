"""Integer arithmetic on index expressions: canonical linear forms, simplification, bounds.

Index expressions are affine in loop variables almost everywhere (splits make
``outer * f + inner``, convolution makes ``h * stride + r * dilation - pad``).
``simplify`` rewrites them to a canonical sum of terms so equal indices print
alike and differences fold to constants; ``const_bounds`` gives an integer range
from variable ranges; ``symbolic_interval`` gives the range of an expression
when some variables are held fixed (the bound inference of compute_at).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from .dtype import is_int
from .expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Logic,
    Not,
    Select,
    Var,
    fold_constant,
    free_vars,
    rebuild,
)

Ranges = dict[Var, tuple[int, int]]  # inclusive [lo, hi]


# ---------------------------------------------------------------------------- linear forms


class Linear:
    """``sum(coeff * atom) + const`` with atoms keyed structurally."""

    __slots__ = ("atoms", "const", "terms")

    def __init__(self) -> None:
        self.terms: dict[tuple, int] = {}
        self.atoms: dict[tuple, Expr] = {}
        self.const = 0

    def add_term(self, atom: Expr, coeff: int) -> None:
        if coeff == 0:
            return
        k = atom.key()
        c = self.terms.get(k, 0) + coeff
        if c == 0:
            self.terms.pop(k, None)
            self.atoms.pop(k, None)
        else:
            self.terms[k] = c
            self.atoms[k] = atom

    def add(self, other: Linear, scale: int = 1) -> None:
        for k, c in other.terms.items():
            self.add_term(other.atoms[k], c * scale)
        self.const += other.const * scale

    def scaled(self, factor: int) -> Linear:
        out = Linear()
        out.add(self, factor)
        return out

    @property
    def is_const(self) -> bool:
        return not self.terms


def linear(e: Expr) -> Linear | None:
    """The linear form of an integer expression, or None for non-integer expressions."""
    if not is_int(e.dtype):
        return None
    out = Linear()
    _collect(e, 1, out)
    return out


def _collect(e: Expr, scale: int, out: Linear) -> None:
    if isinstance(e, Const):
        out.const += int(e.value) * scale
        return
    if isinstance(e, Binary) and not isinstance(e, Compare | Logic):
        if e.op == "+":
            _collect(e.a, scale, out)
            _collect(e.b, scale, out)
            return
        if e.op == "-":
            _collect(e.a, scale, out)
            _collect(e.b, -scale, out)
            return
        if e.op == "*":
            a, b = simplify(e.a), simplify(e.b)
            if isinstance(b, Const):
                _collect(a, scale * int(b.value), out)
                return
            if isinstance(a, Const):
                _collect(b, scale * int(a.value), out)
                return
    if isinstance(e, Cast) and is_int(e.value.dtype):
        _collect(e.value, scale, out)
        return
    out.add_term(_simplify_atom(e), scale)


def _merge_divmod(lin: Linear) -> None:
    """``c * floordiv(x, c) + floormod(x, c)`` is ``x`` (from splitting a fused loop)."""
    for k in list(lin.terms):
        mod = lin.atoms.get(k)
        if not (isinstance(mod, Binary) and mod.op == "floormod" and isinstance(mod.b, Const)):
            continue
        m = lin.terms[k]
        div = Binary("floordiv", mod.a, mod.b, mod.dtype)
        if lin.terms.get(div.key()) == m * int(mod.b.value):
            lin.add_term(div, -m * int(mod.b.value))
            lin.add_term(mod, -m)
            _collect(mod.a, m, lin)


def from_linear(lin: Linear, dtype: str = "int32") -> Expr:
    """Rebuild an expression: terms with positive coefficients first, constant last."""
    _merge_divmod(lin)
    pos: list[Expr] = []
    neg: list[Expr] = []
    for k, c in lin.terms.items():
        atom = lin.atoms[k]
        term = atom if abs(c) == 1 else atom * Const(abs(c), dtype)
        (pos if c > 0 else neg).append(term)
    result: Expr | None = None
    for t in pos:
        result = t if result is None else Binary("+", result, t, dtype)
    for t in neg:
        result = (Binary("-", Const(0, dtype), t, dtype) if result is None
                  else Binary("-", result, t, dtype))
    if result is None:
        return Const(lin.const, dtype)
    if lin.const > 0:
        return Binary("+", result, Const(lin.const, dtype), dtype)
    if lin.const < 0:
        return Binary("-", result, Const(-lin.const, dtype), dtype)
    return result


# ---------------------------------------------------------------------------- simplification


#: Within one top-level ``simplify`` (or a ``memo_scope``), each integer expression (by
#: structure) already simplified under the same ranges: the indices of a large
#: expression's many loads repeat the same sub-expressions (a tile's row and column).
_MEMO: contextvars.ContextVar[dict[tuple, object] | None] = contextvars.ContextVar(
    "simplify_memo", default=None)


@contextlib.contextmanager
def memo_scope() -> Iterator[None]:
    """Share ``simplify``'s results across the calls made inside the block (a pass that
    simplifies many expressions with common parts)."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def simplify(e: Expr, ranges: Ranges | None = None) -> Expr:
    """Canonicalise integer arithmetic, fold constants, and (given variable ranges) drop
    comparisons, min/max and floordiv/floormod whose outcome the ranges decide."""
    memo = _MEMO.get()
    if memo is None:
        with memo_scope():
            return simplify(e, ranges)
    if not is_int(e.dtype):
        return _simplify_atom(e, ranges)
    # the ranges object is kept while the memo lives, so its id is not reused
    memo.setdefault(("ranges", id(ranges)), ranges)
    key = (e.key(), id(ranges))
    out = memo.get(key)
    if out is None:
        out = memo[key] = from_linear(linear_with_ranges(e, ranges), e.dtype)
    return out  # type: ignore[return-value]


def linear_with_ranges(e: Expr, ranges: Ranges | None) -> Linear:
    out = Linear()
    _collect_r(e, 1, out, ranges)
    return out


def _collect_r(e: Expr, scale: int, out: Linear, ranges: Ranges | None) -> None:
    if ranges is None:
        _collect(e, scale, out)
        return
    if isinstance(e, Binary) and e.op in ("+", "-") and not isinstance(e, Compare | Logic):
        _collect_r(e.a, scale, out, ranges)
        _collect_r(e.b, scale if e.op == "+" else -scale, out, ranges)
        return
    if isinstance(e, Binary) and e.op == "*" and not isinstance(e, Compare | Logic):
        a, b = simplify(e.a, ranges), simplify(e.b, ranges)
        if isinstance(b, Const):
            _collect_r(a, scale * int(b.value), out, ranges)
            return
        if isinstance(a, Const):
            _collect_r(b, scale * int(a.value), out, ranges)
            return
    if isinstance(e, Const):
        out.const += int(e.value) * scale
        return
    out.add_term(_simplify_atom(e, ranges), scale)


def _simplify_atom(e: Expr, ranges: Ranges | None = None) -> Expr:
    """Simplify a node that is not a sum: fold its children and the node itself."""
    if isinstance(e, Var | Const):
        return e
    kids = [simplify(c, ranges) for c in e.children()]
    if isinstance(e, Binary):
        a, b = kids
        if isinstance(a, Const) and isinstance(b, Const):
            folded = fold_constant(e.op, a, b, e.dtype)
            if folded is not None:
                return folded
        if isinstance(e, Compare):
            decided = _decide_compare(e.op, a, b, ranges)
            if decided is not None:
                return Const(decided, "bool")
            return Compare(e.op, a, b, "bool")
        if isinstance(e, Logic):
            return _simplify_logic(e.op, a, b)
        if e.op in ("floordiv", "floormod") and isinstance(b, Const) and b.value > 0:
            return _simplify_divmod(e.op, a, int(b.value), e.dtype, ranges)
        if e.op in ("min", "max") and is_int(e.dtype):
            diff = const_bounds(simplify(Binary("-", a, b, e.dtype)), ranges or {})
            if diff is not None:
                lo, hi = diff
                if hi <= 0:
                    return a if e.op == "min" else b
                if lo >= 0:
                    return b if e.op == "min" else a
        if e.op == "*" and (_is(a, 0) or _is(b, 0)) and is_int(e.dtype):
            return Const(0, e.dtype)
        return Binary(e.op, a, b, e.dtype)
    if isinstance(e, Not):
        (a,) = kids
        if isinstance(a, Const):
            return Const(not a.value, "bool")
        return Not(a)
    if isinstance(e, Select):
        cond, t, f = kids
        if isinstance(cond, Const):
            return t if cond.value else f
        return Select(cond, t, f)
    return rebuild(e, kids) if kids else e


def _is(e: Expr, value: int) -> bool:
    return isinstance(e, Const) and e.value == value


def _simplify_logic(op: str, a: Expr, b: Expr) -> Expr:
    for x, y in ((a, b), (b, a)):
        if isinstance(x, Const):
            if op == "and":
                return y if x.value else Const(False, "bool")
            return Const(True, "bool") if x.value else y
    return Logic(op, a, b, "bool")


def _decide_compare(op: str, a: Expr, b: Expr, ranges: Ranges | None) -> bool | None:
    if not (is_int(a.dtype) and is_int(b.dtype)):
        return None
    bounds = const_bounds(simplify(Binary("-", a, b, a.dtype)), ranges or {})
    if bounds is None:
        return None
    lo, hi = bounds
    table = {
        "<": (hi < 0, lo >= 0), "<=": (hi <= 0, lo > 0), ">": (lo > 0, hi <= 0),
        ">=": (lo >= 0, hi < 0), "==": (lo == hi == 0, lo > 0 or hi < 0),
        "!=": (lo > 0 or hi < 0, lo == hi == 0),
    }
    always, never = table[op]
    if always:
        return True
    if never:
        return False
    return None


def _simplify_divmod(op: str, a: Expr, c: int, dtype: str, ranges: Ranges | None) -> Expr:
    if c == 1:
        return a if op == "floordiv" else Const(0, dtype)
    if op == "floormod":
        reduced = _without_finer_mods(a, c)
        if reduced is not a:
            return simplify(Binary("floormod", reduced, Const(c, dtype), dtype), ranges)
    lin = linear_with_ranges(a, ranges)
    # pull out terms that are multiples of c: (c*x + r) // c == x + r // c
    whole = Linear()
    rest = Linear()
    for k, coeff in lin.terms.items():
        (whole if coeff % c == 0 else rest).add_term(lin.atoms[k], coeff)
    whole.const = lin.const - lin.const % c
    rest.const = lin.const % c
    rest_expr = from_linear(rest, dtype)
    bounds = const_bounds(rest_expr, ranges or {})
    if op == "floordiv":
        base = whole.scaled(1)
        for k in list(base.terms):
            base.terms[k] //= c
        base.const //= c
        if bounds is not None and bounds[0] >= 0 and bounds[1] < c:
            return from_linear(base, dtype)
        if rest.is_const:
            base.const += rest.const // c
            return from_linear(base, dtype)
        if not whole.terms and whole.const == 0:
            return Binary("floordiv", rest_expr, Const(c, dtype), dtype)
        return simplify(Binary("+", from_linear(base, dtype),
                               Binary("floordiv", rest_expr, Const(c, dtype), dtype), dtype))
    if bounds is not None and bounds[0] >= 0 and bounds[1] < c:
        return rest_expr
    if rest.is_const:
        return Const(rest.const % c, dtype)
    return Binary("floormod", rest_expr, Const(c, dtype), dtype)


def _without_finer_mods(a: Expr, c: int) -> Expr:
    """``a`` with each term ``floormod(x, m)``, ``m`` a multiple of ``c``, replaced by ``x``:
    the same value modulo ``c`` (``a`` itself when there is none)."""
    lin = linear(a)
    if lin is None:
        return a
    out, changed = Linear(), False
    out.const = lin.const
    for k, coeff in lin.terms.items():
        atom = lin.atoms[k]
        if isinstance(atom, Binary) and atom.op == "floormod" and isinstance(atom.b, Const) \
                and atom.b.value % c == 0:
            out.add(linear(atom.a) or Linear(), coeff)
            changed = True
        else:
            out.add_term(atom, coeff)
    return from_linear(out, a.dtype) if changed else a


# ---------------------------------------------------------------------------- bounds


def const_bounds(e: Expr, ranges: Ranges) -> tuple[int, int] | None:
    """Inclusive integer bounds of ``e`` given variable ranges; None when unknown."""
    if isinstance(e, Const):
        if isinstance(e.value, bool):
            return (int(e.value), int(e.value))
        return (int(e.value), int(e.value)) if isinstance(e.value, int) else None
    if isinstance(e, Var):
        return ranges.get(e)
    if isinstance(e, Cast):
        return const_bounds(e.value, ranges) if is_int(e.dtype) else None
    if isinstance(e, Select):
        t, f = const_bounds(e.true_value, ranges), const_bounds(e.false_value, ranges)
        if t is None or f is None:
            return None
        return (min(t[0], f[0]), max(t[1], f[1]))
    if not isinstance(e, Binary) or isinstance(e, Compare | Logic):
        return None
    a, b = const_bounds(e.a, ranges), const_bounds(e.b, ranges)
    if a is None or b is None:
        if e.op == "floormod" and b is not None and b[0] > 0:
            return (0, b[1] - 1)
        return None
    if e.op == "+":
        return (a[0] + b[0], a[1] + b[1])
    if e.op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if e.op == "*":
        products = [x * y for x in a for y in b]
        return (min(products), max(products))
    if e.op == "floordiv" and b[0] > 0:
        cands = [x // y for x in a for y in b]
        return (min(cands), max(cands))
    if e.op == "floormod" and b[0] > 0:
        if b[0] == b[1] and a[0] >= 0 and a[1] < b[0]:
            return a
        return (0, b[1] - 1)
    if e.op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if e.op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    return None


def symbolic_interval(e: Expr, fixed: set[Var], ranges: Ranges) -> tuple[Expr, Expr] | None:
    """Inclusive (lo, hi) of ``e`` as expressions in the ``fixed`` variables, the others
    ranging over ``ranges``. None when ``e`` depends on an unbounded variable."""
    lin = linear(e)
    if lin is None:
        return None
    lo, hi = Linear(), Linear()
    lo.const = hi.const = lin.const
    for k, c in lin.terms.items():
        atom = lin.atoms[k]
        iv = _atom_interval(atom, fixed, ranges)
        if iv is None:
            return None
        a_lo, a_hi = iv
        if c < 0:
            a_lo, a_hi = a_hi, a_lo
        lo.add(a_lo, c)
        hi.add(a_hi, c)
    return from_linear(lo, e.dtype), from_linear(hi, e.dtype)


def _atom_interval(atom: Expr, fixed: set[Var], ranges: Ranges) -> tuple[Linear, Linear] | None:
    if free_vars(atom) <= fixed:
        lin = Linear()
        lin.add_term(atom, 1)
        return lin, lin
    if isinstance(atom, Binary) and atom.op == "floordiv" and isinstance(atom.b, Const) \
            and atom.b.value > 0:
        inner = symbolic_interval(atom.a, fixed, ranges)
        if inner is not None:
            c = Const(atom.b.value, atom.dtype)
            return (linear(simplify(Binary("floordiv", inner[0], c, atom.dtype))),
                    linear(simplify(Binary("floordiv", inner[1], c, atom.dtype))))
    bounds = const_bounds(atom, ranges)
    if bounds is None:
        return None
    lo, hi = Linear(), Linear()
    lo.const, hi.const = bounds
    return lo, hi
