"""ir.build on the graph executor: results equal the interpreter's, tasks and their keys,
schedules from the caller, the memory plan, and an exported model that runs where only
numpy can be imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import ir
from ir.backend import GraphBuildError, build, extract_tasks
from schedule import make_schedule

from .blocks import mobilenet_inverted_residual, resnet_basic_block, transformer_layer

RNG = np.random.default_rng(11)


def _input(module: ir.Module) -> np.ndarray:
    shape = module["main"].params[0].checked_type.shape
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("make", [resnet_basic_block, mobilenet_inverted_residual,
                                  transformer_layer])
def test_built_model_equals_the_interpreter(make):
    module = make()
    model = build(module)
    x = _input(module)
    np.testing.assert_allclose(model(x), ir.evaluate(module, x), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(model(x=x), ir.evaluate(module, x), rtol=1e-4, atol=1e-5)
    assert model.memory.bytes_planned <= model.memory.bytes_unshared
    if make is not resnet_basic_block:  # (that one folds into two kernels: nothing to share)
        assert model.memory.bytes_planned < model.memory.bytes_unshared


def test_tasks_share_keys_and_count_occurrences():
    x = ir.var("x", shape=(2, 16))
    rng = np.random.default_rng(0)
    y = x
    for _ in range(3):  # three equal dense + bias + relu layers with different weights
        w = ir.const(rng.standard_normal((16, 16)).astype("float32"))
        b = ir.const(rng.standard_normal(16).astype("float32"))
        y = ir.op.nn.relu(ir.op.nn.bias_add(ir.op.nn.dense(y, w), b, axis=-1))
    module = ir.infer_type(ir.Module({"main": ir.Function([x], y)}))
    tasks = extract_tasks(module)
    assert len(tasks) == 1 and tasks[0].weight == 3
    assert tasks[0].ops == ["nn.dense", "nn.bias_add", "nn.relu"]
    assert tasks[0].flops == pytest.approx(2 * 16 * 16 * 2 + 2 * 2 * 16)
    # the same layer in another model has the same key
    x2 = ir.var("input", shape=(2, 16))
    w = ir.const(np.ones((16, 16), "float32"))
    other = ir.op.nn.relu(ir.op.nn.bias_add(ir.op.nn.dense(x2, w),
                                            ir.const(np.zeros(16, "float32")), axis=-1))
    other_tasks = extract_tasks(ir.infer_type(ir.Module({"main": ir.Function([x2], other)})))
    assert other_tasks[0].workload.key == tasks[0].workload.key


def test_schedules_from_the_caller_are_used_and_bad_ones_fall_back():
    module = resnet_basic_block()
    tasks = extract_tasks(module)
    conv = next(t for t in tasks if t.ops[0] == "nn.conv2d_nchwc")
    schedule, args = make_schedule(conv.workload)
    stage = schedule[args[-1]]
    outer, _ = stage.split(stage.op.axis[1], factor=4)
    stage.parallel(outer)
    good = {conv.workload.key: schedule.steps}
    model = build(module, schedules=good)
    report = {r.key: r for r in model.tasks}
    assert report[conv.workload.key].tuned and not report[conv.workload.key].note
    x = _input(module)
    np.testing.assert_allclose(model(x), ir.evaluate(module, x), rtol=1e-4, atol=1e-5)
    assert 0 < model.tuned_share() < 1
    bad = build(module, schedules=lambda wl: [["split", "nonexistent", 0, [2]]])
    assert all(not r.tuned for r in bad.tasks)
    assert any("do not apply" in r.note for r in bad.tasks)
    np.testing.assert_allclose(bad(x), ir.evaluate(module, x), rtol=1e-4, atol=1e-5)
    # a tuned best may be no steps at all (the plain program measured fastest): still a hit,
    # built as it is, not replaced by the default schedule
    def default(wl):
        assert wl.key != conv.workload.key, "the default schedule replaced a tuned task's"

    plain = build(module, schedules={conv.workload.key: []}, default_schedule=default)
    assert {r.key: r.tuned for r in plain.tasks}[conv.workload.key]


def test_tuple_outputs_and_inputs_by_name():
    a, b = ir.var("a", shape=(3, 4)), ir.var("b", shape=(3, 4))
    out = ir.Tuple([ir.op.add(a, b), ir.Tuple([ir.op.nn.relu(a), b])])
    model = build(ir.infer_type(ir.Module({"main": ir.Function([a, b], out)})))
    x, y = RNG.standard_normal((2, 3, 4)).astype("float32")
    s, (r, same) = model(b=y, a=x)
    np.testing.assert_allclose(s, x + y, rtol=1e-6)
    np.testing.assert_array_equal(r, np.maximum(x, 0))
    np.testing.assert_array_equal(same, y)
    with pytest.raises(TypeError, match="missing input 'b'"):
        model(x)
    with pytest.raises(ValueError, match="must have shape"):
        model(x[:2], y)


def test_control_flow_is_refused_with_a_pointer_to_the_vm():
    x = ir.var("x", shape=(3,))
    body = ir.If(ir.op.greater(ir.op.sum(x), ir.const(np.float32(0))), x, ir.op.negative(x))
    with pytest.raises(GraphBuildError, match="VM"):
        build(ir.infer_type(ir.Module({"main": ir.Function([x], body)})))


BLOCK_OTHERS = """
import builtins, sys
real_import = builtins.__import__
def guarded(name, *args, **kwargs):
    if name.split(".")[0] in {"ir", "schedule", "tuner", "search", "workers", "db", "api",
                              "cost_model", "sqlalchemy", "ray", "xgboost", "onnx"}:
        raise ImportError(f"blocked: {name}")
    return real_import(name, *args, **kwargs)
