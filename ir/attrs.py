"""``Attrs``: the immutable attribute mapping of operator calls, functions and type relations.

Values are JSON-able and kept normalized: ``None``, ``bool``, ``int``, ``float``, ``str``, and
tuples of those (lists, numpy scalars and 1-D arrays are converted on the way in), so
``Attrs(axis=[1])`` equals ``Attrs(axis=(1,))``. Equality and hashing are by value and
type-exact (``1`` differs from ``1.0`` and ``True``), and ignore the order of the keys.
Attribute-style reading works too: ``attrs.axis``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Any as _AnyValue

import numpy as np

AttrValue = None | bool | int | float | str | tuple


def normalize_attr_value(value: object) -> AttrValue:
    """``value`` in normal form (lists -> tuples, numpy scalars -> Python scalars), or a
    TypeError naming the value when it is not JSON-able."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, list | tuple):
        return tuple(normalize_attr_value(v) for v in value)
    if isinstance(value, np.ndarray) and value.ndim <= 1:
        return tuple(normalize_attr_value(v) for v in value.tolist())
    raise TypeError(f"attribute value {value!r} is not JSON-able: use None, bool, int, float, "
                    "str, or a list/tuple of those")


def _tagged(value: AttrValue) -> tuple:
    """A type-exact, order-stable key for a normalized value (floats by repr, so -0.0 and
    NaN compare as written)."""
    if value is None:
        return ("N",)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, float):
        return ("f", repr(value))
    if isinstance(value, str):
        return ("s", value)
    return ("t", *(_tagged(v) for v in value))


class Attrs(Mapping[str, _AnyValue]):
    """An immutable name -> value mapping with value equality and hashing.

    ``Attrs({"axis": [1]})``, ``Attrs(axis=[1])`` and ``Attrs(Attrs(axis=(1,)))`` are equal.
    """

    __slots__ = ("_data", "_key", "_owner")

    def __init__(self, data: Mapping[str, object] | None = None, /, **kwargs: object):
        items = dict(data or {})
        items.update(kwargs)
        normalized: dict[str, AttrValue] = {}
        for name, value in items.items():
            if not isinstance(name, str):
                raise TypeError(f"attribute names are strings, got {name!r}")
            normalized[name] = normalize_attr_value(value)
        object.__setattr__(self, "_data", normalized)
        object.__setattr__(self, "_key", tuple(sorted((k, _tagged(v))
                                                      for k, v in normalized.items())))
        # The OpDef whose schema produced these attrs (lets Call skip re-validation); not
        # part of equality.
        object.__setattr__(self, "_owner", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Attrs is immutable; use replace()")

    def __getitem__(self, name: str) -> AttrValue:
        return self._data[name]

    def __getattr__(self, name: str) -> AttrValue:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"no attribute {name!r} (have: {', '.join(self._data)})"
                                 ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._key == other._key
        if isinstance(other, Mapping):
            try:
                return self._key == Attrs(other)._key
            except TypeError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return "Attrs(" + ", ".join(f"{k}={v!r}" for k, v in self._data.items()) + ")"

    def replace(self, **changes: object) -> Attrs:
        """A copy with ``changes`` applied (new names are added)."""
        return Attrs(self._data, **changes)

    def stable_hash(self) -> int:
        """A hash that is the same in every process (``hash()`` of strings is not)."""
        digest = hashlib.blake2b(repr(self._key).encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little")


EMPTY_ATTRS = Attrs()
