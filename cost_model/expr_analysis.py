"""Expression analysis for the features: affine views of buffer indices and operation counts.

``linearize`` views an index expression as ``sum(coef[v] * v) + const`` over the loop
variables (keyed by ``id(var)``), with a cap on the number of distinct values where a
``floormod`` bounds it; non-affine parts (products of variables, min/max, selects, loads)
become coefficient-1 terms of their variables, which is enough for footprints and strides.

``count_ops`` counts the arithmetic of an expression by kind (float add/mul/multiply-add/div,
special functions, integer arithmetic, comparisons, selects, ...), in the slots of ``OPS``.
"""

from __future__ import annotations

from schedule import expr as E

# Operation-count slots, in feature order.
OPS = ("float_mad", "float_addsub", "float_mul", "float_div", "float_minmax", "float_cmp",
       "float_math", "int_addsub", "int_mul", "int_divmod", "int_minmax", "int_cmp", "bool_op",
       "select", "cast", "loads")
(F_MAD, F_ADD, F_MUL, F_DIV, F_MINMAX, F_CMP, F_MATH, I_ADD, I_MUL, I_DIVMOD, I_MINMAX, I_CMP,
 BOOL, SELECT, CAST, LOADS) = range(len(OPS))
N_OPS = len(OPS)
FLOAT_SLOTS = (F_MAD, F_ADD, F_MUL, F_DIV, F_MINMAX, F_CMP, F_MATH)

_FLOAT_SLOT = {"+": F_ADD, "-": F_ADD, "*": F_MUL, "/": F_DIV, "min": F_MINMAX,
               "max": F_MINMAX}
_INT_SLOT = {"+": I_ADD, "-": I_ADD, "*": I_MUL, "/": I_DIVMOD, "floordiv": I_DIVMOD,
             "floormod": I_DIVMOD, "min": I_MINMAX, "max": I_MINMAX}

Coefs = dict[int, float]


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def count_ops(e: E.Expr, counts: list[int], loads: list[E.Load] | None = None) -> None:
    """Add the operations of ``e`` to ``counts`` (a list of ``N_OPS`` ints), and its loads
    to ``loads`` when given. A float ``*`` feeding a float ``+``/``-`` counts once, as a
    multiply-add."""
    stack = [e]
    fused: set[int] = set()
    while stack:
        node = stack.pop()
        t = type(node)
        if t is E.Binary:
            op = node.op
            if _is_float(node.dtype):
                if op in ("+", "-"):
                    for child in (node.a, node.b):
                        if type(child) is E.Binary and child.op == "*" and id(child) not in fused:
                            fused.add(id(child))
                            counts[F_MAD] += 1
                            break
                    else:
                        counts[F_ADD] += 1
                elif op == "*" and id(node) in fused:
                    pass
                else:
                    counts[_FLOAT_SLOT.get(op, F_MATH)] += 1
            else:
                counts[_INT_SLOT.get(op, I_ADD)] += 1
            stack.append(node.a)
            stack.append(node.b)
        elif t is E.Load:
            counts[LOADS] += 1
            if loads is not None:
                loads.append(node)
            stack.extend(node.indices)
        elif t is E.Compare:
            counts[F_CMP if _is_float(node.a.dtype) else I_CMP] += 1
            stack.append(node.a)
            stack.append(node.b)
        elif t is E.Logic or t is E.Not:
            counts[BOOL] += 1
            stack.extend(node.children())
        elif t is E.Call:
            counts[F_MATH] += 1
            stack.extend(node.args)
        elif t is E.Select:
            counts[SELECT] += 1
            stack.extend(node.children())
        elif t is E.Cast:
            counts[CAST] += 1
            stack.append(node.value)
        elif t is E.Var or t is E.Const:
            continue
        else:  # other node kinds (e.g. target-specific ones): count their children only
            stack.extend(node.children())


def _opaque(e: E.Expr) -> tuple[Coefs, int, int]:
    return {id(v): 1.0 for v in E.free_vars(e)}, 0, 0


def linearize(e: E.Expr) -> tuple[Coefs, int, int]:
    """``(coefs, const, cap)``: ``e`` as an affine function of loop variables; ``cap`` > 0
    bounds its number of distinct values (a floormod), 0 means unbounded."""
    t = type(e)
    if t is E.Var:
        return {id(e): 1.0}, 0, 0
    if t is E.Const:
        value = e.value
        return {}, (int(value) if not isinstance(value, float) else 0), 0
    if t is E.Cast:
        return linearize(e.value)
    if t is not E.Binary:
        return _opaque(e)
    op = e.op
    if op == "+" or op == "-":
        ca, ka, pa = linearize(e.a)
        cb, kb, pb = linearize(e.b)
        sign = 1.0 if op == "+" else -1.0
        coefs = dict(ca)
        for v, c in cb.items():
            coefs[v] = coefs.get(v, 0.0) + sign * c
        cap = pa * pb if pa and pb else 0
        return coefs, ka + int(sign) * kb, cap
    if op == "*":
        ca, ka, pa = linearize(e.a)
        cb, kb, pb = linearize(e.b)
        if not ca:
            return {v: c * ka for v, c in cb.items()}, ka * kb, pb
        if not cb:
            return {v: c * kb for v, c in ca.items()}, ka * kb, pa
        return _opaque(e)
    if op in ("floordiv", "floormod") and type(e.b) is E.Const and int(e.b.value) > 0:
        c = int(e.b.value)
        ca, ka, pa = linearize(e.a)
        divisible = all(float(x).is_integer() and int(x) % c == 0 for x in ca.values())
        if op == "floordiv":  # exact when every coefficient is a multiple of c
            return {v: x / c for v, x in ca.items()}, ka // c, (-(-pa // c) if pa else 0)
        if divisible:
            return {}, ka % c, 0
        return ca, ka % c, min(pa, c) if pa else c
    return _opaque(e)
