"""Buffers for kernels: numpy arrays whose data starts on a cache-line boundary, and on a
page boundary from a page's size on.

numpy aligns large arrays to 16 bytes only, so three times in four a 64-byte vector load of
a kernel spans two cache lines and costs two (a BERT dense kernel on AVX-512 ran 10% slower
on such operands).

Where a large buffer starts within its page matters too. A core predicts whether a load
depends on an earlier store from the low 12 bits of their addresses: when a kernel's output
starts a few cache lines after its input modulo 4 KiB, each load of the input looks like it
reads the store just made to the output and waits for it ("4K aliasing"). The softmax of
128x3072 rows ran 20% slower with its output 64 bytes after its input modulo 4 KiB than with
both on a page boundary (``bench/buffer_offsets.py``). numpy places large arrays wherever
the heap has room, so the offsets changed from one process to the next, and a tuner that
times each candidate in a fresh process kept whichever candidate had drawn harmless
offsets. Buffers of a page or more start on a page boundary here, so that every process
lays them out alike and the runtime runs a kernel on the layout it was measured on.

Whatever allocates what kernels read or write — the measurement workers, the graph
executor, the VM, the AOT runtime — allocates it here (the two standalone runtimes, which
cannot import this module, follow the same rule).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

#: bytes: a cache line, and the widest vector (AVX-512)
ALIGNMENT = 64
#: bytes: a page; buffers at least this large start on a page boundary
PAGE = 4096


def buffer_alignment(nbytes: int) -> int:
    """Where a buffer of ``nbytes`` starts: a multiple of ``PAGE`` from a page's size on,
    else of ``ALIGNMENT``."""
    return PAGE if nbytes >= PAGE else ALIGNMENT


def aligned_empty(shape: Sequence[int] | int, dtype: np.dtype | str) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts at a multiple of
    ``buffer_alignment(nbytes)``."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    align = buffer_alignment(nbytes)
    raw = np.empty(nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned(array: np.ndarray) -> np.ndarray:
    """``array`` itself when it is C-contiguous and starts on a cache line, else a copy from
    ``aligned_empty``."""
    array = np.asarray(array)
    if array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0:
        return array
    return placed(array)


def placed(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``array`` in a buffer from ``aligned_empty``: what a kernel is
    measured on, laid out alike in every process."""
    out = aligned_empty(np.shape(array), np.asarray(array).dtype)
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