builtins.__import__ = guarded
"""


def test_exported_model_runs_with_numpy_alone(tmp_path):
    module = transformer_layer()
    model = build(module)
    path = model.export(tmp_path / "layer.tt")
    x = _input(module)
    np.save(tmp_path / "x.npy", x)
    with zipfile.ZipFile(path) as z:  # the runtime travels inside the artefact
        z.extract("runtime.py", tmp_path)
    script = BLOCK_OTHERS + textwrap.dedent(f"""
        import numpy as np
        import runtime
        model = runtime.load({str(path)!r})
        np.save("y.npy", model(np.load("x.npy")))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path, timeout=120,
                   env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ir.evaluate(module, x), rtol=1e-4,
                               atol=1e-5)


def test_loading_something_that_is_not_an_artefact_is_a_clear_error(tmp_path):
    garbage = tmp_path / "garbage.tt"
    garbage.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="not a model artefact"):
        ir.runtime.load(garbage)
    other = tmp_path / "other.tt"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("graph.json", "{}")
    with pytest.raises(ValueError, match="not a model artefact"):
        ir.runtime.load(other)
    result = subprocess.run([sys.executable, "-m", "tuner", "run", str(garbage), "--inputs",
                             str(garbage)], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "cannot load" in result.stderr
    assert "Traceback" not in result.stderr


def test_build_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match="takes a Module"):
        build(ir.var("x", shape=(2,)))


def test_every_buffer_a_kernel_is_given_starts_on_a_cache_line_and_large_ones_on_a_page():
    """Weights, inputs and the planned temporaries: a 64-byte vector load across two cache
    lines costs two (numpy aligns to 16 bytes only), and a large buffer's offset within its
    page decides whether its loads alias earlier stores (laid out as the tuner measured)."""
    from ir.backend.runtime import ALIGNMENT, PAGE

    model = build(transformer_layer())
    entries = model.runtime.entries
    assert len(entries) > 5
    assert all(e.ctypes.data % ALIGNMENT == 0 for e in entries if e.nbytes)
    large = [e for e in entries if e.nbytes >= PAGE]
    assert large and all(e.ctypes.data % PAGE == 0 for e in large)

    x = ir.var("x", shape=(32, 64))
    w = ir.const(RNG.standard_normal((64, 64)).astype("float32"))
    module = ir.Module.from_expr(ir.Function([x], ir.op.nn.softmax(ir.op.nn.dense(x, w))))
    storages = build(module).runtime._storages  # the dense output: a planned temporary
    assert any(s.nbytes >= PAGE for s in storages)
    assert all(s.ctypes.data % PAGE == 0 for s in storages if s.nbytes >= PAGE)
