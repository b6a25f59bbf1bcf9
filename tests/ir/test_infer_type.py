"""Type inference (ir.infer_type / ir.infer_expr): unification, operator relations solved
to a fixed point, polymorphism, recursion, ADTs and match, references, symbolic shapes,
error messages with positions, and deep programs."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

import ir
from ir.op import relations as rel
from ir.op._make import op_builder

F32 = "float32"


def tensor(*shape, dtype=F32) -> ir.TensorType:
    return ir.TensorType(shape, dtype)


def scalar(dtype: str = F32) -> ir.TensorType:
    return ir.TensorType((), dtype)


def binary(name: str, out_dtype: str | None = None) -> Callable[..., ir.Call]:
    """The builder of operator ``name``; while it is not registered yet, of a minimal
    test-only stand-in ``test.<name>`` with the broadcasting relation."""
    if name in ir.list_ops():
        return op_builder(name)
    test_name = f"test.{name}"
    if test_name not in ir.list_ops():
        fn = getattr(np, name)
        ir.register_op(ir.OpDef(
            name=test_name, num_inputs=2, attrs_schema={},
            type_relation=rel.broadcast_relation(test_name, out_dtype),
            pattern=ir.OpPattern.BROADCAST, compute=lambda args, attrs, fn=fn: fn(*args)))
    return op_builder(test_name)


add = ir.op.add
relu = ir.op.nn.relu
dense = ir.op.nn.dense
less = binary("less", "bool")
equal = binary("equal", "bool")
subtract = binary("subtract")
multiply = binary("multiply")


def list_adt():
    """``type List[a] { Nil, Cons(a, List[a]) }``."""
    lst, a = ir.GlobalTypeVar("List"), ir.TypeVar("a")
    nil = ir.Constructor("Nil", (), lst, 0)
    cons = ir.Constructor("Cons", (a, ir.TypeCall(lst, (a,))), lst, 1)
    return ir.TypeData(lst, (a,), (nil, cons)), nil, cons


def list_of(t: ir.Type) -> ir.TypeCall:
    return ir.TypeCall(ir.GlobalTypeVar("List"), (t,))


def make_list(nil: ir.Constructor, cons: ir.Constructor, items: list[ir.Expr]) -> ir.Expr:
    out: ir.Expr = ir.Call(nil, [])
    for item in reversed(items):
        out = ir.Call(cons, [item, out])
    return out


def map_function(map_gv: ir.GlobalVar, nil: ir.Constructor,
                 cons: ir.Constructor) -> ir.Function:
    """``def @map[a, b](%f: fn(a) -> b, %l: List[a]) -> List[b]``."""
    a, b = ir.TypeVar("a"), ir.TypeVar("b")
    f = ir.var("f", type_annotation=ir.FuncType((a,), b))
    lst = ir.var("l", type_annotation=list_of(a))
    h, t = ir.var("h"), ir.var("t")
    body = ir.Match(lst, [
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(h), ir.PatternVar(t)]),
                  ir.Call(cons, [ir.Call(f, [h]), ir.Call(map_gv, [f, t])])),
        ir.Clause(ir.PatternConstructor(nil), ir.Call(nil, [])),
    ])
    return ir.Function([f, lst], body, list_of(b), [a, b])


def main_type(mod: ir.Module) -> ir.FuncType:
    return mod["main"].checked_type


# --------------------------------------------------------------------------- basics


def test_annotated_function_gets_types_on_every_node() -> None:
    x, w, b = ir.var("x", shape=(1, 8)), ir.var("w", shape=(4, 8)), ir.var("b", shape=(4,))
    d = dense(x, w)
    s = add(d, b)
    out = relu(s)
    fn = ir.Function([x, w, b], out)
    mod = ir.infer_type(ir.Module({"main": fn}))
    assert d.checked_type == tensor(1, 4) and s.checked_type == tensor(1, 4)
    assert fn.checked_type == ir.FuncType((tensor(1, 8), tensor(4, 8), tensor(4,)),
                                          tensor(1, 4))
    assert x.checked_type == tensor(1, 8)
    # the result fills the return type in; the input module's function is unchanged
    assert mod["main"].ret_type == tensor(1, 4) and fn.ret_type is None
    assert mod["main"].body is out and main_type(mod) == fn.checked_type


def test_unannotated_let_variables_and_global_parameters_are_inferred_and_filled() -> None:
    f_gv = ir.GlobalVar("f")
    p = ir.var("p")  # typed by its caller
    v = ir.var("v")
    f = ir.Function([p], ir.Let(v, relu(p), add(v, v)))
    x = ir.var("x", shape=(2, 3))
    y = ir.var("y")
    main = ir.Function([x], ir.Let(y, ir.Call(f_gv, [x]), ir.Tuple([y, ir.op.sum(y)])))
    mod = ir.infer_type(ir.Module({"f": f, "main": main}))
    assert p.checked_type == tensor(2, 3) and v.checked_type == tensor(2, 3)
    assert main.checked_type.ret_type == ir.TupleType((tensor(2, 3), scalar()))
    new_f = mod["f"]
    assert new_f.params[0].type_annotation == tensor(2, 3)
    assert new_f.ret_type == tensor(2, 3)
    new_let = new_f.body
    assert new_let.var.type_annotation == tensor(2, 3)
    assert new_let.body.args[0] is new_let.var  # uses follow the rewritten binder
    assert new_let.checked_type == tensor(2, 3) and new_let.body.checked_type == tensor(2, 3)
    assert mod["main"].body.var.type_annotation == tensor(2, 3)
    # inferring the filled module again gives the same types
    again = ir.infer_type(mod)
    assert ir.structural_equal(again["f"], new_f)
    assert again["main"].checked_type == main.checked_type


def test_tuples_and_projections() -> None:
    x, y = ir.var("x", shape=(2,)), ir.var("y", shape=(3,), dtype="int32")
    tup = ir.Tuple([x, y])
    item = ir.TupleGetItem(tup, 1)
    fn = ir.Function([x, y], ir.Tuple([item, ir.TupleGetItem(tup, 0), ir.Tuple([])]))
    ir.infer_type(ir.Module({"main": fn}))
    assert tup.checked_type == ir.TupleType((tensor(2), tensor(3, dtype="int32")))
    assert fn.checked_type.ret_type == ir.TupleType(
        (tensor(3, dtype="int32"), tensor(2), ir.TupleType(())))
    bad = ir.Function([x, y], ir.TupleGetItem(tup, 2, span=ir.Span(2, 5)))
    with pytest.raises(ir.IRTypeError, match=r"^2:5: the projection \.2 is out of range for "
                                             r"a tuple of 2 fields"):
        ir.infer_type(ir.Module({"main": bad}))
    with pytest.raises(ir.IRTypeError, match=r"\.0 needs a tuple, got a value of type "
                                             r"Tensor\[\(2\), float32\]"):
        ir.infer_type(ir.Module({"main": ir.Function([x], ir.TupleGetItem(x, 0))}))


def test_projection_of_a_tuple_known_only_later_waits() -> None:
    g_gv = ir.GlobalVar("g")
    p = ir.var("p")
    g = ir.Function([p], relu(ir.TupleGetItem(p, 1)))
    x = ir.var("x", shape=(4,))
    main = ir.Function([x], ir.Call(g_gv, [ir.Tuple([ir.const(1), x])]))
    ir.infer_type(ir.Module({"g": g, "main": main}))
    assert g.checked_type == ir.FuncType((ir.TupleType((scalar("int32"), tensor(4))),),
                                         tensor(4))


def test_if_condition_and_branches() -> None:
    c = ir.var("c", type_annotation="bool")
    x, y = ir.var("x", shape=(1, 10)), ir.var("y", shape=(1, 5))
    ok = ir.If(c, x, relu(x))
    ir.infer_type(ir.Module({"main": ir.Function([c, x], ok)}))
    assert ok.checked_type == tensor(1, 10)

    bad = ir.If(c, x, y, span=ir.Span(4, 3))
    with pytest.raises(ir.IRTypeError) as info:
        ir.infer_type(ir.Module({"main": ir.Function([c, x, y], bad)}))
    assert str(info.value) == ("4:3: the branches of an if have types Tensor[(1, 10), float32] "
                               "and Tensor[(1, 5), float32] (dimension 1: 10 vs 5)")
    assert info.value.span == ir.Span(4, 3)

    cond = ir.var("cond", shape=(1,), dtype="bool")
    with pytest.raises(ir.IRTypeError, match=r"condition of an if must be a bool scalar, "
                                             r"got Tensor\[\(1\), bool\]"):
        ir.infer_type(ir.Module({"main": ir.Function([cond, x], ir.If(cond, x, x))}))


def test_any_dimensions_unify_with_anything() -> None:
    c = ir.var("c", type_annotation="bool")
    x, y = ir.var("x", shape=(ir.Any, 4)), ir.var("y", shape=(3, 4))
    e = ir.If(c, x, y)
    ir.infer_type(ir.Module({"main": ir.Function([c, x, y], e)}))
    assert e.checked_type == tensor(ir.Any, 4)


# ---------------------------------------------------------------------- polymorphism


def test_polymorphic_identity_used_at_two_types() -> None:
    a = ir.TypeVar("a")
    z = ir.var("z", type_annotation=a)
    ident = ir.Function([z], z, type_params=[a])  # return type inferred: a
    id_gv = ir.GlobalVar("id")
    x, n = ir.var("x", shape=(2, 2)), ir.var("n", type_annotation="int32")
    c1, c2 = ir.Call(id_gv, [x]), ir.Call(id_gv, [n])
    mod = ir.infer_type(ir.Module({"id": ident, "main": ir.Function([x, n],
                                                                    ir.Tuple([c1, c2]))}))
    assert c1.checked_type == tensor(2, 2) and c2.checked_type == scalar("int32")
    assert ident.checked_type == ir.FuncType((a,), a, (a,))
    new_main = mod["main"]
    assert [c.type_args for c in new_main.body.fields] == [(tensor(2, 2),), (scalar("int32"),)]
    assert new_main.body.fields[0].checked_type == tensor(2, 2)


def test_polymorphic_map_used_at_two_types_with_a_closure_and_an_operator() -> None:
    data, nil, cons = list_adt()
    map_gv = ir.GlobalVar("map")
    x = ir.var("x", shape=(1, 4))
    i = ir.var("i", type_annotation="int32")
    k = ir.var("k", type_annotation="int32")
    is_small = ir.Function([k], less(k, ir.const(3)))
    floats = make_list(nil, cons, [x, relu(x)])
    ints = make_list(nil, cons, [i, ir.const(7)])
    m1 = ir.Call(map_gv, [is_small, ints])
    m2 = ir.Call(map_gv, [ir.Op.get("nn.relu"), floats])  # an operator as a value
    q = ir.var("q")  # typed by map's instantiation
    m3 = ir.Call(map_gv, [ir.Function([q], ir.op.sum(q)), floats])
    main = ir.Function([x, i], ir.Tuple([m1, m2, m3]))
    mod = ir.Module({"map": map_function(map_gv, nil, cons), "main": main}, {data.header: data})
    out = ir.infer_type(mod)
    assert m1.checked_type == list_of(scalar("bool"))
    assert m2.checked_type == list_of(tensor(1, 4))
    assert m3.checked_type == list_of(scalar())
    assert out["main"].body.fields[0].type_args == (scalar("int32"), scalar("bool"))
    assert mod["map"].checked_type.type_params  # stays polymorphic


def test_let_bound_polymorphic_function_is_instantiated_at_each_call() -> None:
    a = ir.TypeVar("a")
    z = ir.var("z", type_annotation=a)
    ident = ir.var("ident")
    x, n = ir.var("x", shape=(3,)), ir.var("n", type_annotation="int8")
    body = ir.Let(ident, ir.Function([z], z, a, [a]),
                  ir.Tuple([ir.Call(ident, [x]), ir.Call(ident, [n])]))
    ir.infer_type(ir.Module({"main": ir.Function([x, n], body)}))
    assert body.checked_type == ir.TupleType((tensor(3), scalar("int8")))


def test_function_types_unify_up_to_renaming_of_type_params() -> None:
    a, b = ir.TypeVar("a"), ir.TypeVar("b")
    z = ir.var("z", type_annotation=a)
    ident = ir.var("ident", type_annotation=ir.FuncType((b,), b, (b,)))
    x = ir.var("x", shape=(3,))
    body = ir.Let(ident, ir.Function([z], z, None, [a]), ir.Call(ident, [x]))
    ir.infer_type(ir.Module({"main": ir.Function([x], body)}))
    assert body.checked_type == tensor(3)
    # inside a polymorphic function its type parameters are rigid
    bad = ir.Function([z], relu(z), type_params=[a])
    with pytest.raises(ir.IRTypeError, match="nn.relu: input must be a tensor, got a"):
        ir.infer_type(ir.Module({"f": bad}))


def test_unannotated_global_is_monomorphic() -> None:
    g_gv = ir.GlobalVar("g")
    p = ir.var("p")
    x, y = ir.var("x", shape=(2,)), ir.var("y", shape=(3,))
    main = ir.Function([x, y], ir.Tuple([ir.Call(g_gv, [x]), ir.Call(g_gv, [y])]))
    with pytest.raises(ir.IRTypeError, match=r"@g expects Tensor\[\(2\), float32\] for "
                                             r"argument 1, got Tensor\[\(3\), float32\]"):
        ir.infer_type(ir.Module({"g": ir.Function([p], p), "main": main}))


# ----------------------------------------------------------------------- ADTs, match


def test_constructor_calls_instantiate_the_type_variables() -> None:
    data, nil, cons = list_adt()
    x = ir.var("x", shape=(2,))
    lst = make_list(nil, cons, [x, x])
    empty = ir.Call(nil, [])
    ir.infer_type(ir.Module({"main": ir.Function([x], ir.Tuple([lst, empty]))},
                            {data.header: data}))
    assert lst.checked_type == list_of(tensor(2))
    assert isinstance(empty.checked_type.args[0], ir.IncompleteType)  # Nil of unknown type

    bad = ir.Call(cons, [x, make_list(nil, cons, [ir.const(1)])], span=ir.Span(9, 1))
    with pytest.raises(ir.IRTypeError) as info:
        ir.infer_type(ir.Module({"main": ir.Function([x], bad)}, {data.header: data}))
    assert str(info.value) == (
        "9:1: constructor Cons expects List[Tensor[(2), float32]] for argument 2, got "
        "List[int32] (type argument 0: dtype float32 vs int32)")


def test_a_constructor_without_fields_used_as_a_value_is_that_value() -> None:
    data, nil, cons = list_adt()
    c = ir.var("c", type_annotation="bool")
    x = ir.var("x", shape=(2,))
    e = ir.If(c, nil, ir.Call(cons, [x, nil]))  # ``Nil`` as the interpreter reads it
    ir.infer_type(ir.Module({"main": ir.Function([c, x], e)}, {data.header: data}))
    assert e.checked_type == list_of(tensor(2))
    assert isinstance(nil.checked_type, ir.FuncType)  # the node itself: fn[a]() -> List[a]


def test_match_with_nested_and_tuple_patterns() -> None:
    data, nil, cons = list_adt()
    lst = ir.var("l", type_annotation=list_of(tensor(2)))
    a, b, c = ir.var("a"), ir.var("b"), ir.var("c")
    m = ir.Match(lst, [
        ir.Clause(ir.PatternConstructor(cons, [
            ir.PatternVar(a),
            ir.PatternConstructor(cons, [ir.PatternVar(b), ir.PatternWildcard()])]),
            add(a, b)),
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(c), ir.PatternConstructor(nil)]),
                  c),
        ir.Clause(ir.PatternWildcard(), ir.const(np.zeros(2, "float32"))),
    ])
    d, e = ir.var("d"), ir.var("e")
    m2 = ir.Match(ir.Tuple([lst, ir.const(1)]), [
        ir.Clause(ir.PatternTuple([ir.PatternConstructor(cons, [ir.PatternVar(d),
                                                                ir.PatternWildcard()]),
                                   ir.PatternVar(e)]), ir.Tuple([d, e])),
    ], complete=False)
    ir.infer_type(ir.Module({"main": ir.Function([lst], ir.Tuple([m, m2]))},
                            {data.header: data}))
    assert m.checked_type == tensor(2)
    assert a.checked_type == b.checked_type == c.checked_type == tensor(2)
    assert e.checked_type == scalar("int32")
    assert m2.checked_type == ir.TupleType((tensor(2), scalar("int32")))

    bad = ir.Match(lst, [ir.Clause(ir.PatternTuple([ir.PatternWildcard()]), lst)],
                   span=ir.Span(2, 2))
    with pytest.raises(ir.IRTypeError, match=r"^2:2: match: the pattern \(_\) matches tuples "
                                             r"of 1 fields, not List\[Tensor"):
        ir.infer_type(ir.Module({"main": ir.Function([lst], bad)}, {data.header: data}))
    clash = ir.Match(lst, [
        ir.Clause(ir.PatternConstructor(nil), ir.const(1)),
        ir.Clause(ir.PatternWildcard(), ir.const(1.0)),
    ])
    with pytest.raises(ir.IRTypeError, match="clauses of a match have types int32 and float32"):
        ir.infer_type(ir.Module({"main": ir.Function([lst], clash)}, {data.header: data}))


# ------------------------------------------------------------------------- recursion


def test_factorial_over_a_scalar_with_if() -> None:
    fact_gv = ir.GlobalVar("fact")
    n = ir.var("n", type_annotation=F32)
    one = ir.const(1.0)
    body = ir.If(less(n, one), one,
                 multiply(n, ir.Call(fact_gv, [subtract(n, one)])))
    fact = ir.Function([n], body)  # no return type: found through the recursion
    mod = ir.infer_type(ir.Module({"fact": fact}))
    assert fact.checked_type == ir.FuncType((scalar(),), scalar())
    assert mod["fact"].ret_type == scalar()


def test_list_length_is_recursive_and_polymorphic() -> None:
    data, nil, cons = list_adt()
    length_gv = ir.GlobalVar("length")
    a = ir.TypeVar("a")
    lst = ir.var("l", type_annotation=list_of(a))
    t = ir.var("t")
    length = ir.Function([lst], ir.Match(lst, [
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternWildcard(), ir.PatternVar(t)]),
                  add(ir.const(1), ir.Call(length_gv, [t]))),
        ir.Clause(ir.PatternConstructor(nil), ir.const(0)),
    ]), type_params=[a])
    x = ir.var("x", shape=(3,))
    main = ir.Function([x], ir.Tuple([
        ir.Call(length_gv, [make_list(nil, cons, [x, x])]),
        ir.Call(length_gv, [make_list(nil, cons, [ir.const(True)])]),
    ]))
    # main comes first: globals are inferred callees first
    mod = ir.infer_type(ir.Module({"main": main, "length": length}, {data.header: data}))
    assert length.checked_type == ir.FuncType((list_of(a),), scalar("int32"), (a,))
    assert main.checked_type.ret_type == ir.TupleType((scalar("int32"), scalar("int32")))
    assert mod["length"].ret_type == scalar("int32")


def test_mutual_recursion_even_odd() -> None:
    even_gv, odd_gv = ir.GlobalVar("even"), ir.GlobalVar("odd")

    def parity(other: ir.GlobalVar, base: bool) -> ir.Function:
        n = ir.var("n", type_annotation="int32")
        return ir.Function([n], ir.If(equal(n, ir.const(0)), ir.const(base),
                                      ir.Call(other, [subtract(n, ir.const(1))])))

    even, odd = parity(odd_gv, True), parity(even_gv, False)
    ir.infer_type(ir.Module({"even": even, "odd": odd}))
    assert even.checked_type == odd.checked_type == ir.FuncType((scalar("int32"),),
                                                                scalar("bool"))


def test_recursive_local_function() -> None:
    loop = ir.var("loop")
    i = ir.var("i", type_annotation="int32")
    fn = ir.Function([i], ir.If(less(i, ir.const(10)),
                                ir.Call(loop, [add(i, ir.const(1))]), i))
    body = ir.Let(loop, fn, ir.Call(loop, [ir.const(0)]))
    ir.infer_type(ir.Module({"main": ir.Function([], body)}))
    assert loop.checked_type == ir.FuncType((scalar("int32"),), scalar("int32"))


# ------------------------------------------------------------------------ references


def test_references() -> None:
    x = ir.var("x", shape=(2,))
    r, u = ir.var("r"), ir.var("u")
    write = ir.RefWrite(r, add(ir.RefRead(r), x))
    body = ir.Let(r, ir.RefCreate(x), ir.Let(u, write, ir.RefRead(r)))
    ir.infer_type(ir.Module({"main": ir.Function([x], body)}))
    assert r.checked_type == ir.RefType(tensor(2))
    assert write.checked_type == ir.TupleType(()) and u.checked_type == ir.TupleType(())
    assert body.checked_type == tensor(2)

    bad = ir.Let(r, ir.RefCreate(x), ir.RefWrite(r, ir.const(1)))
    with pytest.raises(ir.IRTypeError, match=r"a reference of type ref\(Tensor\[\(2\), "
                                             r"float32\]\) is written a value of type int32"):
        ir.infer_type(ir.Module({"main": ir.Function([x], bad)}))
    with pytest.raises(ir.IRTypeError, match="a reference read needs a reference"):
        ir.infer_type(ir.Module({"main": ir.Function([x], ir.RefRead(x))}))


# -------------------------------------------------------------------- symbolic shapes


def test_symbolic_dims_flow_through_add_and_dense() -> None:
    f_gv = ir.GlobalVar("layer")
    x = ir.var("x", shape=("n", 4))
    w, b = ir.var("w", shape=(10, 4)), ir.var("b", shape=(10,))
    layer = ir.Function([x, w, b], relu(add(dense(x, w), b)))
    y = ir.var("y", shape=("n", 4))
    w2, b2 = ir.var("w2", shape=(10, 4)), ir.var("b2", shape=(10,))
    out = ir.Call(f_gv, [y, w2, b2])
    mod = ir.infer_type(ir.Module({"layer": layer, "main": ir.Function([y, w2, b2], out)}))
    assert layer.checked_type.ret_type == tensor("n", 10)
    assert out.checked_type == tensor("n", 10)
    assert mod["layer"].ret_type == tensor("n", 10)
    # a symbolic dimension is one size for the whole module, not a per-call parameter
    z = ir.var("z", shape=(3, 4))
    with pytest.raises(ir.IRTypeError, match=r"@layer expects Tensor\[\(n, 4\), float32\] "
                                             r"for argument 1.*dimension 0: n vs 3"):
        ir.infer_type(ir.Module({"layer": layer,
                                 "main": ir.Function([z, w2, b2], ir.Call(f_gv, [z, w2, b2]))}))


# --------------------------------------------------------------------------- errors


def test_relation_errors_carry_the_call_span() -> None:
    x, w = ir.var("x", shape=(1, 512)), ir.var("w", shape=(1000, 256))
    call = dense(x, w, span=ir.Span(3, 9))
    with pytest.raises(ir.IRTypeError) as info:
        ir.infer_type(ir.Module({"main": ir.Function([x, w], call)}))
    assert str(info.value) == ("3:9: nn.dense: input (1, 512) and weight (1000, 256) "
                               "disagree on the reduction dimension 512 vs 256")
    assert info.value.span == ir.Span(3, 9)
    # without a span, the message names the global
    with pytest.raises(ir.IRTypeError, match=r"vs 256 \(in @main\)$"):
        ir.infer_type(ir.Module({"main": ir.Function([x, w], dense(x, w))}))


def test_call_argument_mismatch_names_the_callee_and_the_types() -> None:
    f_gv = ir.GlobalVar("f")
    p = ir.var("p", shape=(3,))
    y = ir.var("y", shape=(4,))
    call = ir.Call(f_gv, [y], span=ir.Span(5, 2))
    mod = ir.Module({"f": ir.Function([p], p), "main": ir.Function([y], call)})
    with pytest.raises(ir.IRTypeError) as info:
        ir.infer_type(mod)
    assert str(info.value) == (
        "5:2: @f expects Tensor[(3), float32] for argument 1, got Tensor[(4), float32] "
        "(dimension 0: 3 vs 4)")
    wrong_arity = ir.Module({"f": ir.Function([p], p),
                             "main": ir.Function([y], ir.Call(f_gv, [y, y]))})
    with pytest.raises(ir.IRTypeError, match="@f takes 1 argument, got 2"):
        ir.infer_type(wrong_arity)
    with pytest.raises(ir.IRTypeError, match="@nope is not defined"):
        ir.infer_type(ir.Module({"main": ir.Function([y], ir.Call(ir.GlobalVar("nope"),
                                                                  [y]))}))
    with pytest.raises(ir.IRTypeError, match=r"%y is called but is not a function"):
        ir.infer_type(ir.Module({"main": ir.Function([y], ir.Call(y, []))}))


def test_annotations_are_checked() -> None:
    x = ir.var("x", shape=(2,))
    v = ir.var("v", shape=(3,))
    with pytest.raises(ir.IRTypeError, match=r"let %v has type Tensor\[\(3\), float32\] but "
                                             r"its value has type Tensor\[\(2\), float32\]"):
        ir.infer_type(ir.Module({"main": ir.Function([x], ir.Let(v, relu(x), v))}))
    fn = ir.Function([x], x, ret_type=tensor(2, dtype="int32"))
    with pytest.raises(ir.IRTypeError, match=r"@main is annotated to return "
                                             r"Tensor\[\(2\), int32\], but its body has type "
                                             r"Tensor\[\(2\), float32\] \(dtype int32 vs "
                                             r"float32\)"):
        ir.infer_type(ir.Module({"main": fn}))


def test_unsolvable_programs_are_errors() -> None:
    p = ir.var("p", span=ir.Span(1, 10))
    with pytest.raises(ir.IRTypeError, match=r"^nn.relu: cannot infer the type of its "
                                             r"result: its input types are not known"):
        ir.infer_type(ir.Module({"main": ir.Function([p], relu(p))}))
    with pytest.raises(ir.IRTypeError, match=r"^1:10: cannot infer the type of %p: "
                                             r"annotate it"):
        ir.infer_type(ir.Module({"main": ir.Function([p], ir.Tuple([]))}))
    f = ir.var("f")
    with pytest.raises(ir.IRTypeError, match="infinite type"):
        ir.infer_type(ir.Module({"main": ir.Function([f], ir.Call(f, [f]))}))


def test_relation_waiting_for_a_caller_is_solved_later() -> None:
    g_gv = ir.GlobalVar("g")
    p, q = ir.var("p"), ir.var("q")
    g = ir.Function([p, q], dense(relu(p), q))  # nothing known until @main calls it
    x, w = ir.var("x", shape=(5, 3)), ir.var("w", shape=(7, 3))
    out = ir.Call(g_gv, [x, w])
    ir.infer_type(ir.Module({"g": g, "main": ir.Function([x, w], out)}))
    assert out.checked_type == tensor(5, 7) and g.body.checked_type == tensor(5, 7)


def test_infer_expr() -> None:
    x = ir.var("x", shape=(2, 3))
    e = add(x, ir.const(1.0))
    assert ir.infer_expr(e) == tensor(2, 3) and e.checked_type == tensor(2, 3)
    data, nil, cons = list_adt()
    mod = ir.Module(type_definitions={data.header: data})
    assert ir.infer_expr(make_list(nil, cons, [x]), mod) == list_of(tensor(2, 3))
    out = ir.infer_type(e)
    assert main_type(out) == ir.FuncType((tensor(2, 3),), tensor(2, 3))


# ----------------------------------------------------------------------- deep programs


def test_5000_let_chain() -> None:
    n = 5000
    x = ir.var("x", shape=(1, 4))
    vs = [ir.var(f"v{i}") for i in range(n)]
    body: ir.Expr = vs[-1]
    for i in reversed(range(n)):
        body = ir.Let(vs[i], relu(vs[i - 1] if i else x), body)
    fn = ir.Function([x], body)
    mod = ir.infer_type(ir.Module({"main": fn}))
    assert body.checked_type == tensor(1, 4) and vs[2500].checked_type == tensor(1, 4)
    let = mod["main"].body
    for _ in range(n):
        assert let.var.type_annotation == tensor(1, 4) and let.checked_type == tensor(1, 4)
        let = let.body


def test_long_call_chain_and_deep_list() -> None:
    data, nil, cons = list_adt()
    x = ir.var("x", shape=(1, 4))
    y: ir.Expr = x
    for _ in range(5000):
        y = relu(y)
    lst = make_list(nil, cons, [x] * 3000)
    ir.infer_type(ir.Module({"main": ir.Function([x], ir.Tuple([y, lst]))},
                            {data.header: data}))
    assert y.checked_type == tensor(1, 4) and lst.checked_type == list_of(tensor(1, 4))


def build_1000_op_model(width: int = 64, blocks: int = 250) -> ir.Module:
    """250 residual blocks of dense + add (bias) + relu + add (residual): 1000 operators."""
    x = ir.var("x", shape=(1, width))
    params = [x]
    h: ir.Expr = x
    for i in range(blocks):
        w, b = ir.var(f"w{i}", shape=(width, width)), ir.var(f"b{i}", shape=(width,))
        params += [w, b]
        h = add(relu(add(dense(h, w), b)), h)
    return ir.Module({"main": ir.Function(params, h)})


def test_1000_operator_model_infers_fast() -> None:
    mod = build_1000_op_model()
    start = time.perf_counter()
    out = ir.infer_type(mod)
    elapsed = time.perf_counter() - start
    print(f"\ninfer_type of a 1000-operator model: {elapsed * 1e3:.1f} ms")
    assert out["main"].ret_type == tensor(1, 64)
