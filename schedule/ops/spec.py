"""Parameter schemas and ``OpSpec``, the description of one registered workload operator.

An ``OpSpec`` validates and canonicalises parameters (``normalize``), exports them as a
JSON schema, builds the te argument list ``[inputs..., output]``, and gives the numpy
reference, the FLOP count and deterministic random inputs for a parameter set.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import te
from ..dtype import is_float
from ..tensor import Tensor

MAX_DIM = 1 << 20
"""Largest accepted size of any single dimension."""
MAX_ELEMENTS = 1 << 31
"""Largest accepted number of elements of any tensor (inputs, output)."""
MAX_WINDOW = 1 << 12
"""Largest accepted stride, padding or dilation."""

KINDS = ("int", "bool", "str", "int_list", "str_list", "int_or_pair")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class ParamError(ValueError):
    """A bad parameter; ``param`` names it and the message starts with the op and its name."""

    def __init__(self, param: str | None, message: str, op: str | None = None):
        self.param = param
        self.op = op
        self.message = message
        where = f"parameter '{param}'" if param else "parameters"
        super().__init__(f"{op}: {where}: {message}" if op else f"{where}: {message}")


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)


@dataclass(frozen=True)
class Param:
    """One parameter of a workload operator.

    ``kind`` is one of ``KINDS``; ``minimum``/``maximum`` bound ints (and each item of
    int lists and pairs); ``choices`` lists the allowed strings (also of ``str_list``
    items); ``dim`` marks tensor dimensions (named when a tensor would be too large).
    """

    name: str
    kind: str
    default: Any = REQUIRED
    choices: tuple[Any, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    max_items: int | None = None
    dim: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"param {self.name}: unknown kind {self.kind!r}")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    # ------------------------------------------------------------------ validation
    def _int(self, v: Any, what: str) -> int:
        if not _is_int(v):
            raise ParamError(self.name, f"{what} must be an integer, got {v!r}")
        v = int(v)
        if self.minimum is not None and v < self.minimum:
            raise ParamError(self.name, f"{what} must be at least {self.minimum}, got {v}")
        if self.maximum is not None and v > self.maximum:
            raise ParamError(self.name, f"{what} must be at most {self.maximum}, got {v}")
        return v

    def _str(self, v: Any, what: str) -> str:
        if not isinstance(v, str):
            raise ParamError(self.name, f"{what} must be a string, got {v!r}")
        if self.choices is not None and v not in self.choices:
            raise ParamError(self.name, f"{what} must be one of {', '.join(self.choices)}; "
                                        f"got {v!r}")
        return v

    def _items(self, v: Any, lo: int, hi: int) -> list[Any]:
        if not isinstance(v, list | tuple) or not lo <= len(v) <= hi:
            size = f"{lo}" if lo == hi else f"{lo} to {hi}"
            raise ParamError(self.name, f"must be a list of {size} items, got {v!r}")
        return list(v)

    def canonical(self, value: Any) -> Any:
        """The canonical (JSON-able) value, or a ``ParamError`` naming this parameter."""
        if self.kind == "int":
            return self._int(value, "value")
        if self.kind == "bool":
            if not isinstance(value, bool | np.bool_):
                raise ParamError(self.name, f"must be true or false, got {value!r}")
            return bool(value)
        if self.kind == "str":
            return self._str(value, "value")
        if self.kind == "int_or_pair":
            if _is_int(value):
                v = self._int(value, "value")
                return [v, v]
            items = self._items(value, 2, 2)
            return [self._int(x, "each item") for x in items]
        items = self._items(value, 1, self.max_items or 8)
        if self.kind == "int_list":
            return [self._int(x, "each item") for x in items]
        return [self._str(x, "each item") for x in items]

    def parse(self, text: str) -> Any:
        """A raw value from command-line text (``1024``, ``true``, ``3,3``, ``add,relu``,
        or JSON); ``canonical`` still checks it."""
        text = text.strip()
        if self.kind == "str":
            return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
        try:
            return json.loads(text)
        except ValueError:
            pass
        if self.kind == "bool" and text.lower() in ("true", "yes", "on", "false", "no", "off"):
            return text.lower() in ("true", "yes", "on")
        if self.kind in ("int_list", "int_or_pair"):
            parts = [p for p in text.replace("x", ",").split(",") if p.strip()]
            try:
                return [int(p) for p in parts]
            except ValueError:
                return text
        if self.kind == "str_list":
            return [p.strip() for p in text.split(",") if p.strip()]
        return text

    # ------------------------------------------------------------------ schema
    def _int_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer"}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema

    def json_schema(self) -> dict[str, Any]:
        """This parameter as a JSON-schema property."""
        schema: dict[str, Any]
        if self.kind == "int":
            schema = self._int_schema()
        elif self.kind == "bool":
            schema = {"type": "boolean"}
        elif self.kind == "str":
            schema = {"type": "string"}
            if self.choices is not None:
                schema["enum"] = list(self.choices)
        elif self.kind == "int_or_pair":
            schema = {"oneOf": [self._int_schema(),
                                {"type": "array", "items": self._int_schema(),
                                 "minItems": 2, "maxItems": 2}]}
        else:
            item = self._int_schema() if self.kind == "int_list" else {"type": "string"}
            if self.kind == "str_list" and self.choices is not None:
                item["enum"] = list(self.choices)
            schema = {"type": "array", "items": item, "minItems": 1,
                      "maxItems": self.max_items or 8}
        if not self.required:
            schema["default"] = self.default
        if self.description:
            schema["description"] = self.description
        return schema


@dataclass(frozen=True)
class Arg:
    """One tensor of a workload's argument list: name, shape, dtype, and the range its
    random values are drawn from (floats uniform in ``[low, high)``, ints in
    ``[low, high]``)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    low: float = -1.0
    high: float = 1.0


