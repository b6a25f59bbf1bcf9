"""The pass infrastructure: a pass is a named function from module to module with an opt
level; ``Sequential`` runs a pipeline; a ``PassContext`` says which passes run.

- ``Pass``: ``name``, ``opt_level`` (it runs when the context's opt level is at least this,
  unless disabled by name, or required by name whatever the level), and ``__call__(module)``
  which honours the current context. Subclasses implement ``transform(module, ctx)``.
- ``module_pass(name, opt_level)`` / ``function_pass(name, opt_level)``: decorators turning
  ``f(module, ctx) -> module`` / ``f(function, module, ctx) -> function`` into passes (a
  function pass maps every global function; a function marked ``Primitive`` is left alone).
- ``PassContext(opt_level=2, disabled_pass=(), required_pass=(), check_meaning=False)``, a
  context manager (``with PassContext(opt_level=3): ...``); ``PassContext.current()``.
  ``check_meaning`` (for tests) runs ``@main`` in the interpreter before and after each
  pass on random inputs drawn from its parameter types and raises ``PassMeaningError``
  naming the pass when the results differ; ``trace`` collects the passes that ran.

Passes never mutate their input module: they return a new one.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..expr import Function
from ..module import Module
from ..types import TensorType, TupleType, Type

__all__ = ["FunctionPass", "ModulePass", "Pass", "PassContext", "PassMeaningError",
           "Sequential", "function_pass", "module_pass", "random_arguments", "same_value"]


class PassMeaningError(AssertionError):
    """A pass changed what ``@main`` computes (raised only under ``check_meaning``)."""


class PassContext:
    """Which passes run, and how (see the module docstring)."""

    _local = threading.local()

    def __init__(self, opt_level: int = 2, disabled_pass: Iterable[str] = (),
                 required_pass: Iterable[str] = (), check_meaning: bool = False,
                 config: dict[str, Any] | None = None, seed: int = 0):
        if not isinstance(opt_level, int) or not 0 <= opt_level <= 4:
            raise ValueError(f"opt_level must be an int in 0..4, got {opt_level!r}")
        self.opt_level = opt_level
        self.disabled_pass = frozenset(disabled_pass)
        self.required_pass = frozenset(required_pass)
        self.check_meaning = check_meaning
        self.config = dict(config or {})
        self.seed = seed
        self.trace: list[str] = []

    @classmethod
    def current(cls) -> PassContext:
        stack = getattr(cls._local, "stack", None)
        if not stack:
            cls._local.stack = stack = [PassContext()]
        return stack[-1]

    def __enter__(self) -> PassContext:
        PassContext.current()
        self._local.stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._local.stack.remove(self)

    def enabled(self, p: Pass) -> bool:
        if p.name in self.disabled_pass:
            return False
        return p.name in self.required_pass or self.opt_level >= p.opt_level


class Pass(ABC):
    """A named module -> module transformation with an opt level."""

    name: str = "Pass"
    opt_level: int = 0

    def __call__(self, module: Module) -> Module:
        if not isinstance(module, Module):
            raise TypeError(f"{self.name}: a pass takes a Module, got {type(module).__name__}")
        ctx = PassContext.current()
        if not ctx.enabled(self):
            return module
        out = self.transform(module, ctx)
        if not isinstance(self, Sequential):
            ctx.trace.append(self.name)
            if ctx.check_meaning:
                _check_meaning(self.name, module, out, ctx.seed)
        return out

    @abstractmethod
    def transform(self, module: Module, ctx: PassContext) -> Module:
        """The pass itself (``__call__`` has already checked that it should run)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, opt_level={self.opt_level})"


class ModulePass(Pass):
    """A pass given as ``f(module, ctx) -> module``."""

    def __init__(self, fn: Callable[[Module, PassContext], Module], name: str, opt_level: int):
        self.fn, self.name, self.opt_level = fn, name, opt_level
        self.__doc__ = fn.__doc__

    def transform(self, module: Module, ctx: PassContext) -> Module:
        return self.fn(module, ctx)


class FunctionPass(Pass):
    """A pass given as ``f(function, module, ctx) -> function``, applied to every global
    function that is not ``Primitive`` (already fused)."""

    def __init__(self, fn: Callable[[Function, Module, PassContext], Function], name: str,
                 opt_level: int):
        self.fn, self.name, self.opt_level = fn, name, opt_level
        self.__doc__ = fn.__doc__

    def transform(self, module: Module, ctx: PassContext) -> Module:
        out = module.copy()
        for gv, func in module.functions.items():
            if func.attrs.get("Primitive"):
                continue
            out.add(gv, self.fn(func, module, ctx), update=True)
        return out


class Sequential(Pass):
    """Runs passes in order (each one subject to the context)."""

    def __init__(self, passes: Sequence[Pass], name: str = "Sequential", opt_level: int = 0):
        self.passes, self.name, self.opt_level = list(passes), name, opt_level

    def transform(self, module: Module, ctx: PassContext) -> Module:
        for p in self.passes:
            module = p(module)
        return module

    def __repr__(self) -> str:
        return f"Sequential([{', '.join(p.name for p in self.passes)}])"


def module_pass(name: str, opt_level: int = 0) -> Callable[[Callable], ModulePass]:
    """Decorator: ``@module_pass("FoldConstant", 2)`` over ``f(module, ctx) -> module``."""
    return lambda fn: ModulePass(fn, name, opt_level)


def function_pass(name: str, opt_level: int = 0) -> Callable[[Callable], FunctionPass]:
    """Decorator: ``@function_pass("DeadCodeElimination", 1)`` over
    ``f(function, module, ctx) -> function``."""
    return lambda fn: FunctionPass(fn, name, opt_level)


# --------------------------------------------------------------- the meaning check


def random_arguments(func: Function, seed: int = 0) -> list[object]:
    """Random inputs for ``func``'s parameters (static tensor or tuple types; floats in
    [-1, 1], ints in [-4, 4], bools at random, positive values for 'variance'-like names
    so that sqrt/log stay finite). TypeError when a parameter type has no static shape."""
    rng = np.random.default_rng(seed)
    return [_random_value(p.type_annotation or p.checked_type_or_none, rng, p.name_hint)
            for p in func.params]


def _random_value(t: Type | None, rng: np.random.Generator, name: str) -> object:
    if isinstance(t, TupleType):
        return tuple(_random_value(f, rng, name) for f in t.fields)
    if not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
        raise TypeError(f"no random value for parameter %{name} of type {t}")
    shape, dtype = tuple(t.shape), t.dtype
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        return rng.integers(0 if dtype.startswith("u") else -4, 5, shape).astype(dtype)
    if "var" in name.lower():
        return rng.uniform(0.5, 1.5, shape).astype(dtype)
    return rng.uniform(-1, 1, shape).astype(dtype)


def same_value(a: object, b: object, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Whether two interpreter results agree (arrays to a tolerance, tuples field by
    field)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(same_value(x, y, rtol, atol) for x, y in zip(a, b, strict=True)))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def _check_meaning(name: str, before: Module, after: Module, seed: int) -> None:
    from ..interpreter import evaluate

    if "main" not in before or "main" not in after:
        return
    args = random_arguments(before["main"], seed)
    expected, got = evaluate(before, *args), evaluate(after, *args)
    if not same_value(expected, got):
        raise PassMeaningError(f"pass {name} changed what @main computes on random inputs "
                               f"(seed {seed})")
