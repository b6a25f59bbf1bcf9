"""FuseOps: the groups of a ResNet basic block, a MobileNetV2 inverted-residual block and
a transformer layer; meaning is preserved (checked in the interpreter)."""

from __future__ import annotations

import numpy as np

import ir
from ir.backend.build import _primitive_calls
from ir.backend.lower import operator_names
from ir.transform import PassContext
from ir.transform.fuse_ops import FuseOps

from .blocks import mobilenet_inverted_residual, resnet_basic_block, transformer_layer


def groups(module: ir.Module, **kwargs) -> list[list[str]]:
    with PassContext(opt_level=3, check_meaning=True):
        fused = FuseOps(**kwargs)(module)
    return [operator_names(f) for f in _primitive_calls(fused)]


def test_resnet_block_conv_absorbs_bias_relu_and_residual_add():
    x = ir.var("x", shape=(1, 8, 8, 8))
    rng = np.random.default_rng(0)
    w = [ir.const(rng.standard_normal(s).astype("float32")) for s in ((8, 8, 3, 3), (8,))] * 2
    y = ir.op.nn.relu(ir.op.nn.bias_add(ir.op.nn.conv2d(x, w[0], padding=1), w[1]))
    y = ir.op.nn.bias_add(ir.op.nn.conv2d(y, w[2], padding=1), w[3])
    y = ir.op.nn.relu(ir.op.add(y, x))
    out = ir.op.reshape(ir.op.nn.global_avg_pool2d(y), newshape=(1, 8))
    module = ir.infer_type(ir.Module({"main": ir.Function([x], out)}))
    assert groups(module) == [["nn.conv2d", "nn.bias_add", "nn.relu"],
                              ["nn.conv2d", "nn.bias_add", "add", "nn.relu"],
                              ["nn.global_avg_pool2d"], ["reshape"]]
    # fuse_opt_level 0: one call per group
    assert len(groups(module, fuse_opt_level=0)) == 9


def test_batch_norm_stays_alone_without_simplify_inference():
    found = groups(resnet_basic_block())
    assert ["nn.batch_norm"] in found and ["add", "nn.relu"] in found


def test_mobilenet_block_groups():
    found = groups(mobilenet_inverted_residual())
    assert found.count(["nn.conv2d"]) == 3  # batch_norm (opaque) follows each conv
    assert ["clip"] in found and ["add"] in found


def test_transformer_layer_groups():
    found = groups(transformer_layer())
    # dense + bias (+ the residual add; + the GELU's elementwise ops in the FFN)
    assert found.count(["nn.dense", "nn.bias_add"]) == 3
    assert found.count(["nn.dense", "nn.bias_add", "add"]) == 2
    assert ["nn.dense", "nn.bias_add", "multiply", "multiply", "erf", "add", "multiply"] \
        in found
    # injective chains fuse; reductions-like opaque ops stand alone
    assert ["reshape", "transpose"] in found
    assert ["nn.batch_matmul", "multiply"] in found
    assert found.count(["nn.softmax"]) == 1 and found.count(["nn.layer_norm"]) == 2


def test_max_fuse_depth_bounds_a_group():
    x = ir.var("x", shape=(4,))
    y = x
    for _ in range(10):
        y = ir.op.nn.relu(ir.op.add(y, ir.const(np.float32(1))))
    module = ir.infer_type(ir.Module({"main": ir.Function([x], y)}))
    assert [len(g) for g in groups(module)] == [20]
    assert all(len(g) <= 6 for g in groups(module, max_fuse_depth=6))


def test_control_flow_scopes_fuse_on_their_own():
    x = ir.var("x", shape=(3,))
    cond = ir.op.greater(ir.op.sum(x), ir.const(np.float32(0)))
    body = ir.If(cond, ir.op.exp(ir.op.add(x, x)), ir.op.negative(ir.op.nn.relu(x)))
    module = ir.infer_type(ir.Module({"main": ir.Function([x], body)}))
    found = groups(module)
    assert ["add", "exp"] in found and ["nn.relu", "negative"] in found


def test_a_tuple_fuses_into_its_concatenate():
    a, b = ir.var("a", shape=(2, 3)), ir.var("b", shape=(2, 3))
    y = ir.op.nn.relu(ir.op.concatenate(ir.Tuple([ir.op.exp(a), ir.op.nn.relu(b)]), axis=1))
    module = ir.infer_type(ir.Module({"main": ir.Function([a, b], y)}))
    assert ["concatenate", "nn.relu"] in groups(module)
