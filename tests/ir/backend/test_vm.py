"""The virtual machine (``ir.backend.vm``): programs with control flow — the generative RNN,
recursion over lists, closures, references, nested matches — give the interpreter's and
numpy's results with their fused operators run by compiled kernels; static models give the
graph executor's; dynamic shapes fall back to numpy, counted; bad arguments are refused
before any kernel runs."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.backend import VirtualMachine, VMClosure, VMCompileError, VMError, extract_tasks, vm
from ir.interpreter import ADTValue
from schedule import make_schedule

from ..test_rnn_example import STEPS, inputs, numpy_generate, rnn_module, to_list
from .blocks import mobilenet_inverted_residual, resnet_basic_block, transformer_layer

RNG = np.random.default_rng(7)
F32 = "float32"


def assert_close(got: object, want: object) -> None:
    """Values of the VM and the interpreter agree: same structure, arrays within float
    tolerance (kernels and numpy round differently), same dtypes; functions are closures
    on both sides."""
    stack = [(got, want)]
    while stack:
        a, b = stack.pop()
        if isinstance(b, ADTValue):
            assert isinstance(a, ADTValue) and a.name == b.name
            stack.extend(zip(a.fields, b.fields, strict=True))
        elif isinstance(b, tuple):
            assert type(a) is tuple and len(a) == len(b)
            stack.extend(zip(a, b, strict=True))
        elif isinstance(b, ir.Closure):
            assert isinstance(a, VMClosure)  # (called and compared by the tests)
        else:
            assert isinstance(a, np.ndarray) and a.dtype == np.asarray(b).dtype
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def run_both(module: ir.Module, *args: object) -> tuple[object, VirtualMachine]:
    """The VM's result (checked against the interpreter's) and the VM."""
    machine = VirtualMachine(vm.compile(module))
    got = machine(*args)
    assert_close(got, ir.evaluate(module, *args))
    return got, machine


def make_list(module: ir.Module, items: list) -> ADTValue:
    value = ADTValue(module.get_constructor("Nil"), ())
    for item in reversed(items):
        value = ADTValue(module.get_constructor("Cons"), (item, value))
    return value


# ----------------------------------------------------------------------- the generative RNN


@pytest.fixture(scope="module")
def rnn() -> vm.VMExecutable:
    return vm.compile(rnn_module())


def test_generative_rnn_matches_the_interpreter_and_a_numpy_loop(rnn):
    machine = VirtualMachine(rnn)
    args = inputs(3)
    result = machine(**args)
    steps = to_list(result)
    assert len(steps) == STEPS
    for got, want in zip(steps, numpy_generate(*args.values()), strict=True):
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert_close(result, ir.evaluate(rnn_module(), **args))
    # @cell (a static graph of three fused functions) ran as one native call each step; the
    # loop test and the decrement (0-d tensors) on numpy; the last test ends the recursion
    assert machine.stats.native_calls == STEPS and machine.stats.kernel_calls == 0
    assert machine.stats.scalar_calls == 2 * STEPS + 1
    assert machine.stats.fallback_calls == 0
    assert machine.stats.instructions > machine.stats.kernel_calls
    kernels = [t for t in rnn.tasks if t.key is not None]
    assert len(kernels) == 3
    assert {t.note for t in rnn.tasks if t.key is None} == {"numpy: 0-d tensors only"}
    # positional arguments, and n = 0: the empty list
    assert machine(*{**args, "n": 0}.values()) == ("Nil", ())


def test_rnn_bytecode_and_task_keys(rnn):
    text = rnn.disassemble()
    for piece in ("@generate(%n: r0", "invoke_packed", "alloc_adt Cons#1", "invoke @cell",
                  "if r", "tail_invoke @generate", "kernel "):
        assert piece in text
    # the cell's kernels are tasks under the keys extraction reports (extraction also lists
    # the two 0-d functions, which the graph executor and AOT compile: the VM does not)
    task_keys = {t.workload.key for t in extract_tasks(rnn_module())}
    kernel_keys = {t.key for t in rnn.tasks if t.key is not None}
    assert kernel_keys < task_keys and len(task_keys - kernel_keys) == 2


def test_tuned_schedules_apply_and_bad_ones_fall_back():
    module = rnn_module()
    task = next(t for t in extract_tasks(module) if t.ops == ["nn.dense"])
    s, tensors = make_schedule(task.workload)
    stage = s[tensors[-1]]
    stage.split(stage.op.axis[1], factor=4)
    tuned = vm.compile(module, schedules={task.workload.key: s.steps})
    assert {t.key: t.tuned for t in tuned.tasks}[task.workload.key]
    args = inputs(4)
    for got, want in zip(to_list(VirtualMachine(tuned)(**args)),
                         numpy_generate(*args.values()), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    bad = vm.compile(module, schedules=lambda wl: [["split", "nonexistent", 0, [2]]])
    assert all(not t.tuned and "do not apply" in t.note for t in bad.tasks if t.key)
    assert len(to_list(VirtualMachine(bad)(**args))) == STEPS


def test_a_static_global_function_runs_as_one_native_call():
    """@step takes a tensor and a nested tuple and returns a nested tuple: compiled ahead
    of time, invoked (in a branch, not as a tail call) as one native call; invoking it from
    Python runs its bytecode; both give the interpreter's values."""
    module = ir.Module()
    x = ir.var("x", shape=(4, 8))
    pair = ir.var("pair", ir.TupleType((ir.TensorType((4, 8), F32),
                                        ir.TupleType((ir.TensorType((8,), F32),)))))
    a, b = ir.TupleGetItem(pair, 0), ir.TupleGetItem(ir.TupleGetItem(pair, 1), 0)
    step = module.add("step", ir.Function([x, pair], ir.Tuple([
        ir.op.nn.relu(ir.op.add(x, a)), ir.Tuple([ir.op.multiply(b, b), x])])))
    flag, y = ir.var("flag", shape=(), dtype="bool"), ir.var("y", shape=(4, 8))
    zb = ir.var("zb", shape=(8,))
    module.add("main", ir.Function([flag, y, zb], ir.If(
        flag, ir.Tuple([ir.Call(step, [y, ir.Tuple([y, ir.Tuple([zb])])]), zb]),
        ir.Tuple([ir.Tuple([y, ir.Tuple([zb, y])]), zb]))))
    module = ir.infer_type(module)
    args = (np.array(True), RNG.standard_normal((4, 8)).astype(F32),
            RNG.standard_normal(8).astype(F32))
    got, machine = run_both(module, *args)
    assert machine.stats.native_calls == 1 and machine.stats.kernel_calls == 0
    assert len(machine.executable.natives) == 1
    direct = machine.invoke("step", args[1], (args[1], (args[2],)))
    assert_close(direct, got[0])
    assert machine.stats.kernel_calls > 0  # the bytecode's kernels this time

    # the native call keeps the pointers of tensors passed again: the same array changed
    # in place, and new arrays, give that call's values
    y, z = args[1], args[2]
    for change in (lambda: y.__setitem__(..., 2.0), lambda: z.__setitem__(..., -1.0)):
        change()
        assert_close(machine(args[0], y, z), ir.evaluate(module, args[0], y, z))
    fresh = (args[0], y + 1, z * 3)
    assert_close(machine(*fresh), ir.evaluate(module, *fresh))


