"""Type inference over a whole module (``ir.infer_type``) or one expression
(``ir.infer_expr``).

The algorithm (after Relay's): every expression gets a type, a fresh ``IncompleteType``
hole where nothing is annotated, and the walk emits constraints between them. Equalities
(a let's variable and its value, a function's parameters and a call's arguments, the
branches of an ``if``, a match's data and its patterns...) are solved at once by
unification (``type_solver``: union-find over holes). An operator call adds its operator's
type relation, solved as soon as its input types are known, else woken when the hole it
waits on is bound, to a fixed point; one still waiting at the end is an error.

- Globals: each gets a ``FuncType`` from its annotations (holes where missing) before any
  body is inferred, so calls between them, recursive or mutually recursive, work. Bodies
  are inferred callees first (strongly connected components of the call graph), so a
  polymorphic global's type is known when another global instantiates it.
- Polymorphism: a callee (global, local variable, function, constructor, operator) whose
  type has type parameters is instantiated with fresh holes at each call, and so is such a
  value passed as an argument; the returned module's call records the instantiation as
  its ``type_args``.
  Unannotated globals are not generalised (as in Relay): annotate polymorphic functions.
- Shapes unify dimension by dimension (ints, symbolic dims by name, ``Any`` against
  anything), so a function over ``Tensor[(n, 4)]`` keeps ``n``; a symbolic dim is one
  unknown size, the same at every call (not a per-call parameter).
- ADTs: a constructor's type is ``fn[type vars](fields) -> T[type vars]`` (its type's
  definition must be in the module); one without fields used as a value (``Nil``, as the
  interpreter reads it) is the value, of type ``T[fresh]``. Patterns are checked against
  the matched value's type; whether a match is exhaustive is not checked.
- An operator node's own type is ``fn[t0..tn](t0..tn-1) -> tn where op(t0..tn)``
  (none for a variadic one); used as a value it is instantiated, its relation added.
- Errors are ``IRTypeError`` s naming the operator or expression and the types, located at
  the offending node's span (else naming the global: ``(in @main)``).

The result: every expression node reachable from the module's functions gets its checked
type (``ir.set_checked_type``); each global ``Function`` its ``FuncType``. The returned
module (a new one; the input keeps its functions) holds the functions with what inference
found filled in: parameter and let/pattern variable annotations, return types, and the
``type_args`` of polymorphic calls (only where the type is fully known: no hole left). Its
new nodes carry checked types too; unchanged subtrees are shared with the input. A type
that is only partly determined keeps its holes (``Nil()`` alone is ``List[?t5]``); one that
is not determined at all (an unused unannotated parameter) is an error.
"""

from __future__ import annotations

from ..errors import IRTypeError
from ..expr import (
    Call,
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
    set_checked_type,
)
from ..module import Module
from ..types import (
    FuncType,
    IncompleteType,
    RefType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeRelation,
    TypeVar,
    substitute,
)
from ..vars import free_vars
from ..visitor import ExprMutator, ExprVisitor
from .type_solver import (
    Mismatch,
    ProjectionConstraint,
    RelationConstraint,
    TypeSolver,
    locate,
    project,
)

BOOL_SCALAR = TensorType((), "bool")


def infer_type(module_or_expr: Module | Expr) -> Module:
    """Type-check a module (or ``Module.from_expr(expr)``): sets the checked type of every
    expression in it, and returns a new module whose functions have their inferred
    annotations filled in (see the module docstring). Raises ``IRTypeError``."""
    if isinstance(module_or_expr, Expr):
        module_or_expr = Module.from_expr(module_or_expr)
    if not isinstance(module_or_expr, Module):
        raise TypeError(f"infer_type takes a Module or an expression, got {module_or_expr!r}")
    inf = _Inferencer(module_or_expr)
    inf.run()
    return inf.filled_module()


def infer_expr(expr: Expr, mod: Module | None = None) -> Type:
    """The type of ``expr`` (its free variables as parameters, typed by their annotations
    or by their uses), with ``mod``'s globals and types in scope; sets the checked types of
    ``expr``'s nodes (and of ``mod``'s). Raises ``IRTypeError``."""
    if not isinstance(expr, Expr):
        raise TypeError(f"infer_expr takes an expression, got {expr!r}")
    base = mod.copy() if mod is not None else Module()
    name, i = "main", 0
    while name in base:
        i += 1
        name = f"main{i}"
    base.add(name, Function(free_vars(expr), expr))
    _Inferencer(base).run()
    return expr.checked_type


# ----------------------------------------------------------------------------- helpers


