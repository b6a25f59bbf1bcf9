"""Buffers for kernels start on a 64-byte boundary (schedule.buffers): a vector load across
two cache lines costs two; from a page's size on they start on a page boundary, so that
their offsets within a page (which decide whether loads alias earlier stores) are alike in
every process."""

from __future__ import annotations

import numpy as np
import pytest

from schedule import (
    ALIGNMENT,
    PAGE,
    Workload,
    aligned,
    aligned_empty,
    allocator,
    buffer_alignment,
    placed,
)


@pytest.mark.parametrize("shape, dtype", [((), "float32"), ((3,), "int8"), ((5, 7), "float32"),
                                          ((2, 3, 4), "int64"), ((0,), "float32")])
def test_an_aligned_array_starts_on_the_boundary_and_has_the_shape_asked(shape, dtype):
    for _ in range(8):  # numpy's own allocations fall at every 16-byte offset
        a = aligned_empty(shape, dtype)
        assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
        assert a.ctypes.data % ALIGNMENT == 0 or a.size == 0
        a[...] = 1
        assert (a == 1).all()


@pytest.mark.parametrize("shape, dtype", [((1024,), "float32"), ((3, 1000), "float32"),
                                          ((4096,), "int8"), ((128, 3072), "float32")])
def test_a_buffer_of_a_page_or_more_starts_on_a_page(shape, dtype):
    for _ in range(8):
        a = aligned_empty(shape, dtype)
        assert a.shape == shape and a.nbytes >= PAGE and a.ctypes.data % PAGE == 0
        a[...] = 3
        assert (a == 3).all()


def test_the_boundary_is_a_page_from_a_page_on():
    assert [buffer_alignment(n) for n in (0, 64, PAGE - 1, PAGE, 10 * PAGE + 1)] == [
        ALIGNMENT, ALIGNMENT, ALIGNMENT, PAGE, PAGE]


def test_placed_always_copies_into_a_buffer_of_its_own():
    base = aligned_empty((2048,), "float32")
    base[:] = np.arange(2048)
    copy = placed(base)
    assert copy is not base and copy.ctypes.data % PAGE == 0
    np.testing.assert_array_equal(copy, base)
    copy[0] = -1
    assert base[0] == 0
    column = placed(base.reshape(64, 32)[:, 1])  # strided: copied C-contiguous
    assert column.flags.c_contiguous and column.ctypes.data % ALIGNMENT == 0
    np.testing.assert_array_equal(column, np.arange(1, 2048, 32))


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


def test_large_inputs_kernels_are_measured_on_start_on_a_page():
    """Laid out alike in every process: numpy's own arrays land anywhere in a page."""
    workload = Workload.op("softmax", M=128, N=3072)
    for seed in range(4):
        (x,) = workload.random_inputs(seed)
        assert x.ctypes.data % PAGE == 0
