"""JSON serialisation of modules: ``save_json(module) -> str`` / ``load_json(text) ->
Module`` (and ``to_json_dict`` / ``from_json_dict`` for the parsed form).

The document is flat, so no nesting grows with the program::

    {"format": "tensortune.ir", "version": 1,
     "types": [...],      # every type node once, children before parents
     "nodes": [...],      # every expression node once, children before parents
     "type_definitions": [<index into types>], "functions": [{"name": "main", "node": i}]}

Nodes refer to other nodes and types by index (always an earlier one), so sharing (a DAG),
binders (a ``Var`` is one node, used by index) and type variables survive the round trip,
and both writing and reading are loops (a let chain of any length). Constants are the
base64 of their little-endian bytes with dtype and shape, or, with ``npz_path``, big ones
live in a side ``.npz`` file (read with ``allow_pickle=False``). Checked types, call type
arguments and spans are kept.

Loading never executes anything (``json`` plus checks): it refuses documents over
``max_bytes``, with more than ``max_nodes`` nodes, nested deeper than ``max_depth``, or
malformed in any way, with a ValueError saying what and where.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping

import numpy as np

from .attrs import Attrs
from .expr import (
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
    set_checked_type,
)
from .module import Module
from .span import Span
from .types import (
    Any,
    AnyDim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    SymDim,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeRelation,
    TypeVar,
)

FORMAT = "tensortune.ir"
VERSION = 1
MAX_BYTES = 1 << 30
MAX_NODES = 10_000_000
MAX_DEPTH = 64


# ---------------------------------------------------------------------------------- arrays


def _dtype(name: object) -> np.dtype:
    if not isinstance(name, str):
        raise ValueError(f"a dtype is a string, got {name!r}")
    try:
        dt = np.dtype(name)
    except TypeError:
        raise ValueError(f"unknown dtype {name!r}") from None
    if dt.kind not in "biufc" or dt.fields is not None or dt.subdtype is not None:
        raise ValueError(f"dtype {name!r} is not a numeric or bool dtype")
    return dt


def encode_array(arr: np.ndarray) -> dict:
    """``{"dtype", "shape", "data"}``: the array's little-endian bytes in base64."""
    dt = arr.dtype
    raw = np.ascontiguousarray(arr, dtype=dt.newbyteorder("<")).tobytes()
    return {"dtype": dt.name, "shape": list(arr.shape), "data": base64.b64encode(raw).decode()}


def _shape(shape: object, max_elems: int) -> tuple[int, ...]:
    if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"a shape is a list of ints >= 0, got {shape!r}")
    if len(shape) > 64:
        raise ValueError(f"rank {len(shape)} is too large")
    size = 1
    for d in shape:
        size *= d
        if size > max_elems:
            raise ValueError(f"shape {shape} is too large")
    return tuple(shape)


