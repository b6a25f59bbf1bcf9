"""Higher-order reverse mode over the whole language, as the IR's paper describes it.

Every tensor value ``x`` becomes a pair ``(x, ref adjoint)`` (types are "lifted": a tensor
type ``T`` becomes ``(T, ref(T))`` inside tuples, functions, references and ADT type
arguments). A reference ``bp`` holds the backpropagator: a closure ``fn() -> ()``. Each
operator call computes its value forwards and prepends to ``bp`` a closure that reads the
output's adjoint, applies the operator's rule (``rules``) and adds the results into its
inputs' adjoint references, then calls the previous backpropagator. Closures, ``let``,
``if``, ``match``, tuples and references carry lifted values unchanged, so control flow,
higher-order functions and recursion are differentiated by running them: a global ``@f``
becomes ``@f_grad(bp, lifted args...)``. At the end the result's adjoint is seeded with
ones, ``bp`` is run once, and the parameters' adjoints are read.

ADTs are lifted through their type arguments: a ``List[Tensor]`` becomes a list of pairs.
A constructor whose fields are tensors directly (not through a type parameter) cannot be
lifted and is reported.
"""

from __future__ import annotations

from ... import op as ops
from ...expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Op,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ...module import Module
from ...types import FuncType, RefType, TensorType, TupleType, Type, TypeCall
from ..anf import to_a_normal_form
from ..infer_type import infer_expr
from .rules import GradCall, GradientError, differentiable, gradient_rule, ones, zeros

UNIT = TupleType(())
BACKPROP = RefType(FuncType((), UNIT))


def lift(t: Type) -> Type:
    """The type of a value of type ``t`` once its tensors carry adjoint references."""
    if isinstance(t, TensorType):
        return TupleType((t, RefType(t)))
    if isinstance(t, TupleType):
        return TupleType(tuple(lift(f) for f in t.fields))
    if isinstance(t, FuncType):
        return FuncType(tuple(lift(a) for a in t.arg_types), lift(t.ret_type), t.type_params,
                        t.type_constraints)
    if isinstance(t, TypeCall):
        return TypeCall(t.func, tuple(lift(a) for a in t.args))
    if isinstance(t, RefType):
        return RefType(lift(t.value))
    return t


def _holds_tensor(t: Type) -> bool:
    if isinstance(t, TensorType):
        return True
    if isinstance(t, TupleType | TypeCall):
        return any(_holds_tensor(f) for f in (t.fields if isinstance(t, TupleType) else t.args))
    if isinstance(t, FuncType):
        return any(_holds_tensor(a) for a in (*t.arg_types, t.ret_type))
    if isinstance(t, RefType):
        return _holds_tensor(t.value)
    return False


def _seq(effect: Expr, body: Expr) -> Expr:
    return Let(Var("_"), effect, body)


def _value(lifted: Expr, t: Type) -> Expr:
    """The plain value inside a lifted value of type ``t`` (tensors, tuples of them)."""
    if isinstance(t, TensorType):
        return TupleGetItem(lifted, 0)
    if isinstance(t, TupleType):
        return Tuple([_value(TupleGetItem(lifted, i), f) for i, f in enumerate(t.fields)])
    raise GradientError(f"higher-order gradient: a {t} cannot be an operator's input or the "
                        "result")


def _pair(value: Expr, t: Type) -> Expr:
    """A fresh lifted value for the plain ``value`` of type ``t``: zero adjoints."""
    if isinstance(t, TensorType):
        return Tuple([value, RefCreate(zeros(t))])
    if isinstance(t, TupleType):
        return Tuple([_pair(TupleGetItem(value, i), f) for i, f in enumerate(t.fields)])
    raise GradientError(f"higher-order gradient: an operator returning {t} is not supported")


def _adjoint(lifted: Expr, t: Type) -> Expr:
    """The current adjoint held by a lifted value (a Tuple of them for tuples)."""
    if isinstance(t, TensorType):
        return RefRead(TupleGetItem(lifted, 1))
    return Tuple([_adjoint(TupleGetItem(lifted, i), f) for i, f in enumerate(t.fields)])


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


