"""Higher-order reverse mode over the whole language, as the IR's paper describes it.

Every tensor value ``x`` becomes a pair ``(x, ref adjoint)`` (``lifting``). A reference
``bp`` holds the backpropagator: a closure ``fn() -> ()``. Each operator call computes its
value forwards and prepends to ``bp`` a closure that reads the output's adjoint, applies
the operator's rule (``rules``) and adds the results into its inputs' adjoint references,
then calls the previous backpropagator. Closures, ``let``, ``if``, ``match``, tuples and
references carry lifted values unchanged, so control flow, higher-order functions and
recursion are differentiated by running them: a global ``@f`` becomes
``@f_grad(bp, lifted args...)``. At the end the result's adjoint is seeded with ones,
``bp`` is run once, and the parameters' adjoints are read.
"""

from __future__ import annotations

from ... import op as ops
from ...expr import (
    Call,
    Expr,
    Function,
    Let,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ...module import Module
from ...types import FuncType, RefType, TensorType, TupleType, Type
from ..infer_type import infer_expr
from .lifting import Context, Lifter, derivative_part, plain_value, typed_anf
from .rules import GradCall, differentiable, gradient_rule, ones, zeros

UNIT = TupleType(())
BACKPROP = RefType(FuncType((), UNIT))
WHAT = "higher-order gradient"


def _seq(effect: Expr, body: Expr) -> Expr:
    return Let(Var("_"), effect, body)


def _accumulate(lifted: Expr, t: Type, entry: object, rest: Expr) -> Expr:
    """``rest`` after adding ``entry`` into the adjoint reference(s) of ``lifted``."""
    if entry is None or not differentiable(t):
        return rest
    if isinstance(t, TupleType):
        for i, (f, e) in reversed(list(enumerate(zip(t.fields, entry, strict=True)))):
            rest = _accumulate(TupleGetItem(lifted, i), f, e, rest)
        return rest
    ref = TupleGetItem(lifted, 1)
    return _seq(RefWrite(ref, ops.add(RefRead(ref), entry)), rest)


class _Reverse(Lifter):
    what = WHAT
    suffix = "_grad"

    def lift_tensor(self, t: TensorType) -> Type:
        return TupleType((t, RefType(t)))

    def fresh(self, value: Expr, t: TensorType) -> Expr:
        return Tuple([value, RefCreate(zeros(t))])

    def context_params(self) -> Context:
        return (Var("bp", BACKPROP),)

    def op_call(self, call: Call, var: Var, args: list[Expr], ctx: Context,
                body: Expr) -> Expr:
        """The value forwards, and a backpropagator pushed onto ``bp`` when adjoints can
        flow through the call."""
        arg_types = [a.checked_type for a in call.args]
        inputs, plain = self.call_vars(call)
        out_type = call.checked_type
        rest = body
        if differentiable(out_type) and any(differentiable(t) for t in arg_types):
            rest = self.push(call, inputs, plain, var, args, arg_types, ctx[0], body)
        return self.bind_plain(call, args, inputs, plain,
                               Let(var, self.pair(plain, out_type), rest))

    def push(self, call: Call, inputs: list[Var], plain: Var, lifted_out: Var,
             args: list[Expr], arg_types: list[Type], bp: Var, body: Expr) -> Expr:
        grad = Var(f"{plain.name_hint}_adj")
        entries = gradient_rule(call.op.name)(GradCall(call, tuple(inputs), plain, grad))
        prev = Var("prev")
        back: Expr = Call(prev, [])
        for arg, t, entry in reversed(list(zip(args, arg_types, entries, strict=True))):
            back = _accumulate(arg, t, entry, back)
        back = Let(grad, derivative_part(lifted_out, call.checked_type, read=True), back)
        return Let(prev, RefRead(bp), _seq(RefWrite(bp, Function([], back, UNIT)), body))


def higher_order_gradient(func: Function, mod: Module | None = None) -> Function:
    """``fn(params) -> (value, (d value / d param, ...))`` for any function of tensors (see
    the module docstring); differentiated globals are added to ``mod``."""
    anf, anf_mod = typed_anf(func, mod, WHAT)
    lifter = _Reverse(mod, anf_mod)
    bp = Var("bp", BACKPROP)
    types = [p.checked_type for p in anf.params]
    params = [Var(p.name_hint, t) for p, t in zip(anf.params, types, strict=True)]
    lifted = [Var(f"{p.name_hint}_l", lifter.lift(t)) for p, t in zip(anf.params, types,
                                                                       strict=True)]
    result_type = anf.body.checked_type
    result = Var("result", lifter.lift(result_type))
    grads = Tuple([RefRead(TupleGetItem(q, 1)) for q in lifted])
    tail: Expr = Tuple([plain_value(result, result_type, WHAT), grads])
    tail = _seq(Call(RefRead(bp), []), tail)
    tail = _seed(result, result_type, tail)
    body = Let(result, lifter.expr(anf.body, dict(zip(anf.params, lifted, strict=True)),
                                   (bp,)), tail)
    for p, q, t in reversed(list(zip(params, lifted, types, strict=True))):
        body = Let(q, lifter.pair(p, t), body)
    body = Let(bp, RefCreate(Function([], Tuple([]), UNIT)), body)
    out = Function(params, body, None, anf.type_params, anf.attrs, anf.span)
    infer_expr(out, mod)
    return out


def _seed(lifted: Expr, t: Type, rest: Expr) -> Expr:
    if isinstance(t, TensorType):
        if not differentiable(t):
            return rest
        return _seq(RefWrite(TupleGetItem(lifted, 1), ones(t)), rest)
    for i, f in reversed(list(enumerate(t.fields))):
        rest = _seed(TupleGetItem(lifted, i), f, rest)
    return rest
