"""Expressions of the graph IR: immutable nodes.

Atoms: ``Var`` (a local, ``%x``: a binder, equal only to itself; its name is a hint),
``GlobalVar`` (``@f``, equal by name), ``Constant`` (a numpy tensor, equal by dtype, shape
and bytes), ``Op`` (a registered operator, ``Op.get("nn.dense")``, equal by name) and
``Constructor`` (of an algebraic data type, equal by name, tag and type).
Compound: ``Call``, ``Tuple``, ``TupleGetItem``, ``Let``, ``Function``, ``If``, ``Match``
(with ``Clause`` s of ``Pattern`` s), ``RefCreate``, ``RefRead``, ``RefWrite``. ``==`` on
compound nodes is identity (cheap, for memo tables); compare structure with
``ir.structural_equal`` / ``ir.structural_hash`` (alpha-equivalence for bound variables).

Every expression has a ``span`` (source position or None; never part of equality) and a
``checked_type``: the type inference gave it. Types are stored on the node itself — set
only through ``set_checked_type``, which is for type inference — rather than in a side
table, so that every consumer (fusion, lowering, printer, interpreter) reads
``e.checked_type`` of any subexpression without threading a table around, unchanged
subtrees keep their types through rewrites (``ExprMutator`` shares them), and no table
keyed by ``id()`` can outlive its nodes. A new node has no type until inference runs again
(``checked_type`` raises). A node shared by two differently typed contexts (only a free
variable without annotation can be) keeps the type of the latest inference.

Each class names the ``visit_<kind>`` method of ``ExprVisitor`` / ``ExprMutator`` that
handles it (``visit_method``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .attrs import EMPTY_ATTRS, Attrs
from .span import Span
from .types import GlobalTypeVar, Type, TypeVar

if TYPE_CHECKING:
    from .op_registry import OpDef

_set = object.__setattr__


class Node:
    """Base of immutable IR nodes (expressions, clauses, patterns)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


def _expr(x: object, what: str) -> Expr:
    if not isinstance(x, Expr):
        raise TypeError(f"{what} must be an IR expression, got {type(x).__name__}: {x!r}")
    return x


def _opt_type(t: object, what: str) -> Type | None:
    if t is not None and not isinstance(t, Type):
        raise TypeError(f"{what} must be a Type or None, got {t!r}")
    return t


def _types(ts: Sequence[Type], what: str) -> tuple[Type, ...]:
    ts = tuple(ts)
    for t in ts:
        if not isinstance(t, Type):
            raise TypeError(f"{what} must be types, got {t!r}")
    return ts


class Expr(Node):
    """Base of expressions."""

    __slots__ = ("_checked_type", "span")
    #: The method of ``ExprVisitor`` / ``ExprMutator`` that handles this kind.
    visit_method: ClassVar[str]

    def _init_expr(self, span: Span | None) -> None:
        if span is not None and not isinstance(span, Span):
            raise TypeError(f"span must be a Span or None, got {span!r}")
        _set(self, "span", span)
        _set(self, "_checked_type", None)

    @property
    def checked_type(self) -> Type:
        """The type inference gave this expression; raises if it has not run on it."""
        if self._checked_type is None:
            raise ValueError(f"the type of {self!r} is not inferred yet: run type inference "
                             "on the module holding it")
        return self._checked_type

    @property
    def checked_type_or_none(self) -> Type | None:
        return self._checked_type

    def __str__(self) -> str:
        """The expression in the text format (``ir.astext``)."""
        from .text import astext

        return astext(self)


def set_checked_type(expr: Expr, ty: Type) -> None:
    """Record ``ty`` as ``expr``'s checked type. For type inference only: the one place
    where an expression changes after it is built."""
    if not isinstance(ty, Type):
        raise TypeError(f"a checked type must be a Type, got {ty!r}")
    _set(expr, "_checked_type", ty)


# ----------------------------------------------------------------------------------- atoms


