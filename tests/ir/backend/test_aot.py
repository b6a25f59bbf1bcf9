"""Ahead-of-time compilation (``ir.backend.aot_compile``): results equal the graph
executor's and the interpreter's, the model is one C translation unit compiled once, views
and aliased outputs, an exported artefact that runs without the tuner, database or C
compiler, and the clear refusals."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ir
import schedule
from ir.backend import (
    AotCompileError,
    GraphBuildError,
    aot_compile,
    aot_runtime,
    build,
    extract_tasks,
)
from ir.backend import aot as aot_module
from ir.types import TupleType
from schedule import make_schedule

from .blocks import resnet_basic_block, transformer_layer, weight

RNG = np.random.default_rng(17)


def _module(params: list[ir.Var], body: ir.Expr) -> ir.Module:
    return ir.infer_type(ir.Module({"main": ir.Function(params, body)}))


def conv_bias_relu() -> ir.Module:
    x = ir.var("x", shape=(1, 3, 8, 8))
    y = ir.op.nn.conv2d(x, weight(4, 3, 3, 3), padding=1)
    return _module([x], ir.op.nn.relu(ir.op.nn.bias_add(y, weight(4), axis=1)))


def mlp() -> ir.Module:
    x = ir.var("x", shape=(2, 8))
    y = ir.op.nn.relu(ir.op.nn.bias_add(ir.op.nn.dense(x, weight(16, 8)), weight(16), axis=-1))
    y = ir.op.nn.bias_add(ir.op.nn.dense(y, weight(4, 16)), weight(4), axis=-1)
    return _module([x], ir.op.nn.softmax(y))


def _input(module: ir.Module) -> np.ndarray:
    shape = module["main"].params[0].checked_type.shape
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("make", [conv_bias_relu, resnet_basic_block, mlp, transformer_layer])
def test_aot_equals_the_graph_executor_and_the_interpreter(make):
    module = make()
    model = aot_compile(module)
    x = _input(module)
    got = model(x)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    np.testing.assert_allclose(got, build(module)(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, ir.evaluate(module, x), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(model(x=x), got)  # by name; and calls repeat exactly
    assert model.input_names == ["x"] and model.output_names == ["out"]


def test_one_translation_unit_compiled_once_with_the_tuned_schedules(monkeypatch):
    module = resnet_basic_block()
    compiled: list[str] = []
    real_compile_source = schedule.compile_source

    def compile_source(source, flags, *args, **kwargs):
        compiled.append(source)
        return real_compile_source(source, flags, *args, **kwargs)

    monkeypatch.setattr(schedule, "compile_source", compile_source)
    monkeypatch.setattr(schedule, "compile_library", None)  # never several objects
    tasks = extract_tasks(module)
    conv = next(t for t in tasks if t.ops[0] == "nn.conv2d_nchwc")
    s, args = make_schedule(conv.workload)
    outer, _ = s[args[-1]].split(s[args[-1]].op.axis[2], factor=2)
    s[args[-1]].parallel(outer)
    model = aot_compile(module, schedules={conv.workload.key: s.steps})
    assert compiled == [model.source]
    assert {r.key for r in model.tasks} == {t.workload.key for t in tasks}  # build's keys
    assert [r.key for r in model.tasks if r.tuned] == [conv.workload.key]
    assert model.source.count("int tt_run(void** inputs, void** outputs) {") == 1
    assert model.source.count("#pragma omp parallel") >= 1  # the tuned steps are in it
    for k in range(len(tasks)):
        assert f"int32_t tt_k{k}(" in model.source
    x = _input(module)
    np.testing.assert_allclose(model(x), ir.evaluate(module, x), rtol=1e-4, atol=1e-5)


@pytest.fixture
def add_sub_op():
    """A test-only operator with two results, (a + b, a - b): a kernel with two outputs."""
    name = "test_aot.add_sub"

    def lowering(inputs, attrs, out_type):
        from schedule import ops

        return ops.add(inputs[0], inputs[1]), ops.subtract(inputs[0], inputs[1])

    op = ir.register_op(ir.OpDef(
        name=name, num_inputs=2, attrs_schema={},
        type_relation=lambda types, attrs: TupleType((types[0], types[0])),
        pattern=ir.OpPattern.OPAQUE,
        compute=lambda args, attrs: (args[0] + args[1], args[0] - args[1]),
        lowering=lowering), override=True)
    yield op
    ir.Op._table.pop(name, None)


def test_views_tuples_and_aliased_outputs(add_sub_op):
    a, b = ir.var("a", shape=(3, 4)), ir.var("b", shape=(3, 4))
    total = ir.op.add(a, b)
    pair = ir.Call(add_sub_op, [a, b])
    table = np.arange(3, dtype="float32")
    body = ir.Tuple([total,                                                  # a kernel
                     ir.Tuple([ir.op.reshape(ir.op.nn.relu(a), newshape=(4, 3)), b]),
                     total,                                                  # repeated
                     ir.const(table),                                        # a parameter
                     ir.TupleGetItem(pair, 1),                               # 2nd of two
                     a])                                                     # an input
    module = _module([a, b], body)
    model = aot_compile(module)
    x, y = RNG.standard_normal((2, 3, 4)).astype("float32")
    got = model(x, y)
    s, (r, same_b), s_again, t, diff, same_a = got
    np.testing.assert_allclose(s, x + y, rtol=1e-6)
    np.testing.assert_array_equal(r, np.maximum(x, 0).reshape(4, 3))
    np.testing.assert_array_equal(same_b, y)
    np.testing.assert_array_equal(s_again, s)
    np.testing.assert_array_equal(t, table)
    np.testing.assert_allclose(diff, x - y, rtol=1e-6)
    np.testing.assert_array_equal(same_a, x)
    assert not np.shares_memory(same_a, x) and not np.shares_memory(s, s_again)
    want = build(module)(x, y)
    for g, w in zip(_flat(got), _flat(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    assert len(model.output_names) == 7


def _flat(value):
    if isinstance(value, tuple):
        return [x for v in value for x in _flat(v)]
    return [value]


def test_models_of_equal_source_keep_their_own_weights():
    """One library file, loaded once per model: their static buffers and weights differ."""
    first, second = mlp(), mlp()  # the same program, other random weights
    a, b = aot_compile(first), aot_compile(second)
    assert a.source == b.source and a.library == b.library
    x = _input(first)
    np.testing.assert_allclose(a(x), ir.evaluate(first, x), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(b(x), ir.evaluate(second, x), rtol=1e-4, atol=1e-6)
    assert not np.allclose(a(x), b(x))


# everything of ours a deployed model must not need
BLOCKED = """
import builtins
real_import = builtins.__import__
def guarded(name, *args, **kwargs):
    if name.split(".")[0] in BLOCKED:
        raise ImportError(f"blocked: {name}")
    return real_import(name, *args, **kwargs)
