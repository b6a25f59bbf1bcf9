"""PartialEvaluate: meaning kept on the test programs (closures, references, ADTs, mutual
recursion, polymorphism; interpreter on random inputs); the generative RNN with a static
length becomes a straight-line graph that fuses and runs on the graph executor; with a
dynamic length it terminates with one specialised recursive function; a higher-order
gradient (closures and references) shrinks to the size of the first-order backward graph;
references escaping into unknown branches stay right."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.transform import PartialEvaluate, gradient
from ir.transform.partial_eval import partial_evaluate
from ir.transform.pass_infra import random_arguments, same_value
from ir.visitor import ExprVisitor

from .. import programs
from ..test_rnn_example import rnn_module, to_list

F32 = "float32"


class _Census(ExprVisitor):
    """Counts what a residual program still holds."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.kinds: set[str] = set()

    def visit_call(self, e: ir.Call) -> None:
        if isinstance(e.op, ir.Op):
            self.ops += 1
        elif isinstance(e.op, ir.GlobalVar):
            self.kinds.add("global call")
        super().visit_call(e)

    def visit_if(self, e: ir.If) -> None:
        self.kinds.add("if")
        super().visit_if(e)

    def visit_match(self, e: ir.Match) -> None:
        self.kinds.add("match")
        super().visit_match(e)

    def visit_function(self, e: ir.Function) -> None:
        self.kinds.add("function")
        super().visit_function(e)

    def visit_ref_create(self, e: ir.RefCreate) -> None:
        self.kinds.add("ref")
        super().visit_ref_create(e)


def census(e: ir.Expr) -> _Census:
    c = _Census()
    c.visit(e.body if isinstance(e, ir.Function) else e)
    return c


PROGRAMS = ["mlp", "let_chain", "closures", "control", "tuples_refs", "polymorphism",
            "constants"]  # those with a @main


@pytest.mark.parametrize("name", PROGRAMS)
def test_meaning_is_kept_on_the_test_programs(name):
    mod = getattr(programs, name)()
    out = PartialEvaluate()(mod)
    main = ir.infer_type(mod)["main"]
    for seed in range(3):
        args = random_arguments(main, seed)
        want, got = ir.evaluate(mod, *args), ir.evaluate(out, *args)
        assert same_value(want, got), (name, want, got)


def rnn_with_static_length(steps: int) -> ir.Module:
    """The generative RNN's outputs summed by a recursive ``@total``, for a known number
    of steps."""
    mod = rnn_module()
    vec = ir.TensorType((1, 8), F32)
    cons, nil = mod.get_constructor("Cons"), mod.get_constructor("Nil")
    items = ir.var("items", ir.TypeCall(mod.get_global_type_var("List"), (vec,)))
    head, tail = ir.var("head", vec), ir.var("tail")
    total_gv = ir.GlobalVar("total")
    mod.add(total_gv, ir.Function([items], ir.Match(items, [
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(head), ir.PatternVar(tail)]),
                  ir.op.add(head, ir.Call(total_gv, [tail]))),
        ir.Clause(ir.PatternConstructor(nil), ir.op.zeros(shape=(1, 8), dtype=F32))]), vec))
    main = mod["main"]
    x, h, *weights = main.params[1:]
    outputs = ir.Call(mod.get_global_var("generate"), [ir.const(np.int32(steps)), x, h,
                                                       ir.Tuple(weights)])
    total = ir.Call(total_gv, [outputs])
    mod.add("main", ir.Function(main.params[1:], total), update=True)
    return mod


def rnn_inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = [(1, 8), (1, 16), (16, 8), (16, 16), (16,), (8, 16)]
    return [(rng.standard_normal(s) * 0.5).astype(F32) for s in shapes]


def test_static_length_rnn_becomes_a_straight_line_graph_on_the_graph_executor():
    steps = 6
    mod = rnn_with_static_length(steps)
    out = partial_evaluate(mod)
    c = census(out["main"])
    assert c.kinds == set() and list(out.functions) == [out.get_global_var("main")]
    # per step dense x3, add x2, tanh, and the sum's add; the first add (to zeros) is gone
    assert c.ops == steps * 7 - 1
    inputs = rnn_inputs(0)
    model = ir.build(out, target="cpu")
    np.testing.assert_allclose(model(*inputs), ir.evaluate(mod, *inputs), rtol=1e-5,
                               atol=1e-6)


