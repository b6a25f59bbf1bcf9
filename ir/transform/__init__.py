"""Passes over the graph IR (type inference, normal forms, optimisations).

- ``pass_infra``: ``Pass``, ``Sequential``, ``PassContext``, the ``module_pass`` /
  ``function_pass`` decorators and the meaning check used in tests.
- ``infer_type`` (a module) / ``infer_expr`` (one expression): type inference, built on the
  unifier and relation solver of ``type_solver``; ``InferType()`` is it as a pass.
- ``anf``: conversions between graph normal form and A-normal form.
"""

from .infer_type import infer_expr, infer_type
from .pass_infra import (
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PassMeaningError,
    Sequential,
    function_pass,
    module_pass,
)


def InferType() -> Pass:
    """Type inference as a pass (opt level 0: always runs)."""
    return ModulePass(lambda module, ctx: infer_type(module), "InferType", 0)


__all__ = ["FunctionPass", "InferType", "ModulePass", "Pass", "PassContext",
           "PassMeaningError", "Sequential", "function_pass", "infer_expr", "infer_type",
           "module_pass"]
