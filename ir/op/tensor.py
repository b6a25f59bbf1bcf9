"""Tensor operators without a namespace (``ir.op.add``, ``ir.op.sum``): elementwise
arithmetic and math, comparisons and logic, ``where``, ``clip`` and ``cast``, and
reductions. Shape manipulation and tensor creation are in ``transform``.

To add an operator: write its type relation (reuse ``relations``) and numpy compute, and
``register_op(OpDef(...))`` it here; ``ir.op.<name>`` then builds its calls.

Computes return arrays of exactly the dtype the type relation gives (numpy's promotion
rules do not apply: ``float32 + float32`` stays ``float32``, ``sum`` of ``int8`` is
``int8``, as in Relay).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..attrs import Attrs
from ..errors import IRTypeError
from ..op_registry import OpDef, OpPattern, register_op
from ..types import TensorType, Type
from . import lowering as low
from . import relations as rel
from ._make import namespace_getattr, namespace_ops

# ------------------------------------------------------------------ binary (broadcasting)


def _int_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C / TVM semantics, not numpy's floor)."""
    q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    return np.where((a < 0) != (b < 0), -q, q)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return _int_divide(a, b)
    return np.divide(a, b)


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return np.power(a, np.maximum(b, 0))
    return np.power(a, b)


_BINARY: dict[str, tuple[Callable, str]] = {
    "add": (np.add, "Elementwise sum"),
    "subtract": (np.subtract, "Elementwise difference"),
    "multiply": (np.multiply, "Elementwise product"),
    "divide": (_divide, "Elementwise quotient (integers truncate toward zero)"),
    "power": (_power, "Elementwise ``a ** b``"),
    "maximum": (np.maximum, "Elementwise maximum"),
    "minimum": (np.minimum, "Elementwise minimum"),
}
_BINARY_LOWERING = {"add": low.binary("add"), "subtract": low.binary("subtract"),
                    "multiply": low.binary("multiply"), "divide": low.binary("divide"),
                    "maximum": low.elementwise("maximum", lambda te, a, b: te.max(a, b)),
                    "minimum": low.elementwise("minimum", lambda te, a, b: te.min(a, b)),
                    "power": low.elementwise("power", lambda te, a, b: te.pow(a, b))}


#: ops that never raise a floating-point flag on integers (numpy's errstate, which costs
#: more than a scalar op itself, is then not needed: a VM's loop counters)
_FLAGLESS_ON_INTEGERS = {np.add, np.subtract, np.multiply, np.maximum, np.minimum}


def _binary_compute(fn: Callable) -> Callable:
    flagless = fn in _FLAGLESS_ON_INTEGERS

    def compute(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        a, b = (np.asarray(x) for x in args)
        if flagless and a.dtype.kind in "iub":
            return np.asarray(fn(a, b)).astype(a.dtype, copy=False)
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, b)).astype(a.dtype, copy=False)

    return compute


def _register_binary(name: str, fn: Callable, doc: str) -> None:
    register_op(OpDef(
        name=name, num_inputs=2, attrs_schema={},
        type_relation=rel.broadcast_relation(name), pattern=OpPattern.BROADCAST,
        compute=_binary_compute(fn), lowering=_BINARY_LOWERING.get(name),
        doc=f"{doc} with numpy broadcasting; both inputs have one dtype."))


for _name, (_fn, _doc) in _BINARY.items():
    _register_binary(_name, _fn, _doc)

# --------------------------------------------------------- comparisons and logic (bool)


def _compare_compute(fn: Callable) -> Callable:
    def compute(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return np.asarray(fn(np.asarray(args[0]), np.asarray(args[1])), dtype=bool)

    return compute


_COMPARE_LOWERING: dict[str, Callable] = {
    "less": lambda te, a, b: a < b, "greater": lambda te, a, b: a > b,
    "less_equal": lambda te, a, b: a <= b, "greater_equal": lambda te, a, b: a >= b,
    "equal": lambda te, a, b: te.equal(a, b), "not_equal": lambda te, a, b: te.not_equal(a, b),
}

for _name, _fn in (("less", np.less), ("greater", np.greater), ("equal", np.equal),
                   ("less_equal", np.less_equal), ("greater_equal", np.greater_equal),
                   ("not_equal", np.not_equal)):
    register_op(OpDef(
        name=_name, num_inputs=2, attrs_schema={},
        type_relation=rel.broadcast_relation(_name, out_dtype="bool"),
        pattern=OpPattern.BROADCAST, compute=_compare_compute(_fn),
        lowering=low.elementwise(_name, _COMPARE_LOWERING[_name]),
        doc=f"Elementwise ``{_fn.__name__}`` with broadcasting; a bool tensor."))


def _logical_relation(op_name: str) -> Callable:
    broadcast = rel.broadcast_relation(op_name)

    def relation(types: Sequence[Type], attrs: Attrs) -> Type:
        for i, t in enumerate(types):
            rel.expect_dtype_kind(op_name, rel.expect_tensor(op_name, t, f"input {i}"), "b",
                                  f"input {i}")
        return broadcast(types, attrs) if len(types) == 2 else types[0]

    return relation


_LOGICAL_LOWERING: dict[str, Callable] = {
    "logical_and": lambda te, a, b: a & b, "logical_or": lambda te, a, b: a | b,
    "logical_xor": lambda te, a, b: te.not_equal(a, b), "logical_not": lambda te, a: ~a}

for _name, _fn in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                   ("logical_xor", np.logical_xor)):
    register_op(OpDef(
        name=_name, num_inputs=2, attrs_schema={}, type_relation=_logical_relation(_name),
        pattern=OpPattern.BROADCAST, compute=_compare_compute(_fn),
        lowering=low.elementwise(_name, _LOGICAL_LOWERING[_name]),
        doc=f"Elementwise ``{_fn.__name__}`` of bool tensors, with broadcasting."))

