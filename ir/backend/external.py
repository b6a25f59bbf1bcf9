"""External codegens (bring your own codegen): the interface and the registry.

An ``ExternalCodegen`` has a ``name`` (the ``Compiler`` attribute of the functions it
runs), says which operator calls it supports (``supports(call)``: the operator's name,
attributes and input types, checked by the predicates in ``ops``; a codegen that takes
whole patterns, e.g. a convolution with its bias and requantization and nothing less,
overrides ``claims(body)``, the calls of a graph it takes), and turns a partitioned
function (``ir.transform.partition``) into an ``ExternalModule``: an object called on the
function's arguments (numpy arrays) that returns its result, and that can say what it
runs (``describe()``, e.g. the JSON of the subgraph). The graph executor and the VM call
it where the model calls the function; what no codegen takes stays with the host.

``register_codegen(codegen)`` adds one; ``get_codegen(name)``, ``list_codegens()`` find
them. ``external_function(func)`` is the module for a function with a ``Compiler``
attribute (built once per function).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from ..expr import Call, Expr, Function, Op
from ..types import TensorType
from ..visitor import dataflow_post_order

__all__ = ["ExternalCodegen", "ExternalModule", "external_function", "get_codegen",
           "list_codegens", "register_codegen"]

#: call -> whether the codegen takes it
Predicate = Callable[[Call], bool]


class ExternalModule(ABC):
    """A compiled partitioned function."""

    @abstractmethod
    def __call__(self, *args: Any) -> Any:
        """The function's result for numpy-array arguments."""

    @abstractmethod
    def describe(self) -> str:
        """What it runs, for people (e.g. the subgraph as JSON)."""


class ExternalCodegen(ABC):
    """One external codegen (module docstring)."""

    name: str = ""
    #: operator name -> predicate on the call (attributes, input types)
    ops: Mapping[str, Predicate] = {}

    def supports(self, call: Call) -> bool:
        if not isinstance(call.op, Op):
            return False
        predicate = self.ops.get(call.op.name)
        if predicate is None:
            return False
        types = [a.checked_type_or_none for a in call.args]
        if not all(isinstance(t, TensorType) and all(isinstance(d, int) for d in t.shape)
                   for t in types):
            return False  # static tensors only
        return bool(predicate(call))

    def claims(self, body: Expr) -> set[int]:
        """The ids of the calls of dataflow graph ``body`` this codegen takes: by default
        every call it ``supports`` on its own."""
        return {id(e) for e in dataflow_post_order(body)
                if isinstance(e, Call) and self.supports(e)}

    @abstractmethod
    def compile(self, func: Function, symbol: str) -> ExternalModule:
        """The runtime module of partitioned function ``func`` (named ``symbol``)."""


_CODEGENS: dict[str, ExternalCodegen] = {}


def register_codegen(codegen: ExternalCodegen, override: bool = False) -> ExternalCodegen:
    if not codegen.name:
        raise ValueError("an external codegen needs a name")
    if codegen.name in _CODEGENS and not override:
        raise ValueError(f"external codegen {codegen.name!r} is already registered")
    _CODEGENS[codegen.name] = codegen
    return codegen


def get_codegen(name: str) -> ExternalCodegen:
    codegen = _CODEGENS.get(name)
    if codegen is None:
        known = ", ".join(sorted(_CODEGENS)) or "none"
        raise KeyError(f"no external codegen named {name!r} (registered: {known})")
    return codegen


def list_codegens() -> list[str]:
    return sorted(_CODEGENS)


_BUILT: dict[int, tuple[Function, ExternalModule]] = {}


def external_function(func: Function) -> ExternalModule:
    """The runtime module of a function with a ``Compiler`` attribute (cached)."""
    hit = _BUILT.get(id(func))
    if hit is not None and hit[0] is func:
        return hit[1]
    compiler = func.attrs.get("Compiler")
    if compiler is None:
        raise ValueError("external_function: the function has no Compiler attribute")
    symbol = str(func.attrs.get("global_symbol") or f"{compiler}_fn")
    module = get_codegen(str(compiler)).compile(func, symbol)
    _BUILT[id(func)] = (func, module)
    return module