# ----------------------------------------------------------------- recursion over lists


def test_prelude_map_foldl_length_nth_with_a_capturing_closure():
    mod = ir.prelude()
    list_t = ir.TypeCall(mod.get_global_type_var("List"), (ir.TensorType((3,), F32),))
    lst, scale = ir.var("l", list_t), ir.var("scale", shape=(3,))
    x, acc, y = ir.var("x", shape=(3,)), ir.var("acc", shape=(3,)), ir.var("y", shape=(3,))
    scaled = ir.Call(mod.get_global_var("map"),
                     [ir.Function([x], ir.op.multiply(x, scale)), lst])  # captures %scale
    total = ir.Call(mod.get_global_var("foldl"), [
        ir.Function([acc, y], ir.op.add(acc, y)), ir.const(np.zeros(3, F32)), scaled])
    mod.add("main", ir.Function([lst, scale], ir.Tuple([
        total, ir.Call(mod.get_global_var("length"), [scaled]),
        ir.Call(mod.get_global_var("nth"), [scaled, ir.const(2)])])))
    items = [RNG.standard_normal(3).astype(F32) for _ in range(6)]
    factor = np.array([1, 2, 3], F32)
    (total_v, length_v, third), machine = run_both(mod, make_list(mod, items), factor)
    np.testing.assert_allclose(total_v, sum(items) * factor, rtol=1e-5)
    assert length_v == 6 and length_v.dtype == np.int32
    np.testing.assert_allclose(third, items[2] * factor)
    assert machine.stats.fallback_calls == 0 and machine.stats.kernel_calls > 0


