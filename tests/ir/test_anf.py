"""A-normal form and graph normal form: both preserve meaning (interpreted before and after
on random inputs), ANF has atomic operands and binds shared nodes once, GNF removes pure
lets and keeps effects in order."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.transform.anf import is_atomic

F32 = "float32"


class _ShapeCheck(ir.ExprVisitor):
    """Asserts A-normal form: atomic operands everywhere, no let as a let's value."""

    def __init__(self) -> None:
        super().__init__()
        self.lets = 0

    def visit_call(self, e: ir.Call) -> None:
        assert is_atomic(e.op) and all(is_atomic(a) for a in e.args), e
        super().visit_call(e)

    def visit_tuple(self, e: ir.Tuple) -> None:
        assert all(is_atomic(f) for f in e.fields)
        super().visit_tuple(e)

    def visit_tuple_getitem(self, e: ir.TupleGetItem) -> None:
        assert is_atomic(e.tuple_value)
        super().visit_tuple_getitem(e)

    def visit_if(self, e: ir.If) -> None:
        assert is_atomic(e.cond)
        super().visit_if(e)

    def visit_match(self, e: ir.Match) -> None:
        assert is_atomic(e.data)
        super().visit_match(e)

    def visit_ref_write(self, e: ir.RefWrite) -> None:
        assert is_atomic(e.ref) and is_atomic(e.value)
        super().visit_ref_write(e)

    def visit_let_binding(self, e: ir.Let) -> None:
        assert not isinstance(e.value, ir.Let)
        self.lets += 1
        super().visit_let_binding(e)


def check_anf(x: ir.Expr | ir.Module) -> int:
    check = _ShapeCheck()
    for f in (x.functions.values() if isinstance(x, ir.Module) else [x]):
        check.visit(f)
    return check.lets


class _CountLets(ir.ExprVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def visit_let_binding(self, let: ir.Let) -> None:
        self.n += 1
        super().visit_let_binding(let)


def count_lets(e: ir.Expr) -> int:
    counter = _CountLets()
    counter.visit(e)
    return counter.n


def diamond() -> ir.Function:
    """A DAG: y = x + x is used three times, z = y * y twice."""
    x = ir.var("x", shape=(3, 4))
    y = ir.op.add(x, x)
    z = ir.op.multiply(y, y)
    return ir.Function([x], ir.Tuple([ir.op.add(ir.op.tanh(z), y),
                                      ir.op.subtract(z, y)]))


def branchy() -> ir.Function:
    """Sharing across the scope of an if, a branch-local let, a closure."""
    x, c = ir.var("x", shape=(4,)), ir.var("c", shape=())
    y = ir.op.exp(ir.op.negative(x))
    f, v = ir.var("f"), ir.var("v", shape=(4,))
    inner = ir.op.multiply(y, ir.const(2.0))
    body = ir.If(ir.op.greater(c, ir.const(0.0)),
                 ir.op.add(inner, y),
                 ir.Let(f, ir.Function([v], ir.op.subtract(v, y)),
                        ir.Call(f, [ir.Call(f, [inner])])))
    return ir.Function([x, c], ir.op.add(body, y))


def list_module() -> ir.Module:
    """List with a ``map`` of a closure and a ``sum`` via match."""
    lst, a = ir.GlobalTypeVar("List"), ir.TypeVar("a")
    nil = ir.Constructor("Nil", (), lst, 0)
    cons = ir.Constructor("Cons", (a, ir.TypeCall(lst, (a,))), lst, 1)
    mod = ir.Module(type_definitions={lst: ir.TypeData(lst, (a,), (nil, cons))})
    map_, total = ir.GlobalVar("map"), ir.GlobalVar("total")
    f, xs, h, t = ir.var("f"), ir.var("xs"), ir.var("h"), ir.var("t")
    mod.add(map_, ir.Function([f, xs], ir.Match(xs, [
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(h), ir.PatternVar(t)]),
                  ir.Call(cons, [ir.Call(f, [h]), ir.Call(map_, [f, t])])),
        ir.Clause(ir.PatternWildcard(), ir.Call(nil, []))])))
    ys, h2, t2 = ir.var("ys"), ir.var("h2"), ir.var("t2")
    mod.add(total, ir.Function([ys], ir.Match(ys, [
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(h2), ir.PatternVar(t2)]),
                  ir.op.add(h2, ir.Call(total, [t2]))),
        ir.Clause(ir.PatternConstructor(nil, []), ir.const(np.zeros(3, F32)))])))
    x, w, e = ir.var("x", shape=(3,)), ir.var("w", shape=(3,)), ir.var("e")
    scale = ir.Function([e], ir.op.multiply(ir.op.add(e, w), w))
    items = ir.Call(cons, [x, ir.Call(cons, [ir.op.tanh(x), ir.Call(cons, [w, ir.Call(
        nil, [])])])])
    mod.add("main", ir.Function([x, w], ir.Call(total, [ir.Call(map_, [scale, items])])))
    return mod


