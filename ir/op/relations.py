"""Type-relation building blocks that operator definitions share: checking that an input
is a tensor, broadcasting shapes (with symbolic and dynamic dimensions), and reductions
over axes. A relation takes ``(input types, attrs)`` and returns the output type or raises
``IRTypeError`` naming the operator and the shapes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..attrs import Attrs
from ..errors import IRTypeError
from ..op_registry import TypeRelationFn
from ..types import Any, Dim, SymDim, TensorType, Type, format_shape


def expect_tensor(op_name: str, t: Type, what: str = "input") -> TensorType:
    """``t`` when it is a tensor type; otherwise an IRTypeError."""
    if not isinstance(t, TensorType):
        raise IRTypeError(f"{op_name}: {what} must be a tensor, got {t}")
    return t


def same_dtype(op_name: str, types: Sequence[TensorType]) -> str:
    """The common dtype of ``types``; an IRTypeError naming both when two differ."""
    for t in types[1:]:
        if t.dtype != types[0].dtype:
            raise IRTypeError(f"{op_name}: input dtypes differ: {types[0].dtype} vs {t.dtype}")
    return types[0].dtype


def product_dtypes(op_name: str, data: TensorType, weight: TensorType, out_dtype: str) -> None:
    """The inputs of a product (dense, conv2d) share a dtype, except 8-bit quantized
    ones: uint8 data times int8 weights (the dot-product instructions' pairing) when an
    ``out_dtype`` to accumulate in is given."""
    if out_dtype and (data.dtype, weight.dtype) == ("uint8", "int8"):
        return
    same_dtype(op_name, [data, weight])


def broadcast_dim(x: Dim, y: Dim) -> Dim | None:
    """The broadcast of two dimensions, or None when they cannot broadcast. 1 gives way to
    anything; ``Any`` gives way to anything but 1 (it must be 1 or the other at run time);
    equal dimensions stay; two different symbolic ones, or a symbolic one and an int > 1,
    do not broadcast."""
    if x == 1:
        return y
    if y == 1:
        return x
    if x is Any:
        return y
    if y is Any:
        return x
    if x == y:
        return x
    return None


def broadcast_shapes(a: Sequence[Dim], b: Sequence[Dim],
                     op_name: str = "broadcast") -> tuple[Dim, ...]:
    """The numpy broadcast of shapes ``a`` and ``b`` (aligned on the right), extended to
    symbolic and dynamic dimensions (see ``broadcast_dim``); an IRTypeError naming
    ``op_name``, both shapes and the dimensions that disagree otherwise."""
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + tuple(a)
    pb = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for axis, (x, y) in enumerate(zip(pa, pb, strict=True)):
        d = broadcast_dim(x, y)
        if d is None:
            raise IRTypeError(f"{op_name}: shapes {format_shape(a)} and {format_shape(b)} do "
                              f"not broadcast: dimension {x} vs {y} (axis {axis} of the result)")
        out.append(d)
    return tuple(out)


def broadcast_relation(op_name: str, out_dtype: str | None = None) -> TypeRelationFn:
    """The relation of a binary broadcasting operator: both inputs tensors of one dtype;
    the output has their broadcast shape and that dtype (or ``out_dtype``, e.g. ``bool``
    for comparisons)."""

    def relation(types: Sequence[Type], attrs: Attrs) -> Type:
        a, b = (expect_tensor(op_name, t, f"input {i}") for i, t in enumerate(types))
        dtype = same_dtype(op_name, [a, b])
        return TensorType(broadcast_shapes(a.shape, b.shape, op_name), out_dtype or dtype)

    return relation


def identity_relation(op_name: str) -> TypeRelationFn:
    """The relation of a unary elementwise operator: the output type is the input's."""

    def relation(types: Sequence[Type], attrs: Attrs) -> Type:
        return expect_tensor(op_name, types[0])

    return relation


def normalize_axes(op_name: str, axes: Sequence[int], t: TensorType) -> tuple[int, ...]:
    """``axes`` of ``t`` made non-negative and sorted; an IRTypeError for an axis out of
    range or given twice."""
    out = set()
    for axis in axes:
        a = axis + t.ndim if axis < 0 else axis
        if not 0 <= a < t.ndim:
            raise IRTypeError(f"{op_name}: axis {axis} is out of range for an input of rank "
                              f"{t.ndim} (shape {format_shape(t.shape)})")
        if a in out:
            raise IRTypeError(f"{op_name}: axis {axis} is given twice")
        out.add(a)
    return tuple(sorted(out))


def reduce_axes(op_name: str, t: TensorType, attrs: Attrs) -> tuple[int, ...]:
    """The axes a reduction with attributes ``axis`` (None: all), ``exclude`` reduces."""
    axes = tuple(range(t.ndim)) if attrs.axis is None else normalize_axes(
        op_name, attrs.axis, t)
    if attrs.get("exclude"):
        axes = tuple(a for a in range(t.ndim) if a not in axes)
    return axes


def reduce_relation(op_name: str, out_dtype: str | None = None) -> TypeRelationFn:
    """The relation of a reduction with attributes ``axis``, ``keepdims``, ``exclude``:
    reduced axes are dropped (or kept as 1 with ``keepdims``)."""

    def relation(types: Sequence[Type], attrs: Attrs) -> Type:
        t = expect_tensor(op_name, types[0])
        axes = reduce_axes(op_name, t, attrs)
        shape: list[Dim] = []
        for i, d in enumerate(t.shape):
            if i not in axes:
                shape.append(d)
            elif attrs.keepdims:
                shape.append(1)
        return TensorType(tuple(shape), out_dtype or t.dtype)

    return relation


# ------------------------------------------------------------------ dimensions and shapes


def dims_agree(x: Dim, y: Dim) -> bool:
    """Whether two dimensions may be equal: equal ones, or one of them ``Any``."""
    return x == y or x is Any or y is Any


def merge_dim(x: Dim, y: Dim) -> Dim:
    """The more precise of two agreeing dimensions (``Any`` gives way)."""
    return y if x is Any else x


def is_static(shape: Sequence[Dim]) -> bool:
    """Whether every dimension of ``shape`` is an int."""
    return all(isinstance(d, int) for d in shape)


def expect_float(op_name: str, t: TensorType, what: str = "input") -> None:
    """An IRTypeError unless ``t`` has a floating-point dtype."""
    if not (t.dtype.startswith("float") or t.dtype.startswith("bfloat")):
        raise IRTypeError(f"{op_name}: {what} {format_shape(t.shape)} must be a float tensor, "
                          f"got {t.dtype}")


def expect_dtype_kind(op_name: str, t: TensorType, kinds: str, what: str) -> None:
    """An IRTypeError unless ``t``'s dtype is of one of the numpy ``kinds`` ("iu", "b")."""
    try:
        kind = np.dtype(t.dtype).kind
    except TypeError:
        kind = "?"
    if kind not in kinds:
        names = {"i": "int", "u": "uint", "b": "bool", "f": "float"}
        wanted = " or ".join(names.get(k, k) for k in kinds)
        raise IRTypeError(f"{op_name}: {what} {format_shape(t.shape)} must have a {wanted} "
                          f"dtype, got {t.dtype}")


def check_dtype(op_name: str, dtype: str, what: str = "dtype") -> str:
    """``dtype`` when numpy knows it by that name; an IRTypeError otherwise."""
    try:
        if dtype != "bfloat16":
            np.dtype(dtype)
    except TypeError:
        raise IRTypeError(f"{op_name}: {what} {dtype!r} is not a dtype") from None
    return dtype


def normalize_axis(op_name: str, axis: int, ndim: int, shape: Sequence[Dim] = ()) -> int:
    """``axis`` (negative counts from the end) as an index in ``range(ndim)``."""
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        where = f" (shape {format_shape(shape)})" if shape else ""
        raise IRTypeError(f"{op_name}: axis {axis} is out of range for an input of rank "
                          f"{ndim}{where}")
    return a


def shape_attr(op_name: str, value: object, what: str = "shape") -> tuple[Dim, ...]:
    """A shape given as an attribute (ints >= 0 or names of symbolic dims)."""
    if value is None:
        raise IRTypeError(f"{op_name}: attribute {what} is required")
    out = []
    for d in value:
        if isinstance(d, bool) or not isinstance(d, int | str) or (isinstance(d, int) and d < 0):
            raise IRTypeError(f"{op_name}: {what} {tuple(value)} must hold ints >= 0 or names "
                              f"of symbolic dimensions, got {d!r}")
        out.append(SymDim(d) if isinstance(d, str) else d)
    return tuple(out)


def int_tuple(op_name: str, value: object, what: str, sizes: Sequence[int],
              minimum: int | None = None) -> tuple[int, ...]:
    """``value`` (an attribute) as a tuple of ints of one of the lengths ``sizes``."""
    items = tuple(value) if isinstance(value, tuple) else (value,)
    if len(items) not in sizes or not all(isinstance(v, int) and not isinstance(v, bool)
                                          for v in items):
        lengths = ", ".join(str(n) for n in sizes[:-1]) + f" or {sizes[-1]}" if len(
            sizes) > 1 else str(sizes[0])
        raise IRTypeError(f"{op_name}: {what} must be {lengths} ints, got {value!r}")
    if minimum is not None and any(v < minimum for v in items):
        raise IRTypeError(f"{op_name}: {what} must be >= {minimum}, got {value!r}")
    return items


def pair(op_name: str, value: object, what: str, minimum: int = 1) -> tuple[int, int]:
    """A 2-d window parameter (strides, dilation, pool_size) from 1 or 2 ints."""
    items = int_tuple(op_name, value, what, (1, 2), minimum)
    return (items[0], items[0]) if len(items) == 1 else (items[0], items[1])


def padding2d(op_name: str, value: object) -> tuple[int, int, int, int]:
    """Relay's 2-d padding from 1, 2 or 4 ints as (top, left, bottom, right)."""
    p = int_tuple(op_name, value, "padding", (1, 2, 4), 0)
    if len(p) == 1:
        return (p[0],) * 4
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    return p  # type: ignore[return-value]


def layout_axes(op_name: str, layout: str, letters: str, what: str) -> dict[str, int]:
    """The position of each of ``letters`` in ``layout`` (a permutation of them)."""
    if not isinstance(layout, str) or sorted(layout) != sorted(letters):
        raise IRTypeError(f"{op_name}: {what} {layout!r} is not supported (a permutation of "
                          f"{letters}, such as {letters!r})")
    return {c: layout.index(c) for c in letters}


def packed_block(layout: str) -> int | None:
    """The channel block of a packed ``NCHW<b>c`` layout (None for any other layout)."""
    if isinstance(layout, str) and layout.startswith("NCHW") and layout.endswith("c"):
        digits = layout[4:-1]
        if digits.isdigit() and int(digits) >= 1:
            return int(digits)
    return None


def is_nchw_or_packed(layout: str) -> bool:
    """``layout`` is NCHW or a packed NCHW<b>c."""
    return layout == "NCHW" or packed_block(layout) is not None


def window_out_dim(size: Dim, kernel: Dim, stride: int, pad_total: int, dilation: int,
                   ceil_mode: bool = False) -> Dim:
    """The output length of a sliding window (Relay's formula; ``ceil_mode`` rounds the
    number of steps up). Symbolic or dynamic inputs give ``Any``, except a 1-wide window
    with stride 1 and no padding, which keeps the input's dimension."""
    if isinstance(size, int) and isinstance(kernel, int):
        span = (kernel - 1) * dilation + 1
        room = size + pad_total - span
        if ceil_mode:
            room += stride - 1
        return room // stride + 1
    if kernel == 1 and stride == 1 and pad_total == 0:
        return size
    return Any


def sym_size(shape: Sequence[Dim]) -> tuple[int, Counter, bool]:
    """The number of elements of ``shape`` as (product of the ints, multiset of the
    symbolic names, whether some dimension is ``Any``)."""
    const, syms, dyn = 1, Counter(), False
    for d in shape:
        if isinstance(d, int):
            const *= d
        elif isinstance(d, SymDim):
            syms[d.name] += 1
        else:
            dyn = True
    return const, syms, dyn


__all__ = ["SymDim", "broadcast_dim", "broadcast_relation", "broadcast_shapes",
           "check_dtype", "dims_agree", "expect_dtype_kind", "expect_float", "expect_tensor",
           "identity_relation", "int_tuple", "is_static", "layout_axes", "merge_dim",
           "normalize_axes", "normalize_axis", "padding2d", "pair", "product_dtypes",
           "reduce_axes", "reduce_relation", "same_dtype", "shape_attr", "sym_size",
           "window_out_dim"]
