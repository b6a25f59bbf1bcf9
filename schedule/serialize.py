"""Tensor expressions as plain JSON, and back — without running any code from the JSON.

A computation travels between processes and machines (workers, the database, the
REST API) as a declarative document::

    {"version": 1,
     "tensors": [{"name": "A", "op": "placeholder", "shape": [4, 5], "dtype": "float32"},
                 {"name": "C", "op": "compute", "shape": [4], "axis": ["i"],
                  "reduce_axis": [["k", 5]], "body": ["reduce", ...], "tag": ""}],
     "outputs": ["C"]}

Expressions are nested lists: ``["var", name]``, ``["const", dtype, value]``,
``[op, a, b]`` for arithmetic / comparison / logic, ``["not", a]``,
``["call", fn, args...]``, ``["cast", dtype, a]``, ``["select", c, t, f]``,
``["load", tensor, indices...]`` and, at the top of a body only,
``["reduce", reducer, source, [axis names], condition-or-null]`` where ``reducer`` is
``{"name", "combine" (over vars x and y), "identity"}``. Decoding validates everything
(dtypes, names, arity, index counts, depth) and raises ``ValueError`` naming the problem.

The limits are chosen so that whatever decodes can also be keyed, printed, re-encoded and
lowered (lowering and code generation recurse over expressions and nested allocations):

- at most ``MAX_TENSORS`` tensors, of which at most ``MAX_COMPUTES`` computes;
- expressions nested at most ``MAX_DEPTH`` levels in the JSON, and at most
  ``MAX_INLINED_DEPTH`` levels once the elementwise tensors a body reads are inlined into it
  (which a schedule may do), so a long chain of elementwise stages is refused;
- integer constants within their dtype's range;
- every read provably inside its tensor (see ``bounds.check_loads``): indices are bounded
  by interval analysis over the iteration space, narrowed by ``select`` / ``where`` guards;
  a read that may leave its tensor, or whose index cannot be bounded, is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import dtype as dt
from .bounds import check_loads
from .dag import post_order
from .expr import (
    ARITH_OPS,
    COMPARE_OPS,
    LOGIC_OPS,
    MATH_FUNCS,
    Binary,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Load,
    Logic,
    Not,
    Select,
    Var,
    binary,
    call,
    cast,
    compare,
    logic,
    select,
    substitute,
)
from .ops.spec import MAX_DIM, MAX_ELEMENTS
from .tensor import ComputeOp, IterVar, PlaceholderOp, Reduce, Reducer, Tensor, check_body

FORMAT_VERSION = 1
MAX_DEPTH = 200
MAX_TENSORS = 1000
MAX_COMPUTES = 256
MAX_NDIM = 8
MAX_INLINED_DEPTH = 256


# ---------------------------------------------------------------------------- encoding


def _const_value(c: Const) -> Any:
    if isinstance(c.value, float) and not math.isfinite(c.value):
        return "nan" if math.isnan(c.value) else ("inf" if c.value > 0 else "-inf")
    return c.value


def encode_expr(e: Expr) -> Any:
    if isinstance(e, Var):
        return ["var", e.name]
    if isinstance(e, Const):
        return ["const", e.dtype, _const_value(e)]
    if isinstance(e, Compare | Logic | Binary):
        return [e.op, encode_expr(e.a), encode_expr(e.b)]
    if isinstance(e, Not):
        return ["not", encode_expr(e.a)]
    if isinstance(e, Call):
        return ["call", e.name, *(encode_expr(a) for a in e.args)]
    if isinstance(e, Cast):
        return ["cast", e.dtype, encode_expr(e.value)]
    if isinstance(e, Select):
        return ["select", encode_expr(e.cond), encode_expr(e.true_value),
                encode_expr(e.false_value)]
    if isinstance(e, Load):
        return ["load", e.source.name, *(encode_expr(i) for i in e.indices)]
    if isinstance(e, Reduce):
        x, y = Var("x", e.dtype), Var("y", e.dtype)
        reducer = {"name": e.reducer.name, "combine": encode_expr(e.reducer.combine(x, y)),
                   "identity": encode_expr(e.reducer.identity(e.dtype))}
        cond = None if e.condition is None else encode_expr(e.condition)
        return ["reduce", reducer, encode_expr(e.source), [a.name for a in e.axis], cond]
    raise TypeError(f"cannot encode {type(e).__name__}")


def to_json(outputs: Tensor | Sequence[Tensor]) -> dict[str, Any]:
    """The declarative JSON document of the computation producing ``outputs``."""
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    tensors = []
    names: set[str] = set()
    for op in post_order(outputs):
        if op.name in names:
            raise ValueError(f"two tensors are named {op.name!r}; names must be unique to be "
                             "serialised")
        names.add(op.name)
        if isinstance(op, PlaceholderOp):
            tensors.append({"name": op.name, "op": "placeholder", "shape": list(op.shape),
                            "dtype": op.dtype})
        else:
            assert isinstance(op, ComputeOp)
            tensors.append({"name": op.name, "op": "compute", "shape": list(op.shape),
                            "axis": [a.name for a in op.axis],
                            "reduce_axis": [[a.name, a.extent] for a in op.reduce_axis],
                            "body": encode_expr(op.body), "tag": op.tag})
    return {"version": FORMAT_VERSION, "tensors": tensors, "outputs": [t.name for t in outputs]}


# ---------------------------------------------------------------------------- decoding


class _Decoder:
    def __init__(self, tensors: dict[str, Tensor], variables: dict[str, Var],
                 where: str):
        self.tensors = tensors
        self.variables = variables
        self.where = where

    def fail(self, why: str) -> ValueError:
        return ValueError(f"workload JSON, {self.where}: {why}")

    def expr(self, node: Any, depth: int = 0) -> Expr:
        if depth > MAX_DEPTH:
            raise self.fail(f"expression nested deeper than {MAX_DEPTH}")
        if not isinstance(node, list) or not node or not isinstance(node[0], str):
            raise self.fail(f"an expression must be a list starting with its kind, got "
                            f"{str(node)[:80]}")
        kind, args = node[0], node[1:]
        try:
            return self._expr(kind, args, depth)
        except (TypeError, ValueError) as err:
            if str(err).startswith("workload JSON"):
                raise
            raise self.fail(f"{kind}: {err}") from None

    def _arity(self, kind: str, args: list, n: int) -> None:
        if len(args) != n:
            raise self.fail(f"'{kind}' takes {n} argument(s), got {len(args)}")

    def _expr(self, kind: str, args: list, depth: int) -> Expr:
        sub = depth + 1
        if kind == "var":
            self._arity(kind, args, 1)
            var = self.variables.get(args[0]) if isinstance(args[0], str) else None
            if var is None:
                raise self.fail(f"unknown variable {args[0]!r}")
            return var
        if kind == "const":
            self._arity(kind, args, 2)
            dtype = dt.check_dtype(args[0])
            value = args[1]
            if isinstance(value, str) and value in ("inf", "-inf", "nan"):
                value = float(value)
            if not isinstance(value, int | float | bool):
                raise self.fail(f"constant value must be a number, got {value!r}")
            const = Const(value, dtype)
            if dt.is_int(dtype):
                info = np.iinfo(dt.numpy_dtype(dtype))
                if not int(info.min) <= const.value <= int(info.max):
                    raise self.fail(f"constant {const.value} does not fit {dtype}")
            return const
        if kind in ARITH_OPS or kind == "pow":
            self._arity(kind, args, 2)
            return binary(kind, self.expr(args[0], sub), self.expr(args[1], sub))
        if kind in COMPARE_OPS:
            self._arity(kind, args, 2)
            return compare(kind, self.expr(args[0], sub), self.expr(args[1], sub))
        if kind in LOGIC_OPS:
            self._arity(kind, args, 2)
            return logic(kind, self.expr(args[0], sub), self.expr(args[1], sub))
        if kind == "not":
            self._arity(kind, args, 1)
            return Not(self.expr(args[0], sub))
        if kind == "call":
            if not args or args[0] not in MATH_FUNCS:
                raise self.fail(f"unknown function {args[:1]!r}; known: {', '.join(MATH_FUNCS)}")
            return call(args[0], *(self.expr(a, sub) for a in args[1:]))
        if kind == "cast":
            self._arity(kind, args, 2)
            return cast(args[0], self.expr(args[1], sub))
        if kind == "select":
            self._arity(kind, args, 3)
            return select(*(self.expr(a, sub) for a in args))
        if kind == "load":
            if not args or args[0] not in self.tensors:
                raise self.fail(f"load of unknown tensor {args[:1]!r} (tensors must be defined "
                                "before they are read)")
            return self.tensors[args[0]][tuple(self.expr(a, sub) for a in args[1:])]
        raise self.fail(f"unknown expression kind {kind!r}")

    def reducer(self, spec: Any, dtype: str) -> Reducer:
        if not isinstance(spec, dict) or set(spec) != {"name", "combine", "identity"}:
            raise self.fail("a reducer needs exactly 'name', 'combine' and 'identity'")
        x, y = Var("x", dtype), Var("y", dtype)
        inner = _Decoder(self.tensors, {"x": x, "y": y}, self.where)
        combine = inner.expr(spec["combine"])
        try:
            check_loads([], combine)
        except ValueError as err:
            raise self.fail(f"reducer combine: {err}") from None
        identity = _Decoder({}, {}, self.where).expr(spec["identity"])
        if not isinstance(identity, Const):
            raise self.fail("a reducer's identity must be a constant")
        return Reducer(str(spec["name"]),
                       lambda a, b: substitute(combine, {x: a, y: b}),
                       lambda t: cast(t, identity))


def _shape(doc: dict, where: str) -> tuple[int, ...]:
    shape = doc.get("shape")
    if not isinstance(shape, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in shape):
        raise ValueError(f"workload JSON, {where}: shape must be a list of positive integers")
    if len(shape) > MAX_NDIM or max(shape, default=1) > MAX_DIM \
            or math.prod(shape) > MAX_ELEMENTS:
        raise ValueError(f"workload JSON, {where}: shape {shape} is too large (limits: "
                         f"{MAX_NDIM} dimensions, {MAX_DIM} per dimension, {MAX_ELEMENTS} "
                         "elements)")
    return tuple(shape)


def _names(value: Any, where: str, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise ValueError(f"workload JSON, {where}: {what} must be a list of names")
    if len(set(value)) != len(value):
        raise ValueError(f"workload JSON, {where}: {what} has a repeated name")
    return value


def from_json(doc: Any) -> list[Tensor]:
    """Rebuild the output tensors of a document made by ``to_json``."""
    if not isinstance(doc, dict):
        raise ValueError("workload JSON must be an object")
    if doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"workload JSON: unsupported version {doc.get('version')!r} "
                         f"(this build reads version {FORMAT_VERSION})")
    entries = doc.get("tensors")
    if not isinstance(entries, list) or not entries or len(entries) > MAX_TENSORS:
        raise ValueError(f"workload JSON: 'tensors' must be a list of 1 to {MAX_TENSORS} "
                         "entries")
    tensors: dict[str, Tensor] = {}
    inlined: dict[int, int] = {}  # id(op) of elementwise computes -> their inlined depth
    computes = 0
    for n, entry in enumerate(entries):
        where = f"tensor {n}"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ValueError(f"workload JSON, {where}: needs a 'name'")
        name = entry["name"]
        where = f"tensor {name!r}"
        if name in tensors:
            raise ValueError(f"workload JSON, {where}: defined twice")
        shape = _shape(entry, where)
        if entry.get("op") == "placeholder":
            tensors[name] = PlaceholderOp(shape, dt.check_dtype(entry.get("dtype")), name).output
        elif entry.get("op") == "compute":
            computes += 1
            if computes > MAX_COMPUTES:
                raise ValueError(f"workload JSON: more than {MAX_COMPUTES} compute tensors")
            tensor = _compute(entry, shape, tensors, where)
            _check_inlined_depth(tensor, inlined, where)
            tensors[name] = tensor
        else:
            raise ValueError(f"workload JSON, {where}: op must be 'placeholder' or 'compute'")
    outputs = _names(doc.get("outputs"), "outputs", "outputs")
    missing = [o for o in outputs if o not in tensors]
    if missing or not outputs:
        raise ValueError(f"workload JSON: unknown outputs {missing}")
    return [tensors[o] for o in outputs]


def _compute(entry: dict, shape: tuple[int, ...], tensors: dict[str, Tensor],
             where: str) -> Tensor:
    axis_names = _names(entry.get("axis"), where, "axis")
    if len(axis_names) != len(shape):
        raise ValueError(f"workload JSON, {where}: {len(axis_names)} axis names for a "
                         f"{len(shape)}-d shape")
    reduce_spec = entry.get("reduce_axis", [])
    if not isinstance(reduce_spec, list) or not all(
            isinstance(r, list) and len(r) == 2 and isinstance(r[0], str)
            and isinstance(r[1], int) and not isinstance(r[1], bool)
            and 1 <= r[1] <= MAX_DIM for r in reduce_spec):
        raise ValueError(f"workload JSON, {where}: reduce_axis must be [[name, extent], ...] "
                         f"with extents from 1 to {MAX_DIM}")
    axis = [IterVar(Var(n), s, IterVar.SPATIAL) for n, s in zip(axis_names, shape, strict=True)]
    reduce_axis = [IterVar(Var(n), e, IterVar.REDUCE) for n, e in reduce_spec]
    variables = {iv.name: iv.var for iv in [*axis, *reduce_axis]}
    if len(variables) != len(axis) + len(reduce_axis):
        raise ValueError(f"workload JSON, {where}: axis and reduce_axis names must differ")
    decoder = _Decoder(tensors, variables, where)
    body_doc = entry.get("body")
    if isinstance(body_doc, list) and body_doc and body_doc[0] == "reduce":
        if len(body_doc) != 5:
            raise decoder.fail("'reduce' takes reducer, source, axis names and condition")
        _, reducer_doc, source_doc, names, cond_doc = body_doc
        source = decoder.expr(source_doc)
        by_name = {iv.name: iv for iv in reduce_axis}
        if not isinstance(names, list) or sorted(names) != sorted(by_name):
            raise decoder.fail("a reduction must run over exactly the declared reduce_axis")
        cond = None if cond_doc is None else decoder.expr(cond_doc)
        body: Expr = Reduce(decoder.reducer(reducer_doc, source.dtype), source,
                            tuple(by_name[n] for n in names), cond)
    else:
        if reduce_axis:
            raise decoder.fail("reduce_axis given but the body is not a reduction")
        body = decoder.expr(body_doc)
    check_body(entry["name"], axis, body)
    try:
        check_loads(axis, body)
    except ValueError as err:
        raise decoder.fail(str(err)) from None
    tag = entry.get("tag", "")
    return ComputeOp(entry["name"], axis, body, tag if isinstance(tag, str) else "").output


def _check_inlined_depth(tensor: Tensor, inlined: dict[int, int], where: str) -> None:
    """Refuse a compute whose body, with the elementwise computes it reads inlined (as a
    schedule may), nests deeper than ``MAX_INLINED_DEPTH``; record its own inlined depth."""
    op = tensor.op
    assert isinstance(op, ComputeOp)
    depth: dict[int, int] = {}
    stack: list[tuple[Expr, bool]] = [(op.body, False)]
    while stack:  # iterative post-order over the body, each shared node once
        node, ready = stack.pop()
        if id(node) in depth:
            continue
        kids = node.children()
        if not ready:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in depth)
            continue
        below = max((depth[id(k)] for k in kids), default=0)
        if isinstance(node, Load) and isinstance(node.source, Tensor) \
                and id(node.source.op) in inlined:
            # inlining puts the body in place of the load, the indices in place of its axis
            # variables (leaves): at most the body's depth - 1 + the deepest index
            depth[id(node)] = below + inlined[id(node.source.op)] - 1
        else:
            depth[id(node)] = below + 1
    total = depth[id(op.body)]
    if total > MAX_INLINED_DEPTH:
        raise ValueError(f"workload JSON, {where}: its expression, counting the elementwise "
                         f"tensors it reads (which a schedule may inline), nests {total} levels, "
                         f"more than {MAX_INLINED_DEPTH}; split the computation into several "
                         "workloads")
    if not isinstance(op.body, Reduce):
        inlined[id(op)] = total
