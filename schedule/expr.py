"""Scalar expression nodes shared by tensor expressions and the loop IR.

Expressions are immutable trees. Python operators build them (``a * b + 1``);
``==``/``!=`` are *not* overloaded so expressions can live in dicts and sets —
use :func:`equal` / :func:`not_equal` for comparisons. Every node has a
structural ``key`` used for hashing, common-subexpression elimination and the
canonical text of a workload.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import dtype as dt

MATH_FUNCS = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "abs", "floor", "ceil",
              "pow")
ARITH_OPS = ("+", "-", "*", "/", "floordiv", "floormod", "min", "max")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")
LOGIC_OPS = ("and", "or")


class Expr:
    """Base class of scalar expressions."""

    __slots__ = ("_key", "dtype")
    dtype: str

    # The structural key is computed lazily and cached.
    def key(self) -> tuple:
        k = getattr(self, "_key", None)
        if k is None:
            k = self._make_key()
            object.__setattr__(self, "_key", k)
        return k

    def _make_key(self) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    def children(self) -> tuple[Expr, ...]:
        return ()

    def __bool__(self) -> bool:
        raise TypeError(
            "a tensor expression has no truth value; use te.if_then_else / te.all / te.any "
            "instead of Python 'if', 'and', 'or'"
        )

    def __repr__(self) -> str:
        from .printer import expr_str

        return expr_str(self)

    # arithmetic
    def __add__(self, o: Any) -> Expr:
        return binary("+", self, o)

    def __radd__(self, o: Any) -> Expr:
        return binary("+", o, self)

    def __sub__(self, o: Any) -> Expr:
        return binary("-", self, o)

    def __rsub__(self, o: Any) -> Expr:
        return binary("-", o, self)

    def __mul__(self, o: Any) -> Expr:
        return binary("*", self, o)

    def __rmul__(self, o: Any) -> Expr:
        return binary("*", o, self)

    def __truediv__(self, o: Any) -> Expr:
        return binary("/", self, o)

    def __rtruediv__(self, o: Any) -> Expr:
        return binary("/", o, self)

    def __floordiv__(self, o: Any) -> Expr:
        return binary("floordiv", self, o)

    def __rfloordiv__(self, o: Any) -> Expr:
        return binary("floordiv", o, self)

    def __mod__(self, o: Any) -> Expr:
        return binary("floormod", self, o)

    def __rmod__(self, o: Any) -> Expr:
        return binary("floormod", o, self)

    def __neg__(self) -> Expr:
        return binary("-", const(0, self.dtype), self)

    # comparisons (== and != deliberately not overloaded, see module docstring)
    def __lt__(self, o: Any) -> Expr:
        return compare("<", self, o)

    def __le__(self, o: Any) -> Expr:
        return compare("<=", self, o)

    def __gt__(self, o: Any) -> Expr:
        return compare(">", self, o)

    def __ge__(self, o: Any) -> Expr:
        return compare(">=", self, o)

    def __and__(self, o: Any) -> Expr:
        return logic("and", self, o)

    def __or__(self, o: Any) -> Expr:
        return logic("or", self, o)

    def __invert__(self) -> Expr:
        return Not(self)

    __hash__ = object.__hash__


class Var(Expr):
    """A named integer variable (a loop or axis variable)."""

    __slots__ = ("name",)

    def __init__(self, name: str, dtype: str = "int32"):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "dtype", dt.check_dtype(dtype))

    def _make_key(self) -> tuple:
        # Variables are compared by identity; the id keeps distinct vars with equal names apart.
        return ("var", self.name, id(self))


class Const(Expr):
    __slots__ = ("value",)

    def __init__(self, value: int | float | bool, dtype: str):
        dtype = dt.check_dtype(dtype)
        if dtype == "bool":
            value = bool(value)
        elif dt.is_int(dtype):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"constant {value} is not an integer but dtype is {dtype}")
            value = int(value)
        else:
            value = float(value)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "dtype", dtype)

    def _make_key(self) -> tuple:
        return ("const", self.dtype, self.value)


class Binary(Expr):
    """Arithmetic (+ - * / floordiv floormod min max pow) between two expressions."""

    __slots__ = ("a", "b", "op")

    def __init__(self, op: str, a: Expr, b: Expr, dtype: str):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "dtype", dtype)

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)

    def _make_key(self) -> tuple:
        return (self.op, self.dtype, self.a.key(), self.b.key())


class Compare(Binary):
    """A comparison; its dtype is bool."""

    __slots__ = ()


class Logic(Binary):
    """Logical and / or of two bool expressions."""

    __slots__ = ()


class Not(Expr):
    __slots__ = ("a",)

    def __init__(self, a: Expr):
        a = as_expr(a)
        if a.dtype != "bool":
            raise TypeError(f"logical not needs a bool expression, got {a.dtype}")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "dtype", "bool")

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)

    def _make_key(self) -> tuple:
        return ("not", self.a.key())


class Call(Expr):
    """A pure math function (exp, log, sqrt, ...) of one or two arguments; after GPU
    lowering also a warp exchange (``shfl_down``, see ``gpu_lower._warp_reduce``)."""

    __slots__ = ("args", "name")

    def __init__(self, name: str, args: tuple[Expr, ...], dtype: str):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "dtype", dtype)

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def _make_key(self) -> tuple:
        return ("call", self.name, self.dtype, *(a.key() for a in self.args))


class Cast(Expr):
    __slots__ = ("value",)

    def __init__(self, dtype: str, value: Expr):
        object.__setattr__(self, "dtype", dt.check_dtype(dtype))
        object.__setattr__(self, "value", value)

    def children(self) -> tuple[Expr, ...]:
        return (self.value,)

    def _make_key(self) -> tuple:
        return ("cast", self.dtype, self.value.key())


class Select(Expr):
    """``cond ? true_value : false_value``; only the chosen side is evaluated."""

    __slots__ = ("cond", "false_value", "true_value")

    def __init__(self, cond: Expr, true_value: Expr, false_value: Expr):
        object.__setattr__(self, "cond", cond)
        object.__setattr__(self, "true_value", true_value)
        object.__setattr__(self, "false_value", false_value)
        object.__setattr__(self, "dtype", true_value.dtype)

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.true_value, self.false_value)

    def _make_key(self) -> tuple:
        return ("select", self.cond.key(), self.true_value.key(), self.false_value.key())


class Load(Expr):
    """A read of a buffer or tensor element.

    ``source`` is a ``te.Tensor`` in tensor expressions and a ``Buffer`` in the loop IR.
    """

    __slots__ = ("indices", "source")

    def __init__(self, source: Any, indices: tuple[Expr, ...], dtype: str):
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "indices", tuple(indices))
        object.__setattr__(self, "dtype", dtype)

    def children(self) -> tuple[Expr, ...]:
        return self.indices

    def _make_key(self) -> tuple:
        return ("load", id(self.source), *(i.key() for i in self.indices))


# ---------------------------------------------------------------------------- constructors


def const(value: int | float | bool, dtype: str | None = None) -> Const:
    """A constant; its dtype defaults to int32 for ints, float32 for floats, bool for bools."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant of {value!r}")
    return Const(value, dtype)


