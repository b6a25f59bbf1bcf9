"""Readable text of expressions (used by the loop-IR printer and canonical workload text)."""

from __future__ import annotations

import math

from .expr import Binary, Call, Cast, Const, Expr, Load, Logic, Not, Select, Var

_INFIX = {"+": 4, "-": 4, "*": 5, "/": 5, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3,
          "and": 2, "or": 1}
_INFIX_TEXT = {"and": "&&", "or": "||"}


def const_str(c: Const) -> str:
    if c.dtype == "bool":
        return "True" if c.value else "False"
    if isinstance(c.value, float):
        if math.isinf(c.value):
            return "inf" if c.value > 0 else "-inf"
        text = repr(c.value)
        return text if c.dtype == "float32" else f"{c.dtype}({text})"
    return str(c.value) if c.dtype == "int32" else f"{c.dtype}({c.value})"


def expr_str(e: Expr) -> str:
    return _fmt(e, 0)


def _fmt(e: Expr, parent_prec: int) -> str:
    from .tensor import Reduce  # a cycle: tensor uses this printer for reducer keys

    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return const_str(e)
    if isinstance(e, Binary) and e.op in _INFIX:
        prec = _INFIX[e.op]
        # the right operand of - and / needs parentheses at equal precedence
        text = f"{_fmt(e.a, prec)} {_INFIX_TEXT.get(e.op, e.op)} {_fmt(e.b, prec + 1)}"
        if isinstance(e, Logic | Binary) and prec < parent_prec:
            return f"({text})"
        return text
    if isinstance(e, Binary):
        return f"{e.op}({_fmt(e.a, 0)}, {_fmt(e.b, 0)})"
    if isinstance(e, Not):
        return f"!{_fmt(e.a, 9)}"
    if isinstance(e, Call):
        return f"{e.name}({', '.join(_fmt(a, 0) for a in e.args)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({_fmt(e.value, 0)})"
    if isinstance(e, Select):
        return (f"select({_fmt(e.cond, 0)}, {_fmt(e.true_value, 0)}, "
                f"{_fmt(e.false_value, 0)})")
    if isinstance(e, Load):
        return f"{e.source.name}[{', '.join(_fmt(i, 0) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ", ".join(f"{a.name}:{a.extent}" for a in e.axis)
        where = "" if e.condition is None else f", where={_fmt(e.condition, 0)}"
        return f"{e.reducer.name}({_fmt(e.source, 0)}, axis=[{axes}]{where})"
    return f"<{type(e).__name__}>"
