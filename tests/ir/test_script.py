"""The @ir.script Python frontend: scripted functions equal their hand-built IR, run in the
interpreter, call each other (recursion included); unsupported Python names its line."""

# The dtype strings in ir.Tensor[...] annotations are data for @ir.script, not forward
# references to types, which is what ruff takes strings in annotations for.
# ruff: noqa: F821, UP037

from __future__ import annotations

import inspect

import numpy as np
import pytest

import ir

F32 = "float32"


@ir.script
def mlp(x: ir.Tensor[(1, 10), "float32"], w: ir.Tensor[(20, 10), "float32"],
        b: ir.Tensor[(20,), "float32"]):
    y = ir.op.nn.dense(x, w, units=20)
    z = ir.op.nn.relu(y + b)
    return z, y * 2.0


def test_scripted_function_equals_hand_built_ir() -> None:
    x, w, b = ir.var("x", shape=(1, 10)), ir.var("w", shape=(20, 10)), ir.var("b", shape=(20,))
    y, z = ir.var("y"), ir.var("z")
    expected = ir.Function([x, w, b], ir.Let(
        y, ir.op.nn.dense(x, w, units=20),
        ir.Let(z, ir.op.nn.relu(ir.op.add(y, b)),
               ir.Tuple([z, ir.op.multiply(y, ir.const(2.0))]))))
    ir.assert_structural_equal(mlp.function, expected)
    assert ir.structural_equal(mlp.function, expected)
    # spans point at the Python source
    line = inspect.getsourcelines(mlp.py_func)[1]
    assert mlp.function.body.value.span.line == line + 3


def test_scripted_function_runs_in_the_interpreter() -> None:
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(F32) for s in ((1, 10), (20, 10), (20,)))
    z, y2 = mlp(x, w, b)
    np.testing.assert_allclose(z, np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y2, 2 * (x @ w.T), rtol=1e-5, atol=1e-6)


@ir.script
def fact(n: ir.Tensor[(), "int32"]):
    if n < 1:
        return 1
    else:
        return n * fact(n - 1)


@ir.script
def twice_fact(n: ir.Tensor[(), "int32"]):
    """Calls another scripted function."""
    a = fact(n)
    return a + a


def test_recursion_and_calls_of_other_scripted_functions() -> None:
    n = ir.var("n", shape=(), dtype="int32")
    gv = ir.GlobalVar("fact")
    expected = ir.Function([n], ir.If(
        ir.op.less(n, ir.const(1)), ir.const(1),
        ir.op.multiply(n, ir.Call(gv, [ir.op.subtract(n, ir.const(1))]))))
    ir.assert_structural_equal(fact.function, expected)
    assert int(fact(np.int32(5))) == 120
    mod = twice_fact.module
    assert sorted(gv.name for gv in mod.functions) == ["fact", "main", "twice_fact"]
    assert int(ir.evaluate(mod, np.int32(4))) == 48


@ir.script
def is_even(n: ir.Tensor[(), "int32"]):
    if n == 0:
        return True
    else:
        return is_odd(n - 1)


@ir.script
def is_odd(n: ir.Tensor[(), "int32"]):
    if n == 0:
        return False
    else:
        return is_even(n - 1)


def test_mutual_recursion() -> None:
    assert bool(is_even(np.int32(10))) and not bool(is_even(np.int32(7)))
    assert sorted(gv.name for gv in is_odd.module.functions) == ["is_even", "is_odd", "main"]


@ir.script
def branches(x: ir.Tensor[(3,), "float32"]):
    if ir.op.sum(x) > 0.0:
        y = x
        s = 1.0
    else:
        y = -x
        s = -1.0
    pair = (y, s)
    a, b = pair
    return a * b, pair[1]


def test_if_assigning_names_tuples_and_unpacking() -> None:
    v = np.array([1, -2, 4], F32)
    out, sign = branches(v)
    np.testing.assert_array_equal(out, v)
    assert float(sign) == 1
    out, sign = branches(-v)
    np.testing.assert_array_equal(out, -v)
    assert float(sign) == -1


def _line_of(text: str, fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(text)


def bad_while(x: ir.Tensor[(1,), "float32"]):
    while x:
        x = x + 1.0
    return x


def bad_lambda(x):
    f = lambda y: y  # noqa: E731
    return f(x)


def bad_comprehension(x):
    return [x for _ in range(3)]


def bad_attribute(x):
    return np.add(x, x)


def bad_kwonly(x, *, y):
    return x


def bad_name(x):
    return x + unknown_name


def bad_if(x):
    if x > 0.0:
        return x
    y = x
    return y


@pytest.mark.parametrize(("fn", "construct", "marker"), [
    (bad_while, "a while loop", "while x:"),
    (bad_lambda, "a lambda", "lambda y"),
    (bad_comprehension, "a list comprehension", "for _ in"),
    (bad_attribute, "np.add", "np.add"),
    (bad_kwonly, "keyword-only", "def bad_kwonly"),
    (bad_name, "unknown_name", "unknown_name"),
    (bad_if, "else branch", "if x > 0.0"),
])
def test_unsupported_python_names_the_line_and_construct(fn, construct, marker) -> None:
    with pytest.raises(ir.ScriptError) as info:
        ir.script(fn).function  # noqa: B018
    assert info.value.lineno == _line_of(marker, fn)
    msg = str(info.value)
    assert construct in msg and f"test_script.py:{info.value.lineno}:" in msg


def test_the_script_is_never_executed() -> None:
    calls = []

    def side_effect(x: ir.Tensor[(2,), "float32"]):
        calls.append(1)
        return x

    with pytest.raises(ir.ScriptError, match="an expression statement"):
        ir.script(side_effect).function  # noqa: B018
    assert calls == []


def test_tensor_annotation_helper() -> None:
    assert ir.Tensor[(1, "n"), "int8"] == ir.TensorType((1, ir.SymDim("n")), "int8")
