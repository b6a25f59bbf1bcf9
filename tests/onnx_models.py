"""Small ONNX models built with onnx.helper for the tuner and API tests (no downloads)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(5)


def small_cnn() -> onnx.ModelProto:
    """Conv(3x3) + Relu -> GlobalAveragePool -> Flatten -> Gemm: four fused tasks."""
    w = numpy_helper.from_array(RNG.standard_normal((8, 3, 3, 3)).astype("float32"), "w")
    b = numpy_helper.from_array(RNG.standard_normal(8).astype("float32"), "b")
    fc = numpy_helper.from_array(RNG.standard_normal((4, 8)).astype("float32"), "fc")
    fcb = numpy_helper.from_array(RNG.standard_normal(4).astype("float32"), "fcb")
    nodes = [helper.make_node("Conv", ["image", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1, name="fc")]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4])], [w, b, fc, fcb])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def save_small_cnn(path) -> str:
    onnx.save(small_cnn(), str(path))
    return str(path)


def external_data_model(location: str) -> onnx.ModelProto:
    """A model whose weight claims to live in the file ``location`` (external data)."""
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "16")):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
