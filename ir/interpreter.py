"""The reference interpreter: the meaning of an IR program, and the oracle that passes are
tested against. ``evaluate(module_or_expr, *args, **kwargs)`` runs ``@main`` (or an
expression) on numpy arrays.

Semantics: call-by-value; a ``Function`` evaluates to a ``Closure`` capturing its
environment (a ``let`` bound function also sees itself: recursion); globals are looked up in
the module (recursion through globals); ``If`` needs a scalar condition; ``Match`` takes the
first clause whose pattern (constructor, tuple, variable, wildcard; nested) matches, and
fails with ``EvaluationError`` when none does; references are ``RefValue`` cells; operators
run their registry ``compute`` (numpy).

Modes: ``mode="numpy"`` (the default, the reference) runs every operator on its numpy
``compute``. ``mode="compiled"`` runs each operator call whose ``OpDef`` has a ``lowering``
through a kernel compiled (once per process per operator, attributes and input shapes and
dtypes) from the op library's default schedule, and the other calls on numpy; see
``ir.jit`` (its counters: ``ir.jit.stats()``). Everything else is the same machine.

Values: tensors are numpy arrays, tuples are Python tuples, an ADT value is an ``ADTValue``
(a tuple ``(constructor name, fields)`` that also knows its ``constructor``), a function is a
``Closure`` (callable from Python), a reference a ``RefValue``.

Depth. The evaluator does not use Python recursion at all: every compound expression is
evaluated by a generator that *yields* the sub-expressions it needs and receives their
values, and one loop (``_Machine.run``) drives a heap-allocated stack of those generators
(a CEK-style machine whose continuations are suspended generators). Tail positions (a
``let`` body, an ``if`` branch, a clause's right side, a called function's body) replace the
current generator instead of stacking a new one, so a long let chain (ANF) or a tail
recursive loop runs in constant stack, and non-tail recursion in the program (a recursive
list ``length`` 100,000 deep) is limited only by memory, in any thread, without touching the
recursion limit or the thread stack size. (The alternative — recursive evaluation in a
thread with a large stack and a raised recursion limit — was rejected: the recursion limit
is process-wide in CPython, not per thread.)

Sharing: within one function invocation, the value of a dataflow node (operator or
constructor call, tuple, projection) reached twice — a DAG in graph normal form — is
computed once (memoised per frame), as a dataflow graph means.

Errors: ``EvaluationError`` names what failed (an operator's numpy error, a non-exhaustive
match, a non-scalar condition...) and the position of the innermost expression with a
source position (``err.span``), and the global function it happened in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from . import jit as _jit
from .expr import (
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
)
from .module import Module
from .span import Span
from .types import TensorType

__all__ = ["ADTValue", "Closure", "EvaluationError", "RefValue", "evaluate", "values_equal"]


class EvaluationError(RuntimeError):
    """A failure while running a program. ``message``: what failed; ``span``: where (the
    innermost enclosing expression with a source position, or None); ``where``: the global
    function being run (``@name``) when known."""

    def __init__(self, message: str, span: Span | None = None, where: str | None = None):
        super().__init__(message)
        self.message, self.span, self.where = message, span, where

    def __str__(self) -> str:
        prefix = f"{self.span}: " if self.span is not None else ""
        suffix = f" (in {self.where})" if self.where else ""
        return f"{prefix}{self.message}{suffix}"


# ----------------------------------------------------------------------------------- values


class ADTValue(tuple):
    """A value of an algebraic data type: the tuple ``(constructor name, fields)`` (so it
    unpacks and compares like one; equality compares arrays by value), with the
    ``constructor`` itself as an attribute."""

    constructor: Constructor

    def __new__(cls, constructor: Constructor, fields: tuple = ()) -> ADTValue:
        self = super().__new__(cls, (constructor.name, tuple(fields)))
        self.constructor = constructor
        return self

    @property
    def name(self) -> str:
        return self[0]

    @property
    def fields(self) -> tuple:
        return self[1]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple):
            return NotImplemented
        return values_equal(self, other)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # holds arrays

    def __repr__(self) -> str:
        parts, value, depth = [], self, 0
        while isinstance(value, ADTValue) and depth < 20:
            if not value.fields:
                parts.append(value.name)
                break
            inner = ", ".join("..." if isinstance(f, ADTValue) else _short(f)
                              for f in value.fields)
            parts.append(f"{value.name}({inner})")
            last = value.fields[-1]
            value, depth = (last, depth + 1) if isinstance(last, ADTValue) else (None, depth)
        if depth >= 20:
            parts.append("...")
        return "ADTValue(" + " -> ".join(parts) + ")"


def _short(v: object) -> str:
    if isinstance(v, np.ndarray):
        return repr(v.tolist()) if v.size <= 4 else f"<{v.dtype} {v.shape}>"
    return repr(v) if not isinstance(v, tuple) or len(v) <= 4 else f"<tuple of {len(v)}>"


def values_equal(a: object, b: object) -> bool:
    """Structural equality of interpreter values (arrays by dtype-agnostic value and
    shape, tuples and ADT values field by field; an ADT value equals the plain tuple
    ``(name, fields)``), without recursion (long lists compare fine)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, tuple) and isinstance(y, tuple):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, np.ndarray | np.generic) or isinstance(y, np.ndarray | np.generic):
            try:
                if not np.array_equal(np.asarray(x), np.asarray(y)):
                    return False
            except (TypeError, ValueError):
                return False
        elif isinstance(x, tuple) or isinstance(y, tuple) or (x is not y and x != y):
            return False
    return True


