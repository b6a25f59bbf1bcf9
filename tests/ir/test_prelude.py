"""The prelude: its types and functions, written in the text format."""

from __future__ import annotations

import pytest

import ir


def test_prelude_contents():
    p = ir.prelude()
    assert {gv.name for gv in p.functions} >= {"map", "foldl", "foldr", "nth", "length",
                                                "concat"}
    assert {t.name for t in p.type_definitions} == {"List", "Option", "Tree"}
    lst = p[p.get_global_type_var("List")]
    assert [c.name for c in lst.constructors] == ["Cons", "Nil"]
    assert [c.name for c in p[p.get_global_type_var("Option")].constructors] == ["Some", "None"]
    rose = p.get_constructor("Rose")
    assert str(rose.inputs[1]) == "List[Tree[A]]"
    assert len(p["map"].type_params) == 2
    assert p["nth"].body.complete is False
    assert ir.prelude() is not p and ir.prelude() == p


def test_prelude_round_trips():
    p = ir.prelude()
    text = ir.astext(p)
    assert ir.parse(text) == p
    assert ir.astext(ir.parse(text)) == text
    assert ir.load_json(ir.save_json(p)) == p


def test_prelude_type_checks():
    infer = getattr(ir, "infer_type", None)
    if infer is None:
        pytest.skip("type inference is not there yet")
    out = infer(ir.prelude())
    mod = out if isinstance(out, ir.Module) else None
    if mod is None:
        pytest.skip("infer_type does not return a module")
    assert str(mod["length"].checked_type) == "fn[A](List[A]) -> int32"
    assert str(mod["map"].checked_type) == "fn[A, B](fn(A) -> B, List[A]) -> List[B]"
    for gv in mod.functions:
        assert mod[gv].checked_type_or_none is not None, gv.name
