"""Every kind of fused function the models yield tunes: conv + bias + relu, the residual add
fused into a conv, a depthwise conv + clip, dense + bias + gelu, softmax, layer_norm,
pooling, the layout transforms (transpose / reshape) of attention, the packing of a CNN's
input into channel blocks (convolutions run on NCHW[x]c on the CPU), a transformer's
dense layer on a weight packed in column panels (16 rows or more) and the three stages of
a Winograd convolution (3x3 on 28x28 images: input transform, batched product, output
transform with the bias, residual add and ReLU). One job tunes one task
of each kind for a few trials (the workers check every measured candidate against the
workload's reference), then each model compiled with the records is checked against the
interpreter."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import ir
import tuner
from db import Database

from ..ir.backend.blocks import (
    mobilenet_inverted_residual,
    resnet_basic_block,
    transformer_layer,
    weight,
)


def pooling_head() -> ir.Module:
    x = ir.var("x", shape=(1, 4, 8, 8))
    y = ir.op.nn.relu(ir.op.nn.conv2d(x, weight(8, 4, 3, 3), padding=1))
    y = ir.op.nn.global_avg_pool2d(ir.op.nn.max_pool2d(y, pool_size=2, strides=2))
    return ir.infer_type(ir.Module({"main": ir.Function([x], y)}))


MODELS: dict[str, Callable[[], ir.Module]] = {
    "resnet": resnet_basic_block, "mobilenet": mobilenet_inverted_residual,
    # 2 rows: fewer than any target's vector lanes, so its dense layers stay unpacked
    # (PackDenseWeights packs from one block of lanes: 8 rows on AVX2)
    "transformer": lambda: transformer_layer(seq=2), "pooling": pooling_head,
    "transformer, 16 rows": lambda: transformer_layer(seq=16),
    "resnet, 28x28": lambda: resnet_basic_block(c=16, hw=28)}

LAYOUT = {"transpose", "reshape"}
#: kind -> (model, does a task's operator list belong to the kind)
KINDS: dict[str, tuple[str, Callable[[list[str]], bool]]] = {
    "conv + bias + relu": ("resnet", lambda ops: ops[0] == "nn.conv2d_nchwc"
                           and ops.count("add") == 1 and ops[-1] == "nn.relu"),
    "conv + residual add + relu": ("resnet", lambda ops: ops[0] == "nn.conv2d_nchwc"
                                   and ops.count("add") == 2),
    "depthwise conv + clip": ("mobilenet", lambda ops: ops[0] == "nn.depthwise_conv2d_nchwc"
                              and "clip" in ops),
    "dense + bias + gelu": ("transformer", lambda ops: ops[0] == "nn.dense" and "erf" in ops),
    "packed dense + bias + gelu": ("transformer, 16 rows",
                                   lambda ops: ops[0] == "nn.dense_packed" and "erf" in ops),
    "softmax": ("transformer", lambda ops: "nn.softmax" in ops),
    "layer_norm": ("transformer", lambda ops: "nn.layer_norm" in ops),
    "layout transform": ("transformer", lambda ops: set(ops) <= LAYOUT),
    "pooling": ("pooling", lambda ops: "nn.max_pool2d" in ops),
    "channel packing": ("resnet", lambda ops: ops == ["layout_transform"]),
    "winograd input transform": ("resnet, 28x28", lambda ops: ops == ["nn.winograd_input"]),
    "winograd batched product": ("resnet, 28x28", lambda ops: ops == ["nn.batch_matmul"]),
    "winograd output + residual add + relu": ("resnet, 28x28", lambda ops: ops[0] ==
                                              "nn.winograd_output" and ops.count("add") == 2),
}
#: F(4x4, 3x3) rounds differently from the interpreter's direct convolution (relative to
#: the output's largest value)
TOLERANCE = {"resnet, 28x28": 1e-5}


def test_each_fused_kind_tunes_and_the_tuned_models_match_the_interpreter(tmp_path):
    tasks = {name: ir.extract_tasks(make()) for name, make in MODELS.items()}
    chosen = {}
    for kind, (model, belongs) in KINDS.items():
        found = [t for t in tasks[model] if belongs(t.ops)]
        assert found, f"{model} has no {kind} task: {[t.ops for t in tasks[model]]}"
        chosen[kind] = found[0]
    db = Database(f"sqlite:///{tmp_path / 't.db'}")
    workloads = list({t.workload.key: t.workload for t in chosen.values()}.values())
    result = tuner.tune(workloads, "cpu", trials=3 * len(workloads), db=db, batch_size=3,
                        scheduler="round-robin", cost_model="random", reconfirm=0)
    assert result.status == "succeeded"
    for kind, task in chosen.items():
        progress = result.task(task.workload)
        assert progress.errors.get("none", 0) > 0, f"{kind}: no valid candidate"

    rng = np.random.default_rng(0)
    for name, make in MODELS.items():
        module = make()
        x = rng.standard_normal(tuple(module["main"].params[0].checked_type.shape)) \
            .astype("float32")
        compiled = tuner.compile(module, "cpu", db)
        tuned = {r.key for r in compiled.tasks if r.tuned}
        assert {t.workload.key for kind, t in chosen.items() if KINDS[kind][0] == name} <= tuned
        want = ir.evaluate(module, x)
        if name in TOLERANCE:
            np.testing.assert_allclose(compiled(x), want, rtol=0,
                                       atol=TOLERANCE[name] * np.abs(want).max())
        else:
            np.testing.assert_allclose(compiled(x), want, rtol=1e-4, atol=1e-5)