class RefValue:
    """A mutable reference cell (``ref(value)``)."""

    __slots__ = ("value",)

    def __init__(self, value: object):
        self.value = value

    def __repr__(self) -> str:
        return f"RefValue({_short(self.value)})"


class Closure:
    """A function value: ``function`` with the environment it captured. Calling it from
    Python evaluates its body on the (converted) arguments."""

    __slots__ = ("env", "function", "machine", "name")

    def __init__(self, function: Function, env: dict, machine: _Machine,
                 name: str | None = None):
        self.function, self.env, self.machine, self.name = function, env, machine, name

    def __call__(self, *args: object, **kwargs: object) -> object:
        values = _bind_python_args(self.function, args, kwargs, self.name or "closure")
        return self.machine.run_call(self, values)

    def __repr__(self) -> str:
        params = ", ".join("%" + p.name_hint for p in self.function.params)
        return f"Closure({'@' + self.name + ' ' if self.name else ''}fn ({params}))"


class _ConstructorFn:
    """A constructor with fields used as a value (``map(Cons(...)...)``-style)."""

    __slots__ = ("constructor",)

    def __init__(self, constructor: Constructor):
        self.constructor = constructor


class _OpFn:
    """An operator used as a value."""

    __slots__ = ("call",)

    def __init__(self, op: Op):
        self.call = Call(op, [Var(f"x{i}") for i in range(max(op.opdef.num_inputs, 0))])


# ---------------------------------------------------------------------------- the machine


class _Tail:
    """Yielded by an evaluation generator: continue with ``expr`` in ``frame`` instead of
    me (a tail call; the generator is dropped)."""

    __slots__ = ("expr", "frame")

    def __init__(self, expr: Expr, frame: _Frame):
        self.expr, self.frame = expr, frame


class _Frame:
    """One function invocation: variable values and the memo of its dataflow nodes."""

    __slots__ = ("env", "memo", "where")

    def __init__(self, env: dict, where: str | None):
        self.env, self.memo, self.where = env, {}, where


_ATOMS = (Var, Constant, GlobalVar, Op, Constructor)
_MEMO_KINDS = (Call, Tuple, TupleGetItem)
Gen = Iterator[Any]


