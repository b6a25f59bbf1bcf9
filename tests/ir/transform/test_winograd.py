"""ConvertWinograd and the Winograd operators: the matrices reproduce a direct 3x3
convolution, the op library's transforms (default and vectorized schedules) match their
numpy references, the pass converts what it should and leaves the rest, the CPU pipeline
builds a block with it that matches the interpreter, and bad uses are refused clearly."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import ir
from ir.op import nn
from ir.transform import ConvertLayout, PassContext, Sequential
from ir.transform.winograd import MIN_TILES, TILE_CONFIG, ConvertWinograd, default_tile
from schedule import Workload, build, make_schedule, te
from schedule import ops as te_ops
from schedule.ops import reference as ref
from schedule.workload import count_flops

from .helpers import calls_of, op_counts, rand, run

PACK = ConvertLayout({"nn.conv2d": ("NCHW4c", "default")})


def _winograd_conv(x: np.ndarray, w: np.ndarray, tile: int, padding, block: int
                   ) -> np.ndarray:
    """The three stages in numpy: NCHW in, NCHW out."""
    v = ref.winograd_input_nchwc(ref.layout_transform(x, "NCHW", f"NCHW{block}c"), tile,
                                 padding)
    products = np.matmul(v, ref.winograd_weight(w, tile))
    oh = x.shape[2] + padding[0] + padding[2] - 2
    ow = x.shape[3] + padding[1] + padding[3] - 2
    y = ref.winograd_output_nchwc(products, tile, (oh, ow), block)
    return ref.layout_transform(y, f"NCHW{block}c", "NCHW")


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("shape, padding", [((2, 8, 9, 11), (1, 0, 2, 1)),
                                            ((1, 4, 8, 8), (1, 1, 1, 1)),
                                            ((1, 4, 5, 3), (0, 0, 0, 0))])
def test_the_matrices_compute_a_direct_convolution(tile, shape, padding):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((12, shape[1], 3, 3))
    np.testing.assert_allclose(_winograd_conv(x, w, tile, padding, 4),
                               ref.conv2d_nchw(x, w, 1, padding), rtol=1e-9, atol=1e-9)


def _run(out: te.Tensor, inputs: list[np.ndarray], steps=()) -> np.ndarray:
    workload = Workload.from_tensors([out])
    sched, args = make_schedule(workload, list(steps))
    got = np.zeros(out.shape, np.float32)
    build(sched, args)(*inputs, got)
    return got


@pytest.mark.parametrize("tile", [2, 4])
def test_the_transforms_match_numpy_default_and_vectorized(tile):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (2, 2, 9, 7, 8)).astype(np.float32)
    data = te.placeholder(x.shape, name="x")
    tiles = te_ops.winograd_input_nchwc(data, tile, (1, 0, 2, 1))
    want = ref.winograd_input_nchwc(x, tile, (1, 0, 2, 1))
    vectorized = [["compute_inline", "winograd_input_pad"], ["split", "winograd_input", "c", 8],
                  ["vectorize", "winograd_input", "c.inner"]]
    for steps in ((), vectorized):
        np.testing.assert_allclose(_run(tiles, [x], steps), want, rtol=1e-5, atol=1e-4)

    m = rng.uniform(-1, 1, (*want.shape[:2], 16)).astype(np.float32)
    products = te.placeholder(m.shape, name="m")
    y = te_ops.winograd_output_nchwc(products, tile, (10, 6), 8)
    want = ref.winograd_output_nchwc(m, tile, (10, 6), 8)
    for steps in ((), [["vectorize", "winograd_output", "ki"]]):
        np.testing.assert_allclose(_run(y, [m], steps), want, rtol=1e-5, atol=1e-4)


def test_flops_count_one_side_of_each_choice():
    """A transform picks one sum per position; its FLOPs are those of the costliest sum,
    not of all of them."""
    data = te.placeholder((1, 1, 6, 6, 4), name="x")
    tiles = te_ops.winograd_input_nchwc(data, 4, 0)
    bt = ref.winograd_matrices(4)[0]
    costliest = max(np.count_nonzero(np.outer(bt[a], bt[b])) for a in range(6) for b in range(6))
    # n non-zero terms: n - 1 additions and one multiplication per coefficient other than +-1
    assert count_flops([tiles]) <= 36 * 4 * (2 * costliest)
    assert count_flops([tiles]) >= 36 * 4 * (costliest - 1)


def _convs(out: ir.Module) -> int:
    return op_counts(out)["nn.conv2d_nchwc"]


def test_a_3x3_convolution_becomes_the_three_stages():
    x = ir.var("x", shape=(1, 8, 12, 12))
    y = nn.relu(nn.bias_add(nn.conv2d(x, rand(8, 8, 3, 3, seed=1), padding=1), rand(8)))
    # F(2x2): exact enough for the helper's meaning check (rtol 1e-4, atol 1e-5)
    out = run([PACK, ConvertWinograd(lambda *_: 2)], ir.Function([x], y))
    counts = op_counts(out)
    assert counts["nn.winograd_input"] == counts["nn.winograd_output"] == 1
    assert counts["nn.batch_matmul"] == 1 and _convs(out) == 0
    (product,) = calls_of(out, "nn.batch_matmul")
    assert product.args[1].data.shape == (16, 8, 8)


def test_tile_4_agrees_with_the_direct_convolution_to_float32_rounding():
    x = ir.var("x", shape=(1, 8, 12, 12))
    module = ir.Module({"main": ir.Function([x], nn.conv2d(x, rand(8, 8, 3, 3, seed=2),
                                                           padding=1))})
    with PassContext(opt_level=3):
        packed = PACK(module)
        converted = ConvertWinograd(lambda *_: 4)(packed)
    assert op_counts(converted)["nn.winograd_input"] == 1
    data = np.random.default_rng(0).uniform(-1, 1, (1, 8, 12, 12)).astype(np.float32)
    want = ir.evaluate(packed, data)
    np.testing.assert_allclose(ir.evaluate(converted, data), want, rtol=0,
                               atol=1e-5 * np.abs(want).max())


def test_what_stays_direct():
    x = ir.var("x", shape=(1, 8, 12, 12))
    v = ir.var("v", shape=(8, 8, 3, 3))
    ys = [nn.conv2d(x, rand(8, 8, 3, 3, seed=1), padding=1, strides=2),    # stride 2
          nn.conv2d(x, rand(8, 8, 1, 1, seed=2)),                          # 1x1
          nn.conv2d(x, rand(8, 8, 3, 3, seed=3), padding=2, dilation=2),   # dilated
          nn.conv2d(x, v, padding=1)]                                      # not a constant
    out = run([PACK, ConvertWinograd(lambda *_: 4)], ir.Function([x, v], ir.Tuple(ys)))
    assert op_counts(out)["nn.winograd_input"] == 0


def test_the_default_rule_takes_large_images_only():
    assert MIN_TILES == 49
    assert default_tile(56, 56, 64, 64) == default_tile(28, 28, 128, 128) == 4
    assert default_tile(14, 14, 256, 256) is None  # the transformed kernel, read from memory
    assert default_tile(7, 7, 512, 512) is None and default_tile(12, 12, 64, 64) is None
    assert default_tile(56, 56, 8, 64) is None  # too few channels to repay the transforms
    x = ir.var("x", shape=(1, 16, 8, 8))
    out = run([PACK, ConvertWinograd()], ir.Function([x], nn.conv2d(
        x, rand(16, 16, 3, 3), padding=1)))
    assert _convs(out) == 1


def test_the_cpu_pipeline_builds_a_block_that_matches_the_interpreter():
    """A ResNet basic block of 28x28 images goes through Winograd in ``ir.build`` (both its
    3x3 convolutions: input transform, batched product, output transform with the bias,
    residual add and ReLU fused) and agrees with the interpreter's direct convolutions."""
    from ..backend.blocks import resnet_basic_block

    module = resnet_basic_block(c=16, hw=28)
    tasks = ir.extract_tasks(module, "cpu")
    kinds = sorted({t.ops[0] for t in tasks})
    assert {"nn.winograd_input", "nn.batch_matmul", "nn.winograd_output"} <= set(kinds)
    assert not any(t.ops[0] == "nn.conv2d_nchwc" for t in tasks)
    out = [t for t in tasks if t.ops[0] == "nn.winograd_output"]
    assert any(t.ops.count("add") == 2 and t.ops[-1] == "nn.relu" for t in out)
    x = np.random.default_rng(0).standard_normal((1, 16, 28, 28)).astype(np.float32)
    want = ir.evaluate(module, x)
    np.testing.assert_allclose(ir.build(module, "cpu")(x), want, rtol=0,
                               atol=1e-5 * np.abs(want).max())
    with PassContext(disabled_pass=["ConvertWinograd"]):
        assert not any(t.ops[0] == "nn.winograd_input" for t in ir.extract_tasks(module, "cpu"))