def as_expr(value: Any, like: str | None = None) -> Expr:
    """Convert a Python number (or an expression) to an expression, matching ``like``'s kind."""
    if isinstance(value, Expr):
        return value
    if isinstance(getattr(value, "var", None), Var):  # an IterVar stands for its variable
        return value.var
    if isinstance(value, bool):
        return Const(value, "bool")
    if isinstance(value, int):
        if like is not None and like != "bool":
            return Const(value, like)
        return const(value)
    if isinstance(value, float):
        if like is not None and dt.is_float(like):
            return Const(value, like)
        return Const(value, "float32")
    if hasattr(value, "item") and hasattr(value, "dtype"):  # numpy scalar
        return as_expr(value.item(), like)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} in a tensor expression")


def _operands(a: Any, b: Any) -> tuple[Expr, Expr]:
    if isinstance(a, Expr) and not isinstance(b, Expr):
        return a, as_expr(b, a.dtype)
    if isinstance(b, Expr) and not isinstance(a, Expr):
        return as_expr(a, b.dtype), b
    a, b = as_expr(a), as_expr(b)
    if a.dtype != b.dtype:
        target = dt.promote(a.dtype, b.dtype)
        a = a if a.dtype == target else Cast(target, a)
        b = b if b.dtype == target else Cast(target, b)
    return a, b


def binary(op: str, a: Any, b: Any) -> Expr:
    a, b = _operands(a, b)
    if a.dtype == "bool" and op in ARITH_OPS:
        raise TypeError(f"arithmetic '{op}' on bool expressions; cast them first")
    if op in ("floordiv", "floormod") and not dt.is_int(a.dtype):
        raise TypeError(f"{op} needs integer operands, got {a.dtype}")
    return Binary(op, a, b, a.dtype)


def compare(op: str, a: Any, b: Any) -> Expr:
    a, b = _operands(a, b)
    return Compare(op, a, b, "bool")


def logic(op: str, a: Any, b: Any) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.dtype != "bool" or b.dtype != "bool":
        raise TypeError(f"logical '{op}' needs bool expressions, got {a.dtype} and {b.dtype}")
    return Logic(op, a, b, "bool")


def equal(a: Any, b: Any) -> Expr:
    return compare("==", a, b)


def not_equal(a: Any, b: Any) -> Expr:
    return compare("!=", a, b)


