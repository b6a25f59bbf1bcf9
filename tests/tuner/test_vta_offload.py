"""The ``vta`` external codegen: quantized layers (conv2d / dense, bias, relu, requantize by
a power of two) partitioned into ``Compiler="vta"`` regions and run on the simulated
accelerator give exactly the integers the IR computes (interpreter), through the graph
executor, the VM and the AOT library; what the accelerator cannot compute stays on the
host; layers take their tuned schedules from the database; the offloaded region reports
simulated cycles."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import ir
from db import Database
from ir.op.qnn import fixed_point
from ir.transform.quantize import VTA_QCONFIG, QConfig, quantize
from schedule import Steps, Target, vta
from tuner import VtaCodegen, tune, use_vta

from ..ir.backend.blocks import mobilenet_inverted_residual, resnet_basic_block, weight

RNG = np.random.default_rng(11)
CONFIG = replace(VTA_QCONFIG, skip_conv_layers=())


def _calibration(shape: tuple[int, ...], n: int = 4) -> list[list[np.ndarray]]:
    return [[RNG.standard_normal(shape).astype("float32")] for _ in range(n)]


def _regions(module: ir.Module) -> list[ir.Function]:
    return [f for _, f in module.functions.items()
            if isinstance(f, ir.Function) and f.attrs.get("Compiler") == "vta"]


def _layer(shift: int, relu: bool, bias: bool, dense: bool) -> ir.Module:
    """One hand-built int8 layer with large accumulators, so that rounding matters."""
    if dense:
        x = ir.var("x", shape=(4, 48), dtype="int8")
        w = ir.const(RNG.integers(-128, 128, (32, 48)).astype("int8"))
        y = ir.op.nn.dense(x, w, out_dtype="int32")
    else:
        x = ir.var("x", shape=(1, 16, 6, 6), dtype="int8")
        w = ir.const(RNG.integers(-128, 128, (32, 16, 3, 3)).astype("int8"))
        y = ir.op.nn.conv2d(x, w, padding=1, out_dtype="int32")
    if bias:
        y = ir.op.nn.bias_add(y, ir.const(RNG.integers(-50000, 50000, 32).astype("int32")),
                              axis=1)
    if relu:
        y = ir.op.nn.relu(y)
    multiplier, s = fixed_point(2.0 ** -shift)
    y = ir.op.qnn.requantize(y, multiplier=multiplier, shift=s, out_dtype="int8")
    return ir.infer_type(ir.Module({"main": ir.Function([x], y)}))


@pytest.mark.parametrize(("shift", "relu", "bias", "dense"), [
    (0, False, False, False), (1, True, True, False), (9, True, False, False),
    (12, False, True, False), (7, True, True, True), (0, False, True, True),
])
def test_a_layer_on_vta_equals_the_interpreters_integers(shift, relu, bias, dense) -> None:
    """qnn.requantize rounds half up; the accelerator floors: the bias carries the half."""
    module = _layer(shift, relu, bias, dense)
    parted = ir.transform.partition_for(module, ["vta"])
    [region] = _regions(parted)
    ops = {e.op.name for e in ir.dataflow_post_order(region.body) if isinstance(e, ir.Call)}
    assert "qnn.requantize" in ops and ("nn.relu" in ops) == relu
    shape = module["main"].params[0].checked_type.shape
    for _ in range(3):
        x = RNG.integers(-128, 128, shape).astype("int8")
        expected = ir.evaluate(module, x)
        np.testing.assert_array_equal(ir.build(parted, "cpu")(x), expected)


def test_a_quantized_residual_block_runs_its_convolutions_on_vta() -> None:
    module = resnet_basic_block(16, 8)
    calibration = _calibration((1, 16, 8, 8))
    quantized = quantize(module, calibration, CONFIG)
    parted = ir.transform.partition_for(quantized, ["vta"])
    [region] = _regions(parted)
    convs = [e for e in ir.dataflow_post_order(region.body) if isinstance(e, ir.Call)
             and e.op.name == "nn.conv2d"]
    assert len(convs) == 2  # both layers in one region; the residual add on the host
    host_ops = {e.op.name for e in ir.dataflow_post_order(parted["main"].body)
                if isinstance(e, ir.Call) and isinstance(e.op, ir.Op)}
    assert "add" in host_ops and "nn.conv2d" not in host_ops
    graph, machine = ir.build(parted, "cpu"), ir.backend.vm.compile(parted, "cpu")
    vm, aot = ir.backend.VirtualMachine(machine), ir.aot_compile(parted, target="cpu")
    for _ in range(3):
        x = RNG.standard_normal((1, 16, 8, 8)).astype("float32")
        expected = ir.evaluate(quantized, x)
        np.testing.assert_array_equal(graph(x), expected)
        np.testing.assert_array_equal(vm(x), expected)
        np.testing.assert_array_equal(aot(x), expected)
    module_ = ir.backend.external.external_function(region)
    assert module_.stats["calls"] >= 9 and module_.stats["cycles"] > 0
    described = json.loads(module_.describe())["layers"]
    assert [layer["op"] for layer in described] == ["conv2d_nchw", "conv2d_nchw"]
    assert described[0]["params"]["activation"] == "relu" and described[0]["instructions"]


def test_a_quantized_mlp_runs_its_dense_layers_on_vta() -> None:
    x = ir.var("x", shape=(8, 64))
    h = ir.op.nn.relu(ir.op.nn.bias_add(ir.op.nn.dense(x, weight(48, 64)), weight(48), axis=1))
    h = ir.op.nn.relu(ir.op.nn.bias_add(ir.op.nn.dense(h, weight(32, 48)), weight(32), axis=1))
    y = ir.op.nn.dense(h, weight(10, 32))
    module = ir.infer_type(ir.Module({"main": ir.Function([x], y)}))
    quantized = quantize(module, _calibration((8, 64)), CONFIG)
    parted = ir.transform.partition_for(quantized, ["vta"])
    regions = _regions(parted)
    layers = sum(1 for f in regions for e in ir.dataflow_post_order(f.body)
                 if isinstance(e, ir.Call) and e.op.name == "nn.dense")
    assert layers == 2  # the last dense leaves the integers (dequantized): host
    compiled = ir.build(parted, "cpu")
    for _ in range(3):
        v = RNG.standard_normal((8, 64)).astype("float32")
        np.testing.assert_array_equal(compiled(v), ir.evaluate(quantized, v))
    float_out, int8_out = ir.evaluate(module, v), compiled(v)
    assert np.linalg.norm(int8_out - float_out) / np.linalg.norm(float_out) < 0.2


def test_what_the_accelerator_cannot_compute_stays_on_the_host() -> None:
    block = mobilenet_inverted_residual(16, 2, 8)
    calibration = _calibration((1, 16, 8, 8))
    parted = ir.transform.partition_for(quantize(block, calibration, CONFIG), ["vta"])
    groups = [e.attrs.groups for f in _regions(parted) for e in ir.dataflow_post_order(f.body)
              if isinstance(e, ir.Call) and e.op.name == "nn.conv2d"]
    assert groups == [1]  # the projection
    host = [e for e in ir.dataflow_post_order(parted["main"].body)
            if isinstance(e, ir.Call) and isinstance(e.op, ir.Op) and e.op.name == "nn.conv2d"]
    # the depthwise conv, and the expansion whose ReLU6 (a clip) the template lacks
    assert sorted(e.attrs.groups for e in host) == [1, 32]
    # per-channel scales (the cpu default) requantize by factors that are not shifts
    cpu_quantized = quantize(resnet_basic_block(16, 8), calibration,
                             QConfig(skip_conv_layers=()))
    assert not _regions(ir.transform.partition_for(cpu_quantized, ["vta"]))


def test_a_layer_whose_intermediate_is_used_twice_is_not_taken() -> None:
    x = ir.var("x", shape=(4, 32), dtype="int8")
    acc = ir.op.nn.dense(x, ir.const(RNG.integers(-9, 9, (16, 32)).astype("int8")),
                         out_dtype="int32")
    multiplier, shift = fixed_point(0.25)
    out = ir.op.qnn.requantize(acc, multiplier=multiplier, shift=shift, out_dtype="int8")
    module = ir.infer_type(ir.Module({"main": ir.Function([x], ir.Tuple([out, acc]))}))
    assert not _regions(ir.transform.partition_for(module, ["vta"]))


def test_a_tuned_schedule_that_no_longer_compiles_falls_back_to_the_default() -> None:
    module = _layer(4, True, True, dense=True)
    [workload] = VtaCodegen().layer_workloads(module)
    stale = [["split", "Y", 9, [7], True]]  # no such axis: not a schedule of this workload
    try:
        ir.register_codegen(VtaCodegen(schedules=lambda wl: stale), override=True)
        parted = ir.transform.partition_for(module, ["vta"])
        with pytest.warns(UserWarning, match="does not compile"):
            compiled = ir.build(parted, "cpu")
        x = RNG.integers(-128, 128, (4, 48)).astype("int8")
        np.testing.assert_array_equal(compiled(x), ir.evaluate(module, x))
        assert workload.op_name == "dense"
    finally:
        use_vta()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"preset": "nope"}, "unknown preset 'nope'"),
    ({"target": "cpu"}, "not a vta target"),
    ({"target": "vta -config=3x16x16"}, "bad vta config"),
])
def test_a_bad_board_or_target_is_named_and_the_codegen_is_kept(kwargs, message) -> None:
    before = ir.get_codegen("vta")
    with pytest.raises(ValueError, match=message):
        use_vta(**kwargs)
    assert ir.get_codegen("vta") is before


def test_power2_scales_need_one_scale_per_tensor() -> None:
    with pytest.raises(ValueError, match="per_channel=False"):
        QConfig(power2_scales=True)


def test_layers_take_their_tuned_schedules_from_the_database(tmp_path: Path) -> None:
    module = _layer(6, True, True, dense=False)
    [workload] = VtaCodegen().layer_workloads(module)
    assert workload.op_name == "conv2d_nchw" and workload.params["bias"]
    db = Database(f"sqlite:///{tmp_path / 'vta.db'}")
    result = tune(workload, "vta", trials=8, db=db, batch_size=8)
    assert result.status == "succeeded"
    target = Target.parse("vta")
    best = db.best(workload.key, str(target)).records[0].steps
    compute = vta.VtaCompute(workload, vta.VtaConfig.for_target(target))
    assert Steps.of(best) != compute.template_steps(compute.default_template())
    try:
        use_vta(db=db)
        parted = ir.transform.partition_for(module, ["vta"])
        compiled = ir.build(parted, "cpu")
        [region] = _regions(parted)
        [layer] = ir.backend.external.external_function(region).layers
        _, tuned_program = vta.compile_workload(workload, best, compute.config)
        assert layer.program.instructions == tuned_program.instructions
        x = RNG.integers(-128, 128, (1, 16, 6, 6)).astype("int8")
        np.testing.assert_array_equal(compiled(x), ir.evaluate(module, x))
    finally:
        use_vta()