class _Machine:
    """Evaluates expressions of one module with an explicit stack of generators."""

    def __init__(self, module: Module | None, jit: _jit.JIT | None = None):
        self.module = module
        self.jit = jit  # None: operators run their numpy compute
        self.globals: dict[str, Closure] = {}

    # ---------------------------------------------------------------- entry points

    def run_call(self, fn: object, args: list) -> object:
        return self.run(self._apply_gen(fn, args, None), None)

    def run_expr(self, expr: Expr, env: dict) -> object:
        frame = _Frame(env, None)
        if isinstance(expr, _ATOMS):
            return self._atom(expr, frame)
        return self.run(self._eval(expr, frame), expr)

    def run(self, gen: Gen, expr: Expr | None) -> object:
        """Drive ``gen`` (and everything it asks for) to its value."""
        stack: list[tuple[Gen, Expr | None, _Frame | None]] = [(gen, expr, None)]
        value: object = None
        while stack:
            top, top_expr, _ = stack[-1]
            try:
                req = top.send(value)
            except StopIteration as stop:
                stack.pop()
                value = stop.value
                continue
            except EvaluationError as err:
                raise self._locate(err, stack) from err.__cause__
            except Exception as exc:  # a bug of the program being run, not of ours
                raise self._locate(EvaluationError(f"{type(exc).__name__}: {exc}"),
                                   stack) from exc
            value = None
            if type(req) is _Tail:
                stack.pop()
                e, frame = req.expr, req.frame
                if isinstance(e, _ATOMS):
                    try:
                        value = self._atom(e, frame)
                    except EvaluationError as err:
                        raise self._locate(err, [*stack, (iter(()), e, frame)]) from None
                else:
                    stack.append((self._eval(e, frame), e, frame))
                continue
            e, frame = req
            if isinstance(e, _ATOMS):
                try:
                    value = self._atom(e, frame)
                except EvaluationError as err:
                    raise self._locate(err, [*stack, (iter(()), e, frame)]) from None
                continue
            hit = frame.memo.get(id(e)) if isinstance(e, _MEMO_KINDS) else None
            if hit is not None:
                value = hit[1]
                continue
            stack.append((self._eval(e, frame), e, frame))
        return value

    @staticmethod
    def _locate(err: EvaluationError, stack: list) -> EvaluationError:
        if err.span is not None and err.where is not None:
            return err
        span, where = err.span, err.where
        for _, e, frame in reversed(stack):
            if span is None and e is not None and e.span is not None:
                span = e.span
            if where is None and frame is not None and frame.where is not None:
                where = frame.where
        return EvaluationError(err.message, span, where)

    # ----------------------------------------------------------------------- atoms

    def _atom(self, e: Expr, frame: _Frame) -> object:
        kind = type(e)
        if kind is Var:
            try:
                return frame.env[e]
            except KeyError:
                raise EvaluationError(f"variable %{e.name_hint} is not bound") from None
        if kind is Constant:
            return e.data
        if kind is GlobalVar:
            return self._global(e)
        if kind is Constructor:
            return ADTValue(e, ()) if not e.inputs else _ConstructorFn(e)
        return _OpFn(e)

    def _global(self, gv: GlobalVar) -> Closure:
        closure = self.globals.get(gv.name)
        if closure is None:
            if self.module is None or gv not in self.module.functions:
                raise EvaluationError(f"global @{gv.name} is not defined in the module")
            closure = Closure(self.module.functions[gv], {}, self, gv.name)
            self.globals[gv.name] = closure
        return closure

    # ------------------------------------------------------------------ compound

    def _eval(self, e: Expr, frame: _Frame) -> Gen:
        """The generator evaluating a compound ``e``: the ``_eval_<kind>`` method named
        after the node's ``visit_method`` (``visit_let`` -> ``_eval_let``)."""
        handler = getattr(self, "_eval" + e.visit_method.removeprefix("visit"), None)
        if handler is None:
            raise EvaluationError(f"cannot evaluate a {type(e).__name__}")
        return handler(e, frame)

    def _eval_let(self, e: Let, frame: _Frame) -> Gen:
        env = frame.env
        while type(e) is Let:
            if type(e.value) is Function:
                closure = Closure(e.value, dict(env), self)
                closure.env[e.var] = closure  # a let-bound function sees itself
                env[e.var] = closure
            else:
                env[e.var] = yield (e.value, frame)
            e = e.body
        yield _Tail(e, frame)

    def _eval_tuple(self, e: Tuple, frame: _Frame) -> Gen:
        fields = []
        for f in e.fields:
            fields.append((yield (f, frame)))
        value = tuple(fields)
        frame.memo[id(e)] = (e, value)
        return value

    def _eval_tuple_getitem(self, e: TupleGetItem, frame: _Frame) -> Gen:
        tup = yield (e.tuple_value, frame)
        if isinstance(tup, ADTValue) or not isinstance(tup, tuple):
            raise EvaluationError(f"projection .{e.index} of a non-tuple value {_short(tup)}")
        if e.index >= len(tup):
            raise EvaluationError(f"projection .{e.index} of a tuple of {len(tup)} fields")
        value = tup[e.index]
        frame.memo[id(e)] = (e, value)
        return value

    def _eval_if(self, e: If, frame: _Frame) -> Gen:
        cond = yield (e.cond, frame)
        if not isinstance(cond, np.ndarray | np.generic) or np.size(cond) != 1:
            raise EvaluationError(f"if: the condition must be a scalar tensor, got "
                                  f"{_short(cond)}")
        yield _Tail(e.true_branch if bool(np.asarray(cond).reshape(())) else e.false_branch,
                    frame)

    def _eval_match(self, e: Match, frame: _Frame) -> Gen:
        data = yield (e.data, frame)
        for clause in e.clauses:
            bindings: dict = {}
            if _match(clause.lhs, data, bindings):
                frame.env.update(bindings)
                yield _Tail(clause.rhs, frame)
                return None
        names = ", ".join(_pattern_str(c.lhs) for c in e.clauses) or "no clauses"
        raise EvaluationError(f"match: no clause matches the value {_describe(data)} "
                              f"(clauses: {names})")

    def _eval_function(self, e: Function, frame: _Frame) -> Gen:
        return Closure(e, dict(frame.env), self)
        yield  # a generator

    def _eval_ref_create(self, e: RefCreate, frame: _Frame) -> Gen:
        return RefValue((yield (e.value, frame)))

    def _eval_ref_read(self, e: RefRead, frame: _Frame) -> Gen:
        ref = yield (e.ref, frame)
        if not isinstance(ref, RefValue):
            raise EvaluationError(f"reading a non-reference value {_short(ref)}")
        return ref.value

    def _eval_ref_write(self, e: RefWrite, frame: _Frame) -> Gen:
        ref = yield (e.ref, frame)
        value = yield (e.value, frame)
        if not isinstance(ref, RefValue):
            raise EvaluationError(f"writing a non-reference value {_short(ref)}")
        ref.value = value
        return ()

    def _eval_call(self, e: Call, frame: _Frame) -> Gen:
        op = e.op
        if type(op) is Op:
            args = []
            for a in e.args:
                args.append((yield (a, frame)))
            value = _run_op(op, args, e, self.jit)
            frame.memo[id(e)] = (e, value)
            return value
        fn = yield (op, frame)
        args = []
        for a in e.args:
            args.append((yield (a, frame)))
        if isinstance(fn, ADTValue | _ConstructorFn):
            value = _construct(fn, args)
            frame.memo[id(e)] = (e, value)
            return value
        return (yield from self._apply_gen(fn, args, frame))

    def _apply_gen(self, fn: object, args: list, frame: _Frame | None) -> Gen:
        if isinstance(fn, _OpFn):
            return _run_op(fn.call.op, args, fn.call, self.jit)
        if isinstance(fn, ADTValue | _ConstructorFn):
            return _construct(fn, args)
        if not isinstance(fn, Closure):
            raise EvaluationError(f"calling a value that is not a function: {_short(fn)}")
        func = fn.function
        if len(args) != len(func.params):
            raise EvaluationError(f"{fn!r} takes {len(func.params)} arguments, got {len(args)}")
        env = dict(fn.env)
        env.update(zip(func.params, args, strict=True))
        where = f"@{fn.name}" if fn.name else (frame.where if frame is not None else None)
        yield _Tail(func.body, _Frame(env, where))
        return None


