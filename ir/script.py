"""``@ir.script``: a Python frontend that turns a restricted Python function into an
``ir.Function`` by *reading* its source (``inspect.getsource`` + ``ast``). The function is
never called, and nothing in its text is evaluated or imported: annotations, constants and
operator attributes are read from the syntax tree (``ast.literal_eval`` for literals).

The accepted language::

    @ir.script
    def cell(x: ir.Tensor[(1, 10), "float32"], w: ir.Tensor[(20, 10), "float32"]):
        y = ir.op.nn.dense(x, w)          # assignment -> let
        if ir.op.sum(y) > 0.0:             # if/else: both branches return, or both
            z = ir.op.nn.relu(y)           # assign the same names
        else:
            z = -y
        return z, y * 2.0                  # tuples; + - * / and unary -; < > <= >= == !=

- Parameters: positional, optionally annotated ``ir.Tensor[(shape), "dtype"]`` (or
  ``Tensor[...]``; a string dimension is symbolic, ``"float32"`` may be written bare).
- Operators: ``ir.op.<name>(...)`` / ``ir.op.nn.<name>(...)`` with attributes as literal
  keyword arguments; ``ir.const(literal[, "dtype"])``; ints become ``int32`` constants,
  floats ``float32``, bools ``bool``.
- ``t[i]`` (an int literal) projects a tuple; ``a, b = t`` unpacks one.
- Calls of other ``@ir.script`` functions (found by name in the function's module globals,
  looked up when the IR is first asked for, so mutual recursion works) and of the function
  itself become calls of globals; ``.module`` holds them all.

Anything else (loops, comprehensions, lambdas, attribute access on other names, keyword-only
or default arguments, ...) raises ``ScriptError`` naming the file, line and construct.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from .builder import const
from .expr import Call, Expr, Function, GlobalVar, If, Let, Op, Tuple, TupleGetItem, Var
from .module import Module
from .op_registry import get_op_def
from .span import Span
from .types import TensorType, Type

__all__ = ["ScriptError", "ScriptFunction", "Tensor", "script"]


class ScriptError(SyntaxError):
    """Python that ``@ir.script`` does not accept; names the file, line and construct."""

    def __init__(self, message: str, filename: str | None = None, lineno: int | None = None):
        where = f"{filename or '<script>'}:{lineno}: " if lineno is not None else ""
        super().__init__(f"{where}{message}")
        self.message, self.filename, self.lineno = message, filename, lineno
        self.text = f"{where}{message}"

    def __str__(self) -> str:
        return self.text


class _TensorAnnotation:
    """``ir.Tensor[(shape), dtype]``: a tensor type in a script's annotations (read from
    the syntax tree by ``@ir.script``; also usable at run time, giving a TensorType)."""

    def __getitem__(self, key: tuple) -> TensorType:
        shape, dtype = key if isinstance(key, tuple) and len(key) == 2 else (key, "float32")
        return TensorType(tuple(shape), str(dtype))

    def __repr__(self) -> str:
        return "ir.Tensor"


#: The annotation helper: ``x: ir.Tensor[(1, 10), "float32"]``.
Tensor = _TensorAnnotation()

_BINOPS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide"}
_CMPOPS = {ast.Lt: "less", ast.Gt: "greater", ast.Eq: "equal", ast.LtE: "less_equal",
           ast.GtE: "greater_equal", ast.NotEq: "not_equal"}


class ScriptFunction:
    """What ``@ir.script`` returns: ``.function`` (the ``ir.Function``), ``.global_var``
    (``@name``) and ``.module`` (this function, every scripted function it calls, and
    ``@main`` = this function when it is not itself named ``main``). Calling it runs the
    interpreter on ``.module``. The IR is built on first use."""

    def __init__(self, py_func: Callable):
        if not inspect.isfunction(py_func):
            raise TypeError(f"@ir.script decorates a function, got {py_func!r}")
        self.py_func = py_func
        self.name = py_func.__name__
        self.global_var = GlobalVar(self.name)
        self._function: Function | None = None
        self._building = False
        self._callees: list[ScriptFunction] = []

    @property
    def function(self) -> Function:
        if self._function is None:
            if self._building:
                raise ScriptError(f"{self.name}: the function is being built")
            self._building = True
            try:
                self._function = _Converter(self).convert()
            finally:
                self._building = False
        return self._function

    def callees(self) -> list[ScriptFunction]:
        """The scripted functions this one calls, directly or not (itself included)."""
        self.function  # noqa: B018 - builds the IR, which records the callees
        seen: dict[str, ScriptFunction] = {}
        todo = [self]
        while todo:
            sf = todo.pop()
            if sf.name in seen:
                if seen[sf.name] is not sf:
                    raise ScriptError(f"two scripted functions are named {sf.name}")
                continue
            seen[sf.name] = sf
            sf.function  # noqa: B018
            todo.extend(sf._callees)
        return list(seen.values())

    @property
    def module(self) -> Module:
        mod = Module()
        for sf in self.callees():
            mod.add(sf.global_var, sf.function)
        if self.name != "main":
            mod.add("main", self.function, update=True)
        return mod

    def __call__(self, *args: object, **kwargs: object) -> object:
        from .interpreter import evaluate

        return evaluate(self.module, *args, **kwargs)

    def __repr__(self) -> str:
        return f"ScriptFunction({self.name})"


def script(py_func: Callable) -> ScriptFunction:
    """Decorator: the IR of a restricted Python function (see the module docstring)."""
    return ScriptFunction(py_func)


class _Converter:
    def __init__(self, sf: ScriptFunction):
        self.sf = sf
        func = sf.py_func
        self.globals: dict[str, Any] = func.__globals__
        try:
            lines, first = inspect.getsourcelines(func)
            self.filename = inspect.getsourcefile(func) or "<unknown>"
        except (OSError, TypeError) as exc:
            raise ScriptError(f"{sf.name}: cannot read the source of the function ({exc})"
                              ) from None
        self.offset = first - 1
        tree = ast.parse(textwrap.dedent("".join(lines)))
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        if not defs or not isinstance(defs[0], ast.FunctionDef):
            raise ScriptError(f"{sf.name}: not a plain function definition", self.filename,
                              first)
        self.node: ast.FunctionDef = defs[0]
        sf._callees = []

    # --------------------------------------------------------------------- errors

    def error(self, node: ast.AST, message: str) -> ScriptError:
        line = getattr(node, "lineno", 1) + self.offset
        return ScriptError(f"{self.sf.name}: {message}", self.filename, line)

    def span(self, node: ast.AST) -> Span:
        return Span(getattr(node, "lineno", 1) + self.offset,
                    getattr(node, "col_offset", 0) + 1, self.filename)

    # ------------------------------------------------------------------ function

    def convert(self) -> Function:
        node = self.node
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.kw_defaults or a.posonlyargs:
            raise self.error(node, "only plain positional parameters are supported "
                             "(no *args, **kwargs, keyword-only, defaults or positional-only)")
        if node.decorator_list and len(node.decorator_list) > 1:
            raise self.error(node, "other decorators than @ir.script are not supported")
        params = [Var(p.arg, self.annotation(p.annotation) if p.annotation else None)
                  for p in a.args]
        ret = self.annotation(node.returns) if node.returns is not None else None
        scope = {p.name_hint: p for p in params}
        body = self.block(node.body, scope, node)
        return Function(params, body, ret, span=self.span(node))

    def annotation(self, node: ast.expr) -> Type:
        """``ir.Tensor[(shape), dtype]`` / ``Tensor[...]`` read from the tree."""
        if not (isinstance(node, ast.Subscript) and self.is_name(node.value, "Tensor")):
            raise self.error(node, "a parameter annotation must be ir.Tensor[(shape), dtype], "
                             f"got {ast.unparse(node)}")
        key = node.slice
        parts = key.elts if isinstance(key, ast.Tuple) and len(key.elts) == 2 and isinstance(
            key.elts[0], ast.Tuple | ast.List) else [key]
        shape_node = parts[0]
        dtype = "float32"
        if len(parts) == 2:
            d = parts[1]
            if isinstance(d, ast.Constant) and isinstance(d.value, str):
                dtype = d.value
            elif isinstance(d, ast.Name):
                dtype = d.id
            else:
                raise self.error(d, f"a tensor dtype is a string, got {ast.unparse(d)}")
        try:
            shape = ast.literal_eval(shape_node)
        except ValueError:
            raise self.error(shape_node, "a tensor shape is a tuple of ints and names, got "
                             f"{ast.unparse(shape_node)}") from None
        if isinstance(shape, int):
            shape = (shape,)
        try:
            return TensorType(tuple(shape), dtype)
        except (TypeError, ValueError) as exc:
            raise self.error(node, f"bad tensor annotation {ast.unparse(node)}: {exc}") from None

    def is_name(self, node: ast.expr, name: str) -> bool:
        """``name`` or ``<ir module>.name``."""
        if isinstance(node, ast.Name):
            return node.id == name
        return (isinstance(node, ast.Attribute) and node.attr == name
                and isinstance(node.value, ast.Name) and self.is_ir(node.value.id))

    def is_ir(self, name: str) -> bool:
        obj = self.globals.get(name)
        if obj is None:
            return name == "ir"
        return getattr(obj, "__name__", None) == "ir" and inspect.ismodule(obj)

    # --------------------------------------------------------------- statements

    def block(self, stmts: list[ast.stmt], scope: dict[str, Expr], parent: ast.AST,
              results: list[str] | None = None) -> Expr:
        """The expression of statements ``stmts``: a ``return`` ends it; without one (an if
        branch that assigns) it ends with the values of ``results``."""
        lets: list[tuple[Var, Expr]] = []
        scope = dict(scope)
        out: Expr | None = None
        for i, st in enumerate(stmts):
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) and isinstance(
                    st.value.value, str):
                continue  # a docstring
            if isinstance(st, ast.Pass):
                continue
            if isinstance(st, ast.Return):
                if st.value is None:
                    raise self.error(st, "return needs a value")
                out = self.expr(st.value, scope)
                if i != len(stmts) - 1:
                    raise self.error(stmts[i + 1], "unreachable code after return")
                break
            if isinstance(st, ast.Assign | ast.AnnAssign):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                if len(targets) != 1 or st.value is None:
                    raise self.error(st, "chained assignment is not supported")
                self.assign(targets[0], self.expr(st.value, scope), scope, lets)
                continue
            if isinstance(st, ast.If):
                rest = stmts[i + 1:]
                out = self.if_stmt(st, scope, lets, rest, results)
                if out is not None:
                    break
                continue
            raise self.error(st, f"{_construct_name(st)} is not supported in @ir.script")
        if out is None:
            if results is None:
                raise self.error(parent, "the function ends without a return")
            missing = [n for n in results if n not in scope]
            if missing:
                raise self.error(parent, f"name {missing[0]} is not assigned in this branch")
            vals = [scope[n] for n in results]
            out = vals[0] if len(vals) == 1 else Tuple(vals)
        for var, value in reversed(lets):
            out = Let(var, value, out)
        return out

    def assign(self, target: ast.expr, value: Expr, scope: dict[str, Expr],
               lets: list[tuple[Var, Expr]]) -> None:
        if isinstance(target, ast.Name):
            var = Var(target.id)
            lets.append((var, value))
            scope[target.id] = var
            return
        if isinstance(target, ast.Tuple | ast.List):
            names = []
            for t in target.elts:
                if not isinstance(t, ast.Name):
                    raise self.error(t, "only names can be unpacked from a tuple")
                names.append(t.id)
            tup = Var("_".join(names) + "_tuple")
            lets.append((tup, value))
            for i, n in enumerate(names):
                var = Var(n)
                lets.append((var, TupleGetItem(tup, i)))
                scope[n] = var
            return
        raise self.error(target, f"assignment to {_construct_name(target)} is not supported")

    def if_stmt(self, st: ast.If, scope: dict[str, Expr], lets: list[tuple[Var, Expr]],
                rest: list[ast.stmt], results: list[str] | None) -> Expr | None:
        """An ``if``: returns the block's value when both branches return; else (both
        assign) binds the assigned names and returns None."""
        cond = self.expr(st.test, scope)
        if not st.orelse:
            raise self.error(st, "an if needs an else branch (both branches must return or "
                             "assign the same names)")
        then_ret, else_ret = _returns(st.body), _returns(st.orelse)
        if then_ret and else_ret:
            if rest:
                raise self.error(rest[0], "unreachable code after an if whose branches return")
            return If(cond, self.block(st.body, scope, st, results),
                      self.block(st.orelse, scope, st, results), span=self.span(st))
        if then_ret or else_ret:
            raise self.error(st, "either both branches of an if return, or neither")
        names_then, names_else = _assigned(st.body), _assigned(st.orelse)
        if set(names_then) != set(names_else):
            raise self.error(st, "both branches of an if must assign the same names (got "
                             f"{sorted(names_then)} and {sorted(names_else)})")
        names = [n for n in names_then]
        value = If(cond, self.block(st.body, scope, st, names),
                   self.block(st.orelse, scope, st, names), span=self.span(st))
        if len(names) == 1:
            var = Var(names[0])
            lets.append((var, value))
            scope[names[0]] = var
        else:
            tup = Var("_".join(names) + "_if")
            lets.append((tup, value))
            for i, n in enumerate(names):
                var = Var(n)
                lets.append((var, TupleGetItem(tup, i)))
                scope[n] = var
        return None

    # -------------------------------------------------------------- expressions

    def expr(self, node: ast.expr, scope: dict[str, Expr]) -> Expr:
        if isinstance(node, ast.Name):
            if node.id in scope:
                return scope[node.id]
            if node.id == self.sf.name or isinstance(self.globals.get(node.id), ScriptFunction):
                return self.callee(node, node.id)
            if node.id in ("True", "False"):
                return const(node.id == "True", span=self.span(node))
            raise self.error(node, f"name {node.id} is not defined (only parameters, assigned "
                             "names and @ir.script functions can be used)")
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool | int | float):
                return const(node.value, span=self.span(node))
            raise self.error(node, f"constant {node.value!r} is not supported (numbers only)")
        if isinstance(node, ast.Tuple):
            return Tuple([self.expr(e, scope) for e in node.elts], self.span(node))
        if isinstance(node, ast.BinOp):
            name = _BINOPS.get(type(node.op))
            if name is None:
                raise self.error(node, f"operator {type(node.op).__name__} is not supported "
                                 "(+ - * / only)")
            return self.op_call(node, name, [self.expr(node.left, scope),
                                             self.expr(node.right, scope)])
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                if isinstance(node.operand, ast.Constant) and isinstance(
                        node.operand.value, int | float) and not isinstance(
                        node.operand.value, bool):
                    return const(-node.operand.value, span=self.span(node))
                return self.op_call(node, "negative", [self.expr(node.operand, scope)])
            if isinstance(node.op, ast.UAdd):
                return self.expr(node.operand, scope)
            raise self.error(node, f"unary {type(node.op).__name__} is not supported")
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise self.error(node, "chained comparisons are not supported")
            name = _CMPOPS.get(type(node.ops[0]))
            if name is None:
                raise self.error(node, f"comparison {type(node.ops[0]).__name__} is not "
                                 "supported")
            return self.op_call(node, name, [self.expr(node.left, scope),
                                             self.expr(node.comparators[0], scope)])
        if isinstance(node, ast.Subscript):
            index = node.slice
            if not (isinstance(index, ast.Constant) and isinstance(index.value, int)
                    and not isinstance(index.value, bool) and index.value >= 0):
                raise self.error(node, "only a tuple projection t[i] with an int literal "
                                 "i >= 0 is supported")
            return TupleGetItem(self.expr(node.value, scope), index.value, self.span(node))
        if isinstance(node, ast.Call):
            return self.call(node, scope)
        if isinstance(node, ast.Attribute):
            raise self.error(node, f"attribute access {ast.unparse(node)} is not supported "
                             "(only ir.op.<name>(...) calls)")
        raise self.error(node, f"{_construct_name(node)} is not supported in @ir.script")

    def callee(self, node: ast.AST, name: str) -> GlobalVar:
        if name == self.sf.name:
            return self.sf.global_var
        target = self.globals[name]
        self.sf._callees.append(target)
        return target.global_var

    def op_call(self, node: ast.AST, name: str, args: list[Expr],
                attrs: dict[str, object] | None = None) -> Call:
        try:
            opdef = get_op_def(name)
        except KeyError as exc:
            raise self.error(node, f"operator {name} is not registered ({exc.args[0]})"
                             ) from None
        try:
            return Call(Op.get(opdef.name), args, opdef.make_attrs(attrs or {}),
                        span=self.span(node))
        except TypeError as exc:
            raise self.error(node, str(exc)) from None

    def call(self, node: ast.Call, scope: dict[str, Expr]) -> Expr:
        func = node.func
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            raise self.error(node, "*args / **kwargs in calls are not supported")
        op_name = self.op_path(func)
        if op_name is not None:
            attrs = {k.arg: self.literal(k.value) for k in node.keywords}
            return self.op_call(node, op_name, [self.expr(a, scope) for a in node.args], attrs)
        if self.is_name(func, "const") and not isinstance(func, ast.Name):
            if not 1 <= len(node.args) <= 2 or node.keywords:
                raise self.error(node, "ir.const takes a literal value and an optional dtype")
            value = self.literal(node.args[0])
            dtype = self.literal(node.args[1]) if len(node.args) == 2 else None
            try:
                return const(value, dtype, span=self.span(node))
            except (TypeError, ValueError) as exc:
                raise self.error(node, f"bad constant: {exc}") from None
        if isinstance(func, ast.Name) and func.id not in scope and (
                func.id == self.sf.name or isinstance(self.globals.get(func.id), ScriptFunction)):
            if node.keywords:
                raise self.error(node, "keyword arguments in calls of scripted functions are "
                                 "not supported")
            return Call(self.callee(func, func.id), [self.expr(a, scope) for a in node.args],
                        span=self.span(node))
        if isinstance(func, ast.Name) and func.id in scope:
            if node.keywords:
                raise self.error(node, "keyword arguments are not supported")
            return Call(scope[func.id], [self.expr(a, scope) for a in node.args],
                        span=self.span(node))
        raise self.error(node, f"call of {ast.unparse(func)} is not supported (only ir.op "
                         "operators, ir.const and @ir.script functions)")

    def op_path(self, func: ast.expr) -> str | None:
        """``ir.op.nn.dense`` -> ``"nn.dense"``; None when ``func`` is not such a path."""
        parts: list[str] = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        parts.reverse()
        if self.is_ir(func.id) and len(parts) >= 2 and parts[0] == "op":
            return ".".join(parts[1:])
        return None

    def literal(self, node: ast.expr) -> object:
        try:
            return ast.literal_eval(node)
        except ValueError:
            raise self.error(node, f"{ast.unparse(node)} must be a literal (a number, string, "
                             "or tuple of them)") from None


def _returns(stmts: list[ast.stmt]) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and _returns(last.body) and _returns(last.orelse)


def _assigned(stmts: list[ast.stmt]) -> list[str]:
    names: list[str] = []
    for st in stmts:
        targets: list[ast.expr] = []
        if isinstance(st, ast.Assign):
            targets = list(st.targets)
        elif isinstance(st, ast.AnnAssign):
            targets = [st.target]
        elif isinstance(st, ast.If):
            targets = [ast.Name(n) for n in _assigned(st.body)]
        for t in targets:
            for n in (t.elts if isinstance(t, ast.Tuple | ast.List) else [t]):
                if isinstance(n, ast.Name) and n.id not in names:
                    names.append(n.id)
    return names


_NAMES = {
    "For": "a for loop", "While": "a while loop", "With": "a with statement",
    "Lambda": "a lambda", "ListComp": "a list comprehension", "SetComp": "a comprehension",
    "DictComp": "a comprehension", "GeneratorExp": "a generator expression",
    "AugAssign": "augmented assignment (+=)", "FunctionDef": "a nested function",
    "ClassDef": "a class", "Try": "try/except", "Raise": "raise", "Import": "import",
    "ImportFrom": "import", "Global": "global", "Nonlocal": "nonlocal", "Delete": "del",
    "Assert": "assert", "IfExp": "a conditional expression (x if c else y)",
    "List": "a list", "Dict": "a dict", "Set": "a set", "BoolOp": "and/or",
    "JoinedStr": "an f-string", "Await": "await", "Yield": "yield", "YieldFrom": "yield",
    "NamedExpr": "the walrus operator", "Expr": "an expression statement",
    "Starred": "starred expressions", "Slice": "a slice",
}


def _construct_name(node: ast.AST) -> str:
    kind = type(node).__name__
    return _NAMES.get(kind, f"the Python construct {kind}")
