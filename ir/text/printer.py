"""The printer of the IR text format (Relay's text format, version 0.0.5).

``astext(module_or_expr)`` writes::

    #[version = "0.0.5"]
    type List[A] {
      Cons(A, List[A]),
      Nil,
    }

    def @main(%x: Tensor[(1, 3), float32], %w) -> Tensor[(1, 3), float32] {
      %0 = nn.dense(%x, %w, units=3);
      let %y = add(%0, 1f);
      %y
    }

Graph form is printed as Relay prints it: every non-atomic operand (a call, tuple,
projection, function, ``if``, ``match``, reference operation) is bound to a numbered
temporary ``%0 = ...;`` in the block where it is first used, and later uses in that block
(or blocks nested in it) refer to the temporary, so a DAG prints once, in time linear in
its size, and the parser restores the sharing. Let chains are printed by a loop (no
recursion per ``let``); only nested scopes (function bodies, branches, clauses) recurse.

Atoms print inline: ``%x`` (name hints made unique per global function: ``%x``, ``%x1``),
``@f``, operator and constructor names, rank-0 constants as literals (``1f``, ``2``,
``3i64``, ``0.5f16``, ``True``) and other constants as ``meta[relay.Constant][i]``,
stored in the ``#[metadata]`` section after the program (this project's own JSON, see
``ir.text``).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Sequence
from contextlib import contextmanager

from ..attrs import Attrs
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
)
from ..module import Module
from ..types import (
    AnyDim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeRelation,
    TypeVar,
)

VERSION = "0.0.5"
HEADER = f'#[version = "{VERSION}"]'
#: The most nested brackets the parser accepts (and the printer is meant to produce).
MAX_DEPTH = 500

_ATOMS = (Var, GlobalVar, Op, Constructor, Constant)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@contextmanager
def recursion_room(frames: int):
    """Make sure the interpreter allows ``frames`` more nested Python calls meanwhile
    (nested scopes recurse a few frames per level; MAX_DEPTH bounds the levels)."""
    old = sys.getrecursionlimit()
    need = len_stack() + frames
    if need > old:
        sys.setrecursionlimit(need)
    try:
        yield
    finally:
        if need > old:
            sys.setrecursionlimit(old)


def len_stack() -> int:
    f, n = sys._getframe(), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


def _sanitize(hint: str, default: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", hint) or default
    return name if not name[0].isdigit() else default + name


_INT_SUFFIX = {"int8": "i8", "int16": "i16", "int32": "", "int64": "i64", "uint8": "u8",
               "uint16": "u16", "uint32": "u32", "uint64": "u64"}
_FLOAT_SUFFIX = {"float16": "f16", "float32": "f", "float64": "f64"}


def scalar_literal(c: Constant) -> str | None:
    """The literal of a rank-0 constant (``1f``, ``2``, ``3i64``, ``True``), or None when
    it has none (a NaN, complex or unusual dtype: printed as a meta constant)."""
    if c.data.ndim != 0:
        return None
    dt, v = c.dtype, c.data[()]
    if dt == "bool":
        return "True" if bool(v) else "False"
    if dt in _INT_SUFFIX:
        return f"{int(v)}{_INT_SUFFIX[dt]}"
    if dt in _FLOAT_SUFFIX:
        if math.isnan(float(v)):
            return None
        if math.isinf(float(v)):
            text = "inf" if v > 0 else "-inf"
        else:
            text = str(v)
            if text.endswith(".0"):
                text = text[:-2]
        return text + _FLOAT_SUFFIX[dt]
    return None


def attr_value_text(v: object) -> str:
    """An attribute value in Relay's syntax: ``1``, ``0.5f``, ``"NCHW"``, ``[1, 1]``,
    ``True``, ``None``."""
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nanf"
        if math.isinf(v):
            return "inff" if v > 0 else "-inff"
        return repr(v) + "f"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(attr_value_text(x) for x in v) + "]"
    raise TypeError(f"cannot print attribute value {v!r}")


def _indent(lines: list[str]) -> list[str]:
    return ["  " + line for line in lines]


def _emit(lines: list[str], prefix: str, rhs: list[str], suffix: str) -> None:
    if len(rhs) == 1:
        lines.append(prefix + rhs[0] + suffix)
    else:
        lines.append(prefix + rhs[0])
        lines.extend(rhs[1:-1])
        lines.append(rhs[-1] + suffix)


def _operands(e: Expr) -> tuple[Expr, ...]:
    """The subexpressions printed as operands in the block holding ``e``."""
    kind = type(e)
    if kind is Call:
        return (e.op, *e.args)
    if kind is Tuple:
        return e.fields
    if kind is TupleGetItem:
        return (e.tuple_value,)
    if kind is If:
        return (e.cond,)
    if kind is Match:
        return (e.data,)
    if kind is RefCreate:
        return (e.value,)
    if kind is RefRead:
        return (e.ref,)
    if kind is RefWrite:
        return (e.ref, e.value)
    return ()


def _children(e: Expr) -> tuple[Expr, ...]:
    kind = type(e)
    if kind is Let:
        return (e.value, e.body)
    if kind is Function:
        return (e.body,)
    if kind is If:
        return (e.cond, e.true_branch, e.false_branch)
    if kind is Match:
        return (e.data, *(c.rhs for c in e.clauses))
    return _operands(e)


def _use_counts(roots: Sequence[Expr]) -> dict[int, int]:
    """How many parents each node has (each parent counted once per child slot)."""
    counts: dict[int, int] = {}
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        for c in _children(e):
            counts[id(c)] = counts.get(id(c), 0) + 1
            if id(c) not in seen and not isinstance(c, _ATOMS):
                stack.append(c)
    return counts


class _Printer:
    def __init__(self, roots: Sequence[Expr]):
        self.counts = _use_counts(roots)
        self.meta: list[Constant] = []
        self.meta_index: dict[int, int] = {}
        self.keep: list[object] = []  # nodes whose id() is a key (keeps them alive)
        self.reset()

    def reset(self) -> None:
        """New naming scope (one per global function / type definition)."""
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.tnames: dict[int, str] = {}
        self.tused: set[str] = set()
        self.temps = 0
        self.scopes: list[dict[int, str]] = [{}]

    # -------------------------------------------------------------------------- names

    def var_name(self, v: Var) -> str:
        name = self.names.get(id(v))
        if name is None:
            base = _sanitize(v.name_hint, "v")
            name, i = base, 1
            while name in self.used:
                name, i = f"{base}{i}", i + 1
            self.used.add(name)
            self.names[id(v)] = name
            self.keep.append(v)
        return name

    def tvar_name(self, t: TypeVar) -> str:
        name = self.tnames.get(id(t))
        if name is None:
            base = _sanitize(t.name, "T")
            name, i = base, 1
            while name in self.tused:
                name, i = f"{base}{i}", i + 1
            self.tused.add(name)
            self.tnames[id(t)] = name
            self.keep.append(t)
        return name

    def type_params(self, params: Sequence[TypeVar]) -> str:
        if not params:
            return ""
        return "[" + ", ".join(self.tvar_name(p) for p in params) + "]"

    # -------------------------------------------------------------------------- types

    def type(self, t: Type) -> str:
        kind = type(t)
        if kind is TensorType:
            if not t.shape:
                return t.dtype
            dims = ", ".join("?" if isinstance(d, AnyDim) else str(d) for d in t.shape)
            return f"Tensor[({dims}), {t.dtype}]"
        if kind is TupleType:
            inner = ", ".join(self.type(f) for f in t.fields)
            return f"({inner},)" if len(t.fields) == 1 else f"({inner})"
        if kind is TypeVar:
            return self.tvar_name(t)
        if kind is GlobalTypeVar:
            return t.name
        if kind is TypeCall:
            return f"{self.type(t.func)}[{', '.join(self.type(a) for a in t.args)}]"
        if kind is FuncType:
            params = self.type_params(t.type_params)
            args = ", ".join(self.type(a) for a in t.arg_types)
            return f"fn {params}({args}) -> {self.type(t.ret_type)}"
        if kind is RefType:
            return f"ref({self.type(t.value)})"
        if kind is IncompleteType:
            return "_"
        if kind is TypeRelation:
            raise TypeError(f"a type relation has no text form: {t}")
        raise TypeError(f"cannot print type {t!r}")

    def annotation(self, v: Var) -> str:
        return "" if v.type_annotation is None else ": " + self.type(v.type_annotation)

    # -------------------------------------------------------------------------- atoms

    def constant(self, c: Constant) -> str:
        lit = scalar_literal(c)
        if lit is not None:
            return lit
        index = self.meta_index.get(id(c))
        if index is None:
            index = self.meta_index[id(c)] = len(self.meta)
            self.meta.append(c)
        return f"meta[relay.Constant][{index}]"

    def atom(self, e: Expr) -> str:
        kind = type(e)
        if kind is Var:
            return "%" + self.var_name(e)
        if kind is GlobalVar:
            return "@" + e.name
        if kind is Op or kind is Constructor:
            return e.name
        return self.constant(e)

    def lookup(self, e: Expr) -> str | None:
        key = id(e)
        for scope in reversed(self.scopes):
            name = scope.get(key)
            if name is not None:
                return name
        return None

    # ------------------------------------------------------------------------ operands

    def operand(self, e: Expr, lines: list[str]) -> str:
        """``e`` as an operand: an atom, or a temporary bound (with the temporaries its
        own operands need, children first, by an explicit stack) in ``lines``."""
        if isinstance(e, _ATOMS):
            return self.atom(e)
        stack: list[tuple[Expr, bool]] = [(e, False)]
        while stack:
            node, ready = stack.pop()
            if isinstance(node, _ATOMS) or self.lookup(node) is not None:
                continue
            if ready:
                rhs = self.inline(node, lines)
                name = str(self.temps)
                self.temps += 1
                _emit(lines, f"%{name} = ", rhs, ";")
                self.scopes[-1][id(node)] = "%" + name
                self.keep.append(node)
                continue
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(_operands(node)))
        return self.lookup(e)

    def inline(self, e: Expr, lines: list[str]) -> list[str]:
        """The text of ``e`` itself (first line unprefixed), its operands bound first."""
        if isinstance(e, _ATOMS):
            return [self.atom(e)]
        name = self.lookup(e)
        if name is not None:
            return [name]
        kind = type(e)
        if kind is Call:
            callee = self.operand(e.op, lines)
            args = [self.operand(a, lines) for a in e.args]
            return [f"{callee}({', '.join(args + self.call_attrs(e))})"]
        if kind is Tuple:
            fields = [self.operand(f, lines) for f in e.fields]
            return [f"({fields[0]},)" if len(fields) == 1 else f"({', '.join(fields)})"]
        if kind is TupleGetItem:
            return [f"{self.operand(e.tuple_value, lines)}.{e.index}"]
        if kind is RefCreate:
            return [f"ref({self.operand(e.value, lines)})"]
        if kind is RefRead:
            return [f"ref_read({self.operand(e.ref, lines)})"]
        if kind is RefWrite:
            ref = self.operand(e.ref, lines)
            return [f"ref_write({ref}, {self.operand(e.value, lines)})"]
        if kind is Function:
            return self.function(e, "fn ")
        if kind is If:
            cond = self.operand(e.cond, lines)
            return [f"if ({cond}) {{", *_indent(self.block(e.true_branch)), "} else {",
                    *_indent(self.block(e.false_branch)), "}"]
        if kind is Match:
            data = self.operand(e.data, lines)
            out = [f"match{'' if e.complete else '?'} ({data}) {{"]
            for clause in e.clauses:
                pat = self.pattern(clause.lhs)
                body = self.block(clause.rhs)
                if len(body) == 1:
                    out.append(f"  {pat} => {body[0]},")
                else:
                    out += [f"  {pat} => {{", *_indent(_indent(body)), "  },"]
            out.append("}")
            return out
        if kind is Let:
            return ["{", *_indent(self.block(e)), "}"]
        raise TypeError(f"cannot print expression {e!r}")

    def call_attrs(self, call: Call) -> list[str]:
        attrs = call.attrs
        if not attrs:
            return []
        defaults = call.op.opdef.make_attrs(None) if isinstance(call.op, Op) else Attrs()
        out = []
        for key, value in attrs.items():
            if key in defaults and Attrs({key: value}) == Attrs({key: defaults[key]}):
                continue
            out.append(f"{key}={attr_value_text(value)}")
        return out

    def pattern(self, p: Pattern) -> str:
        if isinstance(p, PatternWildcard):
            return "_"
        if isinstance(p, PatternVar):
            return "%" + self.var_name(p.var) + self.annotation(p.var)
        if isinstance(p, PatternConstructor):
            if not p.patterns:
                return p.constructor.name
            return f"{p.constructor.name}({', '.join(self.pattern(q) for q in p.patterns)})"
        if isinstance(p, PatternTuple):
            inner = [self.pattern(q) for q in p.patterns]
            return f"({inner[0]},)" if len(inner) == 1 else f"({', '.join(inner)})"
        raise TypeError(f"cannot print pattern {p!r}")

    # -------------------------------------------------------------------------- scopes

    def block(self, e: Expr) -> list[str]:
        """The lines of a block evaluating ``e``: temporaries and lets (a loop over a let
        chain), then the result."""
        lines: list[str] = []
        self.scopes.append({})
        try:
            while type(e) is Let and self.lookup(e) is None:
                name = self.var_name(e.var)
                value = e.value
                if (type(value) is Function or isinstance(value, _ATOMS)
                        or self.counts.get(id(value), 0) <= 1):
                    rhs = self.inline(value, lines)
                else:
                    rhs = [self.operand(value, lines)]
                _emit(lines, f"let %{name}{self.annotation(e.var)} = ", rhs, ";")
                e = e.body
            if (not isinstance(e, _ATOMS) and type(e) is not Function
                    and self.counts.get(id(e), 0) > 1):
                rhs = [self.operand(e, lines)]
            else:
                rhs = self.inline(e, lines)
            lines.extend(rhs)
            return lines
        finally:
            self.scopes.pop()

    def function(self, f: Function, head: str) -> list[str]:
        tparams = self.type_params(f.type_params)
        params = [f"%{self.var_name(p)}{self.annotation(p)}" for p in f.params]
        params += [f"{k}={attr_value_text(v)}" for k, v in f.attrs.items()]
        ret = "" if f.ret_type is None else f" -> {self.type(f.ret_type)}"
        body = self.block(f.body)
        return [f"{head}{tparams}({', '.join(params)}){ret} {{", *_indent(body), "}"]

    def type_def(self, data: TypeData) -> list[str]:
        params = self.type_params(data.type_vars)
        out = [f"type {data.header.name}{params} {{"]
        for c in data.constructors:
            if c.inputs:
                out.append(f"  {c.name}({', '.join(self.type(t) for t in c.inputs)}),")
            else:
                out.append(f"  {c.name},")
        out.append("}")
        return out

    def metadata(self) -> list[str]:
        if not self.meta:
            return []
        from ..serialize import encode_array

        entries = [json.dumps(encode_array(c.data)) for c in self.meta]
        return ["#[metadata]", "{", '  "relay.Constant": [',
                *[f"    {e}{',' if i + 1 < len(entries) else ''}"
                  for i, e in enumerate(entries)],
                "  ]", "}"]


def astext(node: Module | Expr | Type, header: bool = True) -> str:
    """``node`` (a module, an expression or a type) in the text format; ``ir.parse`` /
    ``ir.parse_expr`` read it back (types print alone, without header)."""
    if isinstance(node, Type):
        return _Printer([]).type(node)
    with recursion_room(8 * MAX_DEPTH + 200):
        if isinstance(node, Module):
            p = _Printer(list(node.functions.values()))
            out = [HEADER] if header else []
            for data in node.type_definitions.values():
                p.reset()
                out += p.type_def(data)
                out.append("")
            for gv, fn in node.functions.items():
                p.reset()
                out += p.function(fn, f"def @{gv.name}")
                out.append("")
            if out and out[-1] == "":
                out.pop()
        elif isinstance(node, Expr):
            p = _Printer([node])
            out = [HEADER] if header else []
            out += p.block(node)
        else:
            raise TypeError(f"astext prints a Module, an Expr or a Type, got {node!r}")
        out += p.metadata()
        return "\n".join(out) + "\n"