# ------------------------------------------------------------------------------- helpers


def _run_op(op: Op, args: list, call: Call, jit: _jit.JIT | None = None) -> object:
    for i, a in enumerate(args):
        if not isinstance(a, np.ndarray):
            if isinstance(a, np.generic):
                args[i] = np.asarray(a)
            elif isinstance(a, tuple) and not isinstance(a, ADTValue):
                continue  # a tuple input (concatenate's): its relation checked the fields
            else:
                raise EvaluationError(f"{op.name}: input {i} must be a tensor, got "
                                      f"{_describe(a)}")
    try:
        out = _jit.FALLBACK if jit is None else jit.run(op.opdef, args, call.attrs)
        if out is _jit.FALLBACK:
            out = op.opdef.compute(args, call.attrs)
    except EvaluationError:
        raise
    except Exception as exc:
        shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in args
                           if isinstance(a, np.ndarray))
        raise EvaluationError(f"{op.name} failed on inputs ({shapes}): {exc}") from exc
    if isinstance(out, tuple | list):
        return tuple(np.asarray(o) for o in out)
    return np.asarray(out)


def _construct(fn: ADTValue | _ConstructorFn, args: list) -> ADTValue:
    con = fn.constructor
    if len(args) != len(con.inputs):
        raise EvaluationError(f"constructor {con.name} takes {len(con.inputs)} fields, got "
                              f"{len(args)}")
    return ADTValue(con, tuple(args))


