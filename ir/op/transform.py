"""Shape manipulation and tensor creation (no namespace: ``ir.op.reshape``,
``ir.op.concatenate``, ``ir.op.zeros``): reshape, transpose, squeeze, expand_dims,
concatenate, split, strided_slice, take, broadcast_to, zeros, ones, full.

Operators taking a tuple (``concatenate``) have one input of ``TupleType``; their compute
receives that input as a sequence of arrays. Operators returning a tuple (``split``) have a
``TupleType`` output and a compute returning a tuple of arrays. Each compute derives its
output shape from the type relation applied to the concrete input shapes, so the two cannot
disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..attrs import Attrs
from ..errors import IRTypeError
from ..op_registry import OpDef, OpPattern, register_op
from ..types import Any, Dim, SymDim, TensorType, TupleType, Type, format_shape
from . import lowering as low
from . import relations as rel
from ._make import namespace_getattr, namespace_ops


def _tt(x: np.ndarray) -> TensorType:
    return TensorType(x.shape, str(x.dtype))


def _static(op_name: str, shape: Sequence[Dim]) -> tuple[int, ...]:
    if not rel.is_static(shape):
        raise ValueError(f"{op_name}: shape {format_shape(shape)} is not static")
    return tuple(shape)  # type: ignore[arg-type]


# -------------------------------------------------------------------------------- reshape


def reshape_shape(data: TensorType, newshape: Sequence[int], allowzero: bool = False
                  ) -> tuple[Dim, ...]:
    """The shape Relay's ``reshape`` gives ``data`` for ``newshape``: a positive entry is
    that size, 0 copies the input dimension at the same position (unless ``allowzero``),
    -1 is inferred from the number of elements, -2 copies all remaining input dimensions,
    -3 merges the next two input dimensions, -4 splits the next input dimension into the
    two sizes that follow it (one may be -1). Symbolic dimensions flow through: copied
    ones stay, an inferred one is a SymDim when the sizes divide symbolically, else Any."""
    shape = data.shape
    out: list[Dim | None] = []
    copied: list[int] = []  # positions in ``out`` that copy an input dimension (0, -2)
    src, infer, i = 0, None, 0
    news = tuple(newshape)

    def src_dim(k: int) -> Dim:
        if k >= len(shape):
            raise IRTypeError(f"reshape: newshape {news} refers to input dimension {k} but "
                              f"the input {format_shape(shape)} has rank {len(shape)}")
        return shape[k]

    while i < len(news):
        v = news[i]
        if not isinstance(v, int) or isinstance(v, bool):
            raise IRTypeError(f"reshape: newshape {news} must hold ints, got {v!r}")
        if v > 0 or (v == 0 and allowzero):
            out.append(v)
            src += 1
        elif v == 0:
            copied.append(len(out))
            out.append(src_dim(src))
            src += 1
        elif v == -1:
            if infer is not None:
                raise IRTypeError(f"reshape: newshape {news} has more than one -1")
            infer = len(out)
            out.append(None)
            src += 1
        elif v == -2:
            copied.extend(range(len(out), len(out) + len(shape) - src))
            out.extend(shape[src:])
            src = len(shape)
        elif v == -3:
            a, b = src_dim(src), src_dim(src + 1)
            out.append(a * b if isinstance(a, int) and isinstance(b, int) else Any)
            src += 2
        elif v == -4:
            if i + 2 >= len(news):
                raise IRTypeError(f"reshape: -4 in newshape {news} must be followed by two "
                                  "sizes")
            d = src_dim(src)
            d1, d2 = news[i + 1], news[i + 2]
            if (d1 == -1 and d2 == -1) or min(d1, d2) < -1 or 0 in (d1, d2):
                raise IRTypeError(f"reshape: the sizes after -4 in newshape {news} must be "
                                  "positive (one may be -1)")
            if isinstance(d, int):
                if d1 == -1:
                    d1 = d // d2
                if d2 == -1:
                    d2 = d // d1
                if d1 * d2 != d:
                    raise IRTypeError(f"reshape: cannot split dimension {d} of input "
                                      f"{format_shape(shape)} into {d1} x {d2}")
                out.extend((d1, d2))
            else:
                out.extend((Any if d1 == -1 else d1, Any if d2 == -1 else d2))
            src += 1
            i += 2
        else:
            raise IRTypeError(f"reshape: newshape {news} has an invalid entry {v}")
        i += 1

    # dimensions copied from the input cancel out exactly (even Any ones)
    copied_dims = [out[k] for k in copied]
    rest_in = list(shape)
    for d in copied_dims:
        rest_in.remove(d)
    known = [d for d in out if d is not None]
    rest_out = [d for k, d in enumerate(out) if d is not None and k not in copied]
    in_c, in_s, in_dyn = rel.sym_size(rest_in)
    out_c, out_s, out_dyn = rel.sym_size(rest_out)  # type: ignore[arg-type]
    if infer is not None:
        if in_dyn or out_dyn:
            inferred: Dim = Any
        else:
            if out_c == 0 or in_c % out_c or (out_s - in_s):
                raise IRTypeError(f"reshape: cannot reshape input {format_shape(shape)} into "
                                  f"newshape {news}: the other dimensions do not divide its "
                                  "size")
            rest = in_s - out_s
            count = in_c // out_c
            if not rest:
                inferred = count
            elif count == 1 and sum(rest.values()) == 1:
                inferred = SymDim(next(iter(rest)))
            else:
                inferred = Any
        out[infer] = inferred
    elif not (in_dyn or out_dyn) and (in_c != out_c or in_s != out_s):
        raise IRTypeError(f"reshape: cannot reshape input {format_shape(shape)} "
                          f"({_size_text(in_c, in_s)} elements) into "
                          f"{format_shape(known)} ({_size_text(out_c, out_s)} elements)")
    return tuple(out)  # type: ignore[arg-type]


def _size_text(const: int, syms: dict) -> str:
    names = [n for n, k in sorted(syms.items()) for _ in range(k)]
    if not names:
        return str(const)
    return "*".join(([str(const)] if const != 1 else []) + names)


def _reshape_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    data = rel.expect_tensor("reshape", types[0])
    if attrs.newshape is None:
        raise IRTypeError("reshape: attribute newshape is required")
    return TensorType(reshape_shape(data, attrs.newshape, attrs.allowzero), data.dtype)


def _reshape(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    return x.reshape(_static("reshape", reshape_shape(_tt(x), attrs.newshape, attrs.allowzero)))


register_op(OpDef(
    name="reshape", num_inputs=1,
    attrs_schema={"newshape": (tuple, None), "allowzero": (bool, False)},
    type_relation=_reshape_relation, pattern=OpPattern.INJECTIVE, compute=_reshape,
    lowering=low.reshape,
    doc="Row-major reshape to ``newshape`` (Relay's: 0 copies a dimension, -1 infers one, "
        "-2 copies the rest, -3 merges two, -4 splits one)."))

# ------------------------------------------------------------------------------ transpose


def _transpose_axes(t: TensorType, axes: Sequence[int] | None) -> tuple[int, ...]:
    if axes is None:
        return tuple(reversed(range(t.ndim)))
    perm = tuple(a + t.ndim if isinstance(a, int) and a < 0 else a for a in axes)
    if sorted(perm) != list(range(t.ndim)):
        raise IRTypeError(f"transpose: axes {tuple(axes)} are not a permutation of the "
                          f"{t.ndim} axes of input {format_shape(t.shape)}")
    return perm


def _transpose_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    t = rel.expect_tensor("transpose", types[0])
    return TensorType(tuple(t.shape[a] for a in _transpose_axes(t, attrs.axes)), t.dtype)


register_op(OpDef(
    name="transpose", num_inputs=1, attrs_schema={"axes": (tuple, None)},
    type_relation=_transpose_relation, pattern=OpPattern.INJECTIVE,
    compute=lambda args, attrs: np.transpose(args[0], _transpose_axes(
        _tt(np.asarray(args[0])), attrs.axes)),
    lowering=low.transpose, doc="Permute the axes (``axes`` None: reverse them)."))

# ---------------------------------------------------------------- squeeze / expand_dims


def _squeeze_axes(t: TensorType, axis: Sequence[int] | None) -> tuple[int, ...]:
    if axis is None:
        return tuple(i for i, d in enumerate(t.shape) if d == 1)
    axes = rel.normalize_axes("squeeze", axis, t)
    for a in axes:
        if isinstance(t.shape[a], int) and t.shape[a] != 1:
            raise IRTypeError(f"squeeze: axis {a} of input {format_shape(t.shape)} has size "
                              f"{t.shape[a]}, not 1")
    return axes


def _squeeze_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    t = rel.expect_tensor("squeeze", types[0])
    axes = _squeeze_axes(t, attrs.axis)
    return TensorType(tuple(d for i, d in enumerate(t.shape) if i not in axes), t.dtype)


register_op(OpDef(
    name="squeeze", num_inputs=1, attrs_schema={"axis": (tuple, None)},
    type_relation=_squeeze_relation, pattern=OpPattern.INJECTIVE,
    compute=lambda args, attrs: np.squeeze(args[0], _squeeze_axes(
        _tt(np.asarray(args[0])), attrs.axis)),
    lowering=low.reshape,
    doc="Drop axes of size 1 (``axis`` None: every static 1)."))


def _expand_dims_shape(t: TensorType, attrs: Attrs) -> tuple[Dim, ...]:
    axis = attrs.axis
    if not -t.ndim - 1 <= axis <= t.ndim:
        raise IRTypeError(f"expand_dims: axis {axis} is out of range for an input of rank "
                          f"{t.ndim} (shape {format_shape(t.shape)}); it must be in "
                          f"[{-t.ndim - 1}, {t.ndim}]")
    if attrs.num_newaxis < 0:
        raise IRTypeError(f"expand_dims: num_newaxis must be >= 0, got {attrs.num_newaxis}")
    a = axis + t.ndim + 1 if axis < 0 else axis
    return (*t.shape[:a], *(1,) * attrs.num_newaxis, *t.shape[a:])


def _expand_dims_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    t = rel.expect_tensor("expand_dims", types[0])
    return TensorType(_expand_dims_shape(t, attrs), t.dtype)


register_op(OpDef(
    name="expand_dims", num_inputs=1, attrs_schema={"axis": (int, 0), "num_newaxis": (int, 1)},
    type_relation=_expand_dims_relation, pattern=OpPattern.BROADCAST,
    compute=lambda args, attrs: np.reshape(args[0], _expand_dims_shape(
        _tt(np.asarray(args[0])), attrs)),
    lowering=low.reshape,
    doc="Insert ``num_newaxis`` axes of size 1 at ``axis``."))

# ---------------------------------------------------------------------------- concatenate


def _concat_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "concatenate"
    tup = types[0]
    if not isinstance(tup, TupleType):
        raise IRTypeError(f"{op}: input must be a tuple of tensors, got {tup}")
    if not tup.fields:
        raise IRTypeError(f"{op}: needs at least one tensor, got an empty tuple")
    ts = [rel.expect_tensor(op, f, f"tuple field {i}") for i, f in enumerate(tup.fields)]
    first = ts[0]
    if first.ndim == 0:
        raise IRTypeError(f"{op}: cannot concatenate scalars (field 0 has shape ())")
    axis = rel.normalize_axis(op, attrs.axis, first.ndim, first.shape)
    rel.same_dtype(op, ts)
    shape = list(first.shape)
    for i, t in enumerate(ts[1:], 1):
        if t.ndim != first.ndim:
            raise IRTypeError(f"{op}: field {i} {format_shape(t.shape)} has rank {t.ndim} but "
                              f"field 0 {format_shape(first.shape)} has rank {first.ndim}")
        for d, (x, y) in enumerate(zip(shape, t.shape, strict=True)):
            if d == axis:
                continue
            if not rel.dims_agree(x, y):
                raise IRTypeError(f"{op}: field {i} {format_shape(t.shape)} and field 0 "
                                  f"{format_shape(first.shape)} disagree on dimension {d} "
                                  f"({y} vs {x}); only axis {axis} may differ")
            shape[d] = rel.merge_dim(x, y)
    sizes = [t.shape[axis] for t in ts]
    shape[axis] = sum(sizes) if all(isinstance(s, int) for s in sizes) else (
        sizes[0] if len(sizes) == 1 else Any)
    return TensorType(tuple(shape), first.dtype)


register_op(OpDef(
    name="concatenate", num_inputs=1, attrs_schema={"axis": (int, 0)},
    type_relation=_concat_relation, pattern=OpPattern.INJECTIVE,
    compute=lambda args, attrs: np.concatenate([np.asarray(a) for a in args[0]], attrs.axis),
    lowering=low.concatenate,
    doc="Join the tensors of a tuple along ``axis`` (all other dimensions agree)."))

# ---------------------------------------------------------------------------------- split


def _split_types(t: TensorType, attrs: Attrs) -> list[TensorType]:
    op = "split"
    if t.ndim == 0:
        raise IRTypeError(f"{op}: cannot split a scalar")
    axis = rel.normalize_axis(op, attrs.axis, t.ndim, t.shape)
    dim = t.shape[axis]
    spec = attrs.indices_or_sections
    if isinstance(spec, int):
        if spec < 1:
            raise IRTypeError(f"{op}: indices_or_sections must be >= 1, got {spec}")
        if isinstance(dim, int):
            if dim % spec:
                raise IRTypeError(f"{op}: dimension {dim} (axis {axis} of input "
                                  f"{format_shape(t.shape)}) does not split into {spec} "
                                  "equal sections")
            sizes: list[Dim] = [dim // spec] * spec
        else:
            sizes = [dim if spec == 1 else Any] * spec
    else:
        idx = list(spec)
        if any(not isinstance(v, int) or v < 0 for v in idx) or idx != sorted(idx):
            raise IRTypeError(f"{op}: indices {tuple(idx)} must be ascending ints >= 0")
        bounds = [0, *idx]
        if isinstance(dim, int):
            ends = [*idx, dim]
            sizes = [max(0, min(e, dim) - min(b, dim)) for b, e in zip(bounds, ends,
                                                                       strict=True)]
        else:
            sizes = [e - b for b, e in zip(bounds[:-1], idx, strict=True)] + [Any]
    return [TensorType((*t.shape[:axis], s, *t.shape[axis + 1:]), t.dtype) for s in sizes]


def _split_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    return TupleType(tuple(_split_types(rel.expect_tensor("split", types[0]), attrs)))


def _split(args: Sequence[np.ndarray], attrs: Attrs) -> tuple:
    x = np.asarray(args[0])
    spec = attrs.indices_or_sections
    parts = np.split(x, spec if isinstance(spec, int) else list(spec), axis=attrs.axis)
    return tuple(np.ascontiguousarray(p) for p in parts)


register_op(OpDef(
    name="split", num_inputs=1,
    attrs_schema={"indices_or_sections": ((int, tuple), 1), "axis": (int, 0)},
    type_relation=_split_relation, pattern=OpPattern.INJECTIVE, compute=_split,
    lowering=low.split,
    doc="Split along ``axis`` into ``indices_or_sections`` equal parts (an int) or at the "
        "given ascending indices; a tuple."))

# -------------------------------------------------------------------------- strided_slice

_BIG = 2 ** 31 - 1


def slice_plan(t: TensorType, attrs: Attrs) -> dict[int, tuple[int, int | None, int]]:
    """axis -> (begin, end or None for 'to the end', stride) from Relay's attributes."""
    op = "strided_slice"
    if attrs.begin is None:
        raise IRTypeError(f"{op}: attribute begin is required")
    begin = list(attrs.begin)
    n = len(begin)
    axes = list(range(n)) if attrs.axes is None else list(attrs.axes)
    if len(axes) != n:
        raise IRTypeError(f"{op}: begin {tuple(begin)} and axes {tuple(axes)} differ in length")
    end = list(attrs.end) if attrs.end is not None else []
    strides = list(attrs.strides) if attrs.strides is not None else []
    if len(end) > n or len(strides) > n:
        raise IRTypeError(f"{op}: end {tuple(end)} or strides {tuple(strides)} is longer than "
                          f"begin {tuple(begin)}")
    if len(strides) == 1 and n > 1:
        strides = strides * n
    if attrs.slice_mode not in ("end", "size"):
        raise IRTypeError(f"{op}: slice_mode must be 'end' or 'size', got {attrs.slice_mode!r}")
    plan = {}
    for k, axis in enumerate(axes):
        a = rel.normalize_axis(op, axis, t.ndim, t.shape)
        if a in plan:
            raise IRTypeError(f"{op}: axis {axis} is given twice")
        b = begin[k]
        e = end[k] if k < len(end) else None
        s = strides[k] if k < len(strides) else 1
        if attrs.slice_mode == "size":
            s = 1
            e = None if e is None or e < 0 else b + e
        if s == 0:
            raise IRTypeError(f"{op}: strides must not be 0, got {tuple(strides)}")
        if e is not None and (e >= _BIG or (s < 0 and e <= -_BIG)):
            e = None
        plan[a] = (b, e, s)
    return plan