class Var(Expr):
    """A local variable ``%name_hint``, optionally annotated with its type."""

    __slots__ = ("name_hint", "type_annotation")
    visit_method = "visit_var"

    def __init__(self, name_hint: str, type_annotation: Type | None = None,
                 span: Span | None = None):
        if not isinstance(name_hint, str):
            raise TypeError(f"a variable's name hint is a str, got {name_hint!r}")
        _set(self, "name_hint", name_hint)
        _set(self, "type_annotation", _opt_type(type_annotation, "a type annotation"))
        self._init_expr(span)

    def __repr__(self) -> str:
        ann = f": {self.type_annotation}" if self.type_annotation is not None else ""
        return f"Var(%{self.name_hint}{ann})"


class GlobalVar(Expr):
    """The name ``@name`` of a module's global function; equal (and hashed) by name."""

    __slots__ = ("name",)
    visit_method = "visit_global_var"

    def __init__(self, name: str, span: Span | None = None):
        if not isinstance(name, str) or not name:
            raise TypeError(f"a global's name is a non-empty str, got {name!r}")
        _set(self, "name", name)
        self._init_expr(span)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GlobalVar):
            return NotImplemented
        return self.name == other.name

    def __hash__(self) -> int:
        return hash(("GlobalVar", self.name))

    def __repr__(self) -> str:
        return f"GlobalVar(@{self.name})"


class Constant(Expr):
    """A constant tensor: a read-only numpy array (copied when given a writeable one).
    Equal (and hashed) by dtype, shape and bytes."""

    __slots__ = ("_hash", "data")
    visit_method = "visit_constant"

    def __init__(self, data: np.ndarray, span: Span | None = None):
        if not isinstance(data, np.ndarray):
            raise TypeError(f"a Constant holds a numpy array, got {type(data).__name__}; "
                            "use ir.const() for Python values")
        if data.dtype.kind not in "biufc":
            raise TypeError(f"a Constant's dtype must be numeric or bool, got {data.dtype}")
        if data.flags.writeable or not data.flags.c_contiguous:
            data = np.array(data, order="C", copy=True)
            data.flags.writeable = False
        _set(self, "data", data)
        _set(self, "_hash", None)
        self._init_expr(span)

    @property
    def dtype(self) -> str:
        return str(self.data.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def same_value(self, other: Constant) -> bool:
        a, b = self.data, other.data
        return a is b or (a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
            a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Constant):
            return NotImplemented
        return self.same_value(other)

    def __hash__(self) -> int:
        return self.stable_hash()

    def stable_hash(self) -> int:
        """A hash of dtype, shape and bytes that is the same in every process (cached)."""
        if self._hash is None:
            h = hashlib.blake2b(digest_size=8)
            h.update(f"{self.data.dtype}{self.data.shape}".encode())
            h.update(self.data.reshape(-1).view(np.uint8).data)
            _set(self, "_hash", int.from_bytes(h.digest(), "little"))
        return self._hash

    def __repr__(self) -> str:
        if self.data.size <= 4:
            return f"Constant({self.data.tolist()!r}, {self.dtype})"
        return f"Constant(<{self.dtype} {self.shape}>)"


class Op(Expr):
    """A registered operator (the callee of operator calls). There is one ``Op`` per
    registered name: ``Op.get(name)``; ``op.opdef`` is its registry entry
    (``ir.op_registry.OpDef``). Equal by name."""

    __slots__ = ("name", "opdef")
    visit_method = "visit_op"
    _table: ClassVar[dict[str, Op]] = {}

    def __init__(self, opdef: OpDef):
        _set(self, "name", opdef.name)
        _set(self, "opdef", opdef)
        self._init_expr(None)

    @staticmethod
    def get(name: str) -> Op:
        """The operator registered as ``name``; KeyError naming close matches if none."""
        try:
            return Op._table[name]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(name, Op._table, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise KeyError(f"unknown operator {name!r}{hint}") from None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Op):
            return NotImplemented
        return self.name == other.name

    def __hash__(self) -> int:
        return hash(("Op", self.name))

    def __repr__(self) -> str:
        return f"Op({self.name})"


class Constructor(Expr):
    """A constructor of the ADT ``belong_to``, taking fields of types ``inputs`` (in terms
    of the type definition's type variables); ``tag`` numbers it within its type. Called
    like a function; matched by ``PatternConstructor``. Equal by name, tag and type."""

    __slots__ = ("belong_to", "inputs", "name", "tag")
    visit_method = "visit_constructor"

    def __init__(self, name: str, inputs: Sequence[Type], belong_to: GlobalTypeVar, tag: int,
                 span: Span | None = None):
        if not isinstance(belong_to, GlobalTypeVar):
            raise TypeError(f"constructor {name}: belong_to is a GlobalTypeVar, "
                            f"got {belong_to!r}")
        _set(self, "name", str(name))
        _set(self, "inputs", _types(inputs, f"constructor {name}'s inputs"))
        _set(self, "belong_to", belong_to)
        _set(self, "tag", int(tag))
        self._init_expr(span)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Constructor):
            return NotImplemented
        return (self.name, self.tag, self.belong_to) == (other.name, other.tag, other.belong_to)

    def __hash__(self) -> int:
        return hash(("Constructor", self.name, self.tag, self.belong_to.name))

    def __repr__(self) -> str:
        return f"Constructor({self.name}, {self.belong_to.name}, tag={self.tag})"


