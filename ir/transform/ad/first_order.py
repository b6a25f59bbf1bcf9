"""First-order reverse mode over dataflow code: the function's body (lets, operator calls,
tuples and projections; no control flow, closures or references) is put in A-normal form,
its bindings are replayed, and then a backward pass in the reverse order binds each
variable's adjoint (the sum of what its uses contributed) and applies the operators'
rules (``rules``). The result is one static graph: it fuses, and it compiles with the
graph executor like any model.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import op as ops
from ...expr import Call, Constant, Expr, Function, Let, Op, Tuple, TupleGetItem, Var
from ...module import Module
from ...types import TensorType, TupleType, Type
from ..infer_type import infer_expr
from .lifting import typed_anf
from .rules import GradCall, GradientError, differentiable, gradient_rule, ones, zeros

_DATAFLOW = (Call, Tuple, TupleGetItem, Var, Constant)


def _bindings(body: Expr) -> tuple[list[tuple[Var, Expr]], Expr]:
    """The let chain of an A-normal-form body, checked to be dataflow code."""
    chain = []
    while isinstance(body, Let):
        value = body.value
        if not isinstance(value, _DATAFLOW) or (
                isinstance(value, Call) and not isinstance(value.op, Op)):
            what = type(value.op).__name__ if isinstance(value, Call) else \
                type(value).__name__
            raise GradientError(
                f"first-order gradient: the function is not dataflow code (it has a "
                f"{'call of a ' if isinstance(value, Call) else ''}{what} bound to "
                f"%{body.var.name_hint}); use mode='higher_order'")
        chain.append((body.var, value))
        body = body.body
    if not isinstance(body, Var | Constant):
        raise GradientError(f"first-order gradient: unexpected result {type(body).__name__}")
    return chain, body


class _Adjoints:
    """Contributions to each variable's adjoint (per field for tuple variables), summed
    into one let-bound value when the backward pass reaches the variable."""

    def __init__(self, emit: Callable[[str, Expr], Var]):
        self.emit = emit
        self.parts: dict[Var, list] = {}

    def add(self, target: Expr, value: object, t: Type) -> None:
        """Record ``value`` (for a tuple: a list per field, or a tuple-typed expression)
        as a contribution to ``target``'s adjoint."""
        if value is None or not isinstance(target, Var) or not differentiable(t):
            return
        if isinstance(t, TupleType):
            if isinstance(value, Expr):
                value = [TupleGetItem(value, i) for i in range(len(t.fields))]
            slots = self.parts.setdefault(target, [[] for _ in t.fields])
            for i, (field_value, field_t) in enumerate(zip(value, t.fields, strict=True)):
                if field_value is not None and differentiable(field_t):
                    slots[i].append(field_value)
        else:
            self.parts.setdefault(target, []).append(value)

    def take(self, var: Var, t: Type) -> Expr | None:
        """The adjoint of ``var`` (a Tuple with zeros for fields without one), or None."""
        parts = self.parts.pop(var, None)
        if not parts:
            return None
        if isinstance(t, TupleType):
            if not any(parts):
                return None
            return Tuple([self._sum(p, var, f) if p else _zero_value(f)
                          for p, f in zip(parts, t.fields, strict=True)])
        return self._sum(parts, var, t)

    def _sum(self, parts: list[Expr], var: Var, t: Type) -> Expr:
        if len(parts) == 1 and isinstance(parts[0], Var):
            return parts[0]
        total = parts[0]
        for p in parts[1:]:
            total = _plus(total, p, t)
        return self.emit(f"{var.name_hint}_adj", total)


def _plus(a: Expr, b: Expr, t: Type) -> Expr:
    if isinstance(t, TupleType):
        return Tuple([_plus(TupleGetItem(a, i), TupleGetItem(b, i), f)
                      for i, f in enumerate(t.fields)])
    return ops.add(a, b)


def _zero_value(t: Type) -> Expr:
    if isinstance(t, TupleType):
        return Tuple([_zero_value(f) for f in t.fields])
    return zeros(t)


def first_order_gradient(func: Function, mod: Module | None = None) -> Function:
    """``fn(params) -> (value, (d value / d param, ...))`` for a dataflow function (the
    adjoint of the output seeded with ones)."""
    anf, _ = typed_anf(func, mod, "gradient")
    chain, result = _bindings(anf.body)
    out_lets: list[tuple[Var, Expr]] = list(chain)

    def emit(name: str, value: Expr) -> Var:
        v = Var(name)
        out_lets.append((v, value))
        return v

    adjoints = _Adjoints(emit)
    result_type = result.checked_type
    adjoints.add(result, _seed(result_type), result_type)
    for var, value in reversed(chain):
        t = var.checked_type
        adj = adjoints.take(var, t)
        if adj is None:
            continue
        if isinstance(value, Var):
            adjoints.add(value, adj, t)
        elif isinstance(value, TupleGetItem):
            whole = value.tuple_value.checked_type
            slots = [None] * len(whole.fields)
            slots[value.index] = adj
            adjoints.add(value.tuple_value, slots, whole)
        elif isinstance(value, Tuple):
            for i, f in enumerate(value.fields):
                adjoints.add(f, TupleGetItem(adj, i), f.checked_type)
        elif isinstance(value, Call):
            _backprop_call(value, var, adj, adjoints, emit)
    grads = []
    for p in anf.params:
        t = p.checked_type
        adj = adjoints.take(p, t) if differentiable(t) else None
        grads.append(adj if adj is not None else zeros(t))
    body: Expr = Tuple([result, Tuple(grads)])
    for var, value in reversed(out_lets):
        body = Let(var, value, body)
    out = Function(anf.params, body, None, anf.type_params, anf.attrs, anf.span)
    infer_expr(out, mod)
    return out


def _backprop_call(call: Call, out: Var, adj: Expr, adjoints: _Adjoints,
                   emit: Callable[[str, Expr], Var]) -> None:
    rule = gradient_rule(call.op.name)
    entries = rule(GradCall(call, tuple(call.args), out, adj))
    for arg, entry in zip(call.args, entries, strict=True):
        if entry is None:
            continue
        t = arg.checked_type
        name = f"{call.op.name.rsplit('.', 1)[-1]}_d"
        if isinstance(t, TupleType):
            entry = [_bound(e, name, emit) for e in entry]
        else:
            entry = _bound(entry, name, emit)
        adjoints.add(arg, entry, t)


def _bound(e: Expr | None, name: str, emit: Callable[[str, Expr], Var]) -> Expr | None:
    """``e`` let-bound (so that its uses share it), unless it is None or a variable."""
    return e if e is None or isinstance(e, Var) else emit(name, e)


def _seed(t: Type) -> object:
    if isinstance(t, TensorType):
        return ones(t) if differentiable(t) else None
    if isinstance(t, TupleType):
        return [_seed(f) for f in t.fields]
    raise GradientError(f"gradient: the function must return tensors, got {t}")
