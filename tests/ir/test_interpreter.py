"""The reference interpreter (ir.evaluate): closures, references, recursion through
globals, ADTs and match, if, let chains and deep recursion, errors with positions."""

from __future__ import annotations

import numpy as np
import pytest

import ir

F32 = "float32"


def list_module() -> tuple[ir.Module, ir.Constructor, ir.Constructor]:
    """A module with ``type List[a] { Nil, Cons(a, List[a]) }`` and ``@length``."""
    lst, a = ir.GlobalTypeVar("List"), ir.TypeVar("a")
    nil = ir.Constructor("Nil", (), lst, 0)
    cons = ir.Constructor("Cons", (a, ir.TypeCall(lst, (a,))), lst, 1)
    mod = ir.Module(type_definitions={lst: ir.TypeData(lst, (a,), (nil, cons))})
    length = ir.GlobalVar("length")
    xs, t = ir.var("xs"), ir.var("t")
    mod.add(length, ir.Function([xs], ir.Match(xs, [
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternWildcard(), ir.PatternVar(t)]),
                  ir.op.add(ir.const(1), ir.Call(length, [t]))),
        ir.Clause(ir.PatternConstructor(nil), ir.const(0)),
    ])))
    return mod, nil, cons


def py_list(nil: ir.Constructor, cons: ir.Constructor, items: list) -> ir.ADTValue:
    value = ir.ADTValue(nil)
    for item in reversed(items):
        value = ir.ADTValue(cons, (np.asarray(item), value))
    return value


def test_operators_run_their_numpy_reference() -> None:
    x, w = ir.var("x", shape=(2, 3)), ir.var("w", shape=(4, 3))
    f = ir.Function([x, w], ir.op.nn.relu(ir.op.add(ir.op.nn.dense(x, w), ir.const(0.5))))
    a = np.random.default_rng(0).standard_normal((2, 3)).astype(F32)
    b = np.random.default_rng(1).standard_normal((4, 3)).astype(F32)
    out = ir.evaluate(f, a, b)
    np.testing.assert_allclose(out, np.maximum(a @ b.T + 0.5, 0), rtol=1e-6)
    # a module's @main, inputs by parameter name
    mod = ir.Module({"main": f})
    np.testing.assert_allclose(ir.evaluate(mod, w=b, x=a), out)


def test_closure_captures_a_tensor_and_is_callable_from_python() -> None:
    x, y = ir.var("x", shape=(3,)), ir.var("y", shape=(3,))
    make_adder = ir.Function([x], ir.Function([y], ir.op.add(x, y)))
    adder = ir.evaluate(make_adder, np.array([1, 2, 3], F32))
    assert isinstance(adder, ir.Closure)
    np.testing.assert_array_equal(adder(np.ones(3, F32)), [2, 3, 4])
    # inside a program: let %f = make_adder(c); %f(%z)
    z, f = ir.var("z", shape=(3,)), ir.var("f")
    prog = ir.Function([z], ir.Let(f, ir.Call(make_adder, [ir.const(np.full(3, 10, F32))]),
                                   ir.Call(f, [z])))
    np.testing.assert_array_equal(ir.evaluate(prog, np.arange(3, dtype=F32)), [10, 11, 12])


def test_references_create_read_write() -> None:
    r, u, x = ir.var("r"), ir.var("u"), ir.var("x", shape=())
    body = ir.Let(r, ir.RefCreate(x),
                  ir.Let(u, ir.RefWrite(r, ir.op.add(ir.RefRead(r), ir.const(1.0))),
                         ir.Let(u, ir.RefWrite(r, ir.op.multiply(ir.RefRead(r), ir.const(3.0))),
                                ir.Tuple([ir.RefRead(r), u]))))
    value, unit = ir.evaluate(ir.Function([x], body), np.float32(2))
    assert value == 9 and unit == ()
    ref = ir.evaluate(ir.Function([x], ir.RefCreate(x)), np.float32(4))
    assert isinstance(ref, ir.RefValue) and ref.value == 4


