"""CombineParallelConv2D: three or more conv2d calls on the same input with the same
attributes (channels aside) become one conv2d + split, whose slices the branches' later
operators read; fewer branches, other attributes, other inputs, grouped convolutions and
let-bound kernels are left alone."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.op import add, concatenate, nn, split
from ir.transform import CombineParallelConv2D, FoldConstant

from .helpers import assert_main, calls_of, op_counts, rand, run


def test_three_branches_become_one_conv_and_split():
    x = ir.var("x", shape=(1, 4, 6, 6))
    ws = [rand(c, 4, 3, 3, seed=c) for c in (2, 3, 5)]
    b = rand(3, seed=9)
    y0, y1, y2 = (nn.conv2d(x, w, padding=1) for w in ws)
    f = ir.Function([x], ir.Tuple([nn.relu(y0), nn.bias_add(y1, b), y2]))
    out = run(CombineParallelConv2D(), f)
    combined = nn.conv2d(x, ir.const(np.concatenate([w.data for w in ws], axis=0)),
                         padding=1)
    parts = split(combined, indices_or_sections=(2, 5), axis=1)
    expected = ir.Tuple([nn.relu(ir.TupleGetItem(parts, 0)),
                         nn.bias_add(ir.TupleGetItem(parts, 1), b), ir.TupleGetItem(parts, 2)])
    assert_main(out, ir.Function([x], expected))
    assert op_counts(out) == {"nn.conv2d": 1, "split": 1, "nn.relu": 1, "nn.bias_add": 1}


def test_nhwc_and_variable_kernels_use_concatenate():
    x = ir.var("x", shape=(1, 5, 5, 2))
    ws = [ir.var(f"w{i}", shape=(1, 1, 2, 4)) for i in range(4)]
    convs = [nn.conv2d(x, w, data_layout="NHWC", kernel_layout="HWIO", channels=4)
             for w in ws]
    f = ir.Function([x, *ws], add(add(convs[0], convs[1]), add(convs[2], convs[3])))
    out = run(CombineParallelConv2D(min_num_branches=4), f)
    assert op_counts(out) == {"nn.conv2d": 1, "split": 1, "concatenate": 1, "add": 3}
    conv = next(iter(calls_of(out, "nn.conv2d")))
    assert conv.attrs.channels == 16
    ir.assert_structural_equal(conv.args[1], concatenate(ir.Tuple(ws), axis=3))




def _three(x, **attrs):
    return [nn.conv2d(x, rand(2, 4, 3, 3, seed=i), **attrs) for i in range(3)]


@pytest.mark.parametrize("case", ["two", "strides", "inputs", "groups", "kernel_size"])
def test_left_alone(case):
    x, z = ir.var("x", shape=(1, 4, 6, 6)), ir.var("z", shape=(1, 4, 6, 6))
    if case == "two":
        convs = _three(x)[:2]
    elif case == "strides":
        convs = [*_three(x)[:2], nn.conv2d(x, rand(2, 4, 3, 3), strides=2)]
    elif case == "inputs":
        convs = [*_three(x)[:2], nn.conv2d(z, rand(2, 4, 3, 3))]
    elif case == "groups":
        convs = [nn.conv2d(x, rand(4, 2, 3, 3, seed=i), groups=2) for i in range(3)]
    else:
        convs = [*_three(x)[:2], nn.conv2d(x, rand(2, 4, 1, 1))]
    f = ir.Function([x, z], ir.Tuple(convs))
    assert run(CombineParallelConv2D(), f)["main"] is f


def test_let_bound_kernels_and_separate_scopes_stay():
    x = ir.var("x", shape=(1, 4, 6, 6))
    k = ir.Var("k")
    c0, c1 = _three(x)[:2]
    body = ir.Let(k, rand(2, 4, 3, 3, seed=5), ir.Tuple([c0, c1, nn.conv2d(x, k)]))
    assert op_counts(run(CombineParallelConv2D(), ir.Function([x], body)))["nn.conv2d"] == 3
    cond = ir.op.greater(ir.op.sum(x), ir.const(0.0))
    branches = ir.If(cond, ir.Tuple(_three(x)[:2]), ir.Tuple(_three(x)[1:]))
    out = run(CombineParallelConv2D(min_num_branches=2), ir.Function([x], branches))
    assert op_counts(out) == {"nn.conv2d": 2, "split": 2, "sum": 1, "greater": 1}


def test_bad_min_num_branches():
    with pytest.raises(ValueError, match="min_num_branches"):
        CombineParallelConv2D(1)


def test_then_fold_constant_keeps_one_kernel():
    x = ir.var("x", shape=(1, 4, 6, 6))
    f = ir.Function([x], ir.Tuple(_three(x, padding=1)))
    out = run([CombineParallelConv2D(), FoldConstant()], f)
    assert op_counts(out) == {"nn.conv2d": 1, "split": 1}
