"""Test programs built with the builder API, covering every expression kind and type (used
by the text and JSON round-trip tests)."""

from __future__ import annotations

import numpy as np

import ir

F32 = "float32"


def tensor(*shape, dtype=F32) -> ir.TensorType:
    return ir.TensorType(shape, dtype)


def mlp() -> ir.Module:
    x = ir.var("x", shape=(1, 4))
    w = ir.var("w", shape=(3, 4))
    h = ir.op.nn.relu(ir.op.nn.dense(x, w, units=3))
    bias = ir.const(np.arange(3, dtype="float32"))
    out = ir.op.add(ir.op.add(h, h), bias)  # h is shared: a DAG
    return ir.Module({"main": ir.Function([x, w], out, tensor(1, 3))})


def conv_block() -> ir.Module:
    x = ir.var("x", shape=(1, 3, 224, 224))
    w = ir.var("w", shape=(64, 3, 3, 3))
    b = ir.var("b", shape=(64,))
    y = ir.op.nn.conv2d(x, w, padding=(1, 1), channels=64, kernel_size=(3, 3))
    y = ir.op.nn.relu(ir.op.nn.bias_add(y, b, axis=1))
    y = ir.op.clip(y, a_min=0.0, a_max=6.5)
    fused = ir.Function([x, w, b], y, attrs={"Primitive": 1, "Compiler": "ccompiler"})
    x2, w2, b2 = ir.var("x", shape=(1, 3, 224, 224)), ir.var("w", shape=(64, 3, 3, 3)), \
        ir.var("b", shape=(64,))
    return ir.Module({"main": ir.Function([x2, w2, b2], ir.Call(fused, [x2, w2, b2]))})


def let_chain(n: int = 20) -> ir.Module:
    x = ir.var("x", shape=(2, 2))
    vs = [ir.var("v", shape=(2, 2)) if i % 2 else ir.var(f"v{i}") for i in range(n)]
    body: ir.Expr = vs[-1]
    for i in reversed(range(n)):
        prev = x if i == 0 else vs[i - 1]
        body = ir.Let(vs[i], ir.op.nn.relu(ir.op.add(prev, ir.const(1.0))), body)
    return ir.Module({"main": ir.Function([x], body)})


def closures() -> ir.Module:
    # fn (%x) { let %c = x + 1; fn (%y) { %y * %c } } ; applied twice
    x = ir.var("x", shape=(3,))
    c = ir.var("c")
    y = ir.var("y", shape=(3,))
    inner = ir.Function([y], ir.op.multiply(y, c))
    make = ir.Function([x], ir.Let(c, ir.op.add(x, ir.const(1.0)), inner))
    mk, f = ir.var("make"), ir.var("f")
    a = ir.var("a", shape=(3,))
    body = ir.Let(mk, make, ir.Let(f, ir.Call(mk, [a]), ir.Call(f, [ir.Call(f, [a])])))
    # a recursive local function (let-bound, calls itself)
    n = ir.var("n", type_annotation="int32")
    loop = ir.var("loop")
    rec = ir.Function([n], ir.If(ir.op.equal(n, ir.const(0)), n,
                                 ir.Call(loop, [ir.op.subtract(n, ir.const(1))])))
    k = ir.var("k", type_annotation="int32")
    main2 = ir.Function([k], ir.Let(loop, rec, ir.Call(loop, [k])))
    # a function literal as an argument and as a callee
    z = ir.var("z", shape=(3,))
    direct = ir.Call(ir.Function([z], ir.op.negative(z)), [a])
    return ir.Module({"main": ir.Function([a], ir.Tuple([body, direct])), "count": main2})


def control() -> ir.Module:
    x = ir.var("x", shape=(2,))
    c = ir.var("c", type_annotation="bool")
    t = ir.var("t")
    nested_let = ir.Let(t, ir.op.exp(x), ir.op.add(t, x))
    # a let in operand position (a nested block) and a let whose value is a let
    u = ir.var("u")
    inner_u = ir.var("w")
    let_value = ir.Let(inner_u, ir.op.sqrt(x), ir.op.log(inner_u))
    tail = ir.Let(u, let_value, ir.op.add(nested_let, u))
    body = ir.If(c, tail, ir.If(ir.op.logical_not(c), ir.op.negative(x), x))
    return ir.Module({"main": ir.Function([c, x], body, tensor(2))})


def tuples_refs() -> ir.Module:
    x = ir.var("x", shape=(2,))
    tup = ir.Tuple([x, ir.Tuple([x, ir.const(True)]), ir.Tuple([])])
    one = ir.Tuple([x])
    get = ir.TupleGetItem(ir.TupleGetItem(tup, 1), 0)
    r = ir.var("r")
    body = ir.Let(r, ir.RefCreate(get), ir.Let(ir.var("_"), ir.RefWrite(r, ir.op.add(x, x)),
                                               ir.Tuple([ir.RefRead(r), one, tup])))
    ann = ir.var("p", type_annotation=ir.TupleType([tensor(2), ir.RefType(tensor(2)),
                                                     ir.TupleType([tensor(1)])]))
    f2 = ir.Function([ann], ir.RefRead(ir.TupleGetItem(ann, 1)))
    return ir.Module({"main": ir.Function([x], body), "deref": f2})