def factorial_module() -> ir.Module:
    n = ir.var("n", shape=(), dtype="int32")
    fact = ir.GlobalVar("fact")
    body = ir.If(ir.op.less(n, ir.const(1)), ir.const(1),
                 ir.op.multiply(n, ir.Call(fact, [ir.op.subtract(n, ir.const(1))])))
    m = ir.var("m", shape=(), dtype="int32")
    return ir.Module({fact: ir.Function([n], body), "main": ir.Function([m], ir.Call(fact, [m]))})


def test_recursion_through_globals_factorial() -> None:
    mod = factorial_module()
    for k in range(8):
        assert int(ir.evaluate(mod, np.int32(k))) == int(np.prod(np.arange(1, k + 1)))
    assert ir.evaluate(mod, 5).dtype == np.int32  # a Python int takes the annotation's dtype


def test_recursive_let_bound_function() -> None:
    n, loop, m = ir.var("n", shape=(), dtype="int32"), ir.var("loop"), ir.var("m", shape=(),
                                                                              dtype="int32")
    fn = ir.Function([n], ir.If(ir.op.equal(n, ir.const(0)), ir.const(0),
                                ir.op.add(ir.const(2), ir.Call(loop, [ir.op.subtract(
                                    n, ir.const(1))]))))
    prog = ir.Function([m], ir.Let(loop, fn, ir.Call(loop, [m])))
    assert int(ir.evaluate(prog, np.int32(50))) == 100


def test_list_length_2000_deep_and_adt_values() -> None:
    mod, nil, cons = list_module()
    xs = ir.var("xs")
    mod.add("main", ir.Function([xs], ir.Call(mod.get_global_var("length"), [xs])))
    assert int(ir.evaluate(mod, py_list(nil, cons, list(range(2000))))) == 2000
    assert int(ir.evaluate(mod, py_list(nil, cons, list(range(30000))))) == 30000
    # ADT values compare with (constructor name, fields)
    x = ir.var("x", shape=(2,))
    build = ir.Function([x], ir.Call(cons, [x, ir.Call(nil, [])]))
    out = ir.evaluate(build, np.array([1, 2], F32))
    assert isinstance(out, ir.ADTValue)
    assert out == ("Cons", (np.array([1, 2], F32), ("Nil", ())))
    assert out != ("Cons", (np.array([1, 3], F32), ("Nil", ())))
    name, (head, tail) = out
    assert name == "Cons" and tail.constructor == nil and out.constructor == cons
    # a 30,000-long list compares and prints without recursion
    long = py_list(nil, cons, list(range(30000)))
    assert long == py_list(nil, cons, list(range(30000)))
    assert repr(long).startswith("ADTValue(Cons(")


def test_match_nested_tuple_wildcard_and_var_patterns() -> None:
    _, nil, cons = list_module()
    xs, a, b, rest, p, q = (ir.var(n) for n in ("xs", "a", "b", "rest", "p", "q"))
    # match (xs, 1) { (Cons(a, Cons(b, _)), _) => a + b, (Cons(a, Nil), q) => a + q, _ => 0 }
    f = ir.Function([xs], ir.Match(ir.Tuple([xs, ir.const(100)]), [
        ir.Clause(ir.PatternTuple([ir.PatternConstructor(cons, [
            ir.PatternVar(a), ir.PatternConstructor(cons, [ir.PatternVar(b),
                                                           ir.PatternWildcard()])]),
            ir.PatternWildcard()]), ir.op.add(a, b)),
        ir.Clause(ir.PatternTuple([ir.PatternConstructor(cons, [
            ir.PatternVar(p), ir.PatternConstructor(nil)]), ir.PatternVar(q)]),
            ir.op.add(p, q)),
        ir.Clause(ir.PatternVar(rest), ir.const(0)),
    ]))
    assert int(ir.evaluate(f, py_list(nil, cons, [np.int32(3), np.int32(4), np.int32(5)]))) == 7
    assert int(ir.evaluate(f, py_list(nil, cons, [np.int32(3)]))) == 103
    assert int(ir.evaluate(f, py_list(nil, cons, []))) == 0


