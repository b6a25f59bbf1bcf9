"""The CPU's 8-bit dot-product intrinsic (x86 VNNI ``vpdpbusd``, plain C elsewhere):
int8 convolutions and dense layers in the blocked layouts tensorized by hand match numpy
exactly on both code paths; the intrinsic matches only the loops it computes; the sketch
rules offer it on AVX-512 targets only."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from schedule import ScheduleError, Target, Workload, build, make_schedule, te
from schedule.cpu_intrin import DOT_U8I8
from schedule.ops import get_op
from search.rules import generate_sketches
from search.task import SearchTask
from tests.cpu_support import X86, needs_avx512

needs_x86 = pytest.mark.skipif(not X86, reason="x86 targets need an x86 host")


def conv(c: int = 32, hw: int = 9, k: int = 32, r: int = 3, stride: int = 1,
         padding: int = 1) -> Workload:
    return Workload.op("conv2d_nchw4c_int8", N=1, C=c, H=hw, W=hw, K=k, R=r, S=r,
                       stride=stride, padding=padding)


def tensorized(wl: Workload) -> tuple[te.Schedule, list[te.Tensor]]:
    """Output channels in blocks of 16, ow in registers, the dot product innermost."""
    s, args = make_schedule(wl)
    stage = s[args[-1]]
    n, ko, oh, ow, ki, rco, ry, rx, rci = stage.leaf_iter_vars
    owo, owi = stage.split(ow, factor=3)
    stage.reorder(n, ko, oh, owo, rco, ry, rx, owi, ki, rci)
    stage.unroll(owi)
    stage.tensorize(ki, DOT_U8I8.name)
    return s, args


def check(wl: Workload, target: str) -> str:
    return run_exactly(wl, *tensorized(wl), target)


def run_exactly(wl: Workload, s: te.Schedule, args: list[te.Tensor], target: str) -> str:
    """Build the schedule, check its output equals numpy's, return the C source."""
    mod = build(s, args, target)
    inputs = wl.random_inputs(5)
    (expected,) = wl.reference(inputs)
    out = np.zeros_like(expected)
    mod(*inputs, out)
    np.testing.assert_array_equal(out, expected)
    return mod.source


@needs_avx512
@pytest.mark.parametrize("stride,padding,r", [(1, 1, 3), (2, 1, 3), (2, 0, 1)])
def test_vnni_path_matches_numpy(stride: int, padding: int, r: int) -> None:
    source = check(conv(stride=stride, padding=padding, r=r), "cpu -isa=avx512 -cores=2")
    assert "_mm512_dpbusd_epi32" in source and 'cpu_supports("avx512vnni")' in source


@needs_x86
@pytest.mark.parametrize("target", [pytest.param("cpu -isa=avx512 -cores=2", marks=needs_avx512),
                                    "cpu -isa=avx2 -cores=2"])
def test_a_tensorized_dense_matches_numpy(target: str) -> None:
    wl = Workload.op("dense_blocked_int8", M=5, N=48, K=40)
    s, args = make_schedule(wl)
    stage = s[args[-1]]
    m, no, ni, ko, ki = stage.leaf_iter_vars
    koo, koi = stage.split(ko, factor=2)
    stage.reorder(no, m, koo, koi, ni, ki)
    stage.parallel(no)
    stage.tensorize(ni, DOT_U8I8.name)
    run_exactly(wl, s, args, target)


@needs_x86
def test_the_library_uses_vpdpbusd() -> None:
    s, args = tensorized(conv())
    library = build(s, args, "cpu -isa=avx512 -cores=2").library_path
    listing = subprocess.run(["objdump", "-d", str(library)], capture_output=True, text=True)
    if listing.returncode != 0:
        pytest.skip("objdump is not installed")
    assert "vpdpbusd" in listing.stdout


@needs_x86
def test_plain_path_matches_numpy() -> None:
    """Without AVX-512 in the target the dot product is plain C (the VNNI copy is absent)."""
    source = check(conv(stride=2), "cpu -isa=avx2 -cores=2")
    assert "dpbusd" not in source and "tt_dot_u8i8(" in source