class _Lifter:
    """Rewrites a typed A-normal-form program into its lifted, backpropagating form."""

    def __init__(self, mod: Module | None, anf_mod: Module | None):
        self.mod = mod
        self.anf_mod = anf_mod
        self.globals: dict[str, GlobalVar] = {}

    # ----------------------------------------------------------------------- globals

    def global_grad(self, gv: GlobalVar) -> GlobalVar:
        name = gv.name
        out = self.globals.get(name)
        if out is not None:
            return out
        if self.anf_mod is None or name not in self.anf_mod:
            raise GradientError(f"higher-order gradient: @{name} is called but no module "
                                "holding it was given")
        out = GlobalVar(f"{name}_grad")
        if out.name in self.mod:
            raise GradientError(f"higher-order gradient: the module already has @{out.name}")
        self.globals[name] = out
        func = self.anf_mod[name]
        bp = Var("bp", BACKPROP)
        lifted = self.function(func, bp, extra=[bp])
        self.mod.add(out, lifted)
        return out

    # -------------------------------------------------------------------- expressions

    def function(self, f: Function, bp: Var, extra: list[Var] | None = None,
                 env: dict | None = None) -> Function:
        env = dict(env or {})
        params = []
        for p in f.params:
            q = Var(p.name_hint, lift(p.checked_type))
            env[p] = q
            params.append(q)
        ret = lift(f.body.checked_type)
        return Function([*(extra or []), *params], self.expr(f.body, env, bp), ret,
                        f.type_params, None, f.span)

    def atom(self, e: Expr, env: dict, bp: Var) -> Expr:
        if isinstance(e, Var):
            return env[e]
        if isinstance(e, Constant):
            return _pair(e, e.checked_type)
        if isinstance(e, GlobalVar):
            t = e.checked_type
            args = [Var(f"a{i}", lift(a)) for i, a in enumerate(t.arg_types)]
            return Function(args, Call(self.global_grad(e), [bp, *args]), lift(t.ret_type),
                            t.type_params)
        if isinstance(e, Constructor):
            self.check_constructor(e)
            return e
        raise GradientError(f"higher-order gradient: {type(e).__name__} {e!r} used as a value "
                            "is not supported")

    def check_constructor(self, c: Constructor) -> None:
        for t in c.inputs:
            if _holds_tensor(t):
                raise GradientError(f"higher-order gradient: constructor {c.name} holds a "
                                    f"{t} directly; make the tensor a type parameter of "
                                    f"its type so it can carry its adjoint")

    def expr(self, e: Expr, env: dict, bp: Var) -> Expr:
        if isinstance(e, Let):
            bindings = []
            while isinstance(e, Let):
                v = Var(e.var.name_hint, lift(e.var.checked_type))
                value_env = dict(env)
                if isinstance(e.value, Function):
                    value_env[e.var] = v  # a let-bound function may call itself
                bindings.append((e, v, value_env))
                env = dict(env)
                env[e.var] = v
                e = e.body
            body = self.expr(e, env, bp)
            for let, v, value_env in reversed(bindings):
                body = self.bind(let.value, v, value_env, bp, body)
            return body
        return self.value(e, env, bp, None)

    def bind(self, value: Expr, var: Var, env: dict, bp: Var, body: Expr) -> Expr:
        if isinstance(value, Call) and isinstance(value.op, Op):
            return self.op_call(value, var, env, bp, body)
        return Let(var, self.value(value, env, bp, var), body)

    def value(self, e: Expr, env: dict, bp: Var, name: Var | None) -> Expr:
        if isinstance(e, Var | Constant | GlobalVar | Constructor):
            return self.atom(e, env, bp)
        if isinstance(e, Call):
            if isinstance(e.op, Op):
                v = Var("y")
                return self.op_call(e, v, env, bp, v)
            args = [self.atom(a, env, bp) for a in e.args]
            if isinstance(e.op, GlobalVar):
                return Call(self.global_grad(e.op), [bp, *args])
            if isinstance(e.op, Constructor):
                self.check_constructor(e.op)
                return Call(e.op, args)
            return Call(self.atom(e.op, env, bp), args)
        if isinstance(e, Function):
            return self.function(e, bp, env=env)
        if isinstance(e, Tuple):
            return Tuple([self.atom(f, env, bp) for f in e.fields])
        if isinstance(e, TupleGetItem):
            return TupleGetItem(self.atom(e.tuple_value, env, bp), e.index)
        if isinstance(e, If):
            cond = TupleGetItem(self.atom(e.cond, env, bp), 0)
            return If(cond, self.expr(e.true_branch, env, bp), self.expr(e.false_branch, env, bp))
        if isinstance(e, Match):
            clauses = []
            for c in e.clauses:
                inner = dict(env)
                clauses.append(Clause(self.pattern(c.lhs, inner), self.expr(c.rhs, inner, bp)))
            return Match(self.atom(e.data, env, bp), clauses, e.complete)
        if isinstance(e, RefCreate):
            return RefCreate(self.atom(e.value, env, bp))
        if isinstance(e, RefRead):
            return RefRead(self.atom(e.ref, env, bp))
        if isinstance(e, RefWrite):
            return RefWrite(self.atom(e.ref, env, bp), self.atom(e.value, env, bp))
        if isinstance(e, Let):
            return self.expr(e, env, bp)
        raise GradientError(f"higher-order gradient: unsupported expression {type(e).__name__}")

    def pattern(self, p: Pattern, env: dict) -> Pattern:
        if isinstance(p, PatternVar):
            v = Var(p.var.name_hint, lift(p.var.checked_type))
            env[p.var] = v
            return PatternVar(v)
        if isinstance(p, PatternConstructor):
            self.check_constructor(p.constructor)
            return PatternConstructor(p.constructor, [self.pattern(q, env) for q in p.patterns])
        if isinstance(p, PatternTuple):
            return PatternTuple([self.pattern(q, env) for q in p.patterns])
        if isinstance(p, PatternWildcard):
            return p
        raise GradientError(f"higher-order gradient: unsupported pattern {p!r}")

    # ------------------------------------------------------------------ operator calls

    def op_call(self, call: Call, var: Var, env: dict, bp: Var, body: Expr) -> Expr:
        """``let var = <lifted call>; body``: the value forwards, and a backpropagator
        pushed onto ``bp`` when adjoints can flow through the call."""
        lifted_args = [self.atom(a, env, bp) for a in call.args]
        arg_types = [a.checked_type for a in call.args]
        inputs = [Var(f"{call.op.name.rsplit('.', 1)[-1]}_in{i}") for i in range(len(call.args))]
        plain = Var(f"{call.op.name.rsplit('.', 1)[-1]}_out")
        out_type = call.checked_type
        flows = differentiable(out_type) and any(differentiable(t) for t in arg_types)
        rest = body
        if flows:
            rest = self.push(call, inputs, plain, var, lifted_args, arg_types, bp, body)
        rest = Let(var, _pair(plain, out_type), rest)
        rest = Let(plain, Call(call.op, inputs, call.attrs, span=call.span), rest)
        for v, arg, t in reversed(list(zip(inputs, lifted_args, arg_types, strict=True))):
            rest = Let(v, _value(arg, t), rest)
        return rest

    def push(self, call: Call, inputs: list[Var], plain: Var, lifted_out: Var,
             lifted_args: list[Expr], arg_types: list[Type], bp: Var, body: Expr) -> Expr:
        grad = Var(f"{plain.name_hint}_adj")
        entries = gradient_rule(call.op.name)(GradCall(call, tuple(inputs), plain, grad))
        prev = Var("prev")
        back: Expr = Call(prev, [])
        for arg, t, entry in reversed(list(zip(lifted_args, arg_types, entries, strict=True))):
            back = _accumulate(arg, t, entry, back)
        back = Let(grad, _adjoint(lifted_out, call.checked_type), back)
        closure = Function([], back, UNIT)
        return Let(prev, RefRead(bp), _seq(RefWrite(bp, closure), body))


