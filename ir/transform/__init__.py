"""Passes over the graph IR (type inference, normal forms, optimisations).

- ``pass_infra``: ``Pass``, ``Sequential``, ``PassContext``, the ``module_pass`` /
  ``function_pass`` decorators and the meaning check used in tests.
- ``infer_type`` (a module) / ``infer_expr`` (one expression): type inference, built on the
  unifier and relation solver of ``type_solver``; ``InferType()`` is it as a pass.
- ``anf``: conversions between graph normal form and A-normal form; ``normal_form``:
  ``ToANormalForm()`` / ``ToGraphNormalForm()``, them as passes.
- Optimisations, one module each, each a factory returning its Pass (names and opt
  levels as TVM's): ``FoldConstant()`` (2), ``DeadCodeElimination()`` (1),
  ``EliminateCommonSubexpr()`` (3), ``SimplifyInference()`` (0), ``FoldScaleAxis()`` (3),
  ``CombineParallelConv2D()`` (4), ``ConvertLayout()`` (3); ``_util`` holds what they share.
- ``ad``: automatic differentiation, ``gradient(func, mode="higher_order"|"first_order")``,
  forward mode ``jvp(func)``, and the per-operator rules.
- ``partial_eval``: ``PartialEvaluate()`` (3) / ``partial_evaluate(module)``: evaluates
  what is statically known, residualises the rest.
- ``partition``: ``AnnotateTarget``, ``MergeCompilerRegions``, ``PartitionGraph`` (bring
  your own codegen: regions an external codegen runs become functions it compiles).
"""

from .ad import gradient, jvp
from .combine_parallel_conv2d import CombineParallelConv2D
from .convert_layout import ConvertLayout
from .dead_code import DeadCodeElimination
from .eliminate_common_subexpr import EliminateCommonSubexpr
from .fold_constant import FoldConstant
from .fold_scale_axis import FoldScaleAxis
from .infer_type import infer_expr, infer_type
from .normal_form import ToANormalForm, ToGraphNormalForm
from .partial_eval import PartialEvaluate, partial_evaluate
from .partition import AnnotateTarget, MergeCompilerRegions, PartitionGraph, partition_for
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
from .simplify_inference import SimplifyInference


def InferType() -> Pass:
    """Type inference as a pass (opt level 0: always runs)."""
    return ModulePass(lambda module, ctx: infer_type(module), "InferType", 0)


__all__ = ["AnnotateTarget", "CombineParallelConv2D", "ConvertLayout", "DeadCodeElimination",
           "EliminateCommonSubexpr", "FoldConstant", "FoldScaleAxis", "FunctionPass",
           "InferType", "MergeCompilerRegions", "ModulePass", "PartialEvaluate",
           "PartitionGraph", "Pass", "PassContext", "PassMeaningError", "Sequential",
           "SimplifyInference", "ToANormalForm", "ToGraphNormalForm", "function_pass",
           "gradient", "infer_expr", "infer_type", "jvp", "module_pass", "partial_evaluate",
           "partition_for"]
