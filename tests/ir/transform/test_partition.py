"""Bring your own codegen: AnnotateTarget marks what a codegen supports (predicates on
attributes and types), MergeCompilerRegions joins neighbours without creating cycles
(graphs with branches), PartitionGraph lifts regions into ``Compiler`` functions; the
partitioned models compute what the unpartitioned ones do, in the interpreter, on the
graph executor and on the VM (where the ``blas`` codegen runs the regions on numpy's
BLAS), and a custom codegen registered by a test is called by the executors."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

import ir
from ir.backend.external import ExternalCodegen, ExternalModule, register_codegen
from ir.op import nn
from ir.transform import AnnotateTarget, MergeCompilerRegions, PartitionGraph, partition_for
from ir.visitor import dataflow_post_order

from ..backend.blocks import resnet_basic_block, weight

F32 = "float32"
RNG = np.random.default_rng(9)


def ops_of(expr: ir.Expr) -> list[str]:
    return [e.op.name for e in dataflow_post_order(expr)
            if isinstance(e, ir.Call) and isinstance(e.op, ir.Op)]


def regions_of(module: ir.Module) -> dict[str, list[str]]:
    return {gv.name: ops_of(f.body) for gv, f in module.functions.items()
            if f.attrs.get("Compiler")}


def branchy() -> ir.Module:
    """dense -> (dense, sigmoid) -> add: the add's inputs come from the region and from
    the sigmoid, which the codegen does not take."""
    x = ir.var("x", shape=(4, 8))
    d1 = nn.dense(x, weight(8, 8))
    d2 = nn.relu(nn.dense(d1, weight(8, 8)))
    s = ir.op.sigmoid(d1)
    out = nn.dense(ir.op.add(d2, s), weight(3, 8))
    return ir.Module({"main": ir.Function([x], out)})


def test_annotate_marks_supported_calls_only():
    annotated = AnnotateTarget(["blas"])(branchy())
    names = ops_of(annotated["main"].body)
    assert names.count("annotation.compiler_end") == 5  # 3 dense, relu, add; not sigmoid
    assert "sigmoid" in names


def test_merging_stops_where_a_cycle_would_form():
    mod = branchy()
    merged = MergeCompilerRegions()(AnnotateTarget(["blas"])(mod))
    partitioned = PartitionGraph()(merged)
    regions = sorted(regions_of(partitioned).values(), key=len)
    # dense -> dense -> relu merge; the add (fed by the sigmoid, fed by the first dense)
    # would close a cycle through the sigmoid, so it starts a region with the last dense
    assert regions == [["add", "nn.dense"], ["nn.dense", "nn.dense", "nn.relu"]]
    assert "sigmoid" in ops_of(partitioned["main"].body)
    x = RNG.standard_normal((4, 8)).astype(F32)
    np.testing.assert_allclose(ir.evaluate(partitioned, x), ir.evaluate(mod, x),
                               rtol=1e-5, atol=1e-6)


def test_partitioned_resnet_block_runs_on_blas_in_every_executor():
    mod = resnet_basic_block()
    partitioned = partition_for(mod, ["blas"])
    functions = [f for f in partitioned.functions.values() if f.attrs.get("Compiler")]
    assert functions and all(f.attrs["global_symbol"].startswith("blas_") for f in functions)
    assert "nn.conv2d" not in ops_of(partitioned["main"].body)
    x = RNG.standard_normal((1, 8, 8, 8)).astype(F32)
    want = ir.evaluate(mod, x)
    np.testing.assert_allclose(ir.evaluate(partitioned, x), want, rtol=1e-5, atol=1e-5)
    graph = ir.build(partitioned, target="cpu")
    np.testing.assert_allclose(graph(x), want, rtol=1e-4, atol=1e-5)
    assert not any(t.name.startswith("blas_") for t in ir.extract_tasks(partitioned))
    vm = ir.backend.VirtualMachine(ir.backend.vm.compile(partitioned, target="cpu"))
    np.testing.assert_allclose(vm(x), want, rtol=1e-4, atol=1e-5)


class _Counting(ExternalCodegen):
    """A codegen of tanh only, counting its calls: proves the executors call into it."""

    name = "test_tanh"
    ops: ClassVar[dict] = {"tanh": lambda call: call.checked_type.dtype == F32}
    calls = 0

    def compile(self, func: ir.Function, symbol: str) -> ExternalModule:
        codegen = self

        class Module(ExternalModule):
            def __call__(self, *args):
                codegen.calls += 1
                return ir.evaluate(func, *args)

            def describe(self) -> str:
                return symbol

        return Module()


def test_a_registered_codegen_is_called_at_run_time():
    codegen = register_codegen(_Counting(), override=True)
    x = ir.var("x", shape=(2, 3))
    mod = ir.Module({"main": ir.Function([x], ir.op.exp(ir.op.tanh(ir.op.tanh(x))))})
    partitioned = partition_for(mod, ["test_tanh"])
    assert list(regions_of(partitioned).values()) == [["tanh", "tanh"]]
    xs = RNG.standard_normal((2, 3)).astype(F32)
    before = codegen.calls
    out = ir.build(partitioned, target="cpu")(xs)
    assert codegen.calls == before + 1  # one region: one call, its two tanh inside
    np.testing.assert_allclose(out, np.exp(np.tanh(np.tanh(xs))), rtol=1e-5)


def test_unknown_codegen_is_reported():
    with pytest.raises(KeyError, match="no external codegen named 'cudnn'"):
        AnnotateTarget(["cudnn"])


def test_aot_model_calls_external_regions_and_refuses_to_export(tmp_path):
    mod = resnet_basic_block()
    partitioned = partition_for(mod, ["blas"])
    model = ir.aot_compile(partitioned, target="cpu")
    assert model.meta["externals"] and "tt_external" in model.source
    x = RNG.standard_normal((1, 8, 8, 8)).astype(F32)
    np.testing.assert_allclose(model(x), ir.evaluate(mod, x), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="does not export"):
        model.export(tmp_path / "model")


def test_an_external_failure_is_reported_by_the_aot_model():
    class Failing(_Counting):
        name = "test_failing"

        def compile(self, func, symbol):
            class Module(ExternalModule):
                def __call__(self, *args):
                    raise ValueError("the device is gone")

                def describe(self) -> str:
                    return symbol

            return Module()

    register_codegen(Failing(), override=True)
    x = ir.var("x", shape=(2, 3))
    mod = ir.Module({"main": ir.Function([x], ir.op.exp(ir.op.tanh(x)))})
    model = ir.aot_compile(partition_for(mod, ["test_failing"]), target="cpu")
    with pytest.raises(RuntimeError, match="external function test_failing_0 failed: the "
                                           "device is gone"):
        model(np.ones((2, 3), F32))
