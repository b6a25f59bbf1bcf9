"""What the ONNX converters share: ``OnnxImportError``, the ``Value`` an ONNX tensor name
stands for during import (an IR expression, its type, and its numpy value when it is known
at import time), the ``NodeContext`` a converter reads its node through (inputs, constant
inputs, attributes with bookkeeping of the ones it understood, typed IR call builders), the
dtype table, and the ``converter`` registry the operator modules fill.

A converter is ``fn(ctx: NodeContext) -> Value | Sequence[Value | None]`` (one value per
node output; None for an output it does not produce). It raises ``OnnxImportError``
(``raise ctx.fail(...)``, ``raise ctx.unsupported(...)``, or ``ctx.const_input`` for an
operand that is not known at import time); any attribute of the node it did not read (or
``ctx.ignore``) is reported as unsupported after it returns. ``ctx.call`` computes a call
whose inputs are all known at once, so constants stay constants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import IRTypeError
from ..expr import Constant, Expr, Tuple, TupleGetItem
from ..op import make_call
from ..op_registry import get_op_def
from ..types import Dim, TensorType, TupleType, Type, format_shape

#: The most elements a value computed at import time may have (256 MiB of float32): a
#: larger result stays an operator call, so a model cannot make the importer allocate
#: without bound (a ConstantOfShape of a huge shape is refused).
MAX_FOLDED_ELEMENTS = 1 << 26


def foldable_size(t: TensorType) -> bool:
    """Whether a value of type ``t`` is small enough to be computed at import time."""
    size = 1
    for d in t.shape:
        if not isinstance(d, int):
            return False
        size *= d
    return size <= MAX_FOLDED_ELEMENTS


class OnnxImportError(ValueError):
    """The model cannot be imported: an unsupported operator, attribute or dtype, or a
    malformed model. ``op_type``, ``node_name`` and ``attribute`` say where (None when not
    about one); ``needs_constant`` names the ONNX value that had to be known at import time
    but was not (a graph input bound to a constant would make the import work)."""

    def __init__(self, message: str, op_type: str | None = None, node_name: str | None = None,
                 attribute: str | None = None, needs_constant: str | None = None):
        super().__init__(message)
        self.op_type = op_type
        self.node_name = node_name
        self.attribute = attribute
        self.needs_constant = needs_constant


# ONNX element types the IR has a dtype for.
_DTYPES = {
    onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.INT8: "int8", onnx.TensorProto.INT16: "int16",
    onnx.TensorProto.INT32: "int32", onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.UINT8: "uint8", onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.UINT32: "uint32", onnx.TensorProto.UINT64: "uint64",
}


def onnx_dtype(elem_type: int) -> str | None:
    """The IR dtype of ONNX element type ``elem_type``, or None when the IR has none
    (strings, bfloat16, float8, 4-bit and complex types)."""
    return _DTYPES.get(elem_type)


def onnx_dtype_name(elem_type: int) -> str:
    """ONNX's name of an element type, for messages."""
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"element type {elem_type}"


def tensor_to_array(tensor: onnx.TensorProto, what: str) -> np.ndarray:
    """The numpy value of a TensorProto (an initializer or a tensor attribute); an
    OnnxImportError for a dtype the IR lacks or data stored outside the model."""
    if onnx_dtype(tensor.data_type) is None:
        raise OnnxImportError(f"{what}: {onnx_dtype_name(tensor.data_type)} tensors are not "
                              "supported")
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        # Reading it would open files named by the model; onnx.load(path) loads them.
        raise OnnxImportError(f"{what}: its data is stored outside the model; load the model "
                              "with onnx.load(path) so that the external data is read in")
    try:
        arr = numpy_helper.to_array(tensor)
    except Exception as exc:  # malformed data (wrong byte count...) from a broken file
        raise OnnxImportError(f"{what}: cannot read its data: {exc}") from exc
    return np.array(arr, dtype=onnx_dtype(tensor.data_type))