def _callee_name(e: Expr, fn_names: dict[int, str]) -> str:
    if isinstance(e, GlobalVar):
        return f"@{e.name}"
    if isinstance(e, Var):
        return f"%{e.name_hint}"
    if isinstance(e, Constructor):
        return f"constructor {e.name}"
    if isinstance(e, Op):
        return e.name
    if isinstance(e, Function):
        return fn_names.get(id(e), "the function")
    return "the called expression"


def _describe(e: Expr) -> str:
    if isinstance(e, Var):
        return f"%{e.name_hint}"
    if isinstance(e, Call):
        return f"the call of {_callee_name(e.op, {})}"
    if isinstance(e, Function):
        return "a function"
    return f"an expression of kind {type(e).__name__}"


def _pattern_text(p: Pattern) -> str:
    if isinstance(p, PatternWildcard):
        return "_"
    if isinstance(p, PatternVar):
        return f"%{p.var.name_hint}"
    if isinstance(p, PatternConstructor):
        if not p.patterns:
            return p.constructor.name
        return f"{p.constructor.name}({', '.join(_pattern_text(q) for q in p.patterns)})"
    return f"({', '.join(_pattern_text(q) for q in p.patterns)})"


def _has_hole(t: Type) -> bool:
    return TypeSolver.first_hole(t) is not None


class _GlobalRefs(ExprVisitor):
    """The names of the globals an expression refers to."""

    def __init__(self) -> None:
        super().__init__()
        self.names: dict[str, None] = {}

    def visit_global_var(self, e: GlobalVar) -> None:
        self.names[e.name] = None


