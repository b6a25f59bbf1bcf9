"""The program rewrite both whole-language AD modes share: every tensor value becomes a
pair ``(value, derivative part)`` — an adjoint reference in reverse mode, a tangent in
forward mode — and the rest of the language carries pairs unchanged.

``Lifter`` walks a typed A-normal-form program: ``let``, closures, calls, ``if`` (its
condition's value), ``match`` over ADTs (pattern variables re-typed), tuples and
references map to themselves over lifted values, and a global ``@f`` becomes
``@f<suffix>`` (added to the module once, recursion included), taking the mode's context
variables first (reverse mode's backpropagator reference). Subclasses say how a tensor type
lifts (``lift_tensor``), how a fresh value gets its derivative part (``fresh``), and how an
operator call is rewritten (``op_call``).

Types lift through tuples, functions, references and ADT type arguments; a constructor
holding a tensor directly (not through a type parameter) cannot be lifted and is reported.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

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
from .rules import GradientError

Context = tuple[Var, ...]


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


def plain_value(lifted: Expr, t: Type, what: str) -> Expr:
    """The plain value inside a lifted value of type ``t`` (tensors, tuples of them)."""
    if isinstance(t, TensorType):
        return TupleGetItem(lifted, 0)
    if isinstance(t, TupleType):
        return Tuple([plain_value(TupleGetItem(lifted, i), f, what)
                      for i, f in enumerate(t.fields)])
    raise GradientError(f"{what}: a {t} cannot be an operator's input or the result")


def derivative_part(lifted: Expr, t: Type, read: bool) -> Expr:
    """The derivative parts of a lifted value of type ``t`` (dereferenced when ``read``)."""
    if isinstance(t, TensorType):
        part = TupleGetItem(lifted, 1)
        return RefRead(part) if read else part
    return Tuple([derivative_part(TupleGetItem(lifted, i), f, read)
                  for i, f in enumerate(t.fields)])


def typed_anf(func: Function, mod: Module | None, what: str) -> tuple[Function, Module | None]:
    """``func`` and ``mod`` in A-normal form, type-checked; ``func``'s parameters must be
    tensors and its result tensors."""
    anf_mod = to_a_normal_form(mod) if mod is not None else None
    anf = to_a_normal_form(func)
    infer_expr(anf, anf_mod)
    for p in anf.params:
        if not isinstance(p.checked_type, TensorType):
            raise GradientError(f"{what}: parameter %{p.name_hint} must be a tensor, got "
                                f"{p.checked_type}")
    if not isinstance(anf.body.checked_type, TensorType | TupleType):
        raise GradientError(f"{what}: the function must return tensors, got "
                            f"{anf.body.checked_type}")
    return anf, anf_mod


class Lifter(ABC):
    """Rewrites a typed A-normal-form program into its lifted form (module docstring)."""

    #: what the mode is called in errors, and the suffix of lifted globals
    what = "lifting"
    suffix = "_lifted"

    def __init__(self, mod: Module | None, anf_mod: Module | None):
        self.mod = mod if mod is not None else Module()
        self.anf_mod = anf_mod
        self.globals: dict[str, GlobalVar] = {}

    # --------------------------------------------------------------------------- hooks

    @abstractmethod
    def lift_tensor(self, t: TensorType) -> Type:
        """The lifted type of a tensor of type ``t``."""

    @abstractmethod
    def fresh(self, value: Expr, t: TensorType) -> Expr:
        """A lifted value for ``value``, with no derivative yet."""

    @abstractmethod
    def op_call(self, call: Call, var: Var, args: list[Expr], ctx: Context,
                body: Expr) -> Expr:
        """``let var = <call over the lifted args>; body``."""

    @staticmethod
    def call_vars(call: Call) -> tuple[list[Var], Var]:
        """Fresh variables for an operator call's inputs' and output's plain values."""
        short = call.op.name.rsplit(".", 1)[-1]
        return [Var(f"{short}_in{i}") for i in range(len(call.args))], Var(f"{short}_out")

    def bind_plain(self, call: Call, args: list[Expr], inputs: list[Var], plain: Var,
                   rest: Expr) -> Expr:
        """``rest`` after binding ``inputs`` to the plain values of the lifted ``args`` and
        ``plain`` to the call over them."""
        rest = Let(plain, Call(call.op, inputs, call.attrs, span=call.span), rest)
        for v, arg, a in reversed(list(zip(inputs, args, call.args, strict=True))):
            rest = Let(v, plain_value(arg, a.checked_type, self.what), rest)
        return rest

    def context_params(self) -> Context:
        """Fresh context variables a lifted global takes first."""
        return ()

    # --------------------------------------------------------------------------- types

    def lift(self, t: Type) -> Type:
        if isinstance(t, TensorType):
            return self.lift_tensor(t)
        if isinstance(t, TupleType):
            return TupleType(tuple(self.lift(f) for f in t.fields))
        if isinstance(t, FuncType):
            return FuncType(tuple(self.lift(a) for a in t.arg_types), self.lift(t.ret_type),
                            t.type_params, t.type_constraints)
        if isinstance(t, TypeCall):
            return TypeCall(t.func, tuple(self.lift(a) for a in t.args))
        if isinstance(t, RefType):
            return RefType(self.lift(t.value))
        return t

    def pair(self, value: Expr, t: Type) -> Expr:
        """A fresh lifted value for the plain ``value`` (a tensor or a tuple of them)."""
        if isinstance(t, TensorType):
            return self.fresh(value, t)
        if isinstance(t, TupleType):
            return Tuple([self.pair(TupleGetItem(value, i), f) for i, f in enumerate(t.fields)])
        raise GradientError(f"{self.what}: an operator returning {t} is not supported")

    # ------------------------------------------------------------------------- globals

    def lifted_global(self, gv: GlobalVar) -> GlobalVar:
        out = self.globals.get(gv.name)
        if out is not None:
            return out
        if self.anf_mod is None or gv.name not in self.anf_mod:
            raise GradientError(f"{self.what}: @{gv.name} is called but no module holding it "
                                "was given")
        out = GlobalVar(f"{gv.name}{self.suffix}")
        if out.name in self.mod:
            raise GradientError(f"{self.what}: the module already has @{out.name}")
        self.globals[gv.name] = out
        ctx = self.context_params()
        self.mod.add(out, self.function(self.anf_mod[gv.name], ctx, extra=ctx))
        return out

    # ----------------------------------------------------------------------- expressions

    def function(self, f: Function, ctx: Context, extra: Context = (),
                 env: dict | None = None) -> Function:
        env = dict(env or {})
        params = []
        for p in f.params:
            q = Var(p.name_hint, self.lift(p.checked_type))
            env[p] = q
            params.append(q)
        return Function([*extra, *params], self.expr(f.body, env, ctx),
                        self.lift(f.body.checked_type), f.type_params, None, f.span)

    def atom(self, e: Expr, env: dict, ctx: Context) -> Expr:
        if isinstance(e, Var):
            return env[e]
        if isinstance(e, Constant):
            return self.pair(e, e.checked_type)
        if isinstance(e, GlobalVar):
            t = e.checked_type
            args = [Var(f"a{i}", self.lift(a)) for i, a in enumerate(t.arg_types)]
            return Function(args, Call(self.lifted_global(e), [*ctx, *args]),
                            self.lift(t.ret_type), t.type_params)
        if isinstance(e, Constructor):
            self.check_constructor(e)
            return e
        raise GradientError(f"{self.what}: {type(e).__name__} {e!r} used as a value is not "
                            "supported")

    def check_constructor(self, c: Constructor) -> None:
        for t in c.inputs:
            if _holds_tensor(t):
                raise GradientError(f"{self.what}: constructor {c.name} holds a {t} directly; "
                                    f"make the tensor a type parameter of its type so it can "
                                    f"carry its derivative")

    def expr(self, e: Expr, env: dict, ctx: Context) -> Expr:
        bindings = []
        while isinstance(e, Let):
            v = Var(e.var.name_hint, self.lift(e.var.checked_type))
            value_env = dict(env)
            if isinstance(e.value, Function):
                value_env[e.var] = v  # a let-bound function may call itself
            bindings.append((e.value, v, value_env))
            env = dict(env)
            env[e.var] = v
            e = e.body
        body = self.value(e, env, ctx)
        for value, v, value_env in reversed(bindings):
            if isinstance(value, Call) and isinstance(value.op, Op):
                args = [self.atom(a, value_env, ctx) for a in value.args]
                body = self.op_call(value, v, args, ctx, body)
            else:
                body = Let(v, self.value(value, value_env, ctx), body)
        return body

    def value(self, e: Expr, env: dict, ctx: Context) -> Expr:
        if isinstance(e, Var | Constant | GlobalVar | Constructor):
            return self.atom(e, env, ctx)
        if isinstance(e, Let):
            return self.expr(e, env, ctx)
        if isinstance(e, Call):
            args = [self.atom(a, env, ctx) for a in e.args]
            if isinstance(e.op, Op):
                v = Var("y")
                return self.op_call(e, v, args, ctx, v)
            if isinstance(e.op, GlobalVar):
                return Call(self.lifted_global(e.op), [*ctx, *args])
            if isinstance(e.op, Constructor):
                self.check_constructor(e.op)
                return Call(e.op, args)
            return Call(self.atom(e.op, env, ctx), args)
        if isinstance(e, Function):
            return self.function(e, ctx, env=env)
        if isinstance(e, Tuple):
            return Tuple([self.atom(f, env, ctx) for f in e.fields])
        if isinstance(e, TupleGetItem):
            return TupleGetItem(self.atom(e.tuple_value, env, ctx), e.index)
        if isinstance(e, If):
            cond = TupleGetItem(self.atom(e.cond, env, ctx), 0)
            return If(cond, self.expr(e.true_branch, env, ctx),
                      self.expr(e.false_branch, env, ctx))
        if isinstance(e, Match):
            clauses = []
            for c in e.clauses:
                inner = dict(env)
                clauses.append(Clause(self.pattern(c.lhs, inner), self.expr(c.rhs, inner, ctx)))
            return Match(self.atom(e.data, env, ctx), clauses, e.complete)
        if isinstance(e, RefCreate):
            return RefCreate(self.atom(e.value, env, ctx))
        if isinstance(e, RefRead):
            return RefRead(self.atom(e.ref, env, ctx))
        if isinstance(e, RefWrite):
            return RefWrite(self.atom(e.ref, env, ctx), self.atom(e.value, env, ctx))
        raise GradientError(f"{self.what}: unsupported expression {type(e).__name__}")

    def pattern(self, p: Pattern, env: dict) -> Pattern:
        if isinstance(p, PatternVar):
            v = Var(p.var.name_hint, self.lift(p.var.checked_type))
            env[p.var] = v
            return PatternVar(v)
        if isinstance(p, PatternConstructor):
            self.check_constructor(p.constructor)
            return PatternConstructor(p.constructor, [self.pattern(q, env) for q in p.patterns])
        if isinstance(p, PatternTuple):
            return PatternTuple([self.pattern(q, env) for q in p.patterns])
        if isinstance(p, PatternWildcard):
            return p
        raise GradientError(f"{self.what}: unsupported pattern {p!r}")