# -------------------------------------------------------------------------------- compound


class Call(Expr):
    """``op(args)``. ``op`` is an ``Op``, a ``Constructor``, or any expression of function
    type (a ``Function``, ``Var``, ``GlobalVar``...). ``attrs`` (always an ``Attrs``) are
    checked against and completed by the operator's schema when ``op`` is an ``Op``.
    ``type_args`` instantiate a polymorphic callee (filled by type inference)."""

    __slots__ = ("args", "attrs", "op", "type_args")
    visit_method = "visit_call"

    def __init__(self, op: Expr, args: Sequence[Expr], attrs: Attrs | dict | None = None,
                 type_args: Sequence[Type] = (), span: Span | None = None):
        _expr(op, "a call's callee")
        args = tuple(args)
        for i, a in enumerate(args):
            _expr(a, f"argument {i} of a call")
        if isinstance(op, Op):
            n = op.opdef.num_inputs
            if n >= 0 and len(args) != n:
                raise TypeError(f"{op.name} takes {n} input{'s' * (n != 1)}, got {len(args)}")
            attrs = op.opdef.make_attrs(attrs)
        else:
            if isinstance(op, Constructor) and len(args) != len(op.inputs):
                raise TypeError(f"constructor {op.name} takes {len(op.inputs)} fields, "
                                f"got {len(args)}")
            attrs = EMPTY_ATTRS if attrs is None else (
                attrs if isinstance(attrs, Attrs) else Attrs(attrs))
        _set(self, "op", op)
        _set(self, "args", args)
        _set(self, "attrs", attrs)
        _set(self, "type_args", _types(type_args, "type arguments"))
        self._init_expr(span)

    def __repr__(self) -> str:
        callee = op.name if isinstance(op := self.op, Op | Constructor) else type(op).__name__
        return f"Call({callee}, {len(self.args)} args)"


class Tuple(Expr):
    __slots__ = ("fields",)
    visit_method = "visit_tuple"

    def __init__(self, fields: Sequence[Expr], span: Span | None = None):
        fields = tuple(fields)
        for i, f in enumerate(fields):
            _expr(f, f"tuple field {i}")
        _set(self, "fields", fields)
        self._init_expr(span)

    def __repr__(self) -> str:
        return f"Tuple({len(self.fields)} fields)"