def refs() -> ir.Function:
    """Effects whose order matters."""
    x, r, u1, u2 = ir.var("x", shape=(2,)), ir.var("r"), ir.var("u1"), ir.var("u2")
    old = ir.var("old")
    return ir.Function([x], ir.Let(r, ir.RefCreate(x), ir.Let(
        old, ir.RefRead(r), ir.Let(u1, ir.RefWrite(r, ir.op.multiply(ir.RefRead(r), x)),
                                   ir.Let(u2, ir.RefWrite(r, ir.op.add(ir.RefRead(r), old)),
                                          ir.Tuple([ir.RefRead(r), old]))))))


def factorial() -> ir.Module:
    n, m = ir.var("n", shape=(), dtype="int32"), ir.var("m", shape=(), dtype="int32")
    fact = ir.GlobalVar("fact")
    body = ir.If(ir.op.less(n, ir.const(1)), ir.const(1),
                 ir.op.multiply(n, ir.Call(fact, [ir.op.subtract(n, ir.const(1))])))
    return ir.Module({fact: ir.Function([n], body), "main": ir.Function([m], ir.Call(fact, [m]))})


def _same(a: object, b: object) -> None:
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


PROGRAMS = {
    "diamond": (diamond, lambda r: (r.standard_normal((3, 4)).astype(F32),)),
    "branchy": (branchy, lambda r: (r.standard_normal(4).astype(F32),
                                    np.float32(r.choice([-1.0, 1.0])))),
    "list": (list_module, lambda r: (r.standard_normal(3).astype(F32),
                                     r.standard_normal(3).astype(F32))),
    "refs": (refs, lambda r: (r.standard_normal(2).astype(F32),)),
    "factorial": (factorial, lambda r: (np.int32(r.integers(0, 8)),)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_anf_and_gnf_preserve_meaning(name: str) -> None:
    make, inputs = PROGRAMS[name]
    program = make()
    anf = ir.to_a_normal_form(program)
    check_anf(anf)
    gnf = ir.to_graph_normal_form(anf)
    back = ir.to_a_normal_form(gnf)
    check_anf(back)
    rng = np.random.default_rng(sum(map(ord, name)))
    for _ in range(4):
        args = inputs(rng)
        expected = ir.evaluate(program, *args)
        for other in (anf, gnf, back):
            _same(ir.evaluate(other, *args), expected)


def test_anf_binds_shared_nodes_once_and_gnf_restores_the_graph() -> None:
    g = diamond()
    anf = ir.to_a_normal_form(g)
    # add(x, x), multiply, tanh, add, subtract, the tuple: 6 bindings
    assert check_anf(anf) == 6
    gnf = ir.to_graph_normal_form(anf)
    assert count_lets(gnf) == 0
    ir.assert_structural_equal(gnf, g)
    # the shared node is one object again
    tup = gnf.body
    assert tup.fields[0].args[1] is tup.fields[1].args[1]


def test_anf_keeps_branch_local_work_inside_the_branch() -> None:
    anf = ir.to_a_normal_form(branchy())
    # exp(-x) is used in both branches and after the if: bound before the if, once
    body = anf.body
    kinds = []
    while isinstance(body, ir.Let):
        kinds.append(type(body.value).__name__)
        if isinstance(body.value, ir.If):
            then = body.value.true_branch
            assert isinstance(then, ir.Let)  # inner * 2 is computed in the branch
        body = body.body
    assert kinds.index("If") > 0 and kinds.count("If") == 1


def test_gnf_keeps_effects_and_recursive_lets() -> None:
    gnf = ir.to_graph_normal_form(refs())
    assert count_lets(gnf) == 4  # the reference operations stay in order
    loop, n = ir.var("loop"), ir.var("n", shape=(), dtype="int32")
    rec = ir.Function([n], ir.Let(loop, ir.Function([n], ir.If(
        ir.op.equal(n, ir.const(0)), n, ir.Call(loop, [ir.op.subtract(n, ir.const(1))]))),
        ir.Call(loop, [n])))
    g = ir.to_graph_normal_form(rec)
    assert count_lets(g) == 1
    assert int(ir.evaluate(g, np.int32(5))) == 0


def test_deep_chains_convert_without_recursion() -> None:
    x = ir.var("x", shape=(2,))
    y: ir.Expr = x
    for _ in range(3000):
        y = ir.op.add(y, ir.const(1.0))
    g = ir.Function([x], y)
    anf = ir.to_a_normal_form(g)
    assert check_anf(anf) == 3000
    gnf = ir.to_graph_normal_form(anf)
    ir.assert_structural_equal(gnf, g)
    np.testing.assert_array_equal(ir.evaluate(anf, np.zeros(2, F32)), [3000, 3000])
