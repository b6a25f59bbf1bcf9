"""The operator registry: one table of every primitive operator the IR can call.

An ``OpDef`` says everything the layers need about an operator: its arity (``num_inputs``,
-1 for variadic), its attributes (``attrs_schema``: name -> (type, default)), its
``type_relation`` (input types + attrs -> output type, or an ``IRTypeError`` naming the
operator and the shapes), its fusion ``pattern``, a numpy ``compute`` (the reference the
interpreter and the tests use) and, later, a ``lowering`` to the schedule layer's tensor
expressions. ``register_op(opdef)`` adds one and returns its ``Op`` (the expression that
calls name it: ``Op.get(name)``); ``list_ops()`` lists them. Operators are defined in the
``ir.op`` package (one module per namespace), and ``ir.op.<namespace>.<name>(...)`` builds
calls of any registered operator without further code.

Attribute schema types: ``int``, ``float`` (ints accepted), ``bool``, ``str``, ``tuple``
(a list/tuple of JSON-able values; a single int/float is wrapped), ``object`` (any
JSON-able value), or a tuple of these (the first that accepts the value wins). A default
of ``None`` makes the attribute optional (None accepted).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from .attrs import Attrs, normalize_attr_value
from .errors import IRTypeError
from .expr import Op
from .types import Type


class OpPattern(IntEnum):
    """How an operator fuses with its neighbours (Relay's operator patterns)."""

    ELEMWISE = 0  # out[i] = f(in[i])
    BROADCAST = 1  # elementwise with broadcasting
    INJECTIVE = 2  # each output element reads some input elements (reshape, transpose)
    COMM_REDUCE = 3  # commutative reduction
    OUT_ELEMWISE_FUSABLE = 4  # complex (dense, conv2d) but elementwise ops fuse after it
    TUPLE = 7  # builds or projects tuples
    OPAQUE = 8  # does not fuse


#: (input types, attrs) -> output type; raises IRTypeError.
TypeRelationFn = Callable[[Sequence[Type], Attrs], Type]
#: (input arrays, attrs) -> output array, or a tuple of arrays.
ComputeFn = Callable[[Sequence[np.ndarray], Attrs], "np.ndarray | tuple"]

_SCHEMA_TYPES = (int, float, bool, str, tuple, object)


def _coerce(kind: type, value: object) -> object:
    """``value`` as schema type ``kind``; raises TypeError/ValueError when it is not one."""
    if kind is bool:
        if isinstance(value, bool | np.bool_):
            return bool(value)
    elif kind is int:
        if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
            return int(value)
    elif kind is float:
        if isinstance(value, int | float | np.integer | np.floating) and not isinstance(
                value, bool | np.bool_):
            return float(value)
    elif kind is str:
        if isinstance(value, str):
            return value
    elif kind is tuple:
        if isinstance(value, int | float | np.integer | np.floating) and not isinstance(
                value, bool | np.bool_):
            return (normalize_attr_value(value),)
        if isinstance(value, list | tuple | np.ndarray):
            return normalize_attr_value(value)
    elif kind is object:
        return normalize_attr_value(value)
    raise TypeError(kind.__name__)


@dataclass(frozen=True, eq=False)
class OpDef:
    """One operator's registry entry (see the module docstring)."""

    name: str
    num_inputs: int
    attrs_schema: Mapping[str, tuple[type | tuple[type, ...], object]]
    type_relation: TypeRelationFn
    pattern: OpPattern
    compute: ComputeFn
    lowering: Callable | None = None
    doc: str = ""
    _defaults: Attrs = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or " " in self.name:
            raise ValueError(f"an operator name is a non-empty word, got {self.name!r}")
        if not isinstance(self.num_inputs, int) or self.num_inputs < -1:
            raise ValueError(f"{self.name}: num_inputs is >= 0 or -1 (variadic)")
        object.__setattr__(self, "pattern", OpPattern(self.pattern))
        schema = dict(self.attrs_schema)
        for key, entry in schema.items():
            kinds = entry[0] if isinstance(entry[0], tuple) else (entry[0],)
            if not all(k in _SCHEMA_TYPES for k in kinds):
                raise ValueError(f"{self.name}: attribute {key} has an unsupported schema "
                                 f"type {entry[0]!r}")
        object.__setattr__(self, "attrs_schema", schema)
        object.__setattr__(self, "_defaults", None)
        object.__setattr__(self, "_defaults", self.make_attrs(None))

    def make_attrs(self, attrs: Mapping[str, object] | None = None) -> Attrs:
        """``attrs`` checked against the schema, converted, and completed with the
        defaults; TypeError naming the operator and the attribute otherwise."""
        if attrs is None and self._defaults is not None:
            return self._defaults
        if isinstance(attrs, Attrs) and attrs._owner is self:
            return attrs
        given = dict(attrs or {})
        unknown = [k for k in given if k not in self.attrs_schema]
        if unknown:
            known = ", ".join(self.attrs_schema) or "no attributes"
            raise TypeError(f"{self.name}: unknown attribute {unknown[0]!r} "
                            f"({self.name} takes {known})")
        values = {}
        for key, (kind, default) in self.attrs_schema.items():
            value = given.get(key, default)
            if value is None and default is None:
                values[key] = None
                continue
            for k in kind if isinstance(kind, tuple) else (kind,):
                try:
                    values[key] = _coerce(k, value)
                    break
                except (TypeError, ValueError):
                    continue
            else:
                names = " or ".join(k.__name__ for k in (
                    kind if isinstance(kind, tuple) else (kind,)))
                raise TypeError(f"{self.name}: attribute {key} must be {names}"
                                f"{' or None' if default is None else ''}, got {value!r}")
        out = Attrs(values)
        object.__setattr__(out, "_owner", self)
        return out

    def infer_type(self, arg_types: Sequence[Type], attrs: Mapping | None = None) -> Type:
        """The output type for inputs of ``arg_types`` (the relation, with the arity and
        the attrs checked first)."""
        if self.num_inputs >= 0 and len(arg_types) != self.num_inputs:
            raise IRTypeError(f"{self.name}: takes {self.num_inputs} inputs, "
                              f"got {len(arg_types)}")
        out = self.type_relation(list(arg_types), self.make_attrs(attrs))
        if not isinstance(out, Type):
            raise TypeError(f"{self.name}: its type relation returned {out!r}, not a Type")
        return out


def register_op(opdef: OpDef, override: bool = False) -> Op:
    """Add ``opdef`` to the registry and return its ``Op``. Registering a name twice is an
    error unless ``override`` (calls built earlier keep the old ``Op``)."""
    if opdef.name in Op._table and not override:
        raise ValueError(f"operator {opdef.name!r} is already registered")
    op = Op(opdef)
    Op._table[opdef.name] = op
    return op


def get_op_def(name: str) -> OpDef:
    """The registry entry of operator ``name`` (KeyError if none)."""
    return Op.get(name).opdef


def list_ops() -> list[str]:
    """The names of all registered operators, sorted."""
    return sorted(Op._table)
