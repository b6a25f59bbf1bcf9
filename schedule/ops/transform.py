"""Layout operators: pad, transpose, reshape and concatenate (all injective)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import te
from ..tensor import Tensor
from . import tags
from ._util import normalize_axis


def pad(data: Tensor, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
        value: float | int | te.Expr = 0, name: str = "pad") -> Tensor:
    """Pad each dimension by ``pad_before[d]`` / ``pad_after[d]`` elements of ``value``.

    Built with ``te.if_then_else`` so a schedule can inline it into its consumer.
    """
    pad_after = pad_before if pad_after is None else pad_after
    before, after = list(pad_before), list(pad_after)
    if len(before) != data.ndim or len(after) != data.ndim:
        raise ValueError(f"pad: need {data.ndim} before/after paddings for shape "
                         f"{list(data.shape)}, got {before} and {after}")
    if min(before + after) < 0:
        raise ValueError(f"pad: paddings must not be negative, got {before} and {after}")
    shape = tuple(d + b + a for d, b, a in zip(data.shape, before, after, strict=True))
    fill = value if isinstance(value, te.Expr) else te.const(value, data.dtype)

    def body(*idx: te.Var) -> te.Expr:
        conds = []
        src = []
        for i, d, b, a in zip(idx, data.shape, before, after, strict=True):
            src.append(i - b if b else i)
            if b:
                conds.append(i >= b)
            if a:
                conds.append(i < b + d)
        if not conds:
            return data[tuple(src)]
        return te.if_then_else(te.all(*conds), data[tuple(src)], fill)

    return te.compute(shape, body, name=name, tag=tags.make(tags.INJECTIVE, tags.PAD))


def transpose(data: Tensor, axes: Sequence[int] | None = None,
              name: str = "T_transpose") -> Tensor:
    """Permute the dimensions; ``axes=None`` reverses them (like numpy)."""
    nd = data.ndim
    perm = list(reversed(range(nd))) if axes is None else [normalize_axis(a, nd, "transpose")
                                                           for a in axes]
    if sorted(perm) != list(range(nd)):
        raise ValueError(f"transpose: axes {axes!r} are not a permutation of {nd} dimensions")
    shape = tuple(data.shape[p] for p in perm)

    def body(*idx: te.Var) -> te.Expr:
        src: list[Any] = [None] * nd
        for out_pos, p in enumerate(perm):
            src[p] = idx[out_pos]
        return data[tuple(src)]

    return te.compute(shape, body, name=name, tag=tags.make(tags.INJECTIVE))


def _infer_shape(size: int, newshape: Sequence[int]) -> tuple[int, ...]:
    shape = list(newshape)
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1 or any(d == 0 or d < -1 for d in shape):
        raise ValueError(f"reshape: invalid new shape {list(newshape)}")
    if unknown:
        known = math.prod(d for d in shape if d != -1)
        if size % known:
            raise ValueError(f"reshape: cannot reshape {size} elements into {list(newshape)}")
        shape[unknown[0]] = size // known
    if math.prod(shape) != size:
        raise ValueError(f"reshape: cannot reshape {size} elements into {list(newshape)}")
    return tuple(shape)


def _strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return list(reversed(strides))


def reshape(data: Tensor, newshape: Sequence[int], name: str = "T_reshape") -> Tensor:
    """Row-major reshape (one dimension may be -1), indexed with floordiv / floormod."""
    size = math.prod(data.shape)
    shape = _infer_shape(size, newshape)
    out_strides, in_strides = _strides(shape), _strides(data.shape)

    def body(*idx: te.Var) -> te.Expr:
        flat: Any = None
        for i, st, d in zip(idx, out_strides, shape, strict=True):
            if d == 1:
                continue
            term = i if st == 1 else i * st
            flat = term if flat is None else flat + term
        if flat is None:
            flat = te.const(0, "int32")
        src = []
        for pos, (st, d) in enumerate(zip(in_strides, data.shape, strict=True)):
            if d == 1:
                src.append(0)
                continue
            q = flat if st == 1 else te.floordiv(flat, st)
            src.append(q if pos == 0 else te.floormod(q, d))
        return data[tuple(src)]

    return te.compute(shape, body, name=name, tag=tags.make(tags.INJECTIVE))


def concatenate(tensors: Sequence[Tensor], axis: int = 0,
                name: str = "T_concat") -> Tensor:
    """Join tensors along ``axis``; all other dimensions and the dtypes must agree."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("concatenate: needs at least one tensor")
    first = tensors[0]
    axis = normalize_axis(axis, first.ndim, "concatenate")
    for t in tensors[1:]:
        if t.ndim != first.ndim or t.dtype != first.dtype or any(
                a != b for d, (a, b) in enumerate(zip(t.shape, first.shape, strict=True))
                if d != axis):
            raise ValueError(f"concatenate: {t} does not match {first} outside axis {axis}")
    offsets = [0]
    for t in tensors:
        offsets.append(offsets[-1] + t.shape[axis])
    shape = tuple(offsets[-1] if d == axis else s for d, s in enumerate(first.shape))

    def body(*idx: te.Var) -> te.Expr:
        def load(k: int) -> te.Expr:
            src = list(idx)
            if offsets[k]:
                src[axis] = idx[axis] - offsets[k]
            return tensors[k][tuple(src)]

        result = load(len(tensors) - 1)
        for k in range(len(tensors) - 2, -1, -1):
            result = te.if_then_else(idx[axis] < offsets[k + 1], load(k), result)
        return result

    return te.compute(shape, body, name=name, tag=tags.make(tags.INJECTIVE))