def _slice_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    t = rel.expect_tensor("strided_slice", types[0])
    shape = list(t.shape)
    for a, (b, e, s) in slice_plan(t, attrs).items():
        d = shape[a]
        if isinstance(d, int):
            shape[a] = len(range(d)[slice(b, e, s)])
        elif not (b == 0 and e is None and s == 1):
            shape[a] = Any
    return TensorType(tuple(shape), t.dtype)


def _strided_slice(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    index = [slice(None)] * x.ndim
    for a, (b, e, s) in slice_plan(_tt(x), attrs).items():
        index[a] = slice(b, e, s)
    return np.ascontiguousarray(x[tuple(index)])


register_op(OpDef(
    name="strided_slice", num_inputs=1,
    attrs_schema={"begin": (tuple, None), "end": (tuple, None), "strides": (tuple, None),
                  "axes": (tuple, None), "slice_mode": (str, "end")},
    type_relation=_slice_relation, pattern=OpPattern.INJECTIVE, compute=_strided_slice,
    lowering=low.strided_slice,
    doc="``x[begin:end:strides]`` on ``axes`` (None: the first len(begin) axes), Python "
        "slice semantics; ``slice_mode='size'`` reads ``end`` as sizes (-1: to the end)."))

# ----------------------------------------------------------------------------------- take


def _take_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "take"
    data = rel.expect_tensor(op, types[0], "data")
    indices = rel.expect_tensor(op, types[1], "indices")
    rel.expect_dtype_kind(op, indices, "iu", "indices")
    if attrs.mode not in ("clip", "wrap", "fast"):
        raise IRTypeError(f"{op}: mode must be 'clip', 'wrap' or 'fast', got {attrs.mode!r}")
    if attrs.axis is None:
        if attrs.batch_dims:
            raise IRTypeError(f"{op}: batch_dims needs an axis")
        return TensorType(indices.shape, data.dtype)
    axis = rel.normalize_axis(op, attrs.axis, data.ndim, data.shape)
    bd = attrs.batch_dims + indices.ndim if attrs.batch_dims < 0 else attrs.batch_dims
    if not 0 <= bd <= min(axis, indices.ndim):
        raise IRTypeError(f"{op}: batch_dims={attrs.batch_dims} must be in [0, min(axis, "
                          f"rank of indices)] for data {format_shape(data.shape)}, indices "
                          f"{format_shape(indices.shape)} and axis {attrs.axis}")
    for d in range(bd):
        if not rel.dims_agree(data.shape[d], indices.shape[d]):
            raise IRTypeError(f"{op}: data {format_shape(data.shape)} and indices "
                              f"{format_shape(indices.shape)} disagree on batch dimension {d}")
    return TensorType((*data.shape[:axis], *indices.shape[bd:], *data.shape[axis + 1:]),
                      data.dtype)


def _take(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices = np.asarray(args[0]), np.asarray(args[1])
    mode = "raise" if attrs.mode == "fast" else attrs.mode
    if attrs.axis is None:
        return np.take(data.reshape(-1), indices, mode=mode)
    axis = attrs.axis % data.ndim
    bd = attrs.batch_dims % indices.ndim if attrs.batch_dims < 0 else attrs.batch_dims
    if bd == 0:
        return np.take(data, indices, axis=axis, mode=mode)
    batch = data.shape[:bd]
    out_type = _take_relation([_tt(data), _tt(indices)], attrs)
    out = np.empty(_static("take", out_type.shape), data.dtype)
    for b in np.ndindex(*batch):
        out[b] = np.take(data[b], indices[b], axis=axis - bd, mode=mode)
    return out


register_op(OpDef(
    name="take", num_inputs=2,
    attrs_schema={"batch_dims": (int, 0), "axis": (int, None), "mode": (str, "clip")},
    type_relation=_take_relation, pattern=OpPattern.INJECTIVE, compute=_take,
    lowering=low.take,
    doc="Gather ``data`` at integer ``indices`` along ``axis`` (None: of the flattened "
        "data); out-of-range indices are clipped (``mode='clip'``) or wrapped ('wrap')."))

# --------------------------------------------------------------------------- broadcast_to


def _broadcast_to_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "broadcast_to"
    t = rel.expect_tensor(op, types[0])
    shape = rel.shape_attr(op, attrs.shape)
    if len(shape) < t.ndim:
        raise IRTypeError(f"{op}: input {format_shape(t.shape)} has more dimensions than "
                          f"the target shape {format_shape(shape)}")
    for x, y in zip(t.shape, shape[len(shape) - t.ndim:], strict=True):
        if not (x == 1 or rel.dims_agree(x, y)):
            raise IRTypeError(f"{op}: input {format_shape(t.shape)} does not broadcast to "
                              f"{format_shape(shape)}: dimension {x} vs {y}")
    return TensorType(shape, t.dtype)


register_op(OpDef(
    name="broadcast_to", num_inputs=1, attrs_schema={"shape": (tuple, None)},
    type_relation=_broadcast_to_relation, pattern=OpPattern.BROADCAST,
    compute=lambda args, attrs: np.array(np.broadcast_to(
        args[0], _static("broadcast_to", rel.shape_attr("broadcast_to", attrs.shape)))),
    lowering=low.broadcast_to, doc="Broadcast to ``shape`` (numpy rules)."))

# ------------------------------------------------------------------------ zeros/ones/full


def _creation_relation(op_name: str) -> Callable:
    def relation(types: Sequence[Type], attrs: Attrs) -> Type:
        dtype = attrs.dtype
        if op_name == "full":
            fill = rel.expect_tensor(op_name, types[0], "fill_value")
            if fill.ndim != 0:
                raise IRTypeError(f"full: fill_value must be a scalar, got shape "
                                  f"{format_shape(fill.shape)}")
            dtype = dtype or fill.dtype
        return TensorType(rel.shape_attr(op_name, attrs.shape),
                          rel.check_dtype(op_name, dtype))

    return relation


def _creation_compute(op_name: str) -> Callable:
    def compute(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        shape = _static(op_name, rel.shape_attr(op_name, attrs.shape))
        if op_name == "full":
            fill = np.asarray(args[0])
            return np.full(shape, fill, dtype=attrs.dtype or fill.dtype)
        return np.full(shape, 0 if op_name == "zeros" else 1, dtype=attrs.dtype)

    return compute


for _name, _doc in (("zeros", "A tensor of zeros"), ("ones", "A tensor of ones")):
    register_op(OpDef(
        name=_name, num_inputs=0,
        attrs_schema={"shape": (tuple, None), "dtype": (str, "float32")},
        type_relation=_creation_relation(_name), pattern=OpPattern.ELEMWISE,
        compute=_creation_compute(_name), lowering=low.constant_fill(int(_name == "ones")),
        doc=f"{_doc} of ``shape`` and ``dtype``."))

register_op(OpDef(
    name="full", num_inputs=1, attrs_schema={"shape": (tuple, None), "dtype": (str, "")},
    type_relation=_creation_relation("full"), pattern=OpPattern.ELEMWISE,
    compute=_creation_compute("full"), lowering=low.full,
    doc="A tensor of ``shape`` filled with the scalar input (``dtype`` '': its dtype)."))

__getattr__ = namespace_getattr("")


def __dir__() -> list[str]:
    return namespace_ops("")