def test_deep_non_tail_recursion_needs_no_python_recursion():
    mod = ir.prelude()
    list_t = ir.TypeCall(mod.get_global_type_var("List"), (ir.TensorType((), "int32"),))
    lst = ir.var("l", list_t)
    mod.add("main", ir.Function([lst], ir.Call(mod.get_global_var("length"), [lst])))
    n = 5000  # @length is not tail recursive: 5000 frames deep
    value = make_list(mod, [np.array(i, np.int32) for i in range(n)])
    machine = VirtualMachine(vm.compile(mod))
    assert machine(value) == n
    assert machine.invoke("nth", value, np.int32(n - 1)) == n - 1  # a tail call: one frame


# ------------------------------------------------------------------- closures and refs


def test_closures_returned_to_python_and_higher_order_functions():
    x, y = ir.var("x", shape=(3,)), ir.var("y", shape=(3,))
    f, g, z = ir.var("f"), ir.var("g"), ir.var("z", shape=(3,))
    make_adder = ir.Function([x], ir.Function([y], ir.op.add(x, y)))
    twice = ir.Function([f, z], ir.Call(f, [ir.Call(f, [z])]))
    mod = ir.Module()
    adder_gv, twice_gv = mod.add("make_adder", make_adder), mod.add("twice", twice)
    mod.add("main", ir.Function([x, z], ir.Let(g, ir.Call(adder_gv, [x]), ir.Tuple([
        ir.Call(twice_gv, [g, z]), g]))))
    ten, base = np.full(3, 10, F32), np.arange(3, dtype=F32)
    (twice_v, add_ten), _ = run_both(mod, ten, base)
    np.testing.assert_array_equal(twice_v, base + 20)
    assert isinstance(add_ten, VMClosure)
    np.testing.assert_array_equal(add_ten(base), base + 10)
    np.testing.assert_array_equal(add_ten(y=base), base + 10)
    with pytest.raises(VMError, match="takes 1 arguments"):
        add_ten(base, base)


def test_let_bound_recursive_closure_with_references():
    n, x = ir.var("n", shape=(), dtype="int32"), ir.var("x", shape=(3,))
    r, loop, i = ir.var("r"), ir.var("loop"), ir.var("i", shape=(), dtype="int32")
    y, k = ir.var("y", shape=(3,)), ir.var("k")
    step = ir.Function([i], ir.If(
        ir.op.greater(i, ir.const(0)),
        ir.Let(ir.var("_"), ir.RefWrite(r, ir.op.add(ir.RefRead(r), x)),
               ir.Call(loop, [ir.op.subtract(i, ir.const(1))])),
        ir.Tuple([])))
    body = ir.Let(r, ir.RefCreate(x), ir.Let(loop, step, ir.Let(
        ir.var("_1"), ir.Call(loop, [n]),
        ir.Let(k, ir.Function([y], ir.op.multiply(y, ir.RefRead(r))),
               ir.Tuple([ir.RefRead(r), k])))))
    mod = ir.Module({"main": ir.Function([n, x], body)})
    exe = vm.compile(mod)
    assert "tail_invoke_closure" in exe.disassemble()  # the loop runs in one frame
    base = np.arange(3, dtype=F32)
    machine = VirtualMachine(exe)
    total, scale = machine(np.int32(1000), base)
    np.testing.assert_allclose(total, base * 1001)
    np.testing.assert_allclose(scale(np.ones(3, F32)), base * 1001)
    want_total, want_scale = ir.evaluate(mod, np.int32(4), base)
    got_total, got_scale = machine(np.int32(4), base)
    np.testing.assert_array_equal(got_total, want_total)
    np.testing.assert_array_equal(got_scale(base), want_scale(base))


