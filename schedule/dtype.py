"""Data types of tensor expressions: names, their C and numpy spellings, and promotion."""

from __future__ import annotations

import numpy as np

DTYPES: dict[str, tuple[str, str, int]] = {
    # name: (C type, numpy dtype, size in bytes)
    "float32": ("float", "float32", 4),
    "float16": ("_Float16", "float16", 2),
    "int8": ("int8_t", "int8", 1),
    "uint8": ("uint8_t", "uint8", 1),
    "int32": ("int32_t", "int32", 4),
    "int64": ("int64_t", "int64", 8),
    "bool": ("bool", "bool", 1),
}

FLOAT_DTYPES = frozenset({"float32", "float16"})
INT_DTYPES = frozenset({"int8", "uint8", "int32", "int64"})


def check_dtype(dtype: object) -> str:
    """Return ``dtype`` as a known dtype name, or raise a clear ``ValueError``."""
    if isinstance(dtype, np.dtype):
        dtype = dtype.name
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; supported: {', '.join(DTYPES)}")
    return dtype


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def c_type(dtype: str) -> str:
    return DTYPES[dtype][0]


def numpy_dtype(dtype: str) -> np.dtype:
    return np.dtype(DTYPES[dtype][1])


def itemsize(dtype: str) -> int:
    return DTYPES[dtype][2]


_RANK = ["bool", "uint8", "int8", "int32", "int64", "float16", "float32"]


def promote(a: str, b: str) -> str:
    """The dtype of a binary arithmetic result: the wider of the two (floats win over ints)."""
    if a == b:
        return a
    return a if _RANK.index(a) >= _RANK.index(b) else b
