"""ONNX import: ``from_onnx(model)`` turns an ONNX model into a ``Module`` whose ``@main``
takes the graph's inputs and returns its outputs.

- Parameters: the graph inputs that are not initializers, in graph order, named after their
  ONNX names made into identifiers (``input.1`` -> ``%input_1``); their types come from the
  model (``dim_param`` dimensions become symbolic, unknown ones ``Any``) unless ``shape`` /
  ``dtype`` override them.
- ``@main``'s attributes ``input_names`` and ``output_names`` hold the ONNX names of the
  parameters and of the results, in order (several outputs make a tuple result).
- Initializers become constants. Values that only depend on constants and on static shapes
  (the ``Shape -> Gather -> Concat -> Reshape`` chains of PyTorch exports) are computed at
  import time with the operators' numpy computes and become constants too; operands that
  must be constants (a Reshape's shape, a Slice's bounds, reduction axes) must be known so.
- Nothing in the model is executed: no custom-op libraries, no functions, no external data
  files. Unsupported operators, attributes and dtypes, and malformed models, raise
  ``OnnxImportError`` (naming the op type, node and attribute) before any module is made.

The operators are converted by the functions in ``onnx_tensor_ops`` and ``onnx_nn_ops``;
``onnx_context`` holds what they share.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from ..errors import IRTypeError
from ..expr import Function, Tuple, Var
from ..interpreter import EvaluationError, evaluate
from ..module import Module
from ..transform.infer_type import infer_type
from ..types import Any, Dim, SymDim, TensorType
from . import onnx_nn_ops, onnx_tensor_ops  # noqa: F401  (they register the converters)
from .onnx_context import (
    CONVERTERS,
    NodeContext,
    OnnxImportError,
    Value,
    const_value,
    foldable_size,
    node_label,
    onnx_dtype,
    onnx_dtype_name,
    tensor_to_array,
)

_DEFAULT_DOMAINS = ("", "ai.onnx")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def supported_ops() -> list[str]:
    """The ONNX operator types ``from_onnx`` converts (default domain), sorted."""
    return sorted(CONVERTERS)


def load_model(source: onnx.ModelProto | bytes | str | os.PathLike) -> onnx.ModelProto:
    """``source`` as a ModelProto: a ModelProto itself, serialized bytes, or a file path
    (external data next to the file is read in by ``onnx.load``); an OnnxImportError when
    it is not a readable ONNX model."""
    if isinstance(source, onnx.ModelProto):
        return source
    try:
        if isinstance(source, bytes | bytearray | memoryview):
            model = onnx.ModelProto()
            model.ParseFromString(bytes(source))
            return model
        if isinstance(source, str | os.PathLike):
            return onnx.load(os.fspath(source))
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise OnnxImportError(f"not a valid ONNX model: {exc}") from exc
    except OSError as exc:
        raise OnnxImportError(f"cannot read the ONNX model {os.fspath(source)!r}: {exc}"
                              ) from exc
    raise TypeError(f"from_onnx takes an onnx.ModelProto, bytes or a path, got "
                    f"{type(source).__name__}")


def from_onnx(model: onnx.ModelProto | bytes | str | os.PathLike,
              shape: Mapping[str, Sequence[Dim | str | None]] | None = None,
              dtype: str | Mapping[str, str] | None = None) -> Module:
    """The ``Module`` of ONNX ``model`` (a ModelProto, its bytes, or a file path).

    ``shape`` maps graph input names to shapes that replace the model's (a str dimension is
    symbolic, None unknown); ``dtype`` replaces the inputs' dtypes (one dtype for all, or by
    name). The result is type-checked. Raises ``OnnxImportError``.
    """
    model = load_model(model)
    return _Importer(model, dict(shape or {}), dtype).run()


class _Importer:
    def __init__(self, model: onnx.ModelProto, shapes: dict, dtype: str | Mapping | None):
        self.model = model
        self.shapes = shapes
        self.dtype = dtype
        self.values: dict[str, Value] = {}
        self.opset = self._opset()

    def _opset(self) -> int:
        if not self.model.HasField("graph"):
            raise OnnxImportError("not a valid ONNX model: it has no graph")
        versions = [o.version for o in self.model.opset_import if o.domain in _DEFAULT_DOMAINS]
        if not versions:
            raise OnnxImportError("not a valid ONNX model: it imports no version of the "
                                  "default operator set (opset_import)")
        return max(versions)

    # ------------------------------------------------------------------------- inputs

    def _input_type(self, info: onnx.ValueInfoProto) -> TensorType:
        name = info.name
        if info.type.WhichOneof("value") != "tensor_type":
            raise OnnxImportError(f"graph input {name!r}: only tensor inputs are supported, "
                                  f"got {info.type.WhichOneof('value') or 'no type'}")
        tt = info.type.tensor_type
        dtype = onnx_dtype(tt.elem_type)
        override = self.dtype.get(name) if isinstance(self.dtype, Mapping) else self.dtype
        if override is not None:
            try:
                dtype = str(np.dtype(override))
            except TypeError:
                raise OnnxImportError(f"graph input {name!r}: {override!r} is not a dtype"
                                      ) from None
        elif dtype is None:
            raise OnnxImportError(f"graph input {name!r}: {onnx_dtype_name(tt.elem_type)} "
                                  "inputs are not supported")
        if name in self.shapes:
            dims = tuple(self._dim(d, name) for d in self.shapes[name])
        elif not tt.HasField("shape"):
            raise OnnxImportError(f"graph input {name!r} has no shape in the model; give "
                                  "from_onnx a shape for it")
        else:
            dims = tuple(
                d.dim_value if d.HasField("dim_value")
                else SymDim(_identifier(d.dim_param, "d")) if d.dim_param else Any
                for d in tt.shape.dim)
        return TensorType(dims, dtype)

    @staticmethod
    def _dim(d: object, name: str) -> Dim:
        if d is None:
            return Any
        if isinstance(d, str):
            return SymDim(_identifier(d, "d"))
        if isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0:
            return int(d)
        raise OnnxImportError(f"shape of input {name!r}: {d!r} is not a dimension (an int "
                              ">= 0, a name, or None)")

    # -------------------------------------------------------------------------- graph

    def run(self) -> Module:
        graph = self.model.graph
        if graph.sparse_initializer:
            raise OnnxImportError("sparse initializers are not supported")
        for init in graph.initializer:
            if not init.name:
                raise OnnxImportError("not a valid ONNX model: an initializer has no name")
            self.values[init.name] = const_value(tensor_to_array(
                init, f"initializer {init.name!r}"))
        unknown = set(self.shapes) - {i.name for i in graph.input}
        if unknown:
            raise OnnxImportError(f"shape given for {sorted(unknown)}, which are not graph "
                                  "inputs")
        params, input_names, used = [], [], set()
        for info in graph.input:
            if info.name in self.values:  # an initializer listed as an input (IR < 4)
                continue
            if not info.name:
                raise OnnxImportError("not a valid ONNX model: a graph input has no name")
            name = _identifier(info.name, "input")
            base, k = name, 1
            while name in used:
                name, k = f"{base}_{k}", k + 1
            used.add(name)
            var = Var(name, self._input_type(info))
            params.append(var)
            input_names.append(info.name)
            self.values[info.name] = Value(var, var.type_annotation)

        for index, node in enumerate(graph.node):
            self._convert(node, index)

        outputs = []
        for info in graph.output:
            if info.name not in self.values:
                raise OnnxImportError(f"not a valid ONNX model: graph output {info.name!r} is "
                                      "not computed by any node")
            outputs.append(self.values[info.name].expr)
        if not outputs:
            raise OnnxImportError("not a valid ONNX model: the graph has no outputs")
        body = outputs[0] if len(outputs) == 1 else Tuple(outputs)
        main = Function(params, body, attrs={
            "input_names": tuple(input_names),
            "output_names": tuple(o.name for o in graph.output)})
        try:
            return infer_type(Module({"main": main}))
        except IRTypeError as exc:  # a converter bug rather than a model problem
            raise OnnxImportError(f"the imported module does not type-check: {exc}") from exc

    def _convert(self, node: onnx.NodeProto, index: int) -> None:
        label = node_label(node, index)
        if node.domain not in _DEFAULT_DOMAINS:
            raise OnnxImportError(f"ONNX node {label}: operator {node.domain}.{node.op_type} "
                                  "(a custom or non-default domain) is not supported",
                                  op_type=node.op_type, node_name=node.name)
        fn = CONVERTERS.get(node.op_type)
        if fn is None:
            raise OnnxImportError(f"ONNX node {label}: operator {node.op_type} is not "
                                  "supported", op_type=node.op_type, node_name=node.name)
        inputs = []
        for name in node.input:
            if not name:
                inputs.append(None)
            elif name in self.values:
                inputs.append(self.values[name])
            else:
                raise OnnxImportError(f"not a valid ONNX model: node {label} ({node.op_type}) "
                                      f"reads {name!r} before any node computes it",
                                      op_type=node.op_type, node_name=node.name)
        ctx = NodeContext(node, index, inputs, self.opset)
        try:
            result = fn(ctx)
        except OnnxImportError:
            raise
        except Exception as exc:  # malformed attributes and the like in a broken model
            raise ctx.fail(f"cannot be imported: {type(exc).__name__}: {exc}") from exc
        ctx.check_attrs()
        results = [result] if isinstance(result, Value) else list(result)
        foldable = any(v is not None for v in inputs) and all(
            v is None or v.const is not None for v in inputs)
        for i, name in enumerate(node.output):
            if not name:
                continue
            if name in self.values:
                raise OnnxImportError(f"not a valid ONNX model: node {label} ({node.op_type}) "
                                      f"computes {name!r}, which is already defined",
                                      op_type=node.op_type, node_name=node.name)
            value = results[i] if i < len(results) else None
            if value is None:
                raise ctx.fail(f"output {i} ({name!r}) is not supported")
            if (foldable and value.const is None and isinstance(value.type, TensorType)
                    and foldable_size(value.type)):
                value = self._fold(ctx, value)
            self.values[name] = value

    @staticmethod
    def _fold(ctx: NodeContext, value: Value) -> Value:
        """``value`` computed now: its inputs are all known."""
        try:
            out = evaluate(value.expr)
        except EvaluationError as exc:
            raise ctx.fail(f"computing it at import time failed: {exc}") from exc
        return const_value(np.asarray(out))


def _identifier(name: str, default: str) -> str:
    """``name`` made into an IR identifier (other characters become ``_``)."""
    if _IDENT.fullmatch(name):
        return name
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return out if out and not out[0].isdigit() else f"{default}_{out}"


__all__ = ["OnnxImportError", "from_onnx", "load_model", "supported_ops"]