builtins.__import__ = guarded
"""


def _run_blocked(blocked: set[str], body: str, cwd, pythonpath: str) -> None:
    script = f"BLOCKED = {sorted(blocked)!r}\n" + BLOCKED + textwrap.dedent(body)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=cwd, timeout=120,
                   env={"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath})


def test_exported_model_runs_without_tuner_database_or_compiler(tmp_path):
    module = transformer_layer()
    model = aot_compile(module)
    path = model.export(tmp_path / "layer.aot")
    assert sorted(p.name for p in path.iterdir()) == sorted(aot_runtime.ARTIFACT_FILES)
    x = _input(module)
    np.save(tmp_path / "x.npy", x)
    want = ir.evaluate(module, x)
    # through ir.backend.aot.load, without schedule (no C compiler), tuner or database
    repo = str(Path(ir.__file__).resolve().parents[1])
    _run_blocked({"schedule", "tuner", "db", "search", "workers", "api", "cost_model"}, f"""
        import numpy as np
        from ir.backend import aot
        model = aot.load({str(path)!r})
        assert model.input_names == ["x"], model.input_names
        np.save("y_ir.npy", model(np.load("x.npy")))
    """, tmp_path, repo)
    # through the runtime the artefact carries, with numpy alone
    _run_blocked({"ir", "schedule", "tuner", "db", "search", "workers", "api", "cost_model"},
                 f"""
        import numpy as np
        import aot_runtime
        np.save("y_alone.npy", aot_runtime.load({str(path)!r})(x=np.load("x.npy")))
    """, tmp_path, str(path))
    for name in ("y_ir.npy", "y_alone.npy"):
        np.testing.assert_allclose(np.load(tmp_path / name), want, rtol=1e-4, atol=1e-5)
    loaded = aot_module.load(path)
    assert loaded.source == model.source and loaded.output_names == model.output_names
    np.testing.assert_array_equal(loaded(x), model(x))


def test_loading_what_is_not_an_artefact_is_a_clear_error(tmp_path):
    (tmp_path / "model.json").write_text("{}")
    with pytest.raises(ValueError, match="not an AOT artefact .*missing model.so"):
        aot_module.load(tmp_path)


@pytest.fixture
def op_without_lowering():
    name = "test_aot.no_lowering"
    op = ir.register_op(ir.OpDef(
        name=name, num_inputs=1, attrs_schema={}, type_relation=lambda types, attrs: types[0],
        pattern=ir.OpPattern.OPAQUE, compute=lambda args, attrs: args[0] * 2), override=True)
    yield op
    ir.Op._table.pop(name, None)


def test_a_fused_function_without_a_kernel_is_refused_by_name(op_without_lowering):
    x = ir.var("x", shape=(4,))
    module = _module([x], ir.op.nn.relu(ir.Call(op_without_lowering, [ir.op.exp(x)])))
    v = RNG.standard_normal(4).astype("float32")
    np.testing.assert_allclose(build(module)(v), ir.evaluate(module, v), rtol=1e-5)  # numpy
    with pytest.raises(AotCompileError, match=r"test_aot\.no_lowering .*has no lowering") as e:
        aot_compile(module)
    assert "ir.build" in str(e.value) and "nn.relu" not in str(e.value)


def test_control_flow_is_refused():
    x = ir.var("x", shape=(3,))
    body = ir.If(ir.op.greater(ir.op.sum(x), ir.const(np.float32(0))), x, ir.op.negative(x))
    with pytest.raises(GraphBuildError, match="VM"):
        aot_compile(_module([x], body))


def test_inputs_are_checked_before_the_library_runs():
    a, b = ir.var("a", shape=(2, 3)), ir.var("b", shape=(2, 3), dtype="int32")
    model = aot_compile(_module([a, b], ir.Tuple([ir.op.multiply(a, a), ir.op.add(b, b)])))
    x, n = np.ones((2, 3), "float32"), np.arange(6, dtype="int32").reshape(2, 3)
    with pytest.raises(ValueError, match=r"input 'a' must have shape \[2, 3\], got \[3, 2\]"):
        model(x.T.copy(), n)
    with pytest.raises(TypeError, match="input 'b' must have dtype int32, got float32"):
        model(x, x)
    with pytest.raises(TypeError, match="missing input 'b'"):
        model(x)
    with pytest.raises(TypeError, match="takes 2 inputs"):
        model(x, n, n)
    with pytest.raises(TypeError, match=r"unknown input\(s\) \['c'\]"):
        model(x, b=n, c=n)
    # what converts safely is converted; strided views are made contiguous
    squares, doubled = model(np.full((3, 2), 3.0).T, b=n)
    np.testing.assert_array_equal(squares, np.full((2, 3), 9.0, "float32"))
    np.testing.assert_array_equal(doubled, 2 * n)
    assert doubled.dtype == np.int32


def test_an_input_passed_again_is_read_afresh():
    """The runtime keeps the address of an array passed again (a step's weights): the same
    array changed in place, a new array, the same array reshaped in place, and an array
    freed and replaced all give the values of that call."""
    a, b = ir.var("a", shape=(2, 3)), ir.var("b", shape=(2, 3))
    model = aot_compile(_module([a, b], ir.op.add(a, b)))
    x, w = np.ones((2, 3), "float32"), np.full((2, 3), 2.0, "float32")
    np.testing.assert_array_equal(model(x, w), np.full((2, 3), 3.0))
    w[...] = 5.0
    np.testing.assert_array_equal(model(x, w), np.full((2, 3), 6.0))
    np.testing.assert_array_equal(model(x, w + 1), np.full((2, 3), 7.0))
    w.shape = (3, 2)
    with pytest.raises(ValueError, match=r"input 'b' must have shape \[2, 3\], got \[3, 2\]"):
        model(x, w)
    for value in range(3):  # fresh arrays, possibly at a freed array's address
        np.testing.assert_array_equal(model(x, np.full((2, 3), value, "float32")),
                                      np.full((2, 3), value + 1.0))


def test_weights_and_outputs_start_on_a_cache_line_and_large_ones_on_a_page():
    """(numpy aligns to 16 bytes only; a vector load across two cache lines costs two; a
    buffer's offset within its page decides whether loads alias earlier stores)"""
    x = ir.var("x", shape=(32, 64))
    w = ir.const(RNG.standard_normal((64, 64)).astype("float32"))
    module = _module([x], ir.op.nn.relu(ir.op.nn.dense(x, w)))
    model = aot_compile(module)
    assert [p.nbytes >= aot_runtime.PAGE for p in model._params] == [True]
    assert [p.ctypes.data % aot_runtime.PAGE for p in model._params] == [0]
    data = RNG.standard_normal((32, 64)).astype("float32")
    for _ in range(4):  # numpy's own allocations fall at every 16-byte offset
        out = model(data)
        assert out.nbytes >= aot_runtime.PAGE and out.ctypes.data % aot_runtime.PAGE == 0
    np.testing.assert_allclose(out, ir.evaluate(module, data), rtol=1e-4, atol=1e-4)