@dataclass(frozen=True)
class OpSpec:
    """A registered workload operator (see ``schedule.ops.registry``)."""

    name: str
    description: str
    params: tuple[Param, ...]
    args_fn: Callable[[dict[str, Any]], list[Arg]] = field(repr=False)
    build_fn: Callable[[list[Tensor], dict[str, Any]], Tensor] = field(repr=False)
    reference_fn: Callable[[list[np.ndarray], dict[str, Any]], np.ndarray] = field(repr=False)
    flops_fn: Callable[[dict[str, Any]], float] = field(repr=False)
    check_fn: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ parameters
    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def normalize(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Validate ``params``, fill in defaults and return the canonical parameters
        (in schema order, pairs as lists of two ints). Raises ``ParamError`` (a
        ``ValueError``) naming the bad parameter."""
        try:
            return self._normalize({} if params is None else params)
        except ParamError as err:
            if err.op is None:
                raise ParamError(err.param, err.message, self.name) from None
            raise

    def _normalize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(params, Mapping):
            raise ParamError(None, f"expected a mapping of names to values, got {params!r}")
        known = [p.name for p in self.params]
        for key in params:
            if key not in known:
                raise ParamError(str(key), f"unknown parameter; {self.name} takes "
                                           f"{', '.join(known)}")
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in params:
                out[p.name] = p.canonical(params[p.name])
            elif p.required:
                raise ParamError(p.name, "missing (required)")
            else:
                out[p.name] = p.canonical(p.default)  # a fresh canonical copy
        if self.check_fn is not None:
            self.check_fn(out)
        self._check_sizes(out)
        return out

    def _check_sizes(self, p: dict[str, Any]) -> None:
        # Blame the largest dimension parameter; the message lists them all.
        dims = sorted((q.name for q in self.params if q.dim),
                      key=lambda name: -max(np.atleast_1d(p[name])))
        for arg in self.args_fn(p):
            n = math.prod(arg.shape)
            if n > MAX_ELEMENTS or max(arg.shape, default=1) > MAX_DIM:
                raise ParamError(dims[0] if dims else None,
                                 f"tensor {arg.name} of shape {list(arg.shape)} is too large "
                                 f"(limits: {MAX_DIM} per dimension, {MAX_ELEMENTS} elements); "
                                 f"reduce {', '.join(dims)}")

    def parse_strings(self, texts: Mapping[str, str]) -> dict[str, Any]:
        """Canonical parameters from ``NAME=VALUE`` texts (the CLI's ``-p``)."""
        raw: dict[str, Any] = {}
        for key, text in texts.items():
            try:
                raw[key] = self.param(key).parse(text)
            except KeyError:
                raw[key] = text  # normalize reports the unknown name
        return self.normalize(raw)

    def json_schema(self) -> dict[str, Any]:
        """The parameters as a JSON schema (draft 2020-12) of an object."""
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": self.name,
            "description": self.description,
            "type": "object",
            "properties": {p.name: p.json_schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }

    # ------------------------------------------------------------------ programs and data
    def arg_specs(self, params: Mapping[str, Any]) -> list[Arg]:
        """Name, shape and dtype of every argument, inputs then the output."""
        return self.args_fn(self.normalize(params))

    def build(self, params: Mapping[str, Any]) -> list[Tensor]:
        """The te argument list ``[inputs..., output]`` of this workload."""
        p = self.normalize(params)
        args = self.args_fn(p)
        inputs = [te.placeholder(a.shape, a.dtype, name=a.name) for a in args[:-1]]
        out = self.build_fn(inputs, p)
        if out.shape != args[-1].shape or out.dtype != args[-1].dtype:
            raise AssertionError(f"{self.name}: built {out} but declared {args[-1]}")
        return [*inputs, out]

    def reference(self, inputs: list[np.ndarray], params: Mapping[str, Any]) -> np.ndarray:
        """The expected output for ``inputs`` (numpy arrays in ``build`` order, no output)."""
        p = self.normalize(params)
        args = self.args_fn(p)
        if len(inputs) != len(args) - 1:
            raise ValueError(f"{self.name}: expected {len(args) - 1} input arrays "
                             f"({', '.join(a.name for a in args[:-1])}), got {len(inputs)}")
        arrays = []
        for arr, a in zip(inputs, args, strict=False):
            arr = np.asarray(arr)
            if arr.shape != a.shape or arr.dtype != np.dtype(a.dtype):
                raise ValueError(f"{self.name}: input {a.name} must be {a.dtype} "
                                 f"{list(a.shape)}, got {arr.dtype} {list(arr.shape)}")
            arrays.append(arr)
        out = self.reference_fn(arrays, p)
        return np.array(out, dtype=args[-1].dtype, order="C").reshape(args[-1].shape)

    def flops(self, params: Mapping[str, Any]) -> float:
        """Floating-point (or integer) operations of one run; a multiply-add counts 2."""
        return float(self.flops_fn(self.normalize(params)))

    def random_inputs(self, params: Mapping[str, Any], seed: int = 0) -> list[np.ndarray]:
        """Deterministic random input arrays (the same for the same params and seed)."""
        rng = np.random.default_rng(seed)
        out = []
        for a in self.args_fn(self.normalize(params))[:-1]:
            if is_float(a.dtype):
                arr = rng.uniform(a.low, a.high, size=a.shape).astype(a.dtype)
            else:
                arr = rng.integers(int(a.low), int(a.high), size=a.shape, endpoint=True,
                                   dtype=np.dtype(a.dtype))
            out.append(np.array(arr, order="C"))
        return out

    def empty_output(self, params: Mapping[str, Any]) -> np.ndarray:
        """A zeroed array for the output argument."""
        a = self.args_fn(self.normalize(params))[-1]
        return np.zeros(a.shape, dtype=a.dtype)

    def to_dict(self) -> dict[str, Any]:
        """Name, description and parameter schema (what the REST API lists)."""
        return {"name": self.name, "description": self.description,
                "params": self.json_schema()}


def fail(param: str, message: str) -> None:
    """Raise a ``ParamError`` from a cross-parameter check (the op name is added later)."""
    raise ParamError(param, message)