@dataclass(frozen=True, eq=False)
class Value:
    """What an ONNX value name stands for: its IR expression and type, and its numpy value
    when known at import time (then ``expr`` is a Constant of it)."""

    expr: Expr
    type: Type
    const: np.ndarray | None = None

    @property
    def tensor_type(self) -> TensorType:
        if not isinstance(self.type, TensorType):
            raise TypeError(f"not a tensor: {self.type}")
        return self.type

    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.tensor_type.shape

    @property
    def dtype(self) -> str:
        return self.tensor_type.dtype

    @property
    def ndim(self) -> int:
        return len(self.tensor_type.shape)


def const_value(array: np.ndarray) -> Value:
    """The Value of a numpy array known at import time."""
    arr = np.asarray(array)
    return Value(Constant(arr), TensorType(arr.shape, str(arr.dtype)), arr)


ConverterFn = Callable[["NodeContext"], "Value | Sequence[Value | None]"]
#: ONNX op type -> converter (filled by ``onnx_tensor_ops`` and ``onnx_nn_ops``).
CONVERTERS: dict[str, ConverterFn] = {}


def converter(*op_types: str) -> Callable[[ConverterFn], ConverterFn]:
    """Register the decorated function as the converter of ``op_types``."""

    def register(fn: ConverterFn) -> ConverterFn:
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"ONNX op {op_type} has two converters")
            CONVERTERS[op_type] = fn
        return fn

    return register


def node_label(node: onnx.NodeProto, index: int) -> str:
    """How messages name a node: its name, or its position and first output."""
    if node.name:
        return repr(node.name)
    out = f", output {node.output[0]!r}" if node.output else ""
    return f"#{index}{out}"