def _callees_first(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` (name -> names it refers to), each
    after every component it refers to (Tarjan's algorithm, with an explicit stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []

    def enter(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)

    for root in graph:
        if root in index:
            continue
        enter(root)
        work = [(root, iter(graph[root]))]
        while work:
            v, edges = work[-1]
            for w in edges:
                if w not in graph:
                    continue
                if w not in index:
                    enter(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


# -------------------------------------------------------------------------- inference


class _Inferencer(ExprVisitor):
    """Walks every global once, giving each node a type and solving the constraints."""

    def __init__(self, mod: Module):
        super().__init__()
        self.mod = mod
        self.solver = TypeSolver()
        # id(node) -> (node, its type, the global it is in)
        self.types: dict[int, tuple[Expr, Type, str | None]] = {}
        self.global_types: dict[str, FuncType] = {}
        self.signatures: dict[int, FuncType] = {}  # id(global Function) -> its FuncType
        self.type_args: dict[int, tuple[Type, ...]] = {}  # id(call) -> instantiation
        self.fn_names: dict[int, str] = {}  # id(Function) -> how messages name it
        self.op_types: dict[str, FuncType] = {}
        self.where: str | None = None

    # ------------------------------------------------------------------- driver

    def run(self) -> None:
        functions = {gv.name: fn for gv, fn in self.mod.functions.items()}
        for name, fn in functions.items():
            self.where = f"@{name}"
            params = []
            for p in fn.params:
                t = p.type_annotation if p.type_annotation is not None else self.solver.fresh()
                self.types[id(p)] = (p, t, self.where)
                params.append(t)
            ret = fn.ret_type if fn.ret_type is not None else self.solver.fresh()
            sig = FuncType(tuple(params), ret, fn.type_params)
            self.global_types[name] = sig
            self.signatures[id(fn)] = sig
            self.fn_names[id(fn)] = f"@{name}"
        graph = {}
        for name, fn in functions.items():
            refs = _GlobalRefs()
            refs.visit(fn)
            graph[name] = list(refs.names)
        for component in _callees_first(graph):
            for name in sorted(component, key=list(functions).index):
                self.where = f"@{name}"
                self.visit(functions[name])
            self.solver.drain()
        self.where = None
        self.finish()

    def finish(self) -> None:
        solver = self.solver
        solver.drain()
        unsolved = solver.unsolved()
        if unsolved:
            raise unsolved[0].unsolved_error(solver)
        for node, t, where in self.types.values():
            r = solver.resolve(t)
            if type(r) is IncompleteType:
                what = _describe(node)
                hint = "annotate it" if isinstance(node, Var) else "annotate the variables it uses"
                raise locate(IRTypeError(f"cannot infer the type of {what}: {hint}"),
                             node.span, where)
            set_checked_type(node, r)

    def filled_module(self) -> Module:
        filler = _Filler({k: self.solver.resolve(TupleType(v)).fields
                          for k, v in self.type_args.items()})
        functions = {}
        for gv, fn in self.mod.functions.items():
            functions[gv] = filler.visit(fn)
        return Module(functions, self.mod.type_definitions)

    # ------------------------------------------------------------------- helpers

    def ty(self, e: Expr) -> Type:
        """The type of ``e`` as a value: its recorded type, except that a constructor
        without fields used as a value (``Nil``, as the interpreter reads it) is that
        value, of a fresh instance of its type (``List[?]``)."""
        t = self.types[id(e)][1]
        if type(e) is Constructor and not e.inputs:
            return self.instantiate(t, e)[0].ret_type
        return t

    def raw(self, e: Expr) -> Type:
        """The recorded type of ``e`` (a constructor's is its function type)."""
        return self.types[id(e)][1]

    def record(self, e: Expr, t: Type) -> None:
        self.types[id(e)] = (e, t, self.where)

    def fail(self, message: str, *nodes: Expr | None) -> IRTypeError:
        span = next((n.span for n in nodes if n is not None and n.span is not None), None)
        return locate(IRTypeError(message), span, self.where)

    def unify(self, a: Type, b: Type, message, *nodes: Expr | None) -> Type:
        """Unify, or raise ``fail(message(mismatch))`` at the first of ``nodes`` with a
        span (``message`` is called only on failure)."""
        try:
            return self.solver.unify(a, b)
        except Mismatch as m:
            raise self.fail(message() + m.explain(), *nodes) from None

    def show(self, t: Type) -> Type:
        return self.solver.resolve(t)

    def instantiate(self, ft: FuncType, node: Expr) -> tuple[FuncType, tuple[Type, ...]]:
        """``ft`` with fresh holes for its type parameters, its type constraints added;
        the holes."""
        ft = self.solver.resolve(ft)
        holes = tuple(self.solver.fresh() for _ in ft.type_params)
        mapping = dict(zip(ft.type_params, holes, strict=True))
        inst = FuncType(tuple(substitute(a, mapping) for a in ft.arg_types),
                        substitute(ft.ret_type, mapping))
        for c in ft.type_constraints:
            self.solver.relation(substitute(c, mapping), node.span, self.where)
        return inst, holes

    def operand(self, e: Expr) -> Type:
        """The type of ``e`` used as a value: a polymorphic function is instantiated."""
        if id(e) not in self.types:  # only a variadic operator has no type
            raise self.fail(f"the variadic operator {_callee_name(e, {})} can only be called, "
                            "not used as a value", e)
        t = self.solver.find(self.ty(e))
        if type(t) is FuncType and t.type_params:
            return self.instantiate(t, e)[0]
        return t

    def op_type(self, op: Op) -> FuncType | None:
        """``fn[t0..tn](t0..tn-1) -> tn where op(t0..tn)`` (None for a variadic op)."""
        t = self.op_types.get(op.name)
        n = op.opdef.num_inputs
        if t is None and n >= 0:
            params = tuple(TypeVar(f"t{i}") for i in range(n + 1))
            rel = TypeRelation(op.name, params, n, op.opdef.make_attrs(None))
            t = self.op_types[op.name] = FuncType(params[:n], params[n], params, (rel,))
        return t

    def constructor_type(self, c: Constructor) -> FuncType:
        data = self.mod.type_definitions.get(c.belong_to)
        if data is None:
            raise self.fail(f"constructor {c.name}: its type {c.belong_to.name} is not "
                            "defined in the module", c)
        return FuncType(c.inputs, TypeCall(c.belong_to, data.type_vars), data.type_vars)

    # ------------------------------------------------------------------- atoms

    def visit_var(self, e: Var) -> None:
        if id(e) not in self.types:
            ann = e.type_annotation
            self.record(e, ann if ann is not None else self.solver.fresh())

    def visit_global_var(self, e: GlobalVar) -> None:
        t = self.global_types.get(e.name)
        if t is None:
            raise self.fail(f"@{e.name} is not defined in the module", e)
        self.record(e, t)

    def visit_constant(self, e: Constant) -> None:
        self.record(e, TensorType(e.data.shape, str(e.data.dtype)))

    def visit_op(self, e: Op) -> None:
        t = self.op_type(e)
        if t is not None:
            self.record(e, t)

    def visit_constructor(self, e: Constructor) -> None:
        self.record(e, self.constructor_type(e))

    # ------------------------------------------------------------------- dataflow

    def visit_call(self, e: Call) -> None:
        super().visit_call(e)
        callee = e.op
        args = [self.operand(a) for a in e.args]
        if type(callee) is Op:
            out = self.solver.fresh()
            self.record(e, out)
            self.solver.add(RelationConstraint(callee.opdef, args, out, e.attrs, e.span,
                                               self.where))
            return
        name = _callee_name(callee, self.fn_names)
        t = self.solver.find(self.raw(callee))
        if type(t) is IncompleteType:
            ft = FuncType(tuple(self.solver.fresh() for _ in args), self.solver.fresh())
            self.solver.unify(t, ft)
        elif type(t) is FuncType:
            ft = t
            if t.type_params:
                ft, holes = self.instantiate(t, e)
                self.type_args[id(e)] = holes
        else:
            raise self.fail(f"{name} is called but is not a function: it has type "
                            f"{self.show(t)}", e)
        if len(ft.arg_types) != len(args):
            n = len(ft.arg_types)
            raise self.fail(f"{name} takes {n} argument{'s' * (n != 1)}, got {len(args)}", e)
        for i, (p, a) in enumerate(zip(ft.arg_types, args, strict=True)):
            self.unify(p, a, lambda p=p, a=a, i=i: f"{name} expects {self.show(p)} for "
                       f"argument {i + 1}, got {self.show(a)}", e.args[i], e)
        self.record(e, ft.ret_type)

    def visit_tuple(self, e: Tuple) -> None:
        super().visit_tuple(e)
        self.record(e, TupleType(tuple(self.ty(f) for f in e.fields)))

    def visit_tuple_getitem(self, e: TupleGetItem) -> None:
        super().visit_tuple_getitem(e)
        t = self.solver.find(self.ty(e.tuple_value))
        if type(t) is not IncompleteType:
            self.record(e, project(t, e.index, lambda message: self.fail(message, e)))
            return
        out = self.solver.fresh()
        self.record(e, out)
        self.solver.add(ProjectionConstraint(t, e.index, out, e.span, self.where))

    # ------------------------------------------------------------------- binding

    def visit_let_binding(self, e: Let) -> None:
        if type(e.value) is Function:
            self.fn_names.setdefault(id(e.value), f"%{e.var.name_hint}")
        super().visit_let_binding(e)
        var_t, value_t = self.ty(e.var), self.ty(e.value)
        self.unify(var_t, value_t, lambda: f"let %{e.var.name_hint} has type "
                   f"{self.show(var_t)} but its value has type {self.show(value_t)}",
                   e.value, e)

    def leave_let(self, e: Let) -> None:
        self.record(e, self.ty(e.body))

    def visit_function(self, e: Function) -> None:
        sig = self.signatures.get(id(e))
        for p in e.params:
            self.visit(p)
        if sig is not None:
            ret = sig.ret_type
        else:
            ret = e.ret_type if e.ret_type is not None else self.solver.fresh()
            sig = FuncType(tuple(self.ty(p) for p in e.params), ret, e.type_params)
        self.visit(e.body)
        body_t = self.ty(e.body)
        name = self.fn_names.get(id(e), "the function")
        if e.ret_type is not None:
            message = lambda: (f"{name} is annotated to return {self.show(ret)}, but its "  # noqa: E731
                               f"body has type {self.show(body_t)}")
        else:
            message = lambda: (f"the body of {name} has type {self.show(body_t)}, but its "  # noqa: E731
                               f"uses need {self.show(ret)}")
        self.unify(ret, body_t, message, e.body, e)
        self.record(e, sig)

    # ------------------------------------------------------------------- control

    def visit_if(self, e: If) -> None:
        super().visit_if(e)
        cond_t = self.ty(e.cond)
        self.unify(BOOL_SCALAR, cond_t, lambda: "the condition of an if must be a bool "
                   f"scalar, got {self.show(cond_t)}", e.cond, e)
        tt, ft = self.ty(e.true_branch), self.ty(e.false_branch)
        self.record(e, self.unify(tt, ft, lambda: "the branches of an if have types "
                                  f"{self.show(tt)} and {self.show(ft)}", e))

    def visit_match(self, e: Match) -> None:
        self.visit(e.data)
        data_t = self.ty(e.data)
        out: Type | None = None
        for i, clause in enumerate(e.clauses):
            self.check_pattern(clause.lhs, data_t, e)
            self.visit(clause.rhs)
            rhs_t = self.ty(clause.rhs)
            if out is None:
                out = rhs_t
            else:
                first = out
                out = self.unify(out, rhs_t, lambda first=first, rhs_t=rhs_t, i=i: (
                    f"the clauses of a match have types {self.show(first)} and "
                    f"{self.show(rhs_t)} (clause {i + 1})"), clause.rhs, e)
        self.record(e, out if out is not None else self.solver.fresh())

    def check_pattern(self, pattern: Pattern, data_t: Type, match: Match) -> None:
        """Type the variables of ``pattern`` matching a value of type ``data_t``."""
        stack = [(pattern, data_t)]
        while stack:
            p, t = stack.pop()
            if isinstance(p, PatternVar):
                self.visit(p.var)
                var_t = self.ty(p.var)
                self.unify(var_t, t, lambda p=p, var_t=var_t, t=t: (
                    f"match: the pattern variable %{p.var.name_hint} has type "
                    f"{self.show(var_t)} but matches a value of type {self.show(t)}"),
                    p.var, match)
            elif isinstance(p, PatternConstructor):
                self.visit(p.constructor)
                ft, _ = self.instantiate(self.raw(p.constructor), match)
                self.unify(ft.ret_type, t, lambda p=p, ft=ft, t=t: (
                    f"match: the pattern {_pattern_text(p)} matches values of type "
                    f"{self.show(ft.ret_type)}, not {self.show(t)}"), match)
                stack.extend(reversed(list(zip(p.patterns, ft.arg_types, strict=True))))
            elif isinstance(p, PatternTuple):
                fields = tuple(self.solver.fresh() for _ in p.patterns)
                self.unify(TupleType(fields), t, lambda p=p, t=t: (
                    f"match: the pattern {_pattern_text(p)} matches tuples of "
                    f"{len(p.patterns)} fields, not {self.show(t)}"), match)
                stack.extend(reversed(list(zip(p.patterns, fields, strict=True))))

    # ------------------------------------------------------------------- references

    def visit_ref_create(self, e: RefCreate) -> None:
        super().visit_ref_create(e)
        self.record(e, RefType(self.ty(e.value)))

    def visit_ref_read(self, e: RefRead) -> None:
        super().visit_ref_read(e)
        value = self.solver.fresh()
        ref_t = self.ty(e.ref)
        self.unify(RefType(value), ref_t, lambda: "a reference read needs a reference, got "
                   f"a value of type {self.show(ref_t)}", e.ref, e)
        self.record(e, value)

    def visit_ref_write(self, e: RefWrite) -> None:
        super().visit_ref_write(e)
        ref_t, value_t = self.ty(e.ref), self.ty(e.value)
        self.unify(ref_t, RefType(value_t), lambda: f"a reference of type {self.show(ref_t)}"
                   f" is written a value of type {self.show(value_t)}", e)
        self.record(e, TupleType(()))


# ---------------------------------------------------------------------- the result


class _Filler(ExprMutator):
    """Fills in what inference found: variable annotations, return types, the type
    arguments of polymorphic calls; rebuilt nodes get their originals' checked types."""

    def __init__(self, type_args: dict[int, tuple[Type, ...]]):
        super().__init__()
        self.type_args = type_args

    @staticmethod
    def _typed(old: Expr, new: Expr) -> Expr:
        if new is not old and new.checked_type_or_none is None:
            t = old.checked_type_or_none
            if t is not None:
                set_checked_type(new, t)
        return new

    def visit_var(self, e: Var) -> Expr:
        t = e.checked_type_or_none
        if e.type_annotation is not None or t is None or _has_hole(t):
            return e
        return self._typed(e, Var(e.name_hint, t, e.span))

    def visit_call(self, e: Call) -> Expr:
        op = self.visit(e.op)
        args = tuple(self.visit(a) for a in e.args)
        type_args = e.type_args
        inst = self.type_args.get(id(e))
        if not type_args and inst and not any(_has_hole(t) for t in inst):
            type_args = inst
        if op is e.op and type_args is e.type_args and all(
                a is b for a, b in zip(args, e.args, strict=True)):
            return e
        return self._typed(e, Call(op, args, e.attrs, type_args, e.span))

    def visit_function(self, e: Function) -> Expr:
        params = tuple(self.visit(p) for p in e.params)
        body = self.visit(e.body)
        ret = e.ret_type
        t = e.checked_type_or_none
        if ret is None and isinstance(t, FuncType) and not _has_hole(t.ret_type):
            ret = t.ret_type
        if ret is e.ret_type and body is e.body and all(
                a is b for a, b in zip(params, e.params, strict=True)):
            return e
        return self._typed(e, Function(params, body, ret, e.type_params, e.attrs, e.span))

    def rebuild_let(self, e: Let, var: Var, value: Expr, body: Expr) -> Expr:
        return self._typed(e, super().rebuild_let(e, var, value, body))


def _wrap(name: str):
    base = getattr(ExprMutator, name)

    def method(self: _Filler, e: Expr) -> Expr:
        return self._typed(e, base(self, e))

    method.__name__ = name
    return method


for _name in ("visit_tuple", "visit_tuple_getitem", "visit_if", "visit_match",
              "visit_ref_create", "visit_ref_read", "visit_ref_write"):
    setattr(_Filler, _name, _wrap(_name))
