"""PartialEvaluate: evaluate what is statically known, leave (residualise) the rest.

Every value the evaluator meets is a ``PValue``: what is known of it statically (a tensor,
a tuple, a closure or global function, an ADT value, a reference cell; or nothing) and, on
demand, its residual expression. The evaluator walks the program once, emitting residual
``let`` bindings in evaluation order:

- operator calls on known tensors are computed (the operators' numpy computes); adding a
  known zero tensor, or multiplying by known ones, is the other operand (``x + 0``,
  ``x * 1``); other calls are emitted;
- tuples, projections, constructors and ``match``/``if`` on known values are resolved;
  on unknown values both branches are evaluated and emitted;
- calls of known closures and globals are unfolded (inlined), recursion included, while
  the recursion is decided by known values (a static loop count, a known list); a
  recursive call under an unknown branch of its own unfolding is residualised as a call of
  a specialised function — the function with its arguments that stay the same through
  the recursion fixed to their known values (memoised, so it terminates), the others
  parameters. ``FUEL`` bounds the unfoldings of one run;
- references: a cell created during evaluation is tracked in a static store, and its
  reads are its known contents; it is only materialised (a residual ``ref``) when it
  escapes into residual code — an unknown branch or function that can reach it, or a
  residual data structure — after which residual calls and branches make its contents
  unknown.

The result is well typed and means the same (checked with the interpreter on random
inputs in tests). Dead bindings are left for ``DeadCodeElimination``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..expr import (
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
from ..interpreter import EvaluationError
from ..module import Module
from ..types import TensorType, Type
from ..vars import free_type_vars, free_vars
from ._util import map_functions
from .anf import to_a_normal_form
from .dead_code import eliminate_dead_code
from .infer_type import infer_type
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["FUEL", "PartialEvaluate", "partial_evaluate"]

#: the most function unfoldings one evaluation makes before residualising calls
FUEL = 20000


# --------------------------------------------------------------------- static knowledge


@dataclass(eq=False)
class STuple:
    fields: list[PValue]


@dataclass(eq=False)
class SClosure:
    function: Function
    env: dict
    self_var: Var | None = None  # a let-bound function's own name (recursion)


@dataclass(eq=False)
class SGlobal:
    gv: GlobalVar


@dataclass(eq=False)
class SADT:
    constructor: Constructor
    fields: list[PValue]


@dataclass(eq=False)
class Cell:
    """A reference created during evaluation; ``residual`` once it has escaped."""

    residual: Var | None = None


Static = np.ndarray | STuple | SClosure | SGlobal | SADT | Constructor | Cell


@dataclass(eq=False)
class PValue:
    static: Static | None = None
    dynamic: Expr | None = None  # an atom (Var, Constant, GlobalVar, Constructor)
    #: how to emit a known tensor that came from an operator without inputs (zeros(...))
    source: Expr | None = None


def dynamic(e: Expr) -> PValue:
    return PValue(None, e)


UNIT = PValue(STuple([]))


def _array_key(a: np.ndarray) -> tuple:
    return (a.dtype.str, a.shape, a.tobytes())


# ---------------------------------------------------------------------------- the walk


class _Block:
    """Residual bindings of one scope, in order."""

    def __init__(self) -> None:
        self.lets: list[tuple[Var, Expr]] = []

    def wrap(self, body: Expr) -> Expr:
        for var, value in reversed(self.lets):
            body = Let(var, value, body)
        return body


@dataclass
class _Unfolding:
    function: Function
    depth: int  # unknown branches entered when the unfolding began
    args: list[PValue]


@dataclass
class _Spec:
    callee: Expr  # the specialised function's GlobalVar or let-bound Var
    keep: list[int]  # which arguments it still takes
    blocks: tuple = field(default_factory=tuple)  # scopes it is visible in (local ones)


class PartialEvaluator:
    def __init__(self, module: Module):
        self.module = module
        self.out = Module(type_definitions=module.type_definitions)
        self.blocks: list[_Block] = []
        self.store: dict[int, tuple[Cell, PValue | None]] = {}
        self.unfolding: list[_Unfolding] = []
        self.unknown_depth = 0
        self.fuel = FUEL
        self.specs: dict[tuple, _Spec] = {}
        self.names = itertools.count()

    # ------------------------------------------------------------------ emission

    def emit(self, value: Expr, hint: str = "v") -> Var:
        v = Var(f"{hint}{next(self.names)}")
        self.blocks[-1].lets.append((v, value))
        return v

    def in_block(self, run) -> Expr:
        """Evaluate ``run() -> PValue`` in a fresh scope; the scope's residual code."""
        self.blocks.append(_Block())
        try:
            result = self.reify(run())
            return self.blocks[-1].wrap(result)
        finally:
            self.blocks.pop()

    def reify(self, pv: PValue) -> Expr:
        """The residual atom of ``pv``, emitting what it needs."""
        if pv.dynamic is not None:
            return pv.dynamic
        s = pv.static
        if isinstance(s, np.ndarray):
            pv.dynamic = self.emit(pv.source, "c") if pv.source is not None else Constant(s)
        elif isinstance(s, STuple):
            pv.dynamic = self.emit(Tuple([self.reify(f) for f in s.fields]), "t")
        elif isinstance(s, SADT):
            pv.dynamic = self.emit(Call(s.constructor, [self.reify(f) for f in s.fields]), "d")
        elif isinstance(s, Constructor):
            pv.dynamic = s
        elif isinstance(s, Cell):
            self.escape_cell(s)
            pv.dynamic = s.residual
        elif isinstance(s, SGlobal | SClosure):
            params = self.function_of(s).params
            pv.dynamic = self.specialise(s, [dynamic(p) for p in params], generalise=True)
        else:
            raise TypeError(f"partial evaluation: cannot residualise {s!r}")
        return pv.dynamic

    # ---------------------------------------------------------------- references

    def escape_cell(self, cell: Cell) -> None:
        if cell.residual is not None:
            return
        _, content = self.store[id(cell)]
        cell.residual = self.emit(RefCreate(self.reify(content)), "ref")

    def escape_reachable(self, values: list[PValue]) -> None:
        """Materialise every cell reachable from ``values`` (they are about to be used by
        residual code)."""
        seen: set[int] = set()
        todo = list(values)
        while todo:
            pv = todo.pop()
            if id(pv) in seen:
                continue
            seen.add(id(pv))
            s = pv.static
            if isinstance(s, STuple | SADT):
                todo.extend(s.fields)
            elif isinstance(s, SClosure):
                todo.extend(s.env.values())
            elif isinstance(s, Cell):
                self.escape_cell(s)
                content = self.store[id(s)][1]
                if content is not None:
                    todo.append(content)

    def forget_escaped(self) -> None:
        """Residual code ran: escaped cells' contents are no longer known."""
        for key, (cell, _) in list(self.store.items()):
            if cell.residual is not None:
                self.store[key] = (cell, None)

    # ---------------------------------------------------------------- expressions

    def eval(self, e: Expr, env: dict) -> PValue:
        while isinstance(e, Let):
            if isinstance(e.value, Function):
                pv = PValue(SClosure(e.value, env, e.var))
                env = {**env, e.var: pv}
                pv.static.env = env
            else:
                env = {**env, e.var: self.eval(e.value, env)}
            e = e.body
        if isinstance(e, Var):
            return env[e]
        if isinstance(e, Constant):
            return PValue(e.data, e)
        if isinstance(e, GlobalVar):
            return PValue(SGlobal(e))
        if isinstance(e, Constructor):
            return PValue(e)
        if isinstance(e, Function):
            return PValue(SClosure(e, env))
        if isinstance(e, Tuple):
            return PValue(STuple([self.eval(f, env) for f in e.fields]))
        if isinstance(e, TupleGetItem):
            t = self.eval(e.tuple_value, env)
            if isinstance(t.static, STuple):
                return t.static.fields[e.index]
            return dynamic(self.emit(TupleGetItem(self.reify(t), e.index), "p"))
        if isinstance(e, Call):
            return self.call(e, env)
        if isinstance(e, If):
            return self.eval_if(e, env)
        if isinstance(e, Match):
            return self.eval_match(e, env)
        if isinstance(e, RefCreate):
            cell = Cell()
            self.store[id(cell)] = (cell, self.eval(e.value, env))
            return PValue(cell)
        if isinstance(e, RefRead):
            return self.ref_read(self.eval(e.ref, env))
        if isinstance(e, RefWrite):
            return self.ref_write(self.eval(e.ref, env), self.eval(e.value, env))
        raise TypeError(f"partial evaluation: unknown expression {type(e).__name__}")

    def ref_read(self, ref: PValue) -> PValue:
        if isinstance(ref.static, Cell):
            content = self.store[id(ref.static)][1]
            if content is not None:
                return content
        return dynamic(self.emit(RefRead(self.reify(ref)), "r"))

    def ref_write(self, ref: PValue, value: PValue) -> PValue:
        if isinstance(ref.static, Cell):
            cell = ref.static
            self.store[id(cell)] = (cell, value)
            if cell.residual is not None:
                self.escape_reachable([value])
                self.emit(RefWrite(cell.residual, self.reify(value)), "_")
            return UNIT
        self.escape_reachable([value])
        self.emit(RefWrite(self.reify(ref), self.reify(value)), "_")
        self.forget_escaped()  # an unknown reference may be any escaped cell
        return UNIT

    # ------------------------------------------------------------------ branches

    def branches(self, env: dict, exprs: list[Expr]) -> None:
        """Before unknown branches run: escape the cells their code can reach."""
        reach = {v for x in exprs for v in free_vars(x)}
        self.escape_reachable([env[v] for v in reach if v in env])

    def residual_branch(self, run) -> Expr:
        store = dict(self.store)
        self.unknown_depth += 1
        try:
            return self.in_block(run)
        finally:
            self.unknown_depth -= 1
            self.store = store

    def eval_if(self, e: If, env: dict) -> PValue:
        cond = self.eval(e.cond, env)
        if isinstance(cond.static, np.ndarray):
            return self.eval(e.true_branch if bool(cond.static) else e.false_branch, env)
        self.branches(env, [e.true_branch, e.false_branch])
        then = self.residual_branch(lambda: self.eval(e.true_branch, env))
        other = self.residual_branch(lambda: self.eval(e.false_branch, env))
        self.forget_escaped()
        return dynamic(self.emit(If(self.reify(cond), then, other), "i"))

    def eval_match(self, e: Match, env: dict) -> PValue:
        data = self.eval(e.data, env)
        if isinstance(data.static, SADT | STuple):
            for clause in e.clauses:
                bound: dict = {}
                verdict = self.static_match(clause.lhs, data, bound)
                if verdict is None:
                    break  # a part is unknown: residualise the whole match
                if verdict:
                    return self.eval(clause.rhs, {**env, **bound})
            else:
                raise EvaluationError("partial evaluation: no clause matches a known value")
        self.branches(env, [c.rhs for c in e.clauses])
        clauses = []
        for clause in e.clauses:
            bound: dict = {}
            lhs = _fresh_pattern(clause.lhs, bound)
            rhs = self.residual_branch(lambda c=clause, b=bound: self.eval(c.rhs, {**env, **b}))
            clauses.append(Clause(lhs, rhs))
        self.forget_escaped()
        return dynamic(self.emit(Match(self.reify(data), clauses, e.complete), "m"))

    def static_match(self, p: Pattern, pv: PValue, bound: dict) -> bool | None:
        """Whether ``pv`` matches ``p`` (binding its variables), None when unknown."""
        if isinstance(p, PatternWildcard):
            return True
        if isinstance(p, PatternVar):
            bound[p.var] = pv
            return True
        s = pv.static
        if isinstance(p, PatternConstructor):
            if not isinstance(s, SADT):
                return None
            if s.constructor.tag != p.constructor.tag:
                return False
            return self.match_all(p.patterns, s.fields, bound)
        if isinstance(p, PatternTuple):
            if not isinstance(s, STuple):
                return None
            return self.match_all(p.patterns, s.fields, bound)
        return None

    def match_all(self, ps, fields, bound: dict) -> bool | None:
        for q, f in zip(ps, fields, strict=True):
            verdict = self.static_match(q, f, bound)
            if verdict is not True:
                return verdict
        return True

    # --------------------------------------------------------------------- calls

    def call(self, e: Call, env: dict) -> PValue:
        if isinstance(e.op, Op):
            return self.op_call(e, [self.eval(a, env) for a in e.args])
        callee = self.eval(e.op, env)
        args = [self.eval(a, env) for a in e.args]
        s = callee.static
        if isinstance(s, Constructor):
            return PValue(SADT(s, args))
        if isinstance(s, SClosure | SGlobal):
            return self.apply(s, args)
        self.escape_reachable(args)
        out = self.emit(Call(self.reify(callee), [self.reify(a) for a in args]), "call")
        self.forget_escaped()
        return dynamic(out)

    def op_call(self, e: Call, args: list[PValue]) -> PValue:
        if all(isinstance(a.static, np.ndarray) for a in args):
            try:
                value = e.op.opdef.compute([a.static for a in args], e.attrs)
            except Exception:
                value = None
            if isinstance(value, np.ndarray | np.generic):
                source = Call(e.op, [], e.attrs) if not args else None
                return PValue(np.asarray(value), None if source else Constant(np.asarray(value)),
                              source)
            if isinstance(value, tuple):
                return PValue(STuple([PValue(np.asarray(v), Constant(np.asarray(v)))
                                      for v in value]))
        same = _identity(e, args)
        if same is not None:
            return same
        self.escape_reachable(args)
        return dynamic(self.emit(Call(e.op, [self.reify(a) for a in args], e.attrs, span=e.span),
                                 "x"))

    def function_of(self, s: SClosure | SGlobal) -> Function:
        return s.function if isinstance(s, SClosure) else self.module[s.gv]

    def apply(self, s: SClosure | SGlobal, args: list[PValue]) -> PValue:
        func = self.function_of(s)
        active = [u for u in self.unfolding if u.function is func]
        if active and active[-1].depth < self.unknown_depth:
            # recursion decided by unknown values: a residual call of a specialisation
            out = self.specialise(s, args, invariant=active[-1].args)
            self.forget_escaped()
            return dynamic(out)
        if self.fuel <= 0:
            out = self.specialise(s, args, generalise=True)
            self.forget_escaped()
            return dynamic(out)
        self.fuel -= 1
        env = dict(s.env) if isinstance(s, SClosure) else {}
        env.update(zip(func.params, args, strict=True))
        self.unfolding.append(_Unfolding(func, self.unknown_depth, args))
        try:
            return self.eval(func.body, env)
        finally:
            self.unfolding.pop()

    def specialise(self, s: SClosure | SGlobal, args: list[PValue],
                   invariant: list[PValue] | None = None, generalise: bool = False) -> Expr:
        """A residual call of ``s`` (or, with ``generalise`` and dynamic ``args``, the
        residual function itself) specialised to the known tensor arguments that equal
        ``invariant``'s (the enclosing unfolding's): those stay the same through the
        recursion, so the specialisations are finitely many."""
        func = self.function_of(s)
        fixed = []
        for i, a in enumerate(args):
            same = (not generalise and invariant is not None
                    and isinstance(a.static, np.ndarray)
                    and isinstance(invariant[i].static, np.ndarray)
                    and _array_key(a.static) == _array_key(invariant[i].static))
            fixed.append(_array_key(a.static) if same else None)
        key = (id(func), id(s.env) if isinstance(s, SClosure) else None, tuple(fixed))
        spec = self.specs.get(key)
        if spec is None or (spec.blocks and spec.blocks[-1] not in self.blocks):
            spec = self.new_spec(s, func, args, fixed, key)
        if generalise and all(a.dynamic is not None and a.static is None for a in args) and \
                len(spec.keep) == len(args) and all(
                    a.dynamic is p for a, p in zip(args, func.params, strict=True)):
            return spec.callee
        kept = [args[i] for i in spec.keep]
        self.escape_reachable(kept)
        return self.emit(Call(spec.callee, [self.reify(a) for a in kept]), "call")

    def new_spec(self, s, func: Function, args: list[PValue], fixed: list, key: tuple) -> _Spec:
        keep = [i for i, f in enumerate(fixed) if f is None]
        params = [Var(func.params[i].name_hint, _monomorphic(func.params[i].checked_type))
                  for i in keep]
        env = dict(s.env) if isinstance(s, SClosure) else {}
        if isinstance(s, SClosure):
            self.escape_reachable(list(s.env.values()))
        for i, p in enumerate(func.params):
            env[p] = args[i] if fixed[i] is not None else dynamic(params[keep.index(i)])
        ret = _monomorphic(func.body.checked_type)
        if isinstance(s, SGlobal):
            callee: Expr = GlobalVar(f"{s.gv.name}_pe{next(self.names)}")
            spec = _Spec(callee, keep)
        else:
            callee = Var(f"{s.self_var.name_hint if s.self_var else 'fn'}_pe{next(self.names)}",
                         None)
            spec = _Spec(callee, keep, (self.blocks[-1],))
        self.specs[key] = spec
        saved = (self.store, self.unfolding, self.unknown_depth)
        self.store = {k: (cell, None if cell.residual is not None else v)
                      for k, (cell, v) in self.store.items()}
        self.unfolding = [_Unfolding(func, 0, [env[p] for p in func.params])]
        self.unknown_depth = 1  # its body runs at unknown times
        try:
            body = self.in_block(lambda: self.eval(func.body, env))
        finally:
            self.store, self.unfolding, self.unknown_depth = saved
        residual = Function(params, body, ret)
        if isinstance(callee, GlobalVar):
            self.out.add(callee, residual)
        else:
            self.blocks[-1].lets.append((callee, residual))
        return spec

    # ------------------------------------------------------------------ entry

    def run_main(self, main: Function) -> Function:
        params = [Var(p.name_hint, p.checked_type) for p in main.params]
        env = {p: dynamic(q) for p, q in zip(main.params, params, strict=True)}
        self.unfolding = [_Unfolding(main, 0, list(env.values()))]
        body = self.in_block(lambda: self.eval(main.body, env))
        return Function(params, body, main.ret_type, main.type_params, main.attrs, main.span)