def _match(pattern: Pattern, value: object, bindings: dict) -> bool:
    stack = [(pattern, value)]
    while stack:
        p, v = stack.pop()
        if isinstance(p, PatternWildcard):
            continue
        if isinstance(p, PatternVar):
            bindings[p.var] = v
        elif isinstance(p, PatternConstructor):
            if not isinstance(v, ADTValue):
                raise EvaluationError(f"match: constructor pattern {p.constructor.name} "
                                      f"against a non-ADT value {_describe(v)}")
            con = v.constructor
            if con.name != p.constructor.name or con.tag != p.constructor.tag:
                return False
            stack.extend(zip(p.patterns, v.fields, strict=True))
        elif isinstance(p, PatternTuple):
            if not isinstance(v, tuple) or isinstance(v, ADTValue) or len(v) != len(
                    p.patterns):
                raise EvaluationError(f"match: a tuple pattern of {len(p.patterns)} against "
                                      f"{_describe(v)}")
            stack.extend(zip(p.patterns, v, strict=True))
        else:
            raise EvaluationError(f"match: unknown pattern {p!r}")
    return True


def _pattern_str(p: Pattern) -> str:
    if isinstance(p, PatternWildcard):
        return "_"
    if isinstance(p, PatternVar):
        return "%" + p.var.name_hint
    if isinstance(p, PatternConstructor):
        inner = ", ".join(_pattern_str(q) for q in p.patterns)
        return f"{p.constructor.name}({inner})" if p.patterns else p.constructor.name
    return "(" + ", ".join(_pattern_str(q) for q in p.patterns) + ")"


def _describe(v: object) -> str:
    if isinstance(v, ADTValue):
        return f"{v.name}(...)" if v.fields else v.name
    if isinstance(v, np.ndarray):
        return f"a tensor {v.dtype}{list(v.shape)}"
    if isinstance(v, tuple):
        return f"a tuple of {len(v)}"
    return type(v).__name__


