"""Buffers for kernels: numpy arrays whose data starts on a cache-line boundary.

numpy aligns large arrays to 16 bytes only, so three times in four a 64-byte vector load of
a kernel spans two cache lines and costs two (a BERT dense kernel on AVX-512 ran 10% slower
on such operands). Whatever allocates what kernels read or write — the measurement
workers, the graph executor, the VM, the AOT runtime — allocates it here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

#: bytes: a cache line, and the widest vector (AVX-512)
ALIGNMENT = 64


def aligned_empty(shape: Sequence[int] | int, dtype: np.dtype | str) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts at a multiple of
    ``ALIGNMENT``."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned(array: np.ndarray) -> np.ndarray:
    """``array`` itself when it is C-contiguous and aligned, else an aligned copy."""
    array = np.asarray(array)
    if array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0:
        return array
    out = aligned_empty(array.shape, array.dtype)
    out[...] = array
    return out


#: below this many bytes, a buffer allocated on every call (a VM kernel's output) keeps
#: numpy's allocation: aligning costs a few microseconds, more than a small array's split
#: loads
SMALL_BYTES = 4096


def allocator(shape: Sequence[int], dtype: np.dtype | str
              ) -> Callable[[Sequence[int], np.dtype | str], np.ndarray]:
    """How to allocate arrays of ``shape`` and ``dtype`` on every call: ``aligned_empty``,
    or ``np.empty`` below ``SMALL_BYTES``."""
    nbytes = int(np.prod(tuple(shape), dtype=np.int64)) * np.dtype(dtype).itemsize
    return aligned_empty if nbytes >= SMALL_BYTES else np.empty
