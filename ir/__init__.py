"""The graph IR: models as programs in a Relay-like, pure functional, statically typed
language (see DESIGN.md, "The graph IR").

- Types (``types``): ``TensorType`` (dims are ints, ``SymDim`` or ``Any``), ``TupleType``,
  ``FuncType``, ``TypeVar``, ``IncompleteType``, ``RefType``, ADTs (``GlobalTypeVar``,
  ``TypeData``, ``TypeCall``), ``TypeRelation``; structural ``==``.
- Expressions (``expr``): ``Var``, ``GlobalVar``, ``Constant``, ``Op``, ``Constructor``,
  ``Call``, ``Tuple``, ``TupleGetItem``, ``Let``, ``Function``, ``If``, ``Match`` /
  ``Clause`` / patterns, references; immutable, with a ``span`` and the ``checked_type``
  type inference records. ``structural_equal`` / ``structural_hash`` compare them up to
  renaming of bound variables.
- ``ExprVisitor`` / ``ExprMutator``: the traversal every pass uses (memoised, no deep
  recursion on let chains or long dataflow chains); ``free_vars`` and friends.
- ``Module``: global functions and type definitions; ``==`` is structural.
- The operator registry (``OpDef``, ``register_op``, ``Op.get``, ``list_ops``) and the
  operators in ``ir.op``, whose call builders (``ir.op.nn.dense(x, w)``) come from it.
- Builders: ``var``, ``const``.

Imports only numpy, the standard library and ``schedule`` (its top-level package).
"""

from . import op
from .attrs import Attrs
from .backend import (
    AotCompileError,
    AotModel,
    CompiledModel,
    ExternalCodegen,
    ExternalModule,
    GraphBuildError,
    aot_compile,
    aot_runtime,
    build,
    extract_tasks,
    get_codegen,
    list_codegens,
    optimize,
    register_codegen,
    runtime,
    tuned_flops_share,
)
from .builder import const, var
from .errors import IRTypeError
from .expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Op,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
    pattern_vars,
    set_checked_type,
)
from .interpreter import ADTValue, Closure, EvaluationError, RefValue, evaluate
from .module import Module
from .op_registry import OpDef, OpPattern, get_op_def, list_ops, register_op
from .prelude import prelude
from .script import ScriptError, ScriptFunction, Tensor, script
from .serialize import from_json_dict, load_json, save_json, to_json_dict
from .span import Span
from .structural import assert_structural_equal, structural_equal, structural_hash
from .text import ParseError, astext, parse, parse_expr
from .transform.anf import to_a_normal_form, to_graph_normal_form
from .transform.infer_type import infer_expr, infer_type
from .types import (
    Any,
    AnyDim,
    Dim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    SymDim,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeRelation,
    TypeVar,
    format_shape,
    is_dynamic,
    scalar_type,
    substitute,
)
from .vars import all_vars, bound_vars, free_type_vars, free_vars
from .visitor import ExprMutator, ExprVisitor, dataflow_inputs, dataflow_post_order

__all__ = [
    # the interpreter, @ir.script, ANF/GNF
    "ADTValue",
    "Any",
    "AnyDim",
    "AotCompileError",
    "AotModel",
    "Attrs",
    "Call",
    "Clause",
    "Closure",
    # model compilation (ir.backend) and ONNX import (ir.frontend, loaded on first use)
    "CompiledModel",
    "Constant",
    "Constructor",
    "Dim",
    "EvaluationError",
    "Expr",
    "ExprMutator",
    "ExprVisitor",
    "ExternalCodegen",
    "ExternalModule",
    "FuncType",
    "Function",
    "GlobalTypeVar",
    "GlobalVar",
    "GraphBuildError",
    "IRTypeError",
    "If",
    "IncompleteType",
    "Let",
    "Match",
    "Module",
    "OnnxImportError",
    "Op",
    "OpDef",
    "OpPattern",
    # text format, JSON, prelude
    "ParseError",
    "Pattern",
    "PatternConstructor",
    "PatternTuple",
    "PatternVar",
    "PatternWildcard",
    "RefCreate",
    "RefRead",
    "RefType",
    "RefValue",
    "RefWrite",
    "ScriptError",
    "ScriptFunction",
    "Span",
    "SymDim",
    "Tensor",
    "TensorType",
    "Tuple",
    "TupleGetItem",
    "TupleType",
    "Type",
    "TypeCall",
    "TypeData",
    "TypeRelation",
    "TypeVar",
    "Var",
    "all_vars",
    "aot_compile",
    "aot_runtime",
    "assert_structural_equal",
    "astext",
    "bound_vars",
    "build",
    "const",
    "dataflow_inputs",
    "dataflow_post_order",
    "evaluate",
    "extract_tasks",
    "format_shape",
    "free_type_vars",
    "free_vars",
    "from_json_dict",
    "from_onnx",
    "get_codegen",
    "get_op_def",
    # type inference
    "infer_expr",
    "infer_type",
    "is_dynamic",
    "list_codegens",
    "list_ops",
    "load_json",
    "op",
    "optimize",
    "parse",
    "parse_expr",
    "pattern_vars",
    "prelude",
    "register_codegen",
    "register_op",
    "runtime",
    "save_json",
    "scalar_type",
    "script",
    "set_checked_type",
    "structural_equal",
    "structural_hash",
    "substitute",
    "to_a_normal_form",
    "to_graph_normal_form",
    "to_json_dict",
    "tuned_flops_share",
    "var",
]


def __getattr__(name: str) -> object:
    """``ir.from_onnx`` / ``ir.OnnxImportError``: the ONNX frontend, imported on first use
    (it needs the optional onnx package)."""
    if name in ("from_onnx", "OnnxImportError"):
        from . import frontend

        return getattr(frontend, name)
    raise AttributeError(f"module 'ir' has no attribute {name!r}")
