"""ONNX import of whole models and of broken ones: ResNet-18, MobileNetV2 and a BERT-base
encoder layer exported from PyTorch import, type-check, round-trip through the text format
and compute what onnxruntime computes; the importer's contract for names, inputs and
outputs; and its errors (unsupported operators and attributes, broken files, malformed
graphs), which always come before any module is made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ir
from ir.frontend import OnnxImportError, from_onnx

from . import models

RTOL, ATOL = 1e-3, 1e-4


def _ort(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx_models")


@pytest.fixture(scope="module")
def resnet18_path(model_dir: Path) -> Path:
    return models.resnet18(model_dir / "resnet18.onnx")


@pytest.fixture(scope="module")
def bert_path(model_dir: Path) -> Path:
    return models.bert_layer(model_dir / "bert_layer.onnx")


def _check_against_onnxruntime(path: Path, input_shape: tuple[int, ...], input_name: str,
                               aot: bool = False, **import_args: object) -> ir.Module:
    """The imported module computes what onnxruntime computes: on the interpreter, built
    for the graph executor (compiled kernels, unscheduled: no tuning here), and with
    ``aot`` compiled ahead of time too."""
    module = from_onnx(onnx.load(path), **import_args)
    x = np.random.default_rng(0).standard_normal(input_shape).astype("float32")
    expected = _ort(path, {input_name: x})[0]
    assert np.abs(expected).max() > 0.1  # not a vanishing signal that any answer matches
    runs = {"interpreter": lambda: ir.evaluate(module, x), "graph": lambda: ir.build(module)(x)}
    if aot:
        runs["aot"] = lambda: ir.aot_compile(module)(x)
    for executor, run in runs.items():
        out = run()
        assert out.shape == expected.shape and out.dtype == expected.dtype, executor
        np.testing.assert_allclose(out, expected, rtol=RTOL, atol=ATOL, err_msg=executor)
    assert ir.parse(ir.astext(module)) == module
    return module


def _calls(module: ir.Module, name: str | None = None) -> list[ir.Call]:
    """The operator calls of ``@main`` (of operator ``name`` only, if given)."""
    found = []

    class Finder(ir.ExprVisitor):
        def visit_call(self, call: ir.Call) -> None:
            if isinstance(call.op, ir.Op) and name in (None, call.op.name):
                found.append(call)
            super().visit_call(call)

    Finder().visit(module["main"])
    return found


def _ops(module: ir.Module) -> list[str]:
    return [c.op.name for c in _calls(module)]


@pytest.mark.slow  # about 20 s: the export, the interpreter and the compiled model
def test_resnet18_matches_onnxruntime(resnet18_path: Path) -> None:
    module = _check_against_onnxruntime(resnet18_path, (1, 3, 224, 224), "data")
    main = module["main"]
    assert [p.name_hint for p in main.params] == ["data"]
    assert main.attrs["input_names"] == ("data",) and main.attrs["output_names"] == ("logits",)
    assert main.checked_type.ret_type == ir.TensorType((1, 1000), "float32")
    ops = _ops(module)
    assert ops.count("nn.conv2d") == 20 and ops.count("nn.batch_norm") == 20
    assert ops.count("add") == 8 and "nn.dense" in ops and "nn.global_avg_pool2d" in ops
    # batch norms keep their (random) statistics, to be folded by later passes
    for bn in _calls(module, "nn.batch_norm"):
        mean, variance = bn.args[3].data, bn.args[4].data
        assert not np.allclose(variance, 1.0) and not np.allclose(mean, 0.0)


@pytest.mark.slow  # about 20 s; test_mobilenet_v2_width_mult is the quick one
def test_mobilenet_v2_matches_onnxruntime(model_dir: Path) -> None:
    path = models.mobilenet_v2(model_dir / "mobilenet_v2.onnx")
    module = _check_against_onnxruntime(path, (1, 3, 224, 224), "data")
    ops = _ops(module)
    depthwise = [c for c in _calls(module, "nn.conv2d") if c.attrs.groups > 1]
    assert len(depthwise) == 17  # one per inverted residual block
    assert ops.count("clip") == 35 and ops.count("add") == 10  # ReLU6, residual adds


def test_mobilenet_v2_width_mult(model_dir: Path) -> None:
    path = models.mobilenet_v2(model_dir / "mobilenet_v2_half.onnx", width_mult=0.5, size=96)
    _check_against_onnxruntime(path, (1, 3, 96, 96), "data", aot=True)


def test_bert_layer_matches_onnxruntime_with_its_shape_arithmetic_folded(
        bert_path: Path) -> None:
    graph = onnx.load(bert_path).graph
    assert {"Shape", "Gather", "Concat", "Reshape"} <= {n.op_type for n in graph.node}
    module = _check_against_onnxruntime(bert_path, (1, 128, 768), "hidden_states", aot=True,
                                        shape={"hidden_states": (1, 128, 768)})
    ops = _ops(module)
    assert ops.count("nn.layer_norm") == 2 and ops.count("nn.softmax") == 1
    assert ops.count("nn.batch_matmul") == 2 and ops.count("nn.matmul") == 6
    assert [tuple(c.attrs.newshape) for c in _calls(module, "reshape")].count(
        (1, 128, 12, 64)) == 3
    assert "erf" in ops


def test_dynamic_dimensions_need_a_shape_for_shape_arithmetic(bert_path: Path) -> None:
    with pytest.raises(OnnxImportError, match=r"\(Shape\): the input's shape \(1, seq, 768\) "
                                              r"must be static here") as err:
        from_onnx(onnx.load(bert_path))
    assert err.value.op_type == "Shape"


# ------------------------------------------------------------------ the import contract


def _model(nodes: list, inputs: list, outputs: list, initializers: list = (),
           opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _info(name: str, shape: list, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def test_names_inputs_outputs_and_initializers() -> None:
    weight = np.arange(6, dtype="float32").reshape(3, 2)
    model = _model(
        [helper.make_node("MatMul", ["input.1", "w"], ["mm"]),
         helper.make_node("Relu", ["mm"], ["out:0"]),
         helper.make_node("Add", ["mm", "2x"], ["sum"])],
        [_info("input.1", ["N", 3]), _info("2x", [1, 2])],
        [_info("out:0", ["N", 2]), _info("sum", ["N", 2])],
        [onnx.numpy_helper.from_array(weight, "w")])
    module = from_onnx(model)
    main = module["main"]
    assert [p.name_hint for p in main.params] == ["input_1", "input_2x"]
    assert main.params[0].type_annotation == ir.TensorType((ir.SymDim("N"), 3), "float32")
    assert main.attrs["input_names"] == ("input.1", "2x")
    assert main.attrs["output_names"] == ("out:0", "sum")
    assert isinstance(main.body, ir.Tuple)
    x, y = np.ones((4, 3), "float32"), np.full((1, 2), -20, "float32")
    relu, total = ir.evaluate(module, x, y)
    np.testing.assert_array_equal(relu, np.maximum(x @ weight, 0))
    np.testing.assert_array_equal(total, x @ weight + y)
    assert ir.parse(ir.astext(module)) == module
    # shape and dtype overrides
    module = from_onnx(model, shape={"input.1": (5, 3)}, dtype="float32")
    assert module["main"].params[0].type_annotation == ir.TensorType((5, 3), "float32")
    with pytest.raises(OnnxImportError, match=r"not graph inputs"):
        from_onnx(model, shape={"nope": (1,)})


def test_an_initializer_listed_as_an_input_is_a_constant() -> None:
    bias = np.ones(2, "float32")
    model = _model([helper.make_node("Add", ["x", "b"], ["y"])],
                   [_info("x", [2]), _info("b", [2])], [_info("y", [2])],
                   [onnx.numpy_helper.from_array(bias, "b")])
    module = from_onnx(model)
    assert [p.name_hint for p in module["main"].params] == ["x"]
    np.testing.assert_array_equal(ir.evaluate(module, np.zeros(2, "float32")), bias)


def test_constant_subgraphs_are_folded() -> None:
    shape = helper.make_node("Shape", ["x"], ["s"])
    gather = helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0)
    unsq = helper.make_node("Unsqueeze", ["d0", "ax"], ["d0v"])
    concat = helper.make_node("Concat", ["d0v", "minus1"], ["target"], axis=0)
    reshape = helper.make_node("Reshape", ["x", "target"], ["y"])
    inits = [onnx.numpy_helper.from_array(np.array(0, "int64"), "i0"),
             onnx.numpy_helper.from_array(np.array([0], "int64"), "ax"),
             onnx.numpy_helper.from_array(np.array([-1], "int64"), "minus1")]
    model = _model([shape, gather, unsq, concat, reshape], [_info("x", [2, 3, 4])],
                   [_info("y", [2, 12])], inits)
    module = from_onnx(model)
    assert _ops(module) == ["reshape"]
    assert tuple(_calls(module, "reshape")[0].attrs.newshape) == (2, 12)


# ---------------------------------------------------------------------------- errors


def test_unsupported_operator_names_op_and_node() -> None:
    nms = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["selected"],
                           name="nms_1")
    model = _model([helper.make_node("Relu", ["boxes"], ["r"], name="relu_0"), nms],
                   [_info("boxes", [1, 4, 4]), _info("scores", [1, 1, 4])],
                   [_info("selected", [1, 3], TensorProto.INT64)])
    with pytest.raises(OnnxImportError) as err:
        from_onnx(model)
    assert "NonMaxSuppression" in str(err.value) and "'nms_1'" in str(err.value)
    assert (err.value.op_type, err.value.node_name) == ("NonMaxSuppression", "nms_1")


def test_custom_domain_operator_is_refused() -> None:
    node = helper.make_node("MyOp", ["x"], ["y"], domain="com.example", name="custom")
    model = _model([node], [_info("x", [2])], [_info("y", [2])])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(OnnxImportError, match=r"com\.example\.MyOp.*not supported"):
        from_onnx(model)


@pytest.mark.parametrize(("node", "attribute", "message"), [
    (helper.make_node("Relu", ["x"], ["y"], name="r", alpha=0.5), "alpha",
     r"ONNX node 'r' \(Relu\): attribute alpha is not supported"),
    (helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode="circular"), "mode",
     r"ONNX node 'p' \(Pad\): attribute mode='circular' is not supported"),
    (helper.make_node("Gelu", ["x"], ["y"], name="g", approximate="erf"), "approximate",
     r"ONNX node 'g' \(Gelu\): attribute approximate='erf' is not supported"),
])
def test_unsupported_attribute_names_op_node_and_attribute(node, attribute, message) -> None:
    inits = [onnx.numpy_helper.from_array(np.array([0, 1, 0, 1], "int64"), "pads")]
    model = _model([node], [_info("x", [2, 3])], [_info("y", None)],
                   inits if node.op_type == "Pad" else [])
    with pytest.raises(OnnxImportError, match=message) as err:
        from_onnx(model)
    assert (err.value.op_type, err.value.node_name, err.value.attribute) == (
        node.op_type, node.name, attribute)


def test_operand_needed_at_import_time() -> None:
    model = _model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="rs")],
                   [_info("x", [2, 3]), _info("shape", [2], TensorProto.INT64)],
                   [_info("y", None)])
    with pytest.raises(OnnxImportError, match=r"input 1 \(shape, 'shape'\) must be known at "
                                              r"import time") as err:
        from_onnx(model)
    assert err.value.needs_constant == "shape"


def test_unsupported_dtype() -> None:
    model = _model([helper.make_node("Identity", ["x"], ["y"])],
                   [_info("x", [2], TensorProto.STRING)], [_info("y", [2], TensorProto.STRING)])
    with pytest.raises(OnnxImportError, match="STRING inputs are not supported"):
        from_onnx(model)


def test_broken_model_bytes_and_files(tmp_path: Path) -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_info("x", [4, 4])],
                   [_info("y", [4, 4])],
                   [onnx.numpy_helper.from_array(np.ones((64, 64), "float32"), "unused")])
    data = model.SerializeToString()
    for cut in (1, 7, len(data) // 3, len(data) // 2, len(data) - 5):
        with pytest.raises(OnnxImportError, match="not a valid ONNX model"):
            from_onnx(data[:cut])
    with pytest.raises(OnnxImportError, match="not a valid ONNX model"):
        from_onnx(b"\xff\xfe this is not a protobuf \x00\x01")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(data[:len(data) // 2])
    with pytest.raises(OnnxImportError, match="not a valid ONNX model"):
        from_onnx(broken)
    with pytest.raises(OnnxImportError, match="cannot read the ONNX model"):
        from_onnx(tmp_path / "missing.onnx")
    good = tmp_path / "good.onnx"
    good.write_bytes(data)
    assert from_onnx(good) == from_onnx(data) == from_onnx(model)


def test_malformed_graphs() -> None:
    undefined = _model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")],
                       [_info("x", [2])], [_info("y", [2])])
    with pytest.raises(OnnxImportError, match=r"node 'r' \(Relu\) reads 'nowhere' before any "
                                              "node computes it"):
        from_onnx(undefined)
    no_producer = _model([], [_info("x", [2])], [_info("y", [2])])
    with pytest.raises(OnnxImportError, match="graph output 'y' is not computed"):
        from_onnx(no_producer)
    no_opset = _model([helper.make_node("Relu", ["x"], ["y"])], [_info("x", [2])],
                      [_info("y", [2])])
    del no_opset.opset_import[:]
    with pytest.raises(OnnxImportError, match="opset_import"):
        from_onnx(no_opset)
    bad_type = _model([helper.make_node("Add", ["x", "y"], ["z"], name="a")],
                      [_info("x", [2]), _info("y", [3])], [_info("z", [2])])
    with pytest.raises(OnnxImportError, match=r"node 'a' \(Add\): add: shapes \(2,\) and "
                                              r"\(3,\) do not broadcast"):
        from_onnx(bad_type)


# ----------------------------------------------------- operator forms of older opsets


# (op, opset, input shape, outputs, attributes): the forms and meanings of older opsets
# (and cropping by negative pads), against onnxruntime
LEGACY_CASES = {
    "softmax-flattens-axes-1-on": ("Softmax", 11, [2, 3, 4], 1, {"axis": 1}),
    "logsoftmax-default-axis-1": ("LogSoftmax", 11, [2, 3, 4], 1, {}),
    "split-attribute": ("Split", 11, [6, 2], 3, {"axis": 0, "split": [1, 2, 3]}),
    "squeeze-axes-attribute": ("Squeeze", 11, [1, 3, 1], 1, {"axes": [0]}),
    "unsqueeze-axes-attribute": ("Unsqueeze", 11, [3, 2], 1, {"axes": [2, 0]}),
    "reducemean-axes-attribute": ("ReduceMean", 13, [2, 3, 4], 1,
                                  {"axes": [1, -1], "keepdims": 0}),
    "reducesum-axes-attribute": ("ReduceSum", 11, [2, 3, 4], 1, {"axes": [0]}),
    "clip-attributes": ("Clip", 6, [3, 4], 1, {"min": -0.5, "max": 0.25}),
    "pad-attributes": ("Pad", 2, [2, 3], 1, {"pads": [0, 1, 1, 0], "value": 1.5}),
    "pad-negative-crops": ("Pad", 2, [4, 5], 1, {"pads": [-1, 2, 1, -2], "mode": "edge"}),
    "slice-attributes": ("Slice", 9, [4, 5], 1,
                         {"starts": [1, -3], "ends": [3, 100], "axes": [0, 1]}),
}


@pytest.mark.parametrize("case", LEGACY_CASES)
def test_older_opset_forms_match_onnxruntime(case: str, tmp_path: Path) -> None:
    op, opset, shape, n_outputs, attrs = LEGACY_CASES[case]
    outputs = [f"y{i}" for i in range(n_outputs)]
    model = _model([helper.make_node(op, ["x"], outputs, **attrs)], [_info("x", shape)],
                   [_info(o, None) for o in outputs], opset=opset)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    x = np.random.default_rng(1).standard_normal(shape).astype("float32")
    expected = _ort(path, {"x": x})
    out = ir.evaluate(from_onnx(model), x)
    out = list(out) if isinstance(out, tuple) else [out]
    assert len(out) == len(expected)
    for o, e in zip(out, expected, strict=True):
        assert o.shape == e.shape and o.dtype == e.dtype
        np.testing.assert_allclose(o, e, rtol=RTOL, atol=ATOL)


def test_import_time_folding_is_bounded() -> None:
    """A model cannot make the importer allocate without bound: a huge ConstantOfShape is
    refused, and a huge Expand of a known value stays an operator call."""
    big = onnx.numpy_helper.from_array(np.array([1 << 20, 1 << 20], "int64"), "shape")
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill")
    model = _model([node], [], [_info("y", [1 << 20, 1 << 20])], [big])
    with pytest.raises(OnnxImportError, match="more than .* elements"):
        from_onnx(model)
    one = onnx.numpy_helper.from_array(np.ones(1, "float32"), "one")
    expand = helper.make_node("Expand", ["one", "shape"], ["z"], name="expand")
    add = helper.make_node("Add", ["z", "x"], ["w"], name="add")
    model = _model([expand, add], [_info("x", [1])], [_info("w", [1 << 20, 1 << 20])],
                   [one, big])
    assert "broadcast_to" in _ops(from_onnx(model))