class TupleGetItem(Expr):
    """``tuple_value.index``."""

    __slots__ = ("index", "tuple_value")
    visit_method = "visit_tuple_getitem"

    def __init__(self, tuple_value: Expr, index: int, span: Span | None = None):
        if not isinstance(index, int | np.integer) or isinstance(index, bool) or index < 0:
            raise TypeError(f"a tuple index is an int >= 0, got {index!r}")
        _set(self, "tuple_value", _expr(tuple_value, "a projected tuple"))
        _set(self, "index", int(index))
        self._init_expr(span)

    def __repr__(self) -> str:
        return f"TupleGetItem(.{self.index})"


class Let(Expr):
    """``let %var = value; body`` (``var`` is in scope in ``body``, and in ``value`` when
    that is a function: recursion)."""

    __slots__ = ("body", "value", "var")
    visit_method = "visit_let"

    def __init__(self, var: Var, value: Expr, body: Expr, span: Span | None = None):
        if not isinstance(var, Var):
            raise TypeError(f"let binds a Var, got {var!r}")
        _set(self, "var", var)
        _set(self, "value", _expr(value, "a let's value"))
        _set(self, "body", _expr(body, "a let's body"))
        self._init_expr(span)

    def __repr__(self) -> str:
        return f"Let(%{self.var.name_hint} = ...)"


class Function(Expr):
    """``fn[type_params](params) -> ret_type { body }`` — a closure when it has free
    variables. ``attrs`` mark e.g. fused functions (``{"Primitive": 1}``)."""

    __slots__ = ("attrs", "body", "params", "ret_type", "type_params")
    visit_method = "visit_function"

    def __init__(self, params: Sequence[Var], body: Expr, ret_type: Type | None = None,
                 type_params: Sequence[TypeVar] = (), attrs: Attrs | dict | None = None,
                 span: Span | None = None):
        params = tuple(params)
        if not all(isinstance(p, Var) for p in params):
            raise TypeError(f"function parameters are Vars, got {params!r}")
        type_params = tuple(type_params)
        if not all(isinstance(p, TypeVar) for p in type_params):
            raise TypeError(f"type parameters are TypeVars, got {type_params!r}")
        _set(self, "params", params)
        _set(self, "body", _expr(body, "a function's body"))
        _set(self, "ret_type", _opt_type(ret_type, "a return type"))
        _set(self, "type_params", type_params)
        _set(self, "attrs", attrs if isinstance(attrs, Attrs) else Attrs(attrs))
        self._init_expr(span)

    def with_attr(self, name: str, value: object) -> Function:
        """This function with attribute ``name`` set (a new node, same body)."""
        return Function(self.params, self.body, self.ret_type, self.type_params,
                        self.attrs.replace(**{name: value}), self.span)

    def __repr__(self) -> str:
        return f"Function({', '.join('%' + p.name_hint for p in self.params)})"


class If(Expr):
    __slots__ = ("cond", "false_branch", "true_branch")
    visit_method = "visit_if"

    def __init__(self, cond: Expr, true_branch: Expr, false_branch: Expr,
                 span: Span | None = None):
        _set(self, "cond", _expr(cond, "an if's condition"))
        _set(self, "true_branch", _expr(true_branch, "an if's true branch"))
        _set(self, "false_branch", _expr(false_branch, "an if's false branch"))
        self._init_expr(span)

    def __repr__(self) -> str:
        return "If(...)"


class RefCreate(Expr):
    """A new mutable cell holding ``value``."""

    __slots__ = ("value",)
    visit_method = "visit_ref_create"

    def __init__(self, value: Expr, span: Span | None = None):
        _set(self, "value", _expr(value, "a reference's initial value"))
        self._init_expr(span)


class RefRead(Expr):
    __slots__ = ("ref",)
    visit_method = "visit_ref_read"

    def __init__(self, ref: Expr, span: Span | None = None):
        _set(self, "ref", _expr(ref, "a read reference"))
        self._init_expr(span)


class RefWrite(Expr):
    """Store ``value`` into ``ref``; evaluates to the empty tuple."""

    __slots__ = ("ref", "value")
    visit_method = "visit_ref_write"

    def __init__(self, ref: Expr, value: Expr, span: Span | None = None):
        _set(self, "ref", _expr(ref, "a written reference"))
        _set(self, "value", _expr(value, "a written value"))
        self._init_expr(span)