register_op(OpDef(
    name="logical_not", num_inputs=1, attrs_schema={},
    type_relation=_logical_relation("logical_not"), pattern=OpPattern.ELEMWISE,
    compute=lambda args, attrs: np.logical_not(args[0]),
    lowering=low.elementwise("logical_not", _LOGICAL_LOWERING["logical_not"]),
    doc="Elementwise negation of a bool tensor."))


def _where_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "where"
    cond, x, y = (rel.expect_tensor(op, t, what) for t, what in
                  zip(types, ("condition", "x", "y"), strict=True))
    rel.expect_dtype_kind(op, cond, "b", "condition")
    dtype = rel.same_dtype(op, [x, y])
    shape = rel.broadcast_shapes(rel.broadcast_shapes(cond.shape, x.shape, op), y.shape, op)
    return TensorType(shape, dtype)


def _where(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    cond, x, y = (np.asarray(a) for a in args)
    return np.asarray(np.where(cond, x, y)).astype(x.dtype, copy=False)


register_op(OpDef(
    name="where", num_inputs=3, attrs_schema={}, type_relation=_where_relation,
    pattern=OpPattern.BROADCAST, compute=_where, lowering=low.where,
    doc="``x`` where the bool ``condition`` holds, else ``y``; the three broadcast together "
        "(x and y have one dtype)."))

# --------------------------------------------------------------------- unary elementwise

_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def _erf(x: np.ndarray) -> np.ndarray:
    return _erf_scalar(x.astype(np.float64)).astype(np.float64)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # stable for large |x|


_UNARY: dict[str, tuple[Callable, str, bool]] = {
    # name -> (numpy function, doc, float-only)
    "negative": (np.negative, "``-x``", False),
    "exp": (np.exp, "``e ** x``", True),
    "log": (np.log, "Natural logarithm", True),
    "sqrt": (np.sqrt, "Square root", True),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), "``1 / sqrt(x)``", True),
    "tanh": (np.tanh, "Hyperbolic tangent", True),
    "sigmoid": (_sigmoid, "``1 / (1 + exp(-x))``", True),
    "erf": (_erf, "The error function (``math.erf`` per element)", True),
    "abs": (np.abs, "Absolute value", False),
    "floor": (np.floor, "Round down", True),
    "ceil": (np.ceil, "Round up", True),
}
_UNARY_LOWERING = {"sigmoid": low.unary("sigmoid"), "tanh": low.unary("tanh"),
                   **{name: low.math(name) for name in ("exp", "log", "sqrt", "rsqrt", "erf",
                                                        "abs", "floor", "ceil")},
                   "negative": low.elementwise("negative", lambda te, x: -x)}


def _unary_relation(op_name: str, float_only: bool) -> Callable:
    def relation(types: Sequence[Type], attrs: Attrs) -> Type:
        t = rel.expect_tensor(op_name, types[0])
        if float_only:
            rel.expect_float(op_name, t)
        return t

    return relation