def test_dynamic_length_rnn_terminates_with_a_specialised_recursion():
    mod = rnn_module()
    out = partial_evaluate(mod)
    names = sorted(gv.name for gv in out.functions)
    assert names[0].startswith("generate_pe") and names[1:] == ["main"]
    inputs = rnn_inputs(1)
    for n in (0, 1, 5):
        want = to_list(ir.evaluate(mod, np.int32(n), *inputs))
        got = to_list(ir.evaluate(out, np.int32(n), *inputs))
        assert len(got) == n
        for a, b in zip(want, got, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def mlp_loss() -> ir.Function:
    x, w1, b1 = ir.var("x", shape=(8, 10)), ir.var("w1", shape=(16, 10)), \
        ir.var("b1", shape=(16,))
    w2 = ir.var("w2", shape=(3, 16))
    labels = ir.const(np.eye(3, dtype=F32)[np.arange(8) % 3])
    h = ir.op.nn.relu(ir.op.nn.bias_add(ir.op.nn.dense(x, w1), b1))
    logp = ir.op.nn.log_softmax(ir.op.nn.dense(h, w2))
    return ir.Function([x, w1, b1, w2], ir.op.negative(ir.op.sum(ir.op.multiply(logp,
                                                                                labels))))


def test_higher_order_gradient_shrinks_to_the_first_order_graph():
    """The higher-order gradient (a backpropagator closure per operator, an adjoint
    reference per value) after partial evaluation and dead-code elimination has no
    closures or references left and no more operator calls than the first-order
    gradient (18 operator calls against its 25 here, from 50)."""
    loss = mlp_loss()
    higher = gradient(loss)
    first = gradient(loss, mode="first_order")
    out = partial_evaluate(ir.Module({"main": higher}))
    c = census(out["main"])
    assert {"ref", "function"} <= census(higher).kinds and not c.kinds
    assert census(higher).ops >= 2 * c.ops and c.ops <= census(first).ops
    inputs = random_arguments(ir.infer_type(ir.Module({"main": loss}))["main"], 0)
    want_value, want = ir.evaluate(higher, *inputs)
    value, grads = ir.evaluate(out, *inputs)
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    for a, b in zip(grads, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_references_escaping_into_unknown_branches():
    """A cell written in one branch of an unknown ``if`` and read after it; a cell passed
    to an unknown function."""
    x = ir.var("x", shape=(3,))
    cell, g = ir.var("cell"), ir.var("g")
    positive = ir.op.greater(ir.op.sum(x), ir.const(0.0))
    write = ir.If(positive, ir.RefWrite(cell, ir.op.exp(x)), ir.Tuple([]))
    r = ir.var("r", ir.RefType(ir.TensorType((3,), F32)))
    bump = ir.Function([r], ir.RefWrite(r, ir.op.add(ir.RefRead(r), ir.const(1.0))))
    body = ir.Let(cell, ir.RefCreate(x), ir.Let(ir.var("_"), write, ir.Let(
        g, bump, ir.Let(ir.var("_"), ir.If(positive, ir.Call(g, [cell]), ir.Tuple([])),
                        ir.op.multiply(ir.RefRead(cell), ir.const(2.0))))))
    mod = ir.Module({"main": ir.Function([x], body)})
    out = partial_evaluate(mod)
    for sign in (1.0, -1.0):
        xs = sign * np.array([0.5, 0.25, 1.0], F32)
        np.testing.assert_allclose(ir.evaluate(out, xs), ir.evaluate(mod, xs), rtol=1e-6)


def test_known_values_fold_and_unknown_recursion_stays():
    """``@length`` of a known list is a constant; of an unknown list, a residual call."""
    mod = ir.prelude()
    cons, nil = mod.get_constructor("Cons"), mod.get_constructor("Nil")
    length = mod.get_global_var("length")
    x = ir.var("x", shape=(2,))
    items = ir.Call(cons, [x, ir.Call(cons, [x, ir.Call(nil, [])])])
    mod.add("main", ir.Function([x], ir.Call(length, [items])))
    out = partial_evaluate(mod)
    assert isinstance(out["main"].body, ir.Constant) and int(out["main"].body.data) == 2
    lst = ir.var("l", ir.TypeCall(mod.get_global_type_var("List"), (ir.TensorType((2,), F32),)))
    mod.add("main", ir.Function([lst], ir.Call(length, [lst])), update=True)
    out = partial_evaluate(mod)
    assert "global call" in census(out["main"]).kinds
    value = ir.evaluate(out, ir.evaluate(ir.Function([x], items), np.ones(2, F32)))
    assert int(value) == 2


def test_gradient_of_a_recursive_rnn_over_a_known_list_becomes_straight_line():
    """The higher-order gradient of ``@rnn`` folded over a list built in ``@main``: the
    recursion, the list, the backpropagator closures and the adjoint references all
    evaluate away."""
    from .test_gradient import rnn_module as list_rnn

    grad = gradient(list_rnn(3, F32))
    out = partial_evaluate(grad)
    assert not census(out["main"]).kinds and len(out.functions) == 1
    rng = np.random.default_rng(4)
    shapes = [(1, 4)] * 3 + [(1, 5), (5, 4), (5, 5)]
    inputs = [rng.standard_normal(s).astype(F32) for s in shapes]
    want_value, want = ir.evaluate(grad, *inputs)
    value, grads = ir.evaluate(out, *inputs)
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    for a, b in zip(grads, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
