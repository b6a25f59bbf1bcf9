"""Passes over the graph IR (type inference, normal forms, optimisations).

- ``infer_type`` (a module) / ``infer_expr`` (one expression): type inference, built on the
  unifier and relation solver of ``type_solver``.
- ``anf``: conversions between graph normal form and A-normal form.
"""

from .infer_type import infer_expr, infer_type

__all__ = ["infer_expr", "infer_type"]