def test_the_intrinsic_matches_only_its_loops() -> None:
    wl = conv()
    s, args = make_schedule(wl)
    assert DOT_U8I8.matches_innermost(s[args[-1]].op)
    # signed data: the instruction multiplies unsigned bytes by signed ones
    signed = Workload.op("conv2d_nchw", N=1, C=8, H=8, W=8, K=16, R=1, S=1, dtype="int8")
    s2, args2 = make_schedule(signed)
    assert not DOT_U8I8.matches_innermost(s2[args2[-1]].op)
    stage = s[args[-1]]
    n, ko, oh, ow, ki, rco, ry, rx, rci = stage.leaf_iter_vars
    with pytest.raises(ScheduleError, match="extents"):
        stage.tensorize(ow, DOT_U8I8.name)
    stage.reorder(n, ko, oh, ow, rco, ry, rx, rci, ki)
    stage.tensorize(rci, DOT_U8I8.name)  # the same sum, but not the instruction's order
    with pytest.raises(ScheduleError, match="16 outputs by 4 reduction steps"):
        build(s, args, "cpu -isa=avx512 -cores=2")


def test_a_nest_of_the_wrong_layout_is_refused() -> None:
    """Kernel blocks stored 4 x 16 instead of 16 x 4 are not the instruction's."""
    data = te.placeholder((4,), "uint8", name="data")
    kernel = te.placeholder((4, 16), "int8", name="kernel")
    k = te.reduce_axis((0, 4), name="k")
    out = te.compute((16,), lambda i: te.sum(
        te.cast("int32", data[k]) * te.cast("int32", kernel[k, i]), axis=k), name="out")
    s = te.create_schedule(out)
    with pytest.raises(ScheduleError, match="does not match"):
        s[out].tensorize(s[out].leaf_iter_vars[0], DOT_U8I8.name)


def test_sketches_offer_the_dot_product_on_avx512_only() -> None:
    names = {t: [sk.name for sk in generate_sketches(SearchTask(conv(), t))]
             for t in ("cpu -isa=avx512 -cores=2", "cpu -isa=avx2 -cores=2")}
    assert sum("tensorized x86_dot_u8i8_16x4" in n for n in names["cpu -isa=avx512 -cores=2"]) == 2
    assert any("tensorized" not in n for n in names["cpu -isa=avx512 -cores=2"])
    assert not any("tensorized" in n for n in names["cpu -isa=avx2 -cores=2"])
    dense = Workload.op("dense_blocked_int8", M=8, N=32, K=64)
    assert sum("tensorized" in sk.name
               for sk in generate_sketches(SearchTask(dense, "cpu -isa=avx512 -cores=2"))) == 2
    float_conv = Workload.op("conv2d_nchw", N=1, C=16, H=8, W=8, K=16, R=3, S=3)
    assert not any("tensorized" in sk.name
                   for sk in generate_sketches(SearchTask(float_conv, "cpu -isa=avx512 -cores=2")))


def test_the_blocked_op_checks_its_channels() -> None:
    spec = get_op("conv2d_nchw4c_int8")
    with pytest.raises(ValueError, match="multiple of 4"):
        spec.normalize({"N": 1, "C": 6, "H": 8, "W": 8, "K": 16, "R": 3, "S": 3})
    with pytest.raises(ValueError, match="multiple of 16"):
        spec.normalize({"N": 1, "C": 8, "H": 8, "W": 8, "K": 24, "R": 3, "S": 3})
    with pytest.raises(ValueError, match="multiple of 4"):
        get_op("dense_blocked_int8").normalize({"M": 1, "N": 16, "K": 6})
    assert Target.parse("cpu -isa=avx512 -cores=2").canonical == "cpu -isa=avx512 -cores=2"


def test_the_blocked_te_ops_name_a_wrong_layout_or_dtype() -> None:
    from schedule.ops.conv import conv2d_nchw4c_int8
    from schedule.ops.linalg import dense_blocked_int8

    data = te.placeholder((1, 2, 8, 8, 4), "uint8", name="data")
    with pytest.raises(ValueError, match="blocked layouts"):
        conv2d_nchw4c_int8(data, te.placeholder((1, 2, 3, 3, 4, 16), "int8", name="k"))
    with pytest.raises(ValueError, match="uint8 and kernel int8"):
        conv2d_nchw4c_int8(te.placeholder((1, 2, 8, 8, 4), "int8", name="d"),
                           te.placeholder((1, 2, 3, 3, 16, 4), "int8", name="k"))
    x = te.placeholder((4, 32), "uint8", name="x")
    with pytest.raises(ValueError, match="not the blocked"):
        dense_blocked_int8(x, te.placeholder((2, 4, 16, 4), "int8", name="w"))
    with pytest.raises(ValueError, match="X must be uint8"):
        dense_blocked_int8(te.placeholder((4, 32), "int8", name="x8"),
                           te.placeholder((2, 8, 16, 4), "int8", name="w"))
