"""Reductions over chosen axes: reduce_sum, reduce_max and reduce_min (numpy ``axis`` /
``keepdims``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import te
from ..tensor import Tensor
from . import tags
from ._util import normalize_axis


def _reduce(op: str, data: Tensor, axis: int | Sequence[int] | None, keepdims: bool,
            name: str) -> Tensor:
    nd = data.ndim
    if axis is None:
        axes = list(range(nd))
    else:
        raw = [axis] if isinstance(axis, int) else list(axis)
        axes = sorted(normalize_axis(a, nd, op) for a in raw)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{op}: axis {axis!r} lists a dimension twice")
    if not axes:
        raise ValueError(f"{op}: no axis to reduce")
    rvars = {d: te.reduce_axis((0, data.shape[d]), name=f"k{d}") for d in axes}
    if keepdims:
        shape = tuple(1 if d in rvars else s for d, s in enumerate(data.shape))
    else:
        shape = tuple(s for d, s in enumerate(data.shape) if d not in rvars)
    reducer = {"reduce_sum": te.sum, "reduce_max": te.max, "reduce_min": te.min}[op]

    def body(*idx: te.Var) -> te.Expr:
        it = iter(idx)
        src: list[Any] = []
        for d in range(nd):
            if keepdims:
                out_i = next(it)
                src.append(rvars.get(d, out_i))
            else:
                src.append(rvars[d] if d in rvars else next(it))
        return reducer(data[tuple(src)], axis=[rvars[d] for d in axes])

    return te.compute(shape, body, name=name, tag=tags.make(tags.REDUCTION, op))


def reduce_sum(data: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False,
               name: str = "T_reduce_sum") -> Tensor:
    """Sum over ``axis`` (all axes when None); a full reduction without keepdims is 0-d."""
    return _reduce("reduce_sum", data, axis, keepdims, name)


def reduce_max(data: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False,
               name: str = "T_reduce_max") -> Tensor:
    """Maximum over ``axis`` (all axes when None); a full reduction without keepdims is 0-d."""
    return _reduce("reduce_max", data, axis, keepdims, name)


def reduce_min(data: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False,
               name: str = "T_reduce_min") -> Tensor:
    """Minimum over ``axis`` (all axes when None); a full reduction without keepdims is 0-d."""
    return _reduce("reduce_min", data, axis, keepdims, name)
