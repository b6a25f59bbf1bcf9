"""Builder functions in TVM's shape for the nodes that need conversion: ``var`` (a
variable with a type annotation from a shape and dtype) and ``const`` (a constant from a
Python or numpy value). The other nodes are built with their classes (``ir.Function``,
``ir.Let``, ``ir.If``, ``ir.Tuple``...) and operator calls with ``ir.op``
(``ir.op.nn.dense(x, w)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .expr import Constant, Var
from .span import Span
from .types import Dim, TensorType, Type


def var(name_hint: str, shape: Sequence[Dim | str] | Type | None = None,
        dtype: str = "float32", type_annotation: Type | str | None = None,
        span: Span | None = None) -> Var:
    """A variable ``%name_hint``. With ``shape``: annotated ``Tensor[shape, dtype]`` (a
    str dimension is symbolic: ``shape=("n", 784)``); or with ``type_annotation`` (a str is
    a scalar dtype); with neither, unannotated. A Type in the ``shape`` position is taken as
    the annotation (``relay.var("x", ty)`` style)."""
    if isinstance(shape, Type):
        if type_annotation is not None:
            raise ValueError(f"var {name_hint}: two type annotations given")
        shape, type_annotation = None, shape
    if shape is not None:
        if type_annotation is not None:
            raise ValueError(f"var {name_hint}: give a shape or a type annotation, not both")
        type_annotation = TensorType(tuple(shape), dtype)
    elif isinstance(type_annotation, str):
        type_annotation = TensorType((), type_annotation)
    return Var(name_hint, type_annotation, span)


def const(value: object, dtype: str | None = None, span: Span | None = None) -> Constant:
    """A constant tensor. Python numbers and (nested) lists default to ``int32`` /
    ``float32`` (``bool`` for booleans), as in Relay; numpy arrays and scalars keep their
    dtype unless ``dtype`` is given."""
    if isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value) if dtype is None else np.asarray(value).astype(dtype)
    else:
        arr = np.array(value, dtype=dtype)
        if dtype is None:
            arr = arr.astype({np.dtype("int64"): np.int32,
                              np.dtype("float64"): np.float32}.get(arr.dtype, arr.dtype))
    return Constant(arr, span)
