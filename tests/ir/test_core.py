"""The IR core: types, expressions, structural equality and hashing (alpha-equivalence),
the visitor and mutator, modules, the operator registry and the builders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ir
from ir.op.relations import broadcast_shapes

F32 = "float32"


def tensor(*shape, dtype=F32) -> ir.TensorType:
    return ir.TensorType(shape, dtype)


def identity_fn(name: str) -> ir.Function:
    x = ir.var(name, shape=(2, 3))
    return ir.Function([x], x)


def list_adt():
    """``type List[a] { Nil, Cons(a, List[a]) }`` with fresh type variables."""
    lst, a = ir.GlobalTypeVar("List"), ir.TypeVar("a")
    nil = ir.Constructor("Nil", (), lst, 0)
    cons = ir.Constructor("Cons", (a, ir.TypeCall(lst, (a,))), lst, 1)
    return ir.TypeData(lst, (a,), (nil, cons)), nil, cons


def let_chain(n: int, prefix: str) -> ir.Function:
    """``fn (%x) { let %v0 = relu(%x); let %v1 = relu(%v0); ... %v{n-1} }``."""
    x = ir.var("x", shape=(1, 4))
    vs = [ir.var(f"{prefix}{i}") for i in range(n)]
    body: ir.Expr = vs[-1]
    for i in reversed(range(n)):
        body = ir.Let(vs[i], ir.op.nn.relu(vs[i - 1] if i else x), body)
    return ir.Function([x], body)


def call_chain(n: int) -> ir.Function:
    x = ir.var("x", shape=(1, 4))
    y: ir.Expr = x
    for _ in range(n):
        y = ir.op.nn.relu(y)
    return ir.Function([x], y)


# ------------------------------------------------------------------------------- types


def test_types_compare_structurally_and_type_params_up_to_renaming() -> None:
    assert tensor(1, "n", ir.Any) == ir.TensorType((1, ir.SymDim("n"), ir.Any), F32)
    assert hash(tensor(1, "n")) == hash(tensor(1, "n"))
    assert tensor(1, 2) != tensor(1, 2, dtype="int8")
    assert ir.scalar_type("int32") == tensor(dtype="int32")
    a, b = ir.TypeVar("a"), ir.TypeVar("a")
    assert a != b and a == a  # type variables are binders: names are hints
    poly_a = ir.FuncType((a,), a, (a,))
    poly_b = ir.FuncType((b,), b, (b,))
    assert poly_a == poly_b and hash(poly_a) == hash(poly_b)
    assert ir.FuncType((a,), a) != ir.FuncType((b,), b)  # free: only equal to themselves
    c = ir.TypeVar("c")
    assert ir.FuncType((a, c), a, (a, c)) != ir.FuncType((b, c), c, (b, c))
    assert ir.TupleType((tensor(1), poly_a)) == ir.TupleType((tensor(1), poly_b))
    assert ir.IncompleteType(3) == ir.IncompleteType(3) != ir.IncompleteType.fresh()
    assert ir.is_dynamic(ir.TupleType((tensor(1, ir.Any),))) and not ir.is_dynamic(tensor("n"))
    assert str(tensor(1, "n", ir.Any)) == "Tensor[(1, n, ?), float32]"
    with pytest.raises(TypeError):
        tensor(1.5)


def test_type_data_compares_up_to_renaming_of_its_type_variables() -> None:
    (d1, _, _), (d2, _, _) = list_adt(), list_adt()
    assert d1 == d2 and hash(d1) == hash(d2)
    lst = ir.GlobalTypeVar("List")
    with pytest.raises(ValueError, match="tags must be distinct"):
        ir.TypeData(lst, (), (ir.Constructor("A", (), lst, 0), ir.Constructor("B", (), lst, 0)))


def test_substitute_replaces_free_type_variables_only() -> None:
    a, b = ir.TypeVar("a"), ir.TypeVar("b")
    t = ir.TupleType((a, ir.FuncType((a,), a, (a,)), b))
    out = ir.substitute(t, {a: tensor(2), b: tensor(3)})
    assert out == ir.TupleType((tensor(2), ir.FuncType((a,), a, (a,)), tensor(3)))


# -------------------------------------------------------------------------------- attrs


def test_attrs_are_normalized_immutable_and_compare_by_value() -> None:
    attrs = ir.Attrs({"axis": [1, np.int64(2)], "pad": [[1, 1], (2, 2)]}, scale=np.float32(2))
    assert attrs["axis"] == (1, 2) and attrs.pad == ((1, 1), (2, 2))
    assert type(attrs.axis[1]) is int and type(attrs.scale) is float
    assert attrs == ir.Attrs(scale=2.0, pad=((1, 1), (2, 2)), axis=(1, 2))
    assert hash(attrs) == hash(ir.Attrs(scale=2.0, pad=((1, 1), (2, 2)), axis=(1, 2)))
    assert ir.Attrs(a=1) != ir.Attrs(a=1.0) and ir.Attrs(a=1) != ir.Attrs(a=True)
    assert ir.Attrs(a=[1]) == {"a": (1,)}
    with pytest.raises(AttributeError):
        attrs.axis = (3,)
    with pytest.raises(TypeError, match="not JSON-able"):
        ir.Attrs(f=object())
    assert attrs.replace(axis=[0]).axis == (0,) and attrs.axis == (1, 2)


# -------------------------------------------------------------------- structural equality


def test_functions_equal_up_to_renaming_of_parameters() -> None:
    f, g = identity_fn("x"), identity_fn("y")
    assert f != g  # == on compound nodes is identity
    assert ir.structural_equal(f, g) and ir.structural_hash(f) == ir.structural_hash(g)
    y = ir.var("y", shape=(2, 3))
    assert not ir.structural_equal(f, ir.Function([y], f.params[0]))  # body uses another var
    assert not ir.structural_equal(identity_fn("x"), ir.Function([ir.var("x", shape=(2, 4))],
                                                                 ir.var("x", shape=(2, 4))))


def test_free_variables_compare_by_identity() -> None:
    x1, x2 = ir.var("x", shape=(2,)), ir.var("x", shape=(2,))
    assert not ir.structural_equal(ir.op.nn.relu(x1), ir.op.nn.relu(x2))
    assert ir.structural_equal(ir.op.nn.relu(x1), ir.op.nn.relu(x1))
    assert ir.structural_equal(ir.op.nn.relu(x1), ir.op.nn.relu(x2), map_free_vars=True)
    assert (ir.structural_hash(ir.op.nn.relu(x1), map_free_vars=True)
            == ir.structural_hash(ir.op.nn.relu(x2), map_free_vars=True))
    # a correspondence is a bijection: %a + %a is not %b + %c
    a, b, c = (ir.var(n) for n in "abc")
    assert not ir.structural_equal(ir.op.add(a, a), ir.op.add(b, c), map_free_vars=True)


def test_let_bound_variables_equal_up_to_renaming() -> None:
    def prog(name: str) -> ir.Expr:
        x = ir.var("x", shape=(4,))
        v = ir.var(name)
        return ir.Function([x], ir.Let(v, ir.op.nn.relu(x), ir.op.add(v, v)))

    assert ir.structural_equal(prog("a"), prog("b"))
    assert ir.structural_hash(prog("a")) == ir.structural_hash(prog("b"))
    x, v, w = ir.var("x", shape=(4,)), ir.var("v"), ir.var("w")
    swapped = ir.Function([x], ir.Let(v, ir.op.nn.relu(x), ir.op.add(v, w)))
    assert not ir.structural_equal(prog("a"), swapped)


def test_match_pattern_variables_equal_up_to_renaming() -> None:
    _, nil, cons = list_adt()

    def length_step(h: str, t: str) -> ir.Function:
        lst, hv, tv = ir.var("l"), ir.var(h), ir.var(t)
        clauses = [ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(hv), ir.PatternVar(tv)]),
                             ir.Tuple([hv, tv])),
                   ir.Clause(ir.PatternConstructor(nil), ir.Tuple([])),
                   ir.Clause(ir.PatternWildcard(), ir.Tuple([]))]
        return ir.Function([lst], ir.Match(lst, clauses))

    assert ir.structural_equal(length_step("h", "t"), length_step("x", "y"))
    assert ir.structural_hash(length_step("h", "t")) == ir.structural_hash(length_step("a", "b"))
    lst, hv, tv = ir.var("l"), ir.var("h"), ir.var("t")
    swapped = ir.Function([lst], ir.Match(lst, [
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(hv), ir.PatternVar(tv)]),
                  ir.Tuple([tv, hv])),
        ir.Clause(ir.PatternConstructor(nil), ir.Tuple([])),
        ir.Clause(ir.PatternWildcard(), ir.Tuple([]))]))
    assert not ir.structural_equal(length_step("h", "t"), swapped)
    with pytest.raises(AssertionError, match="differs from"):
        ir.assert_structural_equal(length_step("h", "t"), swapped)


def test_polymorphic_functions_equal_up_to_renaming_of_type_params() -> None:
    def poly_id(name: str) -> ir.Function:
        a = ir.TypeVar(name)
        x = ir.Var("x", a)
        return ir.Function([x], x, ret_type=a, type_params=[a])

    assert ir.structural_equal(poly_id("a"), poly_id("b"))
    assert ir.structural_hash(poly_id("a")) == ir.structural_hash(poly_id("b"))
    a, b = ir.TypeVar("a"), ir.TypeVar("b")
    x = ir.Var("x", a)
    assert not ir.structural_equal(poly_id("a"), ir.Function([x], x, ret_type=b,
                                                             type_params=[a, b]))
    assert ir.free_type_vars(ir.Function([x], x, ret_type=b, type_params=[a])) == [b]


def test_constants_attrs_globals_and_ops_compare_by_value() -> None:
    assert ir.const([1.0, 2.0]) == ir.const(np.array([1, 2], "float32"))
    assert hash(ir.const([1.0, 2.0])) == hash(ir.const(np.array([1, 2], "float32")))
    assert ir.const([1.0, 2.0]) != ir.const([1.0, 2.5])
    assert ir.const([1, 2]) != ir.const([1.0, 2.0])  # int32 vs float32
    assert ir.const(1.0).dtype == "float32" and ir.const(1).dtype == "int32"
    nan = ir.const(np.array([np.nan], "float32"))
    assert ir.structural_equal(nan, ir.const(np.array([np.nan], "float32")))
    assert ir.GlobalVar("f") == ir.GlobalVar("f") and ir.Op.get("add") == ir.Op.get("add")
    x = ir.var("x", shape=(1, 4))
    assert ir.structural_equal(ir.op.sum(x, axis=[1]), ir.op.sum(x, axis=(1,), keepdims=False))
    assert not ir.structural_equal(ir.op.sum(x, axis=[1]), ir.op.sum(x, axis=[1], keepdims=True))
    data = np.arange(6, dtype="float32")
    c = ir.Constant(data)
    data[0] = 9  # the constant holds its own read-only copy
    assert c.data[0] == 0 and not c.data.flags.writeable


def test_sharing_is_invisible_to_equality_and_hash() -> None:
    x = ir.var("x", shape=(4,))
    shared = ir.op.nn.relu(x)
    dag = ir.op.add(shared, shared)
    tree = ir.op.add(ir.op.nn.relu(x), ir.op.nn.relu(x))
    assert ir.structural_equal(dag, tree) and ir.structural_hash(dag) == ir.structural_hash(tree)
    # a DAG of depth 60 where each level uses the previous twice: 2**60 paths, visited once
    y: ir.Expr = x
    for _ in range(60):
        y = ir.op.add(y, y)
    assert ir.structural_equal(y, y) and isinstance(ir.structural_hash(y), int)


def test_structural_hash_is_the_same_in_every_process() -> None:
    code = ("import ir; x = ir.var('x', shape=('n', 4)); a = ir.TypeVar('a');"
            "f = ir.Function([x], ir.op.sum(ir.op.add(x, ir.const([1.0, 2, 3, 4])), axis=1),"
            " type_params=[a]); print(ir.structural_hash(f))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": seed},
                           cwd=Path(__file__).resolve().parents[2]).stdout
            for seed in ("1", "2")}
    assert len(outs) == 1


def test_spans_and_checked_types_are_not_part_of_equality() -> None:
    x = ir.var("x", shape=(2,))
    a = ir.op.nn.relu(x, span=ir.Span(1, 5))
    b = ir.op.nn.relu(x)
    ir.set_checked_type(a, tensor(2))
    assert a.checked_type == tensor(2) and b.checked_type_or_none is None
    assert ir.structural_equal(a, b)
    with pytest.raises(ValueError, match="not inferred"):
        _ = b.checked_type
    with pytest.raises(AttributeError, match="immutable"):
        a.args = ()


# ------------------------------------------------------------------------- deep programs


def test_deep_let_chain_is_compared_hashed_visited_and_rewritten_without_recursion() -> None:
    assert sys.getrecursionlimit() <= 10_000
    n = 5000
    f, g = let_chain(n, "a"), let_chain(n, "b")
    assert ir.structural_equal(f, g)
    assert ir.structural_hash(f) == ir.structural_hash(g)
    assert len(ir.bound_vars(f)) == n + 1 and ir.free_vars(f) == []

    class CountLets(ir.ExprVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.lets = self.left = 0

        def visit_let_binding(self, e: ir.Let) -> None:
            self.lets += 1
            super().visit_let_binding(e)

        def leave_let(self, e: ir.Let) -> None:
            self.left += 1

    counter = CountLets()
    counter.visit(f)
    assert counter.lets == counter.left == n

    class ReluToNegAdd(ir.ExprMutator):
        def visit_call(self, e: ir.Call) -> ir.Expr:
            new = super().visit_call(e)
            if isinstance(new, ir.Call) and new.op == ir.Op.get("nn.relu"):
                return ir.op.add(new.args[0], new.args[0])
            return new

    h = ReluToNegAdd().visit(f)
    assert not ir.structural_equal(h, f)
    assert ir.structural_equal(ReluToNegAdd().visit(g), h)


def test_deep_dataflow_chain_is_handled_without_recursion() -> None:
    n = 5000
    f, g = call_chain(n), call_chain(n)
    assert ir.structural_equal(f, g) and ir.structural_hash(f) == ir.structural_hash(g)
    assert ir.free_vars(f.body) == [f.params[0]]
    assert ir.ExprMutator().visit(f) is f


# ---------------------------------------------------------------------- visitor, mutator


def every_kind(names: str) -> ir.Function:
    """A function using every expression kind (``names``: hints for its variables)."""
    _, nil, cons = list_adt()
    a = ir.TypeVar("a")
    x, r, h, t, f = (ir.var(n) for n in names)
    x = ir.Var(x.name_hint, a)
    lst = ir.Call(cons, [x, ir.Call(nil, [])])
    match = ir.Match(lst, [
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(h), ir.PatternWildcard()]),
                  ir.Tuple([h])),
        ir.Clause(ir.PatternTuple([ir.PatternVar(t)]), ir.Tuple([t]))], complete=False)
    body = ir.Let(r, ir.RefCreate(x), ir.Tuple([
        ir.RefWrite(r, ir.RefRead(r)), ir.TupleGetItem(match, 0),
        ir.If(ir.const(True), ir.Call(ir.GlobalVar("g"), [x]), ir.op.nn.relu(x)),
        ir.Let(f, ir.Function([], x), ir.Call(f, []))]))
    return ir.Function([x], body, type_params=[a], attrs={"Primitive": 1})


def test_every_kind_is_walked_compared_and_kept_by_the_identity_mutator() -> None:
    prog = every_kind("xrhtf")
    assert ir.structural_equal(prog, every_kind("abcde"))
    assert ir.structural_hash(prog) == ir.structural_hash(every_kind("abcde"))
    assert ir.ExprMutator().visit(prog) is prog
    kinds: set[str] = set()

    class Kinds(ir.ExprVisitor):
        def visit(self, e: ir.Expr) -> None:
            kinds.add(type(e).__name__)
            super().visit(e)

    Kinds().visit(prog)
    assert kinds == {"Function", "Var", "Let", "RefCreate", "Tuple", "RefWrite", "RefRead",
                     "TupleGetItem", "Match", "Call", "Constructor", "If", "Constant",
                     "GlobalVar", "Op"}
    assert ir.free_vars(prog) == [] and len(ir.bound_vars(prog)) == 5


def test_mutator_rebuilds_only_changed_nodes_and_keeps_sharing() -> None:
    x, y = ir.var("x", shape=(4,)), ir.var("y", shape=(4,))
    shared = ir.op.nn.relu(x)
    untouched = ir.op.nn.relu(y)
    root = ir.Tuple([ir.op.add(shared, shared), untouched, ir.op.add(shared, untouched)])

    class XToY(ir.ExprMutator):
        def visit_var(self, e: ir.Var) -> ir.Expr:
            return y if e is x else e

    out = XToY().visit(root)
    assert out is not root
    first, second, third = out.fields
    assert second is untouched  # nothing below changed: the very same node
    assert first.args[0] is first.args[1] is third.args[0]  # rewritten once, still shared
    assert third.args[1] is untouched
    assert ir.structural_equal(first.args[0], untouched)
    assert ir.ExprMutator().visit(root) is root


def test_visitor_visits_each_shared_node_once() -> None:
    x = ir.var("x", shape=(4,))
    shared = ir.op.nn.relu(x)
    root = ir.op.add(shared, ir.op.add(shared, shared))

    class Count(ir.ExprVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[ir.Call] = []

        def visit_call(self, e: ir.Call) -> None:
            self.calls.append(e)
            super().visit_call(e)

    c = Count()
    c.visit(root)
    assert len(c.calls) == 3 and c.calls[0] is shared and c.calls[-1] is root  # post-order


def test_free_bound_and_all_vars() -> None:
    x, y, z, t = ir.var("x"), ir.var("y"), ir.var("z"), ir.var("t")
    body = ir.Let(t, ir.op.add(x, y), ir.Function([z], ir.op.add(z, t)))
    assert ir.free_vars(body) == [x, y]
    assert set(map(id, ir.bound_vars(body))) == {id(t), id(z)}
    assert {id(v) for v in ir.all_vars(body)} == {id(v) for v in (x, y, z, t)}
    closure = ir.Function([z], ir.op.add(z, x))
    assert ir.free_vars(closure) == [x]


# ------------------------------------------------------------------------------- module


def test_module_lookup_and_structural_equality() -> None:
    def build() -> ir.Module:
        data, nil, cons = list_adt()
        mod = ir.Module.from_expr(identity_fn("x"))
        f = ir.GlobalVar("f")
        n = ir.var("n", shape=())
        mod.add(f, ir.Function([n], ir.Call(f, [n])))  # recursion through a global
        mod.add_type(data)
        return mod

    m1, m2 = build(), build()
    assert m1 == m2
    assert m1.get_global_var("f") == ir.GlobalVar("f")
    assert isinstance(m1["main"], ir.Function) and m1["f"] is m1[ir.GlobalVar("f")]
    assert m1.get_constructor("Cons").tag == 1
    assert m1[m1.get_global_type_var("List")].constructors[0].name == "Nil"
    m2["main"] = identity_fn("x").with_attr("Primitive", 1)
    assert m1 != m2
    with pytest.raises(KeyError, match="no global function @g"):
        m1["g"]
    with pytest.raises(ValueError, match="already defined"):
        m1.add("f", identity_fn("x"))
    wrapped = ir.Module.from_expr(ir.op.nn.relu(ir.var("x", shape=(3,))))
    assert [p.name_hint for p in wrapped["main"].params] == ["x"]


# ----------------------------------------------------------------- operators and builders


@pytest.mark.parametrize(("a", "b", "out"), [
    ((2, 3), (2, 3), (2, 3)),
    ((4, 1, 3), (5, 1), (4, 5, 3)),  # rank mismatch: right-aligned
    ((), (2, 3), (2, 3)),
    (("n", 3), (1, 3), ("n", 3)),  # a symbolic batch
    (("n", 3), ("n", 1), ("n", 3)),
    ((ir.Any, 3), (5, 3), (5, 3)),
    ((ir.Any, 1), (1, 3), (ir.Any, 3)),
])
def test_broadcast_relation(a, b, out) -> None:
    add = ir.get_op_def("add")
    assert add.infer_type([tensor(*a), tensor(*b)]) == tensor(*out)
    concrete = [d for d in (*a, *b) if not isinstance(d, int)] == []
    if concrete:
        assert broadcast_shapes(a, b) == np.broadcast_shapes(a, b)


@pytest.mark.parametrize(("a", "b", "message"), [
    ((2, 3), (4, 3), r"add: shapes \(2, 3\) and \(4, 3\) do not broadcast: dimension 2 vs 4"),
    ((3,), (2, 4), r"dimension 3 vs 4 \(axis 1"),
    (("n",), ("m",), "dimension n vs m"),
])
def test_broadcast_relation_rejects_mismatches(a, b, message) -> None:
    with pytest.raises(ir.IRTypeError, match=message):
        ir.get_op_def("add").infer_type([tensor(*a), tensor(*b)])
    with pytest.raises(ir.IRTypeError, match="dtypes differ: float32 vs int32"):
        ir.get_op_def("add").infer_type([tensor(2), tensor(2, dtype="int32")])


def test_dense_relu_and_sum_relations() -> None:
    dense = ir.get_op_def("nn.dense")
    assert dense.infer_type([tensor("n", 512), tensor(1000, 512)]) == tensor("n", 1000)
    assert dense.infer_type([tensor(2, 7, 16), tensor(8, 16)], {"out_dtype": "float16"}) == (
        tensor(2, 7, 8, dtype="float16"))
    with pytest.raises(ir.IRTypeError) as err:
        dense.infer_type([tensor(1, 512), tensor(1000, 256)])
    assert str(err.value) == ("nn.dense: input (1, 512) and weight (1000, 256) disagree on the "
                              "reduction dimension 512 vs 256")
    assert str(err.value.with_span(ir.Span(3, 9))).startswith("3:9: nn.dense: input (1, 512)")
    with pytest.raises(ir.IRTypeError, match="units=10 but weight"):
        dense.infer_type([tensor(1, 512), tensor(1000, 512)], {"units": 10})
    relu = ir.get_op_def("nn.relu")
    assert relu.infer_type([tensor("n", ir.Any)]) == tensor("n", ir.Any)
    with pytest.raises(ir.IRTypeError, match="nn.relu: input must be a tensor"):
        relu.infer_type([ir.TupleType(())])
    total = ir.get_op_def("sum")
    t = tensor(2, "n", 4)
    assert total.infer_type([t], {"axis": [1]}) == tensor(2, 4)
    assert total.infer_type([t], {"axis": [-1], "keepdims": True}) == tensor(2, "n", 1)
    assert total.infer_type([t]) == tensor()
    assert total.infer_type([t], {"axis": 0, "exclude": True}) == tensor(2)
    with pytest.raises(ir.IRTypeError, match="sum: axis 3 is out of range for an input of rank 3"):
        total.infer_type([t], {"axis": [3]})


def test_computes_match_numpy() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 1, 3), "float32"), rng.standard_normal((5, 1), "float32")
    x, w = rng.standard_normal((2, 16), "float32"), rng.standard_normal((8, 16), "float32")
    attrs = ir.get_op_def("sum").make_attrs({"axis": [0, 2], "keepdims": True})
    np.testing.assert_allclose(ir.get_op_def("add").compute([a, b], ir.Attrs()), a + b)
    np.testing.assert_allclose(ir.get_op_def("nn.relu").compute([a], ir.Attrs()),
                               np.maximum(a, 0))
    dense = ir.get_op_def("nn.dense")
    np.testing.assert_allclose(dense.compute([x, w], dense.make_attrs()), x @ w.T, rtol=1e-5)
    out = ir.get_op_def("sum").compute([a.astype("int32")], attrs)
    assert out.dtype == np.int32 and out.shape == (1, 1, 1)
    assert ir.get_op_def("sum").pattern == ir.OpPattern.COMM_REDUCE == 3
    assert ir.get_op_def("nn.dense").pattern == ir.OpPattern.OUT_ELEMWISE_FUSABLE


def test_op_builders_come_from_the_registry_and_check_attrs() -> None:
    x, w = ir.var("x", shape=(1, 512)), ir.var("w", shape=(10, 512))
    call = ir.op.nn.dense(x, w, units=10)
    assert call.op is ir.Op.get("nn.dense") and call.args == (x, w)
    assert call.attrs == {"units": 10, "out_dtype": ""}
    assert ir.op.sum(x, 1).attrs.axis == (1,)  # positional attributes follow the inputs
    with pytest.raises(TypeError, match=r"nn.dense: unknown attribute 'unit' \(nn.dense takes "
                                        r"units, out_dtype\)"):
        ir.op.nn.dense(x, w, unit=10)
    with pytest.raises(TypeError, match="attribute units must be int or None, got '10'"):
        ir.op.nn.dense(x, w, units="10")
    with pytest.raises(TypeError, match="nn.dense takes 2 inputs, got 1"):
        ir.op.nn.dense(x)
    with pytest.raises(TypeError, match="input 1 must be an IR expression"):
        ir.op.add(x, 1.0)
    with pytest.raises(AttributeError, match="ir.op.nn has no operator 'conv9d'"):
        ir.op.nn.conv9d  # noqa: B018
    with pytest.raises(KeyError, match="did you mean nn.dense"):
        ir.Op.get("nn.dens")
    assert "dense" in dir(ir.op.nn) and "sum" in dir(ir.op)


def test_register_op_gives_a_builder_without_more_code() -> None:
    name = "test_core.scale"
    opdef = ir.OpDef(name=name, num_inputs=1, attrs_schema={"factor": (float, 1.0)},
                     type_relation=lambda types, attrs: types[0],
                     pattern=ir.OpPattern.ELEMWISE,
                     compute=lambda args, attrs: args[0] * attrs.factor)
    op = ir.register_op(opdef)
    try:
        from ir.op._make import op_builder

        call = op_builder(name)(ir.var("x", shape=(2,)), factor=3)
        assert call.op is op and call.attrs.factor == 3.0 and name in ir.list_ops()
        with pytest.raises(ValueError, match="already registered"):
            ir.register_op(opdef)
    finally:
        ir.Op._table.pop(name)


def test_var_and_const_builders() -> None:
    assert ir.var("x").type_annotation is None
    assert ir.var("x", shape=("n", 3)).type_annotation == tensor("n", 3)
    assert ir.var("x", tensor(2)).type_annotation == tensor(2)
    assert ir.var("x", type_annotation="int32").type_annotation == ir.scalar_type("int32")
    assert ir.const(np.float64(1.5)).dtype == "float64"
    assert ir.const([[1, 2]], dtype="int8").shape == (1, 2)
    with pytest.raises(ValueError, match="not both"):
        ir.var("x", shape=(1,), type_annotation=tensor(1))
