"""Argument normalisation shared by the operator definitions (pairs, paddings, shapes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import te
from ..tensor import Tensor


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def as_pair(value: int | Sequence[int], name: str, minimum: int = 1) -> tuple[int, int]:
    """An int or a pair of ints as a pair, each at least ``minimum``."""
    if _is_int(value):
        pair = (value, value)
    elif isinstance(value, list | tuple) and len(value) == 2 and all(map(_is_int, value)):
        pair = (value[0], value[1])
    else:
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    if min(pair) < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return pair


def as_padding(value: int | Sequence[int], name: str = "padding") -> tuple[int, int, int, int]:
    """A 2-d padding as (top, left, bottom, right) from an int, a pair or a 4-tuple."""
    if isinstance(value, list | tuple) and len(value) == 4 and all(map(_is_int, value)):
        pads = tuple(value)
        if min(pads) < 0:
            raise ValueError(f"{name} must not be negative, got {value!r}")
        return pads  # type: ignore[return-value]
    ph, pw = as_pair(value, name, minimum=0)
    return ph, pw, ph, pw


def conv_out_size(size: int, kernel: int, stride: int, pad_total: int, dilation: int) -> int:
    """Output length of a sliding window (may be <= 0 when the window does not fit)."""
    span = (kernel - 1) * dilation + 1
    return (size + pad_total - span) // stride + 1


def check_out_size(what: str, size: int) -> None:
    if size < 1:
        raise ValueError(f"{what}: the window does not fit the (padded) input, output size {size}")


def scaled(var: Any, factor: int) -> Any:
    """``var * factor`` without a multiplication by 1 (keeps the loop IR readable)."""
    return var if factor == 1 else var * factor


def check_ndim(t: Tensor, ndim: int, op: str, what: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {what} must be a te.Tensor, got {type(t).__name__}")
    if t.ndim != ndim:
        raise ValueError(f"{op}: {what} must be {ndim}-d, got shape {list(t.shape)}")


def same_dtype(op: str, *tensors: Tensor) -> str:
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        raise ValueError(f"{op}: inputs must share one dtype, got {sorted(dtypes)}")
    return tensors[0].dtype


def to(dtype: str, value: Any) -> Any:
    """Cast an expression to ``dtype`` (no-op when it already has it)."""
    return te.cast(dtype, value)


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if not _is_int(axis) or not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis!r} is out of range for a {ndim}-d tensor")
    return axis % ndim