def decode_array(entry: object, max_bytes: int = MAX_BYTES) -> np.ndarray:
    """The read-only array ``encode_array`` wrote (ValueError for anything else)."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data"}:
        raise ValueError("an array is {\"dtype\", \"shape\", \"data\"}")
    dt = _dtype(entry["dtype"])
    shape = _shape(entry["shape"], max_bytes)
    data = entry["data"]
    if not isinstance(data, str) or len(data) > max_bytes * 4 // 3 + 8:
        raise ValueError("array data is a base64 string within the size limit")
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ValueError("array data is not valid base64") from None
    return _from_bytes(raw, dt, shape)


def _from_bytes(raw: bytes, dt: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    expected = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if len(raw) != expected:
        raise ValueError(f"array of {dt.name} {list(shape)} needs {expected} bytes, "
                         f"got {len(raw)}")
    arr = np.frombuffer(raw, dtype=dt.newbyteorder("<")).astype(dt).reshape(shape)
    arr.flags.writeable = False
    return arr


# ------------------------------------------------------------------------------- writing


def _dim_json(d: object) -> object:
    if isinstance(d, AnyDim):
        return None
    if isinstance(d, SymDim):
        return d.name
    return d


def _type_children(t: Type) -> tuple[Type, ...]:
    kind = type(t)
    if kind is TupleType:
        return t.fields
    if kind is FuncType:
        return (*t.type_params, *t.arg_types, t.ret_type, *t.type_constraints)
    if kind is RefType:
        return (t.value,)
    if kind is TypeCall:
        return (t.func, *t.args)
    if kind is TypeRelation:
        return t.args
    if kind is TypeData:
        return (t.header, *t.type_vars, *(i for c in t.constructors for i in c.inputs))
    return ()


def _attrs_json(attrs: Attrs) -> dict:
    def conv(v: object) -> object:
        return [conv(x) for x in v] if isinstance(v, tuple) else v

    return {k: conv(v) for k, v in attrs.items()}


def _pattern_children(p: Pattern, out: list[Expr]) -> None:
    stack = [p]
    while stack:
        q = stack.pop()
        if isinstance(q, PatternVar):
            out.append(q.var)
        elif isinstance(q, PatternConstructor):
            out.append(q.constructor)
            stack.extend(q.patterns)
        elif isinstance(q, PatternTuple):
            stack.extend(q.patterns)


def _expr_children(e: Expr) -> list[Expr]:
    kind = type(e)
    if kind is Call:
        return [e.op, *e.args]
    if kind is Tuple:
        return list(e.fields)
    if kind is TupleGetItem:
        return [e.tuple_value]
    if kind is Let:
        return [e.var, e.value, e.body]
    if kind is Function:
        return [*e.params, e.body]
    if kind is If:
        return [e.cond, e.true_branch, e.false_branch]
    if kind is Match:
        out = [e.data]
        for c in e.clauses:
            _pattern_children(c.lhs, out)
            out.append(c.rhs)
        return out
    if kind is RefCreate:
        return [e.value]
    if kind is RefRead:
        return [e.ref]
    if kind is RefWrite:
        return [e.ref, e.value]
    return []


class _Writer:
    def __init__(self, checked_types: bool, npz_arrays: dict | None, inline_limit: int):
        self.types: list[dict] = []
        self.type_index: dict[int, int] = {}
        self.nodes: list[dict] = []
        self.node_index: dict[int, int] = {}
        self.keep: list[object] = []
        self.checked_types = checked_types
        self.npz = npz_arrays
        self.inline_limit = inline_limit

    def type(self, root: Type) -> int:
        stack: list[tuple[Type, bool]] = [(root, False)]
        while stack:
            t, ready = stack.pop()
            if id(t) in self.type_index:
                continue
            if not ready:
                stack.append((t, True))
                stack.extend((c, False) for c in reversed(_type_children(t)))
                continue
            self.type_index[id(t)] = len(self.types)
            self.keep.append(t)
            self.types.append(self.type_entry(t))
        return self.type_index[id(root)]

    def type_entry(self, t: Type) -> dict:
        ix = self.type_index.__getitem__
        kind = type(t)
        if kind is TensorType:
            return {"k": "tensor", "shape": [_dim_json(d) for d in t.shape], "dtype": t.dtype}
        if kind is TupleType:
            return {"k": "tuple", "fields": [ix(id(f)) for f in t.fields]}
        if kind is TypeVar:
            return {"k": "tvar", "name": t.name, "kind": t.kind}
        if kind is GlobalTypeVar:
            return {"k": "gtv", "name": t.name, "kind": t.kind}
        if kind is IncompleteType:
            return {"k": "incomplete", "id": t.id, "kind": t.kind}
        if kind is TypeRelation:
            return {"k": "relation", "func": t.func_name, "args": [ix(id(a)) for a in t.args],
                    "num_inputs": t.num_inputs, "attrs": _attrs_json(t.attrs)}
        if kind is FuncType:
            return {"k": "func", "params": [ix(id(p)) for p in t.type_params],
                    "args": [ix(id(a)) for a in t.arg_types], "ret": ix(id(t.ret_type)),
                    "constraints": [ix(id(c)) for c in t.type_constraints]}
        if kind is RefType:
            return {"k": "ref", "value": ix(id(t.value))}
        if kind is TypeCall:
            return {"k": "call", "func": ix(id(t.func)), "args": [ix(id(a)) for a in t.args]}
        if kind is TypeData:
            return {"k": "data", "header": ix(id(t.header)),
                    "vars": [ix(id(v)) for v in t.type_vars],
                    "ctors": [{"name": c.name, "tag": c.tag,
                               "inputs": [ix(id(i)) for i in c.inputs]}
                              for c in t.constructors]}
        raise TypeError(f"cannot serialise type {t!r}")

    def opt_type(self, t: Type | None) -> int | None:
        return None if t is None else self.type(t)

    def expr(self, root: Expr) -> int:
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in self.node_index:
                continue
            if not ready:
                stack.append((e, True))
                stack.extend((c, False) for c in reversed(_expr_children(e)))
                continue
            entry = self.expr_entry(e)
            if self.checked_types and e.checked_type_or_none is not None:
                entry["ct"] = self.type(e.checked_type_or_none)
            if e.span is not None:
                entry["span"] = [e.span.line, e.span.column, e.span.source]
            self.node_index[id(e)] = len(self.nodes)
            self.keep.append(e)
            self.nodes.append(entry)
        return self.node_index[id(root)]

    def pattern(self, p: Pattern) -> dict:
        ix = self.node_index.__getitem__
        if isinstance(p, PatternWildcard):
            return {"k": "wild"}
        if isinstance(p, PatternVar):
            return {"k": "var", "var": ix(id(p.var))}
        if isinstance(p, PatternConstructor):
            return {"k": "ctor", "ctor": ix(id(p.constructor)),
                    "pats": [self.pattern(q) for q in p.patterns]}
        return {"k": "tuple", "pats": [self.pattern(q) for q in p.patterns]}

    def expr_entry(self, e: Expr) -> dict:
        ix = self.node_index.__getitem__
        kind = type(e)
        if kind is Var:
            return {"k": "Var", "name": e.name_hint, "type": self.opt_type(e.type_annotation)}
        if kind is GlobalVar:
            return {"k": "GlobalVar", "name": e.name}
        if kind is Op:
            return {"k": "Op", "name": e.name}
        if kind is Constant:
            if self.npz is not None and e.data.nbytes > self.inline_limit:
                key = f"c{len(self.npz)}"
                self.npz[key] = e.data
                return {"k": "Constant", "npz": key, "dtype": e.data.dtype.name,
                        "shape": list(e.data.shape)}
            return {"k": "Constant", **encode_array(e.data)}
        if kind is Constructor:
            return {"k": "Constructor", "name": e.name, "tag": e.tag,
                    "belong_to": self.type(e.belong_to),
                    "inputs": [self.type(t) for t in e.inputs]}
        if kind is Call:
            return {"k": "Call", "op": ix(id(e.op)), "args": [ix(id(a)) for a in e.args],
                    "attrs": _attrs_json(e.attrs),
                    "type_args": [self.type(t) for t in e.type_args]}
        if kind is Tuple:
            return {"k": "Tuple", "fields": [ix(id(f)) for f in e.fields]}
        if kind is TupleGetItem:
            return {"k": "TupleGetItem", "tuple": ix(id(e.tuple_value)), "index": e.index}
        if kind is Let:
            return {"k": "Let", "var": ix(id(e.var)), "value": ix(id(e.value)),
                    "body": ix(id(e.body))}
        if kind is Function:
            return {"k": "Function", "params": [ix(id(p)) for p in e.params],
                    "body": ix(id(e.body)), "ret": self.opt_type(e.ret_type),
                    "type_params": [self.type(t) for t in e.type_params],
                    "attrs": _attrs_json(e.attrs)}
        if kind is If:
            return {"k": "If", "cond": ix(id(e.cond)), "then": ix(id(e.true_branch)),
                    "else": ix(id(e.false_branch))}
        if kind is Match:
            return {"k": "Match", "data": ix(id(e.data)), "complete": e.complete,
                    "clauses": [[self.pattern(c.lhs), ix(id(c.rhs))] for c in e.clauses]}
        if kind is RefCreate:
            return {"k": "RefCreate", "value": ix(id(e.value))}
        if kind is RefRead:
            return {"k": "RefRead", "ref": ix(id(e.ref))}
        if kind is RefWrite:
            return {"k": "RefWrite", "ref": ix(id(e.ref)), "value": ix(id(e.value))}
        raise TypeError(f"cannot serialise expression {e!r}")


def to_json_dict(module: Module, checked_types: bool = True, npz_arrays: dict | None = None,
                 inline_limit: int = 1 << 16) -> dict:
    """``module`` as a JSON-able dict (see the module docstring). With ``npz_arrays`` (a
    dict), constants over ``inline_limit`` bytes go there instead (key -> array)."""
    if not isinstance(module, Module):
        raise TypeError(f"to_json_dict takes a Module, got {module!r}")
    w = _Writer(checked_types, npz_arrays, inline_limit)
    tdefs = [w.type(data) for data in module.type_definitions.values()]
    fns = [{"name": gv.name, "node": w.expr(fn)} for gv, fn in module.functions.items()]
    return {"format": FORMAT, "version": VERSION, "types": w.types, "nodes": w.nodes,
            "type_definitions": tdefs, "functions": fns}


def save_json(module: Module, npz_path: str | None = None, inline_limit: int = 1 << 16,
              checked_types: bool = True, indent: int | None = None) -> str:
    """``module`` as JSON text. With ``npz_path``, constants over ``inline_limit`` bytes are
    written to that ``.npz`` file (pass it to ``load_json`` too)."""
    arrays: dict | None = {} if npz_path is not None else None
    doc = to_json_dict(module, checked_types, arrays, inline_limit)
    if arrays:
        np.savez(npz_path, **arrays)
    return json.dumps(doc, indent=indent)


# ------------------------------------------------------------------------------- reading

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _json_depth(text: str) -> int:
    depth = deepest = 0
    for m in _JSON_TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


class _Reader:
    def __init__(self, doc: Mapping, npz: Mapping | None, max_bytes: int):
        self.doc = doc
        self.npz = npz
        self.max_bytes = max_bytes
        self.types: list[Type] = []
        self.nodes: list[Expr] = []
        self.ctors: dict[str, Constructor] = {}
        self.where = ""

    def fail(self, message: str) -> ValueError:
        return ValueError(f"JSON IR: {self.where}: {message}")

    def field(self, entry: Mapping, name: str, kind: type | tuple) -> object:
        if name not in entry:
            raise self.fail(f"missing field {name!r}")
        value = entry[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(f"field {name!r} has the wrong type ({type(value).__name__})")
        return value

    def ref(self, table: list, value: object, what: str) -> object:
        if not isinstance(value, int) or isinstance(value, bool) or not (
                0 <= value < len(table)):
            raise self.fail(f"{what} {value!r} is not the index of an earlier entry")
        return table[value]

    def type_ref(self, value: object, cls: type | tuple = Type) -> Type:
        t = self.ref(self.types, value, "type")
        if not isinstance(t, cls):
            raise self.fail(f"type {value} is a {type(t).__name__}, not what is needed here")
        return t

    def type_list(self, entry: Mapping, name: str, cls: type | tuple = Type) -> list:
        return [self.type_ref(v, cls) for v in self.field(entry, name, list)]

    def node_ref(self, value: object, cls: type | tuple = Expr) -> Expr:
        e = self.ref(self.nodes, value, "node")
        if not isinstance(e, cls):
            raise self.fail(f"node {value} is a {type(e).__name__}, not what is needed here")
        return e

    def node_list(self, entry: Mapping, name: str, cls: type | tuple = Expr) -> list:
        return [self.node_ref(v, cls) for v in self.field(entry, name, list)]

    def attrs(self, value: object) -> Attrs:
        if not isinstance(value, dict):
            raise self.fail("attrs must be an object")

        def check(v: object) -> object:
            if isinstance(v, list):
                return tuple(check(x) for x in v)
            if v is None or isinstance(v, bool | int | float | str):
                return v
            raise self.fail(f"bad attribute value {v!r}")

        return Attrs({k: check(v) for k, v in value.items()})

    def read_type(self, entry: Mapping) -> Type:
        k = self.field(entry, "k", str)
        if k == "tensor":
            shape = []
            for d in self.field(entry, "shape", list):
                if d is None:
                    shape.append(Any)
                elif isinstance(d, str):
                    shape.append(SymDim(d))
                elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
                    shape.append(d)
                else:
                    raise self.fail(f"bad dimension {d!r}")
            return TensorType(tuple(shape), self.field(entry, "dtype", str))
        if k == "tuple":
            return TupleType(self.type_list(entry, "fields"))
        if k == "tvar":
            return TypeVar(self.field(entry, "name", str), self.field(entry, "kind", str))
        if k == "gtv":
            return GlobalTypeVar(self.field(entry, "name", str), self.field(entry, "kind", str))
        if k == "incomplete":
            return IncompleteType(self.field(entry, "id", int), self.field(entry, "kind", str))
        if k == "relation":
            return TypeRelation(self.field(entry, "func", str), self.type_list(entry, "args"),
                                self.field(entry, "num_inputs", int),
                                self.attrs(entry.get("attrs", {})))
        if k == "func":
            return FuncType(self.type_list(entry, "args"),
                            self.type_ref(self.field(entry, "ret", int)),
                            self.type_list(entry, "params", TypeVar),
                            self.type_list(entry, "constraints", TypeRelation))
        if k == "ref":
            return RefType(self.type_ref(self.field(entry, "value", int)))
        if k == "call":
            return TypeCall(self.type_ref(self.field(entry, "func", int)),
                            self.type_list(entry, "args"))
        if k == "data":
            header = self.type_ref(self.field(entry, "header", int), GlobalTypeVar)
            ctors = []
            for c in self.field(entry, "ctors", list):
                if not isinstance(c, dict):
                    raise self.fail("a constructor is an object")
                ctors.append(Constructor(self.field(c, "name", str), self.type_list(c, "inputs"),
                                         header, self.field(c, "tag", int)))
            data = TypeData(header, self.type_list(entry, "vars", TypeVar), ctors)
            for c in ctors:
                self.ctors.setdefault(c.name, c)
            return data
        raise self.fail(f"unknown type kind {k!r}")

    def pattern(self, p: object, depth: int = 0) -> Pattern:
        if not isinstance(p, dict) or depth > MAX_DEPTH:
            raise self.fail("a pattern is an object (and not nested too deep)")
        k = self.field(p, "k", str)
        if k == "wild":
            return PatternWildcard()
        if k == "var":
            return PatternVar(self.node_ref(self.field(p, "var", int), Var))
        pats = [self.pattern(q, depth + 1) for q in self.field(p, "pats", list)]
        if k == "ctor":
            return PatternConstructor(self.node_ref(self.field(p, "ctor", int), Constructor),
                                      pats)
        if k == "tuple":
            return PatternTuple(pats)
        raise self.fail(f"unknown pattern kind {k!r}")

    def constant(self, entry: Mapping) -> Constant:
        if "npz" in entry:
            key = self.field(entry, "npz", str)
            if self.npz is None or key not in self.npz:
                raise self.fail(f"constant {key!r} is in a side .npz file that was not given "
                                "(or lacks it)")
            arr = np.asarray(self.npz[key])
            if (arr.dtype != _dtype(self.field(entry, "dtype", str))
                    or list(arr.shape) != self.field(entry, "shape", list)):
                raise self.fail(f"side array {key!r} has another dtype or shape")
            return Constant(arr)
        return Constant(decode_array({k: entry.get(k) for k in ("dtype", "shape", "data")},
                                     self.max_bytes))

    def read_expr(self, entry: Mapping) -> Expr:
        k = self.field(entry, "k", str)
        n = self.node_ref
        if k == "Var":
            t = entry.get("type")
            return Var(self.field(entry, "name", str), None if t is None else self.type_ref(t))
        if k == "GlobalVar":
            return GlobalVar(self.field(entry, "name", str))
        if k == "Op":
            try:
                return Op.get(self.field(entry, "name", str))
            except KeyError as err:
                raise self.fail(str(err)) from None
        if k == "Constant":
            return self.constant(entry)
        if k == "Constructor":
            ctor = Constructor(self.field(entry, "name", str), self.type_list(entry, "inputs"),
                               self.type_ref(self.field(entry, "belong_to", int), GlobalTypeVar),
                               self.field(entry, "tag", int))
            known = self.ctors.get(ctor.name)
            return known if known is not None and known == ctor and known.inputs == ctor.inputs \
                else ctor
        if k == "Call":
            return Call(n(self.field(entry, "op", int)), self.node_list(entry, "args"),
                        self.attrs(entry.get("attrs", {})), self.type_list(entry, "type_args"))
        if k == "Tuple":
            return Tuple(self.node_list(entry, "fields"))
        if k == "TupleGetItem":
            return TupleGetItem(n(self.field(entry, "tuple", int)),
                                self.field(entry, "index", int))
        if k == "Let":
            return Let(n(self.field(entry, "var", int), Var), n(self.field(entry, "value", int)),
                       n(self.field(entry, "body", int)))
        if k == "Function":
            ret = entry.get("ret")
            return Function(self.node_list(entry, "params", Var),
                            n(self.field(entry, "body", int)),
                            None if ret is None else self.type_ref(ret),
                            self.type_list(entry, "type_params", TypeVar),
                            self.attrs(entry.get("attrs", {})))
        if k == "If":
            return If(n(self.field(entry, "cond", int)), n(self.field(entry, "then", int)),
                      n(self.field(entry, "else", int)))
        if k == "Match":
            clauses = []
            for c in self.field(entry, "clauses", list):
                if not isinstance(c, list) or len(c) != 2:
                    raise self.fail("a clause is [pattern, node]")
                clauses.append(Clause(self.pattern(c[0]), n(c[1])))
            return Match(n(self.field(entry, "data", int)), clauses,
                         self.field(entry, "complete", bool))
        if k == "RefCreate":
            return RefCreate(n(self.field(entry, "value", int)))
        if k == "RefRead":
            return RefRead(n(self.field(entry, "ref", int)))
        if k == "RefWrite":
            return RefWrite(n(self.field(entry, "ref", int)), n(self.field(entry, "value", int)))
        raise self.fail(f"unknown node kind {k!r}")

    def read(self) -> Module:
        doc = self.doc
        for i, entry in enumerate(doc["types"]):
            self.where = f"type {i}"
            if not isinstance(entry, dict):
                raise self.fail("an entry is an object")
            self.types.append(self.read_type(entry))
        for i, entry in enumerate(doc["nodes"]):
            self.where = f"node {i}"
            if not isinstance(entry, dict):
                raise self.fail("an entry is an object")
            e = self.read_expr(entry)
            span = entry.get("span")
            if span is not None:
                if not (isinstance(span, list) and len(span) == 3 and isinstance(span[0], int)
                        and isinstance(span[1], int) and isinstance(span[2], str | None)):
                    raise self.fail("a span is [line, column, source]")
                if e.span is None and not isinstance(e, Op | Constructor):
                    object.__setattr__(e, "span", Span(*span))
            if "ct" in entry:
                set_checked_type(e, self.type_ref(entry["ct"]))
            self.nodes.append(e)
        mod = Module()
        self.where = "type_definitions"
        for t in self.field(doc, "type_definitions", list):
            mod.add_type(self.type_ref(t, TypeData))
        self.where = "functions"
        for f in self.field(doc, "functions", list):
            if not isinstance(f, dict):
                raise self.fail("a function entry is an object")
            mod.add(self.field(f, "name", str), self.node_ref(self.field(f, "node", int),
                                                              Function))
        return mod


def from_json_dict(doc: Mapping, npz: Mapping | None = None, max_nodes: int = MAX_NODES,
                   max_bytes: int = MAX_BYTES) -> Module:
    """The module ``to_json_dict`` made (ValueError for anything malformed)."""
    if not isinstance(doc, Mapping):
        raise ValueError("JSON IR: the document is not an object")
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ValueError(f"JSON IR: not a {FORMAT} document of version {VERSION} "
                         f"(format={doc.get('format')!r}, version={doc.get('version')!r})")
    for key in ("types", "nodes", "type_definitions", "functions"):
        if not isinstance(doc.get(key), list):
            raise ValueError(f"JSON IR: {key!r} must be a list")
    count = len(doc["types"]) + len(doc["nodes"])
    if count > max_nodes:
        raise ValueError(f"JSON IR: {count} nodes exceed the limit of {max_nodes}")
    reader = _Reader(doc, npz, max_bytes)
    try:
        return reader.read()
    except (TypeError, KeyError) as err:  # a node's own checks (arity, attrs...)
        raise ValueError(f"JSON IR: {reader.where}: {err}") from None


def load_json(text: str | bytes, npz_path: str | None = None, max_bytes: int = MAX_BYTES,
              max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Module:
    """The module ``save_json`` wrote. Refuses (ValueError) text over ``max_bytes``, more
    than ``max_nodes`` types and nodes, JSON nested deeper than ``max_depth``, and anything
    malformed; executes nothing."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if len(text) > max_bytes:
        raise ValueError(f"JSON IR: {len(text)} bytes exceed the limit of {max_bytes}")
    depth = _json_depth(text)
    if depth > max_depth:
        raise ValueError(f"JSON IR: nested {depth} deep, over the limit of {max_depth}")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"JSON IR: not valid JSON: {err}") from None
    if npz_path is None:
        return from_json_dict(doc, None, max_nodes, max_bytes)
    with np.load(npz_path, allow_pickle=False) as npz:
        return from_json_dict(doc, npz, max_nodes, max_bytes)