def _monomorphic(t: Type | None) -> Type | None:
    """``t`` as an annotation of residual code, or None when it mentions type variables
    (residual code may instantiate a polymorphic function: inference types it)."""
    return None if t is None or free_type_vars(t) else t


def _fresh_pattern(p: Pattern, bound: dict) -> Pattern:
    """``p`` with fresh variables (bound to unknown values in ``bound``)."""
    if isinstance(p, PatternVar):
        v = Var(p.var.name_hint, _monomorphic(p.var.checked_type_or_none))
        bound[p.var] = dynamic(v)
        return PatternVar(v)
    if isinstance(p, PatternConstructor):
        return PatternConstructor(p.constructor, [_fresh_pattern(q, bound) for q in p.patterns])
    if isinstance(p, PatternTuple):
        return PatternTuple([_fresh_pattern(q, bound) for q in p.patterns])
    return p


def _is(value: object, scalar: float) -> bool:
    return isinstance(value, np.ndarray) and value.size > 0 and bool(np.all(value == scalar))


def _identity(e: Call, args: list[PValue]) -> PValue | None:
    """``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``: the other operand, when it
    already has the result's type (no broadcasting to do)."""
    name = e.op.name
    if name not in ("add", "subtract", "multiply") or len(args) != 2:
        return None
    unit = 1.0 if name == "multiply" else 0.0
    out_type = e.checked_type_or_none
    for known, other in ((1, 0), (0, 1)):
        if name == "subtract" and known == 0:
            continue
        if _is(args[known].static, unit) and _same_type(e.args[other], out_type):
            return args[other]
    return None


def _same_type(arg: Expr, out_type: Type | None) -> bool:
    t = arg.checked_type_or_none
    return (isinstance(t, TensorType) and isinstance(out_type, TensorType)
            and tuple(t.shape) == tuple(out_type.shape) and t.dtype == out_type.dtype)


def partial_evaluate(module: Module) -> Module:
    """``module``'s ``@main`` partially evaluated (module docstring): a new module with
    ``@main`` and the specialised functions it calls, dead bindings removed."""
    typed = infer_type(to_a_normal_form(module))
    evaluator = PartialEvaluator(typed)
    evaluator.out.add("main", evaluator.run_main(typed["main"]))
    return infer_type(map_functions(evaluator.out, eliminate_dead_code))


def PartialEvaluate() -> Pass:
    """Partial evaluation as a pass (opt level 3; needs an ``@main``)."""

    def run(module: Module, ctx: PassContext) -> Module:
        return partial_evaluate(module) if "main" in module else module

    return module_pass("PartialEvaluate", 3)(run)