class NodeContext:
    """One node being converted: its inputs (``Value`` or None for an omitted optional
    one), attributes, the opset, and builders of typed IR calls."""

    def __init__(self, node: onnx.NodeProto, index: int, inputs: Sequence[Value | None],
                 opset: int):
        self.node = node
        self.op_type = node.op_type
        self.name = node.name
        self.label = node_label(node, index)
        self.inputs = list(inputs)
        self.opset = opset
        self.attrs = {a.name: a for a in node.attribute}
        self.used_attrs: set[str] = set()

    # ------------------------------------------------------------------------- errors

    def error(self, message: str, attribute: str | None = None,
              needs_constant: str | None = None) -> OnnxImportError:
        return OnnxImportError(f"ONNX node {self.label} ({self.op_type}): {message}",
                               op_type=self.op_type, node_name=self.name, attribute=attribute,
                               needs_constant=needs_constant)

    def fail(self, message: str) -> OnnxImportError:
        """An OnnxImportError naming this node (``raise ctx.fail(...)``)."""
        return self.error(message)

    def unsupported(self, attribute: str, value: object, why: str = "") -> OnnxImportError:
        """The error for attribute ``attribute`` = ``value``, which is not supported."""
        return self.error(f"attribute {attribute}={value!r} is not supported"
                          + (f" ({why})" if why else ""), attribute=attribute)

    # ------------------------------------------------------------------------- inputs

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def output_used(self, i: int) -> bool:
        """Whether output ``i`` is requested (present and named)."""
        return i < len(self.node.output) and bool(self.node.output[i])

    def input(self, i: int, what: str | None = None) -> Value:
        """Input ``i`` (required), a tensor."""
        v = self.optional_input(i)
        if v is None:
            raise self.fail(f"input {i}{f' ({what})' if what else ''} is required")
        if not isinstance(v.type, TensorType):
            raise self.fail(f"input {i} must be a tensor, got {v.type}")
        return v

    def optional_input(self, i: int) -> Value | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def const_input(self, i: int, what: str) -> np.ndarray | None:
        """The value of input ``i`` known at import time (None when omitted); an error
        naming the input when it is computed from the graph's inputs."""
        v = self.optional_input(i)
        if v is None:
            return None
        if v.const is None:
            raise self.error(f"input {i} ({what}, {self.node.input[i]!r}) must be known at "
                             "import time (an initializer, a Constant, or computed from "
                             "static shapes)", needs_constant=self.node.input[i])
        return v.const

    def int_list_input(self, i: int, what: str) -> list[int] | None:
        arr = self.const_input(i, what)
        if arr is None:
            return None
        if arr.dtype.kind not in "iu":
            raise self.fail(f"input {i} ({what}) must be integers, got {arr.dtype}")
        return [int(v) for v in arr.reshape(-1)]

    def static_shape(self, v: Value, what: str = "input") -> tuple[int, ...]:
        if not all(isinstance(d, int) for d in v.shape):
            raise self.fail(f"{what} shape {format_shape(v.shape)} must be static here (give "
                            "from_onnx a shape for the model's inputs)")
        return tuple(v.shape)  # type: ignore[arg-type]

    # --------------------------------------------------------------------- attributes

    def has_attr(self, name: str) -> bool:
        return name in self.attrs

    def attr(self, name: str, default: object = None) -> object:
        """Attribute ``name`` as a Python value (strings decoded, tensors as arrays,
        lists as lists), or ``default``; marks it understood."""
        self.used_attrs.add(name)
        proto = self.attrs.get(name)
        if proto is None:
            return default
        if proto.ref_attr_name:
            raise self.fail(f"attribute {name} refers to a function attribute, which is not "
                            "supported outside functions")
        value = helper.get_attribute_value(proto)
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        if isinstance(value, onnx.TensorProto):
            return tensor_to_array(value, f"ONNX node {self.label} ({self.op_type}) "
                                          f"attribute {name}")
        if isinstance(value, list):
            return [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v
                    for v in value]
        if not isinstance(value, int | float | str):
            raise self.unsupported(name, type(value).__name__, "graph, sparse tensor or type "
                                   "attributes are not supported")
        return value

    def ignore(self, *names: str) -> None:
        """Mark attributes that do not change the inference result as understood."""
        self.used_attrs.update(names)

    def check_attrs(self) -> None:
        """An error for the first attribute of the node the converter did not read."""
        for name in self.attrs:
            if name not in self.used_attrs:
                raise self.error(f"attribute {name} is not supported", attribute=name)

    # ------------------------------------------------------------------------ builders

    def call(self, op_name: str, *args: Value, **attrs: object) -> Value:
        """A call of IR operator ``op_name`` on ``args`` with its type; a type error of the
        operator becomes an OnnxImportError naming this node."""
        opdef = get_op_def(op_name)
        try:
            call = make_call(op_name, *(a.expr for a in args), **attrs)
            out_type = opdef.infer_type([a.type for a in args], call.attrs)
        except (IRTypeError, TypeError, ValueError) as exc:
            raise self.fail(f"{exc}") from exc
        if (isinstance(out_type, TensorType) and all(a.const is not None for a in args)
                and foldable_size(out_type)):
            # known inputs: compute it now (weights transformed, shape arithmetic)
            try:
                out = opdef.compute([a.const for a in args], call.attrs)
            except Exception as exc:
                raise self.fail(f"computing {op_name} at import time failed: {exc}") from exc
            return const_value(np.asarray(out))
        return Value(call, out_type)

    def tuple(self, values: Sequence[Value]) -> Value:
        return Value(Tuple([v.expr for v in values]), TupleType(tuple(v.type for v in values)))

    def item(self, value: Value, index: int) -> Value:
        assert isinstance(value.type, TupleType)
        return Value(TupleGetItem(value.expr, index), value.type.fields[index])

    def const(self, array: object, dtype: str | None = None) -> Value:
        return const_value(np.asarray(array, dtype=dtype))

    def scalar(self, value: float | int, like: Value) -> Value:
        """A rank-0 constant of ``like``'s dtype."""
        return const_value(np.asarray(value, dtype=like.dtype))

    def cast(self, v: Value, dtype: str) -> Value:
        return v if v.dtype == dtype else self.call("cast", v, dtype=dtype)


__all__ = ["CONVERTERS", "NodeContext", "OnnxImportError", "Value", "const_value",
           "converter", "node_label", "onnx_dtype", "onnx_dtype_name", "tensor_to_array"]
