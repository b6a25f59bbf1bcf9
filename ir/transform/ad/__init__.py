"""Automatic differentiation of IR programs.

``gradient(func, mod=None, mode="higher_order")`` returns a function with ``func``'s
parameters (all tensors) that computes ``(value, (grad_1, ..., grad_n))``: ``func``'s value
and the gradient of (the sum of the elements of) its result with respect to each
parameter. For a module, ``gradient(module)`` differentiates ``@main`` and returns a new
module whose ``@main`` is the gradient.

- ``mode="first_order"`` (``first_order``): reverse mode over dataflow code; one static
  graph that fuses and runs on the graph executor.
- ``mode="higher_order"`` (``higher_order``): reverse mode over the whole language —
  closures, ``let``, ``if``, ``match`` over ADTs, tuples, references and recursion through
  globals — carrying each tensor with a reference to its adjoint and a chain of
  backpropagator closures (the IR's paper).
- ``jvp(func, mod=None)`` (``forward``): forward mode with dual numbers over the whole
  language, ``fn(params..., tangents...) -> (value, J @ tangents)``.
- ``rules`` / ``tangents``: the per-operator reverse- and forward-mode rules
  (``register_gradient``, ``register_tangent``); ``lifting``: the rewrite both
  whole-language modes share.
"""

from __future__ import annotations

from collections.abc import Callable

from ...expr import Function
from ...module import Module
from .first_order import first_order_gradient
from .forward import forward_mode
from .higher_order import higher_order_gradient
from .rules import GradCall, GradientError, gradient_rule, has_gradient, register_gradient
from .tangents import TangentCall, has_tangent, register_tangent, tangent_rule

MODES = ("higher_order", "first_order")


def gradient(func: Function | Module, mod: Module | None = None,
             mode: str = "higher_order") -> Function | Module:
    """The gradient of ``func`` (see the module docstring). With a Function that calls
    globals of ``mod`` (higher-order mode), their differentiated versions are added to
    ``mod`` as ``@<name>_grad``."""
    if mode not in MODES:
        raise ValueError(f"gradient: unknown mode {mode!r} (one of {', '.join(MODES)})")
    return _apply(func, mod, first_order_gradient if mode == "first_order"
                  else higher_order_gradient)


def jvp(func: Function | Module, mod: Module | None = None) -> Function | Module:
    """Forward mode: ``fn(params..., tangents...) -> (value, J @ tangents)`` (see the module
    docstring); lifted globals are added to ``mod`` as ``@<name>_jvp``."""
    return _apply(func, mod, forward_mode)


def _apply(func: Function | Module, mod: Module | None,
           transform: Callable[[Function, Module | None], Function]) -> Function | Module:
    """``transform`` of a Function, or of a Module's ``@main`` (a new module, ``@main``
    replaced, the helpers added)."""
    if isinstance(func, Module):
        if "main" not in func:
            raise GradientError("the module has no @main function")
        out = func.copy()
        out.add("main", transform(func["main"], out), update=True)
        return out
    if not isinstance(func, Function):
        raise TypeError(f"expected a Function or a Module, got {type(func).__name__}")
    return transform(func, mod)


__all__ = ["MODES", "GradCall", "GradientError", "TangentCall", "first_order_gradient",
           "forward_mode", "gradient", "gradient_rule", "has_gradient", "has_tangent",
           "higher_order_gradient", "jvp", "register_gradient", "register_tangent",
           "tangent_rule"]
