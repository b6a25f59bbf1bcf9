"""PackDenseWeights: products by a constant weight become nn.dense_packed with the weight
in (N/b, K, b) column panels, packed once at compile time; every run is checked in the
interpreter against the original (the helpers' meaning check), and the packed product's
kernel against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.op import nn
from ir.transform.pack_dense import PackDenseWeights, pack_dense_weight
from schedule import Workload, build, host_cpu_target, make_schedule, te
from schedule import ops as te_ops

from .helpers import calls_of, op_counts, rand, run


def _packed_calls(out: ir.Module) -> list[ir.Call]:
    return calls_of(out, "nn.dense_packed")


def test_pack_dense_weight_puts_each_panel_of_columns_down_the_reduction():
    b = np.arange(3 * 8, dtype=np.float32).reshape(3, 8)
    p = pack_dense_weight(b, 4)
    assert p.shape == (2, 3, 4) and p.flags.c_contiguous
    for j in range(8):
        np.testing.assert_array_equal(p[j // 4, :, j % 4], b[:, j])


@pytest.mark.parametrize("form", ["matmul", "matmul_tb", "dense"])
def test_products_by_a_constant_weight_are_packed(form):
    x = ir.var("x", shape=(32, 24))
    w = rand(24, 48, seed=1)
    if form == "matmul":
        y = nn.matmul(x, w)
    elif form == "matmul_tb":
        y = nn.matmul(x, ir.const(w.data.T.copy()), transpose_b=True)
    else:
        y = nn.dense(x, ir.const(w.data.T.copy()))
    out = run(PackDenseWeights(16), ir.Function([x], nn.relu(y)))
    (call,) = _packed_calls(out)
    assert call.args[1].data.shape == (3, 24, 16)
    np.testing.assert_array_equal(call.args[1].data, pack_dense_weight(w.data, 16))
    assert op_counts(out)["nn.matmul"] == op_counts(out)["nn.dense"] == 0
    assert out["main"].ret_type.shape == (32, 48)


def test_what_is_left_unpacked():
    x = ir.var("x", shape=(32, 24))
    row = ir.var("row", shape=(1, 24))
    v = ir.var("v", shape=(24, 48))
    ys = [
        nn.matmul(x, v),                                   # the weight is not a constant
        nn.matmul(row, rand(24, 48, seed=1)),              # one row: the GEMV sketch's
        nn.matmul(x, rand(24, 40, seed=2)),                # 40 columns: not whole panels
        nn.matmul(ir.const(np.ones((24, 32), np.float32)), rand(24, 48, seed=3),
                  transpose_a=True),                       # a transposed input
    ]
    out = run(PackDenseWeights(16), ir.Function([x, row, v], ir.Tuple(ys)))
    assert not _packed_calls(out)
    assert op_counts(out)["nn.matmul"] == 4


def test_integer_products_are_left_to_the_quantized_passes():
    x = ir.var("x", shape=(32, 24), dtype="int8")
    w = ir.const(np.ones((48, 24), np.int8))
    out = run(PackDenseWeights(16), ir.Function([x], nn.dense(x, w, out_dtype="int32")))
    assert not _packed_calls(out)


def test_the_packed_op_rejects_a_weight_that_does_not_fit():
    x = ir.var("x", shape=(32, 24))
    with pytest.raises(ir.IRTypeError, match="reduction dimension"):
        ir.infer_type(ir.Module({"main": ir.Function(
            [x], nn.dense_packed(x, rand(3, 20, 16)))}))
    with pytest.raises(ir.IRTypeError, match="rank 3"):
        ir.infer_type(ir.Module({"main": ir.Function(
            [x], nn.dense_packed(x, rand(24, 48)))}))


@pytest.mark.parametrize("block", [8, 16])
def test_packed_kernel_matches_numpy_default_and_vectorized(block):
    """The op library's compute, built with its default schedule and with a tiled one whose
    vectorized inner loop spans two panels, against the unpacked product in numpy; the tiled
    one reads the weight with vector loads where a panel holds a whole vector (its index
    divides the loop variable, but not within a chunk of lanes), not lane by lane."""
    X = te.placeholder((20, 36), name="X")
    W = te.placeholder((48 // block, 36, block), name="W")
    Y = te_ops.dense_packed(X, W)
    wl = Workload.from_tensors([Y])
    x, w = wl.random_inputs(seed=3)
    want = x @ w.transpose(1, 0, 2).reshape(36, 48)
    default, tensors = make_schedule(wl, [])
    tiled = te.create_schedule(Y)
    i, j = tiled[Y].op.axis
    jo, ji = tiled[Y].split(j, 2 * block)
    tiled[Y].reorder(i, jo, tiled[Y].op.reduce_axis[0], ji)
    tiled[Y].vectorize(ji)
    for sched, args in ((default, tensors), (tiled, [X, W, Y])):
        out = np.zeros((20, 48), np.float32)
        module = build(sched, args)
        module(x, w, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    if block >= host_cpu_target().vector_bits // 32:
        assert "(&W[" in module.source and "{W[" not in module.source


def test_bad_shapes_are_refused_clearly():
    with pytest.raises(ValueError, match="not a multiple of 16"):
        pack_dense_weight(np.zeros((3, 40), np.float32), 16)
    with pytest.raises(ValueError, match="has K=24 but W"):
        te_ops.dense_packed(te.placeholder((4, 24), name="X"),
                            te.placeholder((2, 20, 16), name="W"))
