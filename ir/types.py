"""Types of the graph IR.

Tensor types have a shape of dimensions — ``int``, a named symbolic ``SymDim`` (a batch
``n``), or the dynamic ``Any`` (known only at run time) — and a dtype string; scalars are
rank-0 tensor types. Further: ``TupleType``, polymorphic ``FuncType`` (type parameters
and ``TypeRelation`` constraints), ``TypeVar``, ``IncompleteType`` (a hole for inference to
fill), ``RefType``, and algebraic data types: a ``GlobalTypeVar`` names one, ``TypeData``
defines it (its type parameters and constructors), ``TypeCall`` applies it (``List[a]``).

Every type is immutable and compares structurally with ``==``: ``TensorType((1, 2),
"float32")`` equals any other such. A ``TypeVar`` is a binder, equal only to itself (its
name is a hint); types that bind type variables (``FuncType`` and ``TypeData``) compare up
to renaming of them (alpha-equivalence): ``fn[a](a) -> a`` equals ``fn[b](b) -> b``.
``GlobalTypeVar`` compares by name, ``IncompleteType`` by id, ``SymDim`` by name.
``hash()`` agrees with ``==``, and is the same in every process for types without free
type variables.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .attrs import EMPTY_ATTRS, Attrs

if TYPE_CHECKING:
    from .expr import Constructor


@functools.lru_cache(maxsize=1 << 16)
def stable_str_hash(text: str) -> int:
    """A 64-bit hash of ``text`` that is the same in every process."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


# ------------------------------------------------------------------------------ dimensions


class AnyDim:
    """The type of ``Any``: a dimension known only at run time (printed ``?``)."""

    __slots__ = ()
    _instance: AnyDim | None = None

    def __new__(cls) -> AnyDim:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "Any"

    def __str__(self) -> str:
        return "?"


#: The dynamic dimension (a singleton).
Any = AnyDim()


@dataclass(frozen=True, slots=True)
class SymDim:
    """A symbolic dimension, e.g. the batch size ``n``; equal to any SymDim of that name."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"a symbolic dimension needs a name, got {self.name!r}")

    def __str__(self) -> str:
        return self.name


Dim = int | SymDim | AnyDim


def as_dim(d: object) -> Dim:
    """``d`` as a dimension: an int >= 0 (numpy ints too), a SymDim (or a str naming one),
    or Any."""
    if isinstance(d, SymDim | AnyDim):
        return d
    if isinstance(d, str):
        return SymDim(d)
    if isinstance(d, int | np.integer) and not isinstance(d, bool | np.bool_):
        if d < 0:
            raise ValueError(f"a dimension must be >= 0, got {d}")
        return int(d)
    raise TypeError(f"a dimension is an int, a SymDim (or its name) or Any, got {d!r}")


def format_shape(shape: Sequence[Dim]) -> str:
    """A shape for messages, as Python writes tuples: ``(1, 512)``, ``(n, ?)``, ``(5,)``."""
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(d) for d in shape) + ")"


# ----------------------------------------------------------------------------------- types

#: The kinds of type variables (as in Relay).
TYPE_KINDS = frozenset({"Type", "ShapeVar", "BaseType", "Constraint", "AdtHandle", "TypeData"})


def _check_kind(kind: str) -> None:
    if kind not in TYPE_KINDS:
        raise ValueError(f"unknown type kind {kind!r} (one of {sorted(TYPE_KINDS)})")


def _types(items: Sequence[Type], what: str) -> tuple[Type, ...]:
    items = tuple(items)
    for t in items:
        if not isinstance(t, Type):
            raise TypeError(f"{what} must be types, got {t!r}")
    return items


class Type:
    """Base of all types: structural ``==`` and ``hash`` (see the module docstring)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Type):
            return NotImplemented
        return type_equal(self, other)

    def __hash__(self) -> int:
        return type_hash(self)