# --------------------------------------------------------------------------------- match


NESTED = """#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

type Option[A] {
  Some(A),
  None,
}

def @pairs(%l: List[Tensor[(2), float32]]) -> Tensor[(2), float32] {
  match (%l) {
    Cons(%a, Cons(%b, %rest)) => add(multiply(%a, %b), @pairs(%rest)),
    Cons(%a, Nil) => %a,
    Nil => zeros(shape=[2], dtype="float32"),
  }
}

def @first(%o: Option[(Tensor[(2), float32], Tensor[(2), float32])]) -> Tensor[(2), float32] {
  let %v = match (%o) {
    Some((%x, _)) => %x,
    None => ones(shape=[2], dtype="float32"),
  };
  if (greater(sum(%v), 0f)) { negative(%v) } else { %v }
}

def @main(%l: List[Tensor[(2), float32]],
          %o: Option[(Tensor[(2), float32], Tensor[(2), float32])]) {
  (@pairs(%l), @first(%o))
}
"""


def test_nested_constructor_tuple_var_and_wildcard_patterns():
    mod = ir.parse(NESTED)
    some, none = mod.get_constructor("Some"), mod.get_constructor("None")
    machine = VirtualMachine(vm.compile(mod))
    for count in range(5):
        items = [RNG.standard_normal(2).astype(F32) for _ in range(count)]
        option = (ADTValue(some, ((items[0], items[0] * 0),)) if items
                  else ADTValue(none, ()))
        got = machine(make_list(mod, items), option)
        assert_close(got, ir.evaluate(mod, make_list(mod, items), option))
        pairs = sum((items[i] * items[i + 1] for i in range(0, count - 1, 2)), np.zeros(2, F32))
        if count % 2:
            pairs = pairs + items[-1]
        np.testing.assert_allclose(got[0], pairs, rtol=1e-5)
    assert machine.stats.fallback_calls == 0  # zeros and ones compile like the rest


def test_a_match_without_a_matching_clause_fails_clearly():
    mod = ir.prelude()
    list_t = ir.TypeCall(mod.get_global_type_var("List"), (ir.TensorType((), F32),))
    lst = ir.var("l", list_t)
    mod.add("main", ir.Function([lst], ir.Call(mod.get_global_var("hd"), [lst])))
    machine = VirtualMachine(vm.compile(mod))
    assert machine(make_list(mod, [np.float32(5) * np.ones((), F32)])) == 5
    with pytest.raises(VMError, match=r"no clause matches .* \(in @hd, instruction"):
        machine(make_list(mod, []))


def test_constructors_used_as_functions():
    mod = ir.prelude()
    list_t = ir.TypeCall(mod.get_global_type_var("List"), (ir.TensorType((2,), F32),))
    lst = ir.var("l", list_t)
    mod.add("main", ir.Function([lst], ir.Call(mod.get_global_var("map"), [
        mod.get_constructor("Some"), lst])))
    items = [RNG.standard_normal(2).astype(F32) for _ in range(3)]
    got, _ = run_both(mod, make_list(mod, items))
    assert [v.name for v in to_list(got)] == ["Some"] * 3


# ----------------------------------------------------------------- static dataflow models


