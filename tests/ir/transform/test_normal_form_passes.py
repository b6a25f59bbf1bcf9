"""ToANormalForm / ToGraphNormalForm as passes: opt level 1, meaning kept, Primitive
functions left alone, and each undoes the other's lets."""

from __future__ import annotations

import ir
from ir.op import add, multiply, nn
from ir.transform import PassContext, ToANormalForm, ToGraphNormalForm

from .helpers import run


def _f() -> ir.Function:
    x = ir.var("x", shape=(3,))
    shared = nn.relu(x)
    return ir.Function([x], add(multiply(shared, shared), x))


def test_round_trip():
    p = ir.var("p", shape=(3,))
    prim = ir.Function([p], add(p, p)).with_attr("Primitive", 1)
    mod = ir.Module({"main": _f(), "prim": prim})
    anf = run(ToANormalForm(), mod)
    assert isinstance(anf["main"].body, ir.Let) and anf["prim"] is prim
    gnf = run(ToGraphNormalForm(), anf)
    assert gnf == mod and gnf["prim"] is prim


def test_opt_level_one():
    mod = ir.Module({"main": _f()})
    with PassContext(opt_level=0, check_meaning=True):
        assert ToANormalForm()(mod) is mod and ToGraphNormalForm()(mod) is mod
    assert (ToANormalForm().opt_level, ToGraphNormalForm().opt_level) == (1, 1)


def test_graph_form_keeps_effectful_calls_bound_when_another_global_uses_refs():
    x = ir.var("x", shape=(3,))
    p = ir.var("p", shape=(3,))
    r, a = ir.Var("r"), ir.Var("a")
    g = ir.GlobalVar("g")
    bumps = ir.Function([p], ir.Let(r, ir.RefCreate(p), ir.RefRead(r)))
    main = ir.Function([x], ir.Let(a, ir.Call(g, [x]), add(a, a)))
    out = run(ToGraphNormalForm(), ir.Module({"main": main, "g": bumps}))
    assert isinstance(out["main"].body, ir.Let)       # the call of @g stays bound