@dataclass(frozen=True, eq=False, slots=True)
class TensorType(Type):
    """A tensor of ``shape`` and ``dtype`` (rank 0: a scalar)."""

    shape: tuple[Dim, ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(as_dim(d) for d in self.shape))
        if not isinstance(self.dtype, str) or not self.dtype:
            raise TypeError(f"a dtype is a non-empty string, got {self.dtype!r}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        if not self.shape:
            return self.dtype
        dims = ", ".join(str(d) for d in self.shape)
        return f"Tensor[({dims}), {self.dtype}]"


@dataclass(frozen=True, eq=False, slots=True)
class TupleType(Type):
    fields: tuple[Type, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", _types(self.fields, "tuple fields"))

    def __str__(self) -> str:
        inner = ", ".join(str(f) for f in self.fields)
        return f"({inner},)" if len(self.fields) == 1 else f"({inner})"


@dataclass(frozen=True, eq=False, slots=True)
class TypeVar(Type):
    """A type variable: equal only to itself (``name`` is a hint), or to its counterpart
    under a binder being compared (alpha-equivalence)."""

    name: str
    kind: str = "Type"

    def __post_init__(self) -> None:
        _check_kind(self.kind)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False, slots=True)
class GlobalTypeVar(Type):
    """The name of an algebraic data type (``List``); equal by name."""

    name: str
    kind: str = "AdtHandle"

    def __post_init__(self) -> None:
        _check_kind(self.kind)

    def __str__(self) -> str:
        return self.name


_incomplete_ids = itertools.count()


@dataclass(frozen=True, eq=False, slots=True)
class IncompleteType(Type):
    """A hole for type inference to fill; equal by ``id``. ``IncompleteType.fresh()`` makes
    one with an id no other ``fresh`` call returns."""

    id: int
    kind: str = "Type"

    def __post_init__(self) -> None:
        _check_kind(self.kind)

    @classmethod
    def fresh(cls, kind: str = "Type") -> IncompleteType:
        return cls(next(_incomplete_ids), kind)

    def __str__(self) -> str:
        return f"?t{self.id}"


@dataclass(frozen=True, eq=False, slots=True)
class TypeRelation(Type):
    """A constraint among types: ``args`` are the inputs (the first ``num_inputs``) and the
    outputs of the relation named ``func_name`` (an operator's name for operator calls),
    with the call's ``attrs``."""

    func_name: str
    args: tuple[Type, ...]
    num_inputs: int
    attrs: Attrs = EMPTY_ATTRS

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", _types(self.args, "relation arguments"))
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", Attrs(self.attrs))

    def __str__(self) -> str:
        return f"{self.func_name}({', '.join(str(a) for a in self.args)})"


@dataclass(frozen=True, eq=False, slots=True)
class FuncType(Type):
    """``fn[type_params](arg_types) -> ret_type where type_constraints``."""

    arg_types: tuple[Type, ...]
    ret_type: Type
    type_params: tuple[TypeVar, ...] = ()
    type_constraints: tuple[TypeRelation, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "arg_types", _types(self.arg_types, "argument types"))
        _types((self.ret_type,), "a return type")
        params = tuple(self.type_params)
        if not all(isinstance(p, TypeVar) for p in params):
            raise TypeError(f"type parameters must be TypeVars, got {params!r}")
        object.__setattr__(self, "type_params", params)
        object.__setattr__(self, "type_constraints",
                           _types(self.type_constraints, "type constraints"))

    def __str__(self) -> str:
        params = f"[{', '.join(str(p) for p in self.type_params)}]" if self.type_params else ""
        args = ", ".join(str(a) for a in self.arg_types)
        return f"fn{params}({args}) -> {self.ret_type}"


@dataclass(frozen=True, eq=False, slots=True)
class RefType(Type):
    """The type of a mutable reference cell holding a ``value``."""

    value: Type

    def __post_init__(self) -> None:
        _types((self.value,), "a reference's value type")

    def __str__(self) -> str:
        return f"ref({self.value})"


@dataclass(frozen=True, eq=False, slots=True)
class TypeCall(Type):
    """An ADT applied to type arguments: ``TypeCall(List, (a,))`` is ``List[a]``."""

    func: Type
    args: tuple[Type, ...]

    def __post_init__(self) -> None:
        _types((self.func,), "a type call's function")
        object.__setattr__(self, "args", _types(self.args, "type arguments"))

    def __str__(self) -> str:
        return f"{self.func}[{', '.join(str(a) for a in self.args)}]"


@dataclass(frozen=True, eq=False, slots=True)
class TypeData(Type):
    """The definition of an ADT: ``type List[a] { Cons(a, List[a]), Nil }``. Each
    constructor must belong to ``header``; their names and tags are distinct."""

    header: GlobalTypeVar
    type_vars: tuple[TypeVar, ...]
    constructors: tuple[Constructor, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.header, GlobalTypeVar):
            raise TypeError(f"a type definition's header is a GlobalTypeVar, got {self.header!r}")
        object.__setattr__(self, "type_vars", tuple(self.type_vars))
        if not all(isinstance(v, TypeVar) for v in self.type_vars):
            raise TypeError(f"type parameters must be TypeVars, got {self.type_vars!r}")
        object.__setattr__(self, "constructors", tuple(self.constructors))
        names, tags = set(), set()
        for c in self.constructors:
            if c.belong_to != self.header:
                raise ValueError(f"constructor {c.name} belongs to {c.belong_to}, "
                                 f"not to {self.header}")
            if c.name in names or c.tag in tags:
                raise ValueError(f"type {self.header}: constructor names and tags must be "
                                 f"distinct ({c.name}, tag {c.tag})")
            names.add(c.name)
            tags.add(c.tag)

    def __str__(self) -> str:
        params = f"[{', '.join(str(v) for v in self.type_vars)}]" if self.type_vars else ""
        cons = ", ".join(f"{c.name}({', '.join(str(t) for t in c.inputs)})" if c.inputs
                         else c.name for c in self.constructors)
        return f"type {self.header}{params} {{ {cons} }}"


# --------------------------------------------------------------------------------- helpers


def scalar_type(dtype: str) -> TensorType:
    """The rank-0 tensor type of ``dtype``."""
    return TensorType((), dtype)


def type_children(t: Type) -> tuple[Type, ...]:
    """The types directly inside ``t`` (type parameters, being binders, excluded)."""
    if isinstance(t, TupleType):
        return t.fields
    if isinstance(t, FuncType):
        return (*t.arg_types, t.ret_type, *t.type_constraints)
    if isinstance(t, RefType):
        return (t.value,)
    if isinstance(t, TypeCall):
        return (t.func, *t.args)
    if isinstance(t, TypeRelation):
        return t.args
    if isinstance(t, TypeData):
        return tuple(i for c in t.constructors for i in c.inputs)
    return ()


def walk_type(t: Type) -> Iterator[Type]:
    """``t`` and every type inside it, pre-order."""
    stack = [t]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(type_children(cur)))