@pytest.mark.parametrize("make", [resnet_basic_block, mobilenet_inverted_residual,
                                  transformer_layer])
def test_static_models_equal_the_graph_executor(make):
    module = make()
    exe = vm.compile(module)
    machine = VirtualMachine(exe)
    x = RNG.standard_normal(module["main"].params[0].checked_type.shape).astype(F32)
    got = machine(x)
    np.testing.assert_allclose(got, ir.build(module)(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, ir.evaluate(module, x), rtol=1e-4, atol=1e-5)
    assert machine.stats.fallback_calls == 0
    assert machine.stats.kernel_calls == len(exe.program.packed)  # one call each


def test_a_fused_function_with_a_tuple_result_runs_as_one_kernel():
    a, b = ir.var("a", shape=(2, 3)), ir.var("b", shape=(2, 3))
    p0, p1 = ir.var("p0", ir.TensorType((2, 3), F32)), ir.var("p1", ir.TensorType((2, 3), F32))
    fused = ir.Function([p0, p1], ir.Tuple([ir.op.add(p0, p1), ir.op.multiply(p0, p1)]),
                        attrs={"Primitive": 1})
    mod = ir.Module({"main": ir.Function([a, b], ir.Call(fused, [a, b]))})
    x, y = RNG.standard_normal((2, 2, 3)).astype(F32)
    (total, product), machine = run_both(mod, x, y)
    np.testing.assert_allclose(total, x + y)
    np.testing.assert_allclose(product, x * y)
    assert (machine.stats.kernel_calls, machine.stats.fallback_calls) == (1, 0)


# ----------------------------------------------------------------------- dynamic shapes


def test_dynamic_shapes_run_jit_kernels_per_shape_and_are_counted():
    x, w = ir.var("x", shape=(ir.Any, 3)), ir.var("w", shape=(4, 3))
    mod = ir.Module({"main": ir.Function([x, w], ir.op.nn.relu(
        ir.op.nn.dense(ir.op.add(x, x), w)))})
    exe = vm.compile(mod)
    assert exe.library is None and all(t.key is None and "numpy" in t.note for t in exe.tasks)
    machine = VirtualMachine(exe)
    weights = RNG.standard_normal((4, 3)).astype(F32)
    before = ir.jit.stats()
    for batch in (1, 5, 5):
        data = RNG.standard_normal((batch, 3)).astype(F32)
        got = machine(data, weights)
        assert got.shape == (batch, 4)
        np.testing.assert_allclose(got, np.maximum((data + data) @ weights.T, 0), rtol=1e-5)
    assert machine.stats.fallback_calls == 6 and machine.stats.kernel_calls == 0
    after = ir.jit.stats()
    # each operator call compiled for each new batch size, then served from the cache
    assert after["fallbacks"] == before["fallbacks"]
    assert after["compiled"] + after["cache_hits"] - before["compiled"] - \
        before["cache_hits"] == 9


# ------------------------------------------------------------------------ bad arguments


def test_bad_arguments_are_refused_with_a_clear_error(rnn):
    machine = VirtualMachine(rnn)
    args = inputs()
    with pytest.raises(VMError, match="missing argument %w_ho"):
        machine(*list(args.values())[:-1])
    with pytest.raises(VMError, match="takes 7 arguments"):
        machine(*args.values(), args["b"])
    with pytest.raises(VMError, match=r"%hidden is a float32 tensor of shape \(1, 3\)"):
        machine(**{**args, "hidden": np.zeros((1, 3), F32)})
    with pytest.raises(VMError, match="%w_ih is a float64 tensor"):
        machine(**{**args, "w_ih": args["w_ih"].astype(np.float64)})
    with pytest.raises(VMError, match="unexpected argument"):
        machine(**args, extra=1)
    with pytest.raises(VMError, match="no global function @nothing"):
        machine.invoke("nothing")
    weights = [args[k] for k in ("w_ih", "w_hh", "b", "w_ho")]
    with pytest.raises(VMError, match="%params must be a tuple of 4 fields, got 3"):
        machine.invoke("generate", 2, args["input"], args["hidden"], weights[:3])
    assert machine.stats.kernel_calls == 0
    # another global, a Python int and a list for the tuple parameter
    two = machine.invoke("generate", 2, args["input"], args["hidden"], weights)
    assert len(to_list(two)) == 2
    # a read-only, non-contiguous argument is fine (copied once)
    hidden = np.asfortranarray(RNG.standard_normal((1, 16)).astype(F32))
    hidden.flags.writeable = False
    got = to_list(machine(**{**args, "hidden": hidden}))
    want = numpy_generate(*{**args, "hidden": hidden}.values())
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-5, atol=1e-6)