def test_bad_uses_are_refused_clearly():
    x = ir.var("x", shape=(1, 2, 8, 8, 4))
    with pytest.raises(ir.IRTypeError, match="tile must be 2 or 4"):
        ir.infer_type(ir.Module({"main": ir.Function([x], nn.winograd_input(x, tile=3))}))
    m = ir.var("m", shape=(36, 5, 8))
    with pytest.raises(ir.IRTypeError, match=r"are not \(36, N \* 4, K\)"):
        ir.infer_type(ir.Module({"main": ir.Function([m], nn.winograd_output(
            m, tile=4, out_size=(8, 8), block=4))}))
    packed = ir.var("p", shape=(1, 2, 8, 8, 4))
    with pytest.raises(ir.IRTypeError, match="are not"):  # a rank-5 tensor, not products
        ir.infer_type(ir.Module({"main": ir.Function([packed], nn.winograd_output(packed))}))
    with pytest.raises(ValueError, match="tile must be 2 or 4"):
        ref.winograd_matrices(6)
    with pytest.raises(ValueError, match=f"{TILE_CONFIG} must be 2 or 4"), \
            PassContext(opt_level=3, config={TILE_CONFIG: 3}):
        Sequential([ConvertWinograd()])(ir.Module({"main": ir.Function([x], x)}))


def test_parsed_workload_tensors_are_shared_and_not_pickled():
    data = te.placeholder((1, 1, 6, 6, 4), name="x")
    workload = Workload.from_tensors([te_ops.winograd_input_nchwc(data, 2, 1)])
    first, second = workload.tensors(), workload.tensors()
    assert first is not second and all(a is b for a, b in zip(first, second, strict=True))
    copy = pickle.loads(pickle.dumps(workload))
    assert "_dag_tensors" not in copy.__dict__ and copy.key == workload.key