def _as_input(value: object, param: Var, where: str) -> object:
    """A Python argument as an interpreter value: arrays (numpy or nested lists, scalars:
    in the dtype of the parameter's tensor annotation), tuples, values of the interpreter."""
    if isinstance(value, ADTValue | Closure | RefValue):
        return value
    if isinstance(value, tuple):
        return tuple(_as_input(v, Var("_"), where) for v in value)
    ann = param.type_annotation
    dtype = ann.dtype if isinstance(ann, TensorType) else None
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError) as exc:
            raise EvaluationError(f"{where}: argument %{param.name_hint} is not a tensor: "
                                  f"{exc}") from None
        if dtype is None and arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif dtype is None and arr.dtype == np.int64:
            arr = arr.astype(np.int32)
    if isinstance(ann, TensorType):
        if arr.ndim != len(ann.shape) or any(
                isinstance(d, int) and d != s for d, s in zip(ann.shape, arr.shape, strict=True)):
            raise EvaluationError(f"{where}: argument %{param.name_hint} has shape "
                                  f"{tuple(arr.shape)}, but its type is {ann}")
        if str(arr.dtype) != ann.dtype:
            raise EvaluationError(f"{where}: argument %{param.name_hint} has dtype {arr.dtype}, "
                                  f"but its type is {ann}")
    return arr


def _bind_python_args(fn: Function, args: tuple, kwargs: Mapping[str, object],
                      where: str) -> list:
    params = fn.params
    if len(args) > len(params):
        raise EvaluationError(f"{where} takes {len(params)} arguments, got {len(args)}")
    values: list = list(args) + [_MISSING] * (len(params) - len(args))
    names = {p.name_hint: i for i, p in enumerate(params)}
    for key, v in kwargs.items():
        i = names.get(key)
        if i is None:
            raise EvaluationError(f"{where} has no parameter %{key} (parameters: "
                                  f"{', '.join('%' + p.name_hint for p in params)})")
        if values[i] is not _MISSING:
            raise EvaluationError(f"{where}: parameter %{key} given twice")
        values[i] = v
    missing = [params[i].name_hint for i, v in enumerate(values) if v is _MISSING]
    if missing:
        raise EvaluationError(f"{where}: missing argument(s) {', '.join('%' + m for m in missing)}")
    return [_as_input(v, p, where) for v, p in zip(values, params, strict=True)]


_MISSING = object()


def evaluate(program: Module | Expr | Any, *args: object, mode: str = "numpy",
             env: Mapping[Var, object] | None = None, **kwargs: object) -> object:
    """Run ``program`` and return its value.

    - A ``Module``: calls its ``@main`` with ``args`` / ``kwargs`` (by parameter name).
    - A ``Function``: calls it (globals unavailable unless it is reached through a module).
    - Any other expression: evaluates it, its free variables taken from ``env``.
    - An object with a ``.module`` (an ``@ir.script`` function): its module's ``@main``.

    Inputs are numpy arrays (Python numbers and lists are converted, in the dtype of the
    parameter's annotation); a parameter annotated with a tensor type is checked against it.
    ``mode`` is ``"numpy"`` (operators run their numpy reference) or ``"compiled"``
    (operators with a lowering run compiled kernels, JIT-built and cached per process, the
    others their numpy reference, counted in ``ir.jit.stats()``; see ``ir.jit``). Closures
    returned keep the mode they were made in.
    Raises ``EvaluationError`` with the failing expression's position.
    """
    if mode not in ("numpy", "compiled"):
        raise ValueError(f"unknown evaluation mode {mode!r} (supported: 'numpy', "
                         "'compiled')")
    jit = _jit.default_jit() if mode == "compiled" else None
    if not isinstance(program, Module | Expr) and isinstance(
            getattr(program, "module", None), Module):
        program = program.module
    if isinstance(program, Module):
        if "main" not in program:
            raise EvaluationError("the module has no @main function")
        machine = _Machine(program, jit)
        main = machine._global(GlobalVar("main"))
        return main(*args, **kwargs)
    if not isinstance(program, Expr):
        raise TypeError(f"evaluate takes a Module or an expression, got {type(program).__name__}")
    machine = _Machine(None, jit)
    if isinstance(program, Function):
        return Closure(program, dict(env or {}), machine)(*args, **kwargs)
    if args or kwargs:
        raise TypeError("arguments are given only to a Module's @main or a Function")
    return machine.run_expr(program, dict(env or {}))


#: For type hints of Python callers: a function value.
FunctionValue = Callable[..., object]