def test_tensors_inside_adt_arguments_are_checked_before_kernels_run():
    mod = ir.parse(NESTED)
    machine = VirtualMachine(vm.compile(mod))
    none = ADTValue(mod.get_constructor("None"), ())
    bad = make_list(mod, [np.ones(2, F32), np.ones(3, F32)])
    with pytest.raises(VMError, match=r"%l\.Cons\[1\]\.Cons\[0\] is a float32 tensor"):
        machine(bad, none)
    with pytest.raises(VMError, match="None is not a constructor of List"):
        machine(none, none)
    assert machine.stats.instructions == 0


def test_unsupported_programs_and_missing_main():
    with pytest.raises(VMError, match="no @main"):
        vm.compile(ir.Module({"f": ir.Function([], ir.const(1.0))}))
    x, p0 = ir.var("x", shape=(3,)), ir.var("p0", ir.TensorType((3,), F32))
    fused = ir.Function([p0], ir.op.nn.relu(p0), attrs={"Primitive": 1})
    with pytest.raises(VMCompileError, match="fused .* used as a value"):
        vm.compile(ir.Module({"main": ir.Function([x], ir.Tuple([x, fused]))}))


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "int64"])
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "less",
                                  "greater_equal", "not_equal"])
def test_integer_scalar_functions_wrap_as_numpy_does(name, dtype):
    """0-d integer functions of one operator run on Python integers: the results equal
    numpy's, overflow wrapping included, with the parameters used in either order."""
    a, b = ir.var("a", shape=(), dtype=dtype), ir.var("b", shape=(), dtype=dtype)
    op = getattr(ir.op, name)
    module = ir.infer_type(ir.Module({"main": ir.Function([a, b], ir.Tuple([
        op(a, b), op(b, a)]))}))
    machine = VirtualMachine(vm.compile(module))
    info = np.iinfo(dtype)
    values = [info.min, info.min + 1, -1 if info.min else 0, 0, 1, 7, info.max - 1, info.max]
    for x in values:
        for y in values[::3]:
            args = (np.array(x, dtype), np.array(y, dtype))
            got = machine(*args)
            want = ir.evaluate(module, *args)
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and g.shape == () and g == w, (x, y, g, w)
    assert machine.stats.scalar_calls > 0 and machine.stats.kernel_calls == 0


def test_a_kernels_large_outputs_start_on_a_cache_line():
    """Allocated on every call: aligned from ``schedule.buffers.SMALL_BYTES`` on (a vector
    load across two cache lines costs two), numpy's allocation below."""
    from schedule import ALIGNMENT

    x, flag = ir.var("x", shape=(32, 64)), ir.var("flag", shape=(), dtype="bool")
    module = ir.infer_type(ir.Module({"main": ir.Function([flag, x], ir.If(
        flag, ir.op.nn.relu(ir.op.multiply(x, x)), ir.op.add(x, x)))}))
    data = RNG.standard_normal((32, 64)).astype(F32)
    for branch in (True, False) * 4:  # numpy's own allocations fall at every 16-byte offset
        got, machine = run_both(module, np.array(branch), data)
        assert got.ctypes.data % ALIGNMENT == 0
    assert machine.stats.kernel_calls > 0