# ------------------------------------------------------------------------ match, patterns


class Pattern(Node):
    """Base of match patterns."""

    __slots__ = ()


class PatternWildcard(Pattern):
    """``_``: matches anything, binds nothing."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PatternWildcard()"


class PatternVar(Pattern):
    """Matches anything and binds it to ``var``."""

    __slots__ = ("var",)

    def __init__(self, var: Var):
        if not isinstance(var, Var):
            raise TypeError(f"a pattern variable is a Var, got {var!r}")
        _set(self, "var", var)

    def __repr__(self) -> str:
        return f"PatternVar(%{self.var.name_hint})"


def _patterns(ps: Sequence[Pattern]) -> tuple[Pattern, ...]:
    ps = tuple(ps)
    if not all(isinstance(p, Pattern) for p in ps):
        raise TypeError(f"sub-patterns must be Patterns, got {ps!r}")
    return ps


class PatternConstructor(Pattern):
    """Matches a value built by ``constructor`` whose fields match ``patterns``."""

    __slots__ = ("constructor", "patterns")

    def __init__(self, constructor: Constructor, patterns: Sequence[Pattern] = ()):
        if not isinstance(constructor, Constructor):
            raise TypeError(f"a constructor pattern needs a Constructor, got {constructor!r}")
        patterns = _patterns(patterns)
        if len(patterns) != len(constructor.inputs):
            raise TypeError(f"pattern {constructor.name} needs {len(constructor.inputs)} "
                            f"sub-patterns, got {len(patterns)}")
        _set(self, "constructor", constructor)
        _set(self, "patterns", patterns)

    def __repr__(self) -> str:
        return f"PatternConstructor({self.constructor.name}, {len(self.patterns)})"


class PatternTuple(Pattern):
    __slots__ = ("patterns",)

    def __init__(self, patterns: Sequence[Pattern]):
        _set(self, "patterns", _patterns(patterns))

    def __repr__(self) -> str:
        return f"PatternTuple({len(self.patterns)})"


class Clause(Node):
    """``lhs => rhs`` of a match: the variables of pattern ``lhs`` are bound in ``rhs``."""

    __slots__ = ("lhs", "rhs")

    def __init__(self, lhs: Pattern, rhs: Expr):
        if not isinstance(lhs, Pattern):
            raise TypeError(f"a clause's left side is a Pattern, got {lhs!r}")
        _set(self, "lhs", lhs)
        _set(self, "rhs", _expr(rhs, "a clause's right side"))

    def __repr__(self) -> str:
        return f"Clause({self.lhs!r} => ...)"


class Match(Expr):
    """``match (data) { clauses }``: the first clause whose pattern matches. ``complete``:
    the clauses are meant to cover every value (inference may check it)."""

    __slots__ = ("clauses", "complete", "data")
    visit_method = "visit_match"

    def __init__(self, data: Expr, clauses: Sequence[Clause], complete: bool = True,
                 span: Span | None = None):
        clauses = tuple(clauses)
        if not all(isinstance(c, Clause) for c in clauses):
            raise TypeError(f"match clauses are Clauses, got {clauses!r}")
        _set(self, "data", _expr(data, "a matched value"))
        _set(self, "clauses", clauses)
        _set(self, "complete", bool(complete))
        self._init_expr(span)

    def __repr__(self) -> str:
        return f"Match({len(self.clauses)} clauses)"


def pattern_vars(pattern: Pattern) -> list[Var]:
    """The variables ``pattern`` binds, left to right."""
    out: list[Var] = []
    stack = [pattern]
    while stack:
        p = stack.pop()
        if isinstance(p, PatternVar):
            out.append(p.var)
        elif isinstance(p, PatternConstructor | PatternTuple):
            stack.extend(reversed(p.patterns))
    return out