def higher_order_gradient(func: Function, mod: Module | None = None) -> Function:
    """``fn(params) -> (value, (d value / d param, ...))`` for any function of tensors (see
    the module docstring); differentiated globals are added to ``mod``."""
    anf_mod = to_a_normal_form(mod) if mod is not None else None
    anf = to_a_normal_form(func)
    infer_expr(anf, anf_mod)
    for p in anf.params:
        if not isinstance(p.checked_type, TensorType):
            raise GradientError(f"gradient: parameter %{p.name_hint} must be a tensor, got "
                                f"{p.checked_type}")
    result_type = anf.body.checked_type
    if not isinstance(result_type, TensorType | TupleType):
        raise GradientError(f"gradient: the function must return tensors, got {result_type}")
    lifter = _Lifter(mod if mod is not None else Module(), anf_mod)
    bp = Var("bp", BACKPROP)
    types = [p.checked_type for p in anf.params]
    params = [Var(p.name_hint, t) for p, t in zip(anf.params, types, strict=True)]
    lifted_params = [Var(f"{p.name_hint}_l", lift(p.checked_type)) for p in anf.params]
    env = dict(zip(anf.params, lifted_params, strict=True))
    result = Var("result", lift(result_type))
    grads = Tuple([RefRead(TupleGetItem(q, 1)) for q in lifted_params])
    tail: Expr = Tuple([_value(result, result_type), grads])
    tail = _seq(Call(RefRead(bp), []), tail)
    tail = _seed(result, result_type, tail)
    body = Let(result, lifter.expr(anf.body, env, bp), tail)
    for p, q, t in reversed(list(zip(params, lifted_params, types, strict=True))):
        body = Let(q, _pair(p, t), body)
    body = Let(bp, RefCreate(Function([], Tuple([]), UNIT)), body)
    out = Function(params, body, None, anf.type_params, anf.attrs, anf.span)
    infer_expr(out, lifter.mod if mod is not None else None)
    return out


def _seed(lifted: Expr, t: Type, rest: Expr) -> Expr:
    if isinstance(t, TensorType):
        if not differentiable(t):
            return rest
        return _seq(RefWrite(TupleGetItem(lifted, 1), ones(t)), rest)
    for i, f in reversed(list(enumerate(t.fields))):
        rest = _seed(TupleGetItem(lifted, i), f, rest)
    return rest