def call(name: str, *args: Any) -> Expr:
    if name not in MATH_FUNCS:
        raise ValueError(f"unknown math function {name!r}; known: {', '.join(MATH_FUNCS)}")
    exprs = [as_expr(a) for a in args]
    if name == "pow":
        base, exponent = _operands(exprs[0], exprs[1])
        exprs = [base, exponent]
    value_dtype = exprs[0].dtype
    if name not in ("abs",) and not dt.is_float(value_dtype):
        raise TypeError(f"{name} needs a float argument, got {value_dtype}; cast it first")
    return Call(name, tuple(exprs), value_dtype)


def cast(dtype: str, value: Any) -> Expr:
    value = as_expr(value)
    dtype = dt.check_dtype(dtype)
    return value if value.dtype == dtype else Cast(dtype, value)


def select(cond: Any, true_value: Any, false_value: Any) -> Expr:
    cond = as_expr(cond)
    if cond.dtype != "bool":
        raise TypeError(f"if_then_else condition must be bool, got {cond.dtype}")
    t, f = _operands(true_value, false_value)
    return Select(cond, t, f)


def all_of(conds: Iterable[Any]) -> Expr:
    result: Expr | None = None
    for c in conds:
        result = as_expr(c) if result is None else logic("and", result, c)
    return result if result is not None else const(True)


def conjuncts(e: Expr) -> list[Expr]:
    """The terms of a conjunction (``all_of`` undone); ``[e]`` for anything else."""
    if isinstance(e, Logic) and e.op == "and":
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]


def any_of(conds: Iterable[Any]) -> Expr:
    result: Expr | None = None
    for c in conds:
        result = as_expr(c) if result is None else logic("or", result, c)
    return result if result is not None else const(False)


# ---------------------------------------------------------------------------- traversal


def rebuild(e: Expr, children: list[Expr]) -> Expr:
    """A copy of ``e`` with new children (in ``children()`` order)."""
    if isinstance(e, Compare):
        return Compare(e.op, children[0], children[1], "bool")
    if isinstance(e, Logic):
        return Logic(e.op, children[0], children[1], "bool")
    if isinstance(e, Binary):
        return Binary(e.op, children[0], children[1], e.dtype)
    if isinstance(e, Not):
        return Not(children[0])
    if isinstance(e, Call):
        return Call(e.name, tuple(children), e.dtype)
    if isinstance(e, Cast):
        return Cast(e.dtype, children[0])
    if isinstance(e, Select):
        return Select(children[0], children[1], children[2])
    if isinstance(e, Load):
        return Load(e.source, tuple(children), e.dtype)
    rebuild_fn = getattr(e, "rebuild", None)
    if rebuild_fn is not None:
        return rebuild_fn(children)
    raise TypeError(f"cannot rebuild {type(e).__name__}")


def transform(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rewrite bottom-up: ``fn`` gets each node (with rewritten children) and returns a
    replacement or None to keep it. Shared subtrees are rewritten once."""
    memo: dict[int, Expr] = {}

    def visit(node: Expr) -> Expr:
        hit = memo.get(id(node))
        if hit is not None:
            return hit
        kids = node.children()
        if kids:
            new_kids = [visit(k) for k in kids]
            if any(n is not o for n, o in zip(new_kids, kids, strict=True)):
                node2 = rebuild(node, new_kids)
            else:
                node2 = node
        else:
            node2 = node
        out = fn(node2)
        result = node2 if out is None else out
        memo[id(node)] = result
        return result

    return visit(e)


def substitute(e: Expr, mapping: dict[Var, Expr]) -> Expr:
    """Replace variables by expressions."""
    if not mapping:
        return e
    return transform(e, lambda n: mapping.get(n) if isinstance(n, Var) else None)


def walk(e: Expr, descend: Callable[[Expr], bool] | None = None) -> Iterable[Expr]:
    """All nodes of ``e``, pre-order, each shared subtree once; with ``descend``, the
    children of a node only where ``descend(node)`` is true."""
    seen: set[int] = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        if descend is None or descend(node):
            stack.extend(reversed(node.children()))


def free_vars(e: Expr) -> set[Var]:
    return {n for n in walk(e) if isinstance(n, Var)}


# ---------------------------------------------------------------------------- evaluation


_PY_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "floormod": lambda a, b: a % b,
    "min": min,
    "max": max,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "and": lambda a, b: a and b,
    "or": lambda a, b: a or b,
}


def fold_constant(op: str, a: Const, b: Const, dtype: str) -> Const | None:
    """Fold an integer/bool binary operation of two constants; None when not foldable."""
    if op == "/" or (op in ("floordiv", "floormod") and b.value == 0):
        return None
    if dt.is_float(a.dtype):
        return None
    return Const(_PY_BINARY[op](a.value, b.value), dtype)


def is_const(e: Expr, value: int | float | None = None) -> bool:
    return isinstance(e, Const) and (value is None or e.value == value)

