"""Forward mode over the whole language: dual numbers. Every tensor value ``x`` becomes a
pair ``(x, tangent)`` (``lifting``); each operator call computes its value and its output's
tangent from its inputs' (``tangents``); closures, ``let``, ``if``, ``match``, tuples,
references and recursion through globals (``@f`` becomes ``@f_jvp``) carry the pairs.

``forward_mode(func, mod=None)`` returns ``fn(params..., tangents...) -> (value, tangent)``: the
Jacobian-vector product ``J(params) @ tangents`` beside ``func``'s value, one tangent
parameter per parameter (``%<name>_tangent``, same type).
"""

from __future__ import annotations

from ...expr import Call, Expr, Function, Let, Tuple, TupleGetItem, Var
from ...module import Module
from ...types import TensorType, TupleType, Type
from ..infer_type import infer_expr
from .lifting import Context, Lifter, derivative_part, plain_value, typed_anf
from .rules import differentiable, zeros
from .tangents import TangentCall, tangent_rule

WHAT = "forward-mode derivative"


class _Forward(Lifter):
    what = WHAT
    suffix = "_jvp"

    def lift_tensor(self, t: TensorType) -> Type:
        return TupleType((t, t))

    def fresh(self, value: Expr, t: TensorType) -> Expr:
        return Tuple([value, zeros(t)])

    def op_call(self, call: Call, var: Var, args: list[Expr], ctx: Context,
                body: Expr) -> Expr:
        arg_types = [a.checked_type for a in call.args]
        inputs, plain = self.call_vars(call)
        out_type = call.checked_type
        tangents = tuple(derivative_part(a, t, read=False) if differentiable(t) else None
                         for a, t in zip(args, arg_types, strict=True))
        tangent = None
        if differentiable(out_type) and any(t is not None for t in tangents):
            tangent = tangent_rule(call.op.name)(TangentCall(call, tuple(inputs), tangents,
                                                             plain))
        out_tangent = Var(f"{plain.name_hint[:-len('_out')]}_tangent")
        rest = Let(var, _dual(plain, out_tangent, out_type), body)
        rest = Let(out_tangent, tangent if tangent is not None else _zeros(out_type), rest)
        return self.bind_plain(call, args, inputs, plain, rest)


def _zeros(t: Type) -> Expr:
    if isinstance(t, TupleType):
        return Tuple([_zeros(f) for f in t.fields])
    return zeros(t)


def _dual(value: Expr, tangent: Expr, t: Type) -> Expr:
    if isinstance(t, TupleType):
        return Tuple([_dual(TupleGetItem(value, i), TupleGetItem(tangent, i), f)
                      for i, f in enumerate(t.fields)])
    return Tuple([value, tangent])


def forward_mode(func: Function, mod: Module | None = None) -> Function:
    """``fn(params..., tangents...) -> (value, J @ tangents)`` (module docstring); lifted
    globals are added to ``mod``."""
    anf, anf_mod = typed_anf(func, mod, WHAT)
    lifter = _Forward(mod, anf_mod)
    types = [p.checked_type for p in anf.params]
    params = [Var(p.name_hint, t) for p, t in zip(anf.params, types, strict=True)]
    tangents = [Var(f"{p.name_hint}_tangent", t) for p, t in zip(anf.params, types,
                                                                  strict=True)]
    duals = [Var(f"{p.name_hint}_dual") for p in anf.params]
    result_type = anf.body.checked_type
    result = Var("result")
    body: Expr = Tuple([plain_value(result, result_type, WHAT),
                        derivative_part(result, result_type, read=False)])
    body = Let(result, lifter.expr(anf.body, dict(zip(anf.params, duals, strict=True)), ()),
               body)
    for p, d, t in reversed(list(zip(params, duals, tangents, strict=True))):
        body = Let(d, Tuple([p, t]), body)
    out = Function([*params, *tangents], body, None, anf.type_params, anf.attrs, anf.span)
    infer_expr(out, mod)
    return out
