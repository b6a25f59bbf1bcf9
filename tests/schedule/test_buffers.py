"""Buffers for kernels start on a 64-byte boundary (schedule.buffers): a vector load across
two cache lines costs two."""

from __future__ import annotations

import numpy as np
import pytest

from schedule import ALIGNMENT, Workload, aligned, aligned_empty, allocator


@pytest.mark.parametrize("shape, dtype", [((), "float32"), ((3,), "int8"), ((5, 7), "float32"),
                                          ((2, 3, 4), "int64"), ((0,), "float32")])
def test_an_aligned_array_starts_on_the_boundary_and_has_the_shape_asked(shape, dtype):
    for _ in range(8):  # numpy's own allocations fall at every 16-byte offset
        a = aligned_empty(shape, dtype)
        assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
        assert a.ctypes.data % ALIGNMENT == 0 or a.size == 0
        a[...] = 1
        assert (a == 1).all()


def test_aligned_copies_only_what_is_misaligned_or_strided():
    base = aligned_empty((65,), "float32")
    base[:] = np.arange(65)
    assert aligned(base) is base
    shifted = base[1:]  # 4 bytes past the boundary
    copy = aligned(shifted)
    assert copy is not shifted and copy.ctypes.data % ALIGNMENT == 0
    np.testing.assert_array_equal(copy, np.arange(1, 65))
    strided = aligned(base[::2].reshape(1, 33))
    assert strided.flags.c_contiguous and strided.ctypes.data % ALIGNMENT == 0
    np.testing.assert_array_equal(strided[0], np.arange(0, 65, 2))


def test_buffers_allocated_per_call_are_aligned_from_a_size_on():
    assert allocator((1024,), "float32") is aligned_empty
    assert allocator((16,), "float32") is np.empty


@pytest.mark.parametrize("workload", [Workload.op("matmul", M=33, N=17, K=5),
                                      Workload.op("conv2d_nchw", N=1, C=3, H=9, W=9, K=4,
                                                  R=3, S=3)])
def test_the_inputs_kernels_are_measured_on_are_aligned(workload):
    for seed in range(4):
        assert all(a.ctypes.data % ALIGNMENT == 0 for a in workload.random_inputs(seed))
