"""JSON serialisation: round trips, sharing, side files, limits and malformed input."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ir

from .programs import ALL


@pytest.mark.parametrize("name", sorted(ALL))
def test_json_round_trip(name):
    m = ALL[name]()
    text = ir.save_json(m)
    back = ir.load_json(text)
    assert back == m
    assert ir.astext(back) == ir.astext(m)
    assert ir.from_json_dict(json.loads(text)) == m


def test_prelude_json_round_trip():
    p = ir.prelude()
    assert ir.load_json(ir.save_json(p)) == p


def test_sharing_binders_and_types_survive():
    x = ir.var("x", shape=(4,))
    h = x
    for _ in range(100):
        h = ir.op.add(h, h)
    m = ir.Module({"main": ir.Function([x], h)})
    doc = ir.to_json_dict(m)
    assert len(doc["nodes"]) == 100 + 3  # x, the op, 100 calls, the function
    back = ir.load_json(ir.save_json(m))
    assert back == m
    body = back["main"].body
    assert body.args[0] is body.args[1]
    inner = body
    while isinstance(inner, ir.Call):
        inner = inner.args[0]
    assert inner is back["main"].params[0]  # the binder and its uses are one Var


def test_checked_types_spans_and_type_args_kept():
    m = ir.parse("def @main(%x: Tensor[(2), float32]) {\n  add(%x, %x)\n}")
    body = m["main"].body
    ir.set_checked_type(body, ir.TensorType((2,), "float32"))
    back = ir.load_json(ir.save_json(m))
    assert back["main"].body.checked_type == ir.TensorType((2,), "float32")
    assert back["main"].body.span == ir.Span(2, 3)
    a = ir.TypeVar("a")
    call = ir.Call(ir.GlobalVar("id"), [ir.const(1)], type_args=[ir.scalar_type("int32")])
    x = ir.var("x", type_annotation=a)
    m2 = ir.Module({"id": ir.Function([x], x, a, [a]), "main": ir.Function([], call)})
    assert ir.load_json(ir.save_json(m2)) == m2


def test_incomplete_and_relation_types():
    rel = ir.TypeRelation("add", (ir.scalar_type("float32"), ir.IncompleteType(7)), 1,
                          ir.Attrs(axis=(1, 2)))
    f = ir.var("f", type_annotation=ir.FuncType([ir.IncompleteType(7)], ir.IncompleteType(7),
                                                 [], [rel]))
    m = ir.Module({"main": ir.Function([f], f)})
    assert ir.load_json(ir.save_json(m)) == m


def test_long_let_chain():
    x = ir.var("x", shape=(2,))
    vs = [ir.var(f"v{i}") for i in range(5000)]
    body: ir.Expr = vs[-1]
    for i in reversed(range(5000)):
        body = ir.Let(vs[i], ir.op.add(x if i == 0 else vs[i - 1], x), body)
    m = ir.Module({"main": ir.Function([x], body)})
    assert ir.load_json(ir.save_json(m)) == m


def test_side_npz_file(tmp_path):
    big = ir.const(np.random.default_rng(0).standard_normal((64, 64)).astype("float32"))
    small = ir.const(np.ones(3, "float32"))
    m = ir.Module({"main": ir.Function([], ir.Tuple([big, small]))})
    path = str(tmp_path / "consts.npz")
    text = ir.save_json(m, npz_path=path, inline_limit=1024)
    assert len(text) < 2000  # the big constant is in the side file
    assert ir.load_json(text, npz_path=path) == m
    with pytest.raises(ValueError, match="side .npz file"):
        ir.load_json(text)


def _doc():
    return ir.to_json_dict(ALL["mlp"]())


def test_limits():
    text = ir.save_json(ALL["mlp"]())
    with pytest.raises(ValueError, match="exceed the limit"):
        ir.load_json(text, max_bytes=100)
    with pytest.raises(ValueError, match="nodes exceed the limit"):
        ir.load_json(text, max_nodes=5)
    deep = "[" * 1000 + "]" * 1000
    with pytest.raises(ValueError, match="nested 1000 deep"):
        ir.load_json(deep)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(format="other"), "not a tensortune.ir document"),
    (lambda d: d["nodes"].append({"k": "Eval", "code": "1"}), "unknown node kind 'Eval'"),
    (lambda d: d["nodes"][-1].update(body=10**6), "not the index of an earlier entry"),
    (lambda d: d["nodes"][-2].update(args=[len(d["nodes"])]), "not the index of an earlier"),
    (lambda d: next(n for n in d["nodes"] if n["k"] == "Op").update(name="os.system"),
     "unknown operator"),
    (lambda d: next(n for n in d["nodes"] if n["k"] == "Constant").update(data="!!"),
     "not valid base64"),
    (lambda d: next(n for n in d["nodes"] if n["k"] == "Constant").update(dtype="object"),
     "not a numeric"),
    (lambda d: next(n for n in d["nodes"] if n["k"] == "Constant").update(shape=[1000]),
     "needs 4000 bytes"),
    (lambda d: next(n for n in d["nodes"] if n["k"] == "Call").update(args=[]),
     "takes 2 inputs"),
    (lambda d: d["functions"].append({"name": "f", "node": 0}), "not what is needed"),
    (lambda d: d["types"].append({"k": "tensor", "shape": [-1], "dtype": "float32"}),
     "bad dimension"),
])
def test_malformed_documents(mutate, message):
    doc = _doc()
    mutate(doc)
    with pytest.raises(ValueError, match=message):
        ir.load_json(json.dumps(doc))