def test_non_exhaustive_match_is_a_clear_error() -> None:
    _, nil, cons = list_module()
    xs, h = ir.var("xs"), ir.var("h")
    match = ir.Match(xs, [ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(h),
                                                                  ir.PatternWildcard()]), h)],
                     complete=False, span=ir.Span(4, 7, "prog.tt"))
    mod = ir.Module({"main": ir.Function([xs], match)})
    with pytest.raises(ir.EvaluationError) as info:
        ir.evaluate(mod, py_list(nil, cons, []))
    msg = str(info.value)
    assert "prog.tt:4:7" in msg and "no clause matches" in msg and "Nil" in msg
    assert "@main" in msg and info.value.span == ir.Span(4, 7, "prog.tt")


def test_operator_failure_names_the_operator_shapes_and_position() -> None:
    x, y = ir.var("x"), ir.var("y")
    call = ir.Call(ir.Op.get("add"), [x, y], span=ir.Span(2, 9))
    with pytest.raises(ir.EvaluationError) as info:
        ir.evaluate(ir.Function([x, y], ir.Let(ir.var("z"), call, x)),
                    np.ones((2, 3), F32), np.ones((4,), F32))
    msg = str(info.value)
    assert msg.startswith("2:9: add failed") and "float32[2, 3]" in msg and "float32[4]" in msg


def test_bad_arguments_and_conditions() -> None:
    x = ir.var("x", shape=(2,))
    f = ir.Function([x], x)
    with pytest.raises(ir.EvaluationError, match=r"shape \(3,\)"):
        ir.evaluate(f, np.ones(3, F32))
    with pytest.raises(ir.EvaluationError, match="missing argument"):
        ir.evaluate(f)
    with pytest.raises(ir.EvaluationError, match="no parameter %y"):
        ir.evaluate(f, y=1)
    g = ir.Function([x], ir.If(x, x, x))
    with pytest.raises(ir.EvaluationError, match="scalar"):
        ir.evaluate(g, np.ones(2, F32))


def test_if_tuples_and_projection() -> None:
    x = ir.var("x", shape=())
    t = ir.var("t")
    f = ir.Function([x], ir.Let(t, ir.Tuple([x, ir.op.negative(x)]), ir.If(
        ir.op.greater(x, ir.const(0.0)), ir.TupleGetItem(t, 0), ir.TupleGetItem(t, 1))))
    assert float(ir.evaluate(f, np.float32(2))) == 2
    assert float(ir.evaluate(f, np.float32(-3))) == 3


def test_long_let_chain_runs_without_recursion() -> None:
    x = ir.var("x", shape=(4,))
    vs = [ir.var(f"v{i}") for i in range(5000)]
    body: ir.Expr = vs[-1]
    for i in reversed(range(5000)):
        body = ir.Let(vs[i], ir.op.add(vs[i - 1] if i else x, ir.const(1.0)), body)
    out = ir.evaluate(ir.Function([x], body), np.zeros(4, F32))
    np.testing.assert_array_equal(out, np.full(4, 5000, F32))


def test_shared_dataflow_nodes_are_computed_once_per_call() -> None:
    # y_{i+1} = y_i + y_i, 200 levels: a tree walk would take 2**200 steps
    x = ir.var("x", shape=())
    y: ir.Expr = x
    for _ in range(200):
        y = ir.op.add(y, y)
    out = ir.evaluate(ir.Function([x], y), np.float32(1))
    assert float(out) == 2.0 ** 200 or np.isinf(out)


def test_free_variables_of_a_bare_expression_come_from_env() -> None:
    x = ir.var("x")
    assert float(ir.evaluate(ir.op.add(x, x), env={x: np.float32(3)})) == 6
    with pytest.raises(ir.EvaluationError, match="not bound"):
        ir.evaluate(ir.op.add(x, x))