def _unary_compute(fn: Callable) -> Callable:
    def compute(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        with np.errstate(all="ignore"):
            return np.asarray(fn(x)).astype(x.dtype, copy=False)

    return compute


for _name, (_fn, _doc, _float) in _UNARY.items():
    register_op(OpDef(
        name=_name, num_inputs=1, attrs_schema={},
        type_relation=_unary_relation(_name, _float), pattern=OpPattern.ELEMWISE,
        compute=_unary_compute(_fn), lowering=_UNARY_LOWERING.get(_name),
        doc=f"{_doc}, elementwise{' (float dtypes)' if _float else ''}."))


def _clip_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    t = rel.expect_tensor("clip", types[0])
    if attrs.a_min > attrs.a_max:
        raise IRTypeError(f"clip: a_min={attrs.a_min} is greater than a_max={attrs.a_max}")
    return t


def _clip(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    return np.clip(x, attrs.a_min, attrs.a_max).astype(x.dtype, copy=False)


register_op(OpDef(
    name="clip", num_inputs=1, attrs_schema={"a_min": (float, None), "a_max": (float, None)},
    type_relation=_clip_relation, pattern=OpPattern.ELEMWISE, compute=_clip,
    lowering=low.clip, doc="``min(max(x, a_min), a_max)``, elementwise."))


def _cast_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    t = rel.expect_tensor("cast", types[0])
    if not attrs.dtype:
        raise IRTypeError("cast: attribute dtype is required")
    return TensorType(t.shape, rel.check_dtype("cast", attrs.dtype))


register_op(OpDef(
    name="cast", num_inputs=1, attrs_schema={"dtype": (str, "")},
    type_relation=_cast_relation, pattern=OpPattern.ELEMWISE,
    compute=lambda args, attrs: np.asarray(args[0]).astype(attrs.dtype), lowering=low.cast,
    doc="Convert to ``dtype`` elementwise."))

# ---------------------------------------------------------------------------- reductions

REDUCE_SCHEMA = {"axis": (tuple, None), "keepdims": (bool, False), "exclude": (bool, False)}


def _reduce_compute(op_name: str, fn: Callable) -> Callable:
    def compute(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        axes = rel.reduce_axes(op_name, TensorType(x.shape, str(x.dtype)), attrs)
        out = fn(x, axes, attrs.keepdims)
        return np.asarray(out).astype(x.dtype, copy=False)

    return compute


def _mean(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    if x.dtype.kind in "iu":  # an integer mean truncates, like Relay's (sum / count)
        total = np.sum(x, axis=axes, keepdims=keepdims, dtype=np.int64)
        count = math.prod(x.shape[a] for a in axes)
        return _int_divide(total, np.int64(count))
    return np.mean(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


_REDUCTIONS: dict[str, tuple[Callable, str, Callable | None]] = {
    "sum": (lambda x, a, k: np.sum(x, axis=a, keepdims=k, dtype=x.dtype), "Sum",
            low.reduction("sum")),
    "mean": (_mean, "Mean", low.mean),
    "max": (lambda x, a, k: np.max(x, axis=a, keepdims=k), "Maximum", low.reduction("max")),
    "min": (lambda x, a, k: np.min(x, axis=a, keepdims=k), "Minimum", low.reduction("min")),
    "prod": (lambda x, a, k: np.prod(x, axis=a, keepdims=k, dtype=x.dtype), "Product",
             low.reduction("prod")),
}

for _name, (_fn, _doc, _lower) in _REDUCTIONS.items():
    register_op(OpDef(
        name=_name, num_inputs=1, attrs_schema=REDUCE_SCHEMA,
        type_relation=rel.reduce_relation(_name), pattern=OpPattern.COMM_REDUCE,
        compute=_reduce_compute(_name, _fn), lowering=_lower,
        doc=f"{_doc} over ``axis`` (None: all axes; ``exclude``: all but those), dropping "
            "the reduced axes unless ``keepdims``."))


def _arg_reduce_compute(op_name: str, fn: Callable) -> Callable:
    """argmax / argmin over several axes: the index into the reduced axes flattened in
    row-major order (as Relay's), int32."""

    def compute(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        axes = rel.reduce_axes(op_name, TensorType(x.shape, str(x.dtype)), attrs)
        kept = [a for a in range(x.ndim) if a not in axes]
        moved = np.transpose(x, kept + list(axes))
        flat = moved.reshape((*moved.shape[:len(kept)], -1))
        if attrs.select_last_index:
            last = flat.shape[-1] - 1
            index = last - fn(flat[..., ::-1], axis=-1)
        else:
            index = fn(flat, axis=-1)
        if attrs.keepdims:
            index = index.reshape([1 if a in axes else x.shape[a] for a in range(x.ndim)])
        return np.asarray(index, dtype=np.int32)

    return compute


for _name, _fn in (("argmax", np.argmax), ("argmin", np.argmin)):
    register_op(OpDef(
        name=_name, num_inputs=1,
        attrs_schema={**REDUCE_SCHEMA, "select_last_index": (bool, False)},
        type_relation=rel.reduce_relation(_name, out_dtype="int32"),
        pattern=OpPattern.COMM_REDUCE, compute=_arg_reduce_compute(_name, _fn),
        lowering=low.arg_reduction(_name),
        doc=f"The int32 index of the {_name[3:]}imum over ``axis`` (several axes: into them "
            "flattened row-major); ties go to the first index unless "
            "``select_last_index``."))


__getattr__ = namespace_getattr("")


def __dir__() -> list[str]:
    return namespace_ops("")
