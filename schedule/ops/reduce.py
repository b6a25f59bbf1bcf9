"""Reductions over chosen axes: reduce_sum, reduce_max, reduce_min and reduce_prod (numpy
``axis`` / ``keepdims``), and argmax / argmin over one axis."""

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
    reducer = {"reduce_sum": te.sum, "reduce_max": te.max, "reduce_min": te.min,
               "reduce_prod": te.prod}[op]

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


def reduce_prod(data: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                name: str = "T_reduce_prod") -> Tensor:
    """Product over ``axis`` (all axes when None); a full reduction without keepdims is 0-d."""
    return _reduce("reduce_prod", data, axis, keepdims, name)


def argmax(data: Tensor, axis: int, keepdims: bool = False, select_last_index: bool = False,
           name: str = "T_argmax") -> Tensor:
    """The int32 index of the largest element along ``axis`` (the first one, or the last
    with ``select_last_index``), in two stages: the maximum, then the least (greatest) index
    holding it. NaN is not special-cased (numpy's argmax returns the first NaN's index)."""
    return _arg_reduce("argmax", data, axis, keepdims, select_last_index, name)


def argmin(data: Tensor, axis: int, keepdims: bool = False, select_last_index: bool = False,
           name: str = "T_argmin") -> Tensor:
    """The int32 index of the smallest element along ``axis`` (as ``argmax``)."""
    return _arg_reduce("argmin", data, axis, keepdims, select_last_index, name)


def _arg_reduce(op: str, data: Tensor, axis: int, keepdims: bool, select_last_index: bool,
                name: str) -> Tensor:
    ax = normalize_axis(axis, data.ndim, op)
    n = data.shape[ax]
    extremum = _reduce("reduce_max" if op == "argmax" else "reduce_min", data, [ax], True,
                       f"{name}_value")
    k = te.reduce_axis((0, n), name="k")
    shape = tuple(1 if d == ax else s for d, s in enumerate(data.shape)) if keepdims else \
        tuple(s for d, s in enumerate(data.shape) if d != ax)

    def body(*idx: te.Var) -> te.Expr:
        full = list(idx) if keepdims else [*idx[:ax], None, *idx[ax:]]
        at = [k if d == ax else i for d, i in enumerate(full)]
        best = [0 if d == ax else i for d, i in enumerate(full)]
        hit = te.equal(data[tuple(at)], extremum[tuple(best)])
        if select_last_index:
            return te.max(te.if_then_else(hit, k.var, te.const(-1, "int32")), axis=k)
        return te.min(te.if_then_else(hit, k.var, te.const(n, "int32")), axis=k)

    return te.compute(shape, body, name=name, tag=tags.make(tags.REDUCTION, op))