def adts() -> ir.Module:
    """A user ADT, nested / wildcard / variable / tuple patterns, an incomplete match."""
    shape = ir.GlobalTypeVar("Shape")
    a = ir.TypeVar("A")
    circle = ir.Constructor("Circle", [tensor()], shape, 0)
    rect = ir.Constructor("Rect", [tensor(), tensor()], shape, 1)
    empty = ir.Constructor("Empty", [], shape, 2)
    shape_data = ir.TypeData(shape, [], [circle, rect, empty])
    pair = ir.GlobalTypeVar("Pair")
    mk = ir.Constructor("MkPair", [a, ir.TypeCall(shape, [])], pair, 0)
    pair_data = ir.TypeData(pair, [a], [mk])
    s = ir.var("s", type_annotation=ir.TypeCall(pair, [tensor(2)]))
    r, w, h, v = ir.var("r"), ir.var("w"), ir.var("h"), ir.var("v")
    clauses = [
        ir.Clause(ir.PatternConstructor(mk, [ir.PatternVar(v), ir.PatternConstructor(
            circle, [ir.PatternVar(r)])]), ir.op.multiply(v, r)),
        ir.Clause(ir.PatternConstructor(mk, [ir.PatternWildcard(), ir.PatternConstructor(
            rect, [ir.PatternVar(w), ir.PatternVar(h)])]), ir.op.multiply(w, h)),
        ir.Clause(ir.PatternWildcard(), ir.const(0.0)),
    ]
    area = ir.Function([s], ir.Match(s, clauses))
    p, q = ir.var("p"), ir.var("q")
    tm = ir.Match(ir.Tuple([ir.const(1), ir.const(2)]),
                  [ir.Clause(ir.PatternTuple([ir.PatternVar(p), ir.PatternVar(q)]),
                             ir.op.add(p, q))], complete=False)
    m = ir.Module(type_definitions={shape: shape_data, pair: pair_data})
    m.add("area", area)
    m.add("tuple_match", ir.Function([], tm))
    m.add("make", ir.Function([], ir.Call(mk, [ir.const(np.ones(2, "float32")),
                                              ir.Call(empty, [])])))
    m.add("ctor_value", ir.Function([], ir.Tuple([circle, empty, ir.Op.get("add")])))
    return m


def mutual_recursion() -> ir.Module:
    even, odd = ir.GlobalVar("even"), ir.GlobalVar("odd")
    n1, n2 = ir.var("n", type_annotation="int32"), ir.var("n", type_annotation="int32")
    zero, one = ir.const(0), ir.const(1)
    fe = ir.Function([n1], ir.If(ir.op.equal(n1, zero), ir.const(True),
                                 ir.Call(odd, [ir.op.subtract(n1, one)])), tensor(dtype="bool"))
    fo = ir.Function([n2], ir.If(ir.op.equal(n2, zero), ir.const(False),
                                 ir.Call(even, [ir.op.subtract(n2, one)])), tensor(dtype="bool"))
    return ir.Module({even: fe, odd: fo})


def polymorphism() -> ir.Module:
    a, b = ir.TypeVar("A"), ir.TypeVar("B")
    x = ir.var("x", type_annotation=a)
    ident = ir.Function([x], x, a, [a])
    # a polymorphic function type annotation and an inner polymorphic function
    f = ir.var("f", type_annotation=ir.FuncType([b], b, [b]))
    c = ir.TypeVar("A")  # same name as the outer one: printed as A1
    y = ir.var("y", type_annotation=c)
    inner = ir.Function([y], ir.Call(f, [y]), c, [c])
    apply = ir.Function([f], inner, None, [])
    x2 = ir.var("x", shape=(2,))
    main = ir.Function([x2], ir.Tuple([ir.Call(ir.GlobalVar("id"), [x2]),
                                       ir.Call(ir.GlobalVar("id"), [ir.const(1)])]))
    return ir.Module({"id": ident, "apply": apply, "main": main})


def constants() -> ir.Module:
    big = ir.const(np.arange(12, dtype="float32").reshape(3, 4))
    scalars = [ir.const(1.5), ir.const(-2), ir.const(np.int64(7)), ir.const(np.int8(-3)),
               ir.const(np.uint8(200)), ir.const(np.float16(0.1)), ir.const(np.float64(0.1)),
               ir.const(True), ir.const(np.float32(-0.0)), ir.const(np.float32(np.inf)),
               ir.const(np.float32(np.nan)), ir.const(np.float32(1e-30)),
               ir.const(np.uint64(2**64 - 1)), ir.const(np.complex64(1 + 2j)),
               ir.const(np.zeros((0, 3), "float32")), ir.const(np.array([True, False]))]
    return ir.Module({"main": ir.Function([], ir.Tuple([big, big, *scalars]))})


def symbolic() -> ir.Module:
    x = ir.var("x", shape=("n", 4))
    y = ir.var("y", shape=(ir.Any, 4))
    s = ir.var("s", shape=(5,))
    return ir.Module({"main": ir.Function([x, y, s], ir.op.add(x, y),
                                          ir.TensorType(("n", 4), F32))})


def odd_names() -> ir.Module:
    a, b = ir.var("x", shape=(1,)), ir.var("x", shape=(1,))
    c, d, e = ir.var("0"), ir.var("a.b"), ir.var("")
    body = ir.Let(c, ir.op.add(a, b), ir.Let(d, c, ir.Let(e, d, ir.Tuple([e, a, b]))))
    return ir.Module({"main": ir.Function([a, b], body)})


ALL = {f.__name__: f for f in (mlp, conv_block, let_chain, closures, control, tuples_refs,
                               adts, mutual_recursion, polymorphism, constants, symbolic,
                               odd_names)}