def is_dynamic(t: Type) -> bool:
    """Whether some tensor type in ``t`` has an ``Any`` dimension (symbolic dimensions are
    not dynamic: they are names for sizes fixed per call)."""
    return any(isinstance(s, TensorType) and any(d is Any for d in s.shape)
               for s in walk_type(t))


def substitute(t: Type, mapping: Mapping[Type, Type]) -> Type:
    """``t`` with each TypeVar / IncompleteType that is a key of ``mapping`` replaced by its
    value (type parameters of an inner ``FuncType`` shadow the mapping)."""
    if not mapping:
        return t
    if isinstance(t, TypeVar | IncompleteType):
        return mapping.get(t, t)
    if isinstance(t, TupleType):
        return TupleType(tuple(substitute(f, mapping) for f in t.fields))
    if isinstance(t, FuncType):
        inner = {k: v for k, v in mapping.items() if not any(k is p for p in t.type_params)}
        return FuncType(tuple(substitute(a, inner) for a in t.arg_types),
                        substitute(t.ret_type, inner), t.type_params,
                        tuple(substitute(c, inner) for c in t.type_constraints))
    if isinstance(t, RefType):
        return RefType(substitute(t.value, mapping))
    if isinstance(t, TypeCall):
        return TypeCall(substitute(t.func, mapping),
                        tuple(substitute(a, mapping) for a in t.args))
    if isinstance(t, TypeRelation):
        return TypeRelation(t.func_name, tuple(substitute(a, mapping) for a in t.args),
                            t.num_inputs, t.attrs)
    return t


# ----------------------------------------------------------- structural equality and hash


def type_equal(a: Type, b: Type, lmap: dict[int, TypeVar] | None = None,
               rmap: dict[int, TypeVar] | None = None, map_free: bool = False) -> bool:
    """Alpha-equivalence of two types. ``lmap``/``rmap`` (id of a TypeVar -> its
    counterpart, both ways) are the type variables already bound to each other by an
    enclosing binder (``ir.structural_equal`` passes those of functions' type params);
    ``map_free``: unbound type variables may correspond too (else only to themselves)."""
    return _TypeEqual({} if lmap is None else lmap, {} if rmap is None else rmap,
                      map_free).eq(a, b)


