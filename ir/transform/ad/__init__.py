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
- ``rules``: the per-operator reverse-mode rules (``register_gradient``).
"""

from __future__ import annotations

from ...expr import Function
from ...module import Module
from .first_order import first_order_gradient
from .higher_order import higher_order_gradient
from .rules import GradCall, GradientError, gradient_rule, has_gradient, register_gradient

MODES = ("higher_order", "first_order")


def gradient(func: Function | Module, mod: Module | None = None,
             mode: str = "higher_order") -> Function | Module:
    """The gradient of ``func`` (see the module docstring). With a Function that calls
    globals of ``mod`` (higher-order mode), their differentiated versions are added to
    ``mod`` as ``@<name>_grad``."""
    if mode not in MODES:
        raise ValueError(f"gradient: unknown mode {mode!r} (one of {', '.join(MODES)})")
    if isinstance(func, Module):
        if "main" not in func:
            raise GradientError("gradient: the module has no @main function")
        out = func.copy()
        out.add("main", gradient(func["main"], out, mode), update=True)
        return out
    if not isinstance(func, Function):
        raise TypeError(f"gradient takes a Function or a Module, got {type(func).__name__}")
    if mode == "first_order":
        return first_order_gradient(func, mod)
    return higher_order_gradient(func, mod)


__all__ = ["MODES", "GradCall", "GradientError", "first_order_gradient", "gradient",
           "gradient_rule", "has_gradient", "higher_order_gradient", "register_gradient"]