class _TypeEqual:
    def __init__(self, lmap: dict[int, TypeVar], rmap: dict[int, TypeVar], map_free: bool):
        self.lmap, self.rmap, self.map_free = lmap, rmap, map_free

    def all(self, xs: Sequence[Type], ys: Sequence[Type]) -> bool:
        return len(xs) == len(ys) and all(self.eq(x, y) for x, y in zip(xs, ys, strict=True))

    def bind(self, xs: Sequence[TypeVar], ys: Sequence[TypeVar]) -> list | None:
        """Bind binders ``xs`` to ``ys``; the entries to restore afterwards, or None if
        they cannot correspond."""
        if len(xs) != len(ys) or any(x.kind != y.kind for x, y in zip(xs, ys, strict=True)):
            return None
        saved = [(x, y, self.lmap.get(id(x)), self.rmap.get(id(y)))
                 for x, y in zip(xs, ys, strict=True)]
        for x, y in zip(xs, ys, strict=True):
            self.lmap[id(x)], self.rmap[id(y)] = y, x
        return saved

    def unbind(self, saved: list) -> None:
        for x, y, old_l, old_r in reversed(saved):
            for table, key, old in ((self.lmap, id(x), old_l), (self.rmap, id(y), old_r)):
                if old is None:
                    table.pop(key, None)
                else:
                    table[key] = old

    def eq(self, a: Type, b: Type) -> bool:
        kind = type(a)
        if kind is not type(b):
            return False
        if kind is TensorType:
            return a.dtype == b.dtype and a.shape == b.shape
        if kind is TypeVar:
            mapped = self.lmap.get(id(a))
            if mapped is not None:
                return mapped is b
            if id(b) in self.rmap:
                return False
            if a is b:
                return True
            if self.map_free and a.kind == b.kind:
                self.lmap[id(a)], self.rmap[id(b)] = b, a
                return True
            return False
        if kind is GlobalTypeVar:
            return a.name == b.name and a.kind == b.kind
        if kind is IncompleteType:
            return a.id == b.id
        if kind is TupleType:
            return self.all(a.fields, b.fields)
        if kind is RefType:
            return self.eq(a.value, b.value)
        if kind is TypeCall:
            return self.eq(a.func, b.func) and self.all(a.args, b.args)
        if kind is TypeRelation:
            return (a.func_name == b.func_name and a.num_inputs == b.num_inputs
                    and a.attrs == b.attrs and self.all(a.args, b.args))
        if kind is FuncType:
            saved = self.bind(a.type_params, b.type_params)
            if saved is None:
                return False
            try:
                return (self.all(a.arg_types, b.arg_types) and self.eq(a.ret_type, b.ret_type)
                        and self.all(a.type_constraints, b.type_constraints))
            finally:
                self.unbind(saved)
        if kind is TypeData:
            if not self.eq(a.header, b.header) or len(a.constructors) != len(b.constructors):
                return False
            saved = self.bind(a.type_vars, b.type_vars)
            if saved is None:
                return False
            try:
                return all(x.name == y.name and x.tag == y.tag and self.all(x.inputs, y.inputs)
                           for x, y in zip(a.constructors, b.constructors, strict=True))
            finally:
                self.unbind(saved)
        raise TypeError(f"not a type: {a!r}")


# Kind codes for hashing (ints, so that hashes do not depend on the process's string hash).
_CODES: dict[type, int] = {TensorType: 1, TupleType: 2, TypeVar: 3, GlobalTypeVar: 4,
                           IncompleteType: 5, TypeRelation: 6, FuncType: 7, RefType: 8,
                           TypeCall: 9, TypeData: 10}


def dim_hash(d: Dim) -> int:
    """A process-independent hash of a dimension."""
    if isinstance(d, int):
        return hash(d)
    if isinstance(d, SymDim):
        return hash((-2, stable_str_hash(d.name)))
    return -3


def type_hash(t: Type, bound: dict[int, int] | None = None) -> int:
    """A hash of ``t`` consistent with ``type_equal``: a bound type variable hashes by its
    binding depth, a free one by identity. ``bound``: id of TypeVar -> depth, for variables
    bound outside ``t`` (``ir.structural_hash`` passes those of functions' type params)."""
    return _type_hash(t, {} if bound is None else bound)


def _type_hash(t: Type, bound: dict[int, int]) -> int:
    kind = type(t)
    code = _CODES[kind]
    if kind is TensorType:
        return hash((code, stable_str_hash(t.dtype), *(dim_hash(d) for d in t.shape)))
    if kind is TypeVar:
        level = bound.get(id(t))
        return hash((code, level)) if level is not None else hash((code, -1, id(t)))
    if kind is GlobalTypeVar:
        return hash((code, stable_str_hash(t.name)))
    if kind is IncompleteType:
        return hash((code, t.id))
    if kind in (FuncType, TypeData):
        params = t.type_params if kind is FuncType else t.type_vars
        saved = [(id(p), bound.get(id(p))) for p in params]
        for p in params:
            bound[id(p)] = len(bound)
        try:
            if kind is FuncType:
                parts = (len(params), len(t.arg_types),
                         *(_type_hash(c, bound) for c in type_children(t)))
            else:
                parts = (len(params), _type_hash(t.header, bound),
                         *((stable_str_hash(c.name), c.tag,
                            *(_type_hash(i, bound) for i in c.inputs))
                           for c in t.constructors))
        finally:
            for key, old in reversed(saved):
                if old is None:
                    bound.pop(key, None)
                else:
                    bound[key] = old
        return hash((code, *parts))
    if kind is TypeRelation:
        return hash((code, stable_str_hash(t.func_name), t.num_inputs, t.attrs.stable_hash(),
                     *(_type_hash(a, bound) for a in t.args)))
    return hash((code, len(type_children(t)), *(_type_hash(c, bound) for c in type_children(t))))
