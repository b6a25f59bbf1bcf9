"""The text format: printing, parsing, round trips, error positions, depth safety."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.text import ParseError, astext, parse, parse_expr

from .programs import ALL


def _nodes(e: ir.Expr) -> set[int]:
    """ids of the distinct call nodes reachable from ``e`` (sharing counted once)."""
    seen, stack, calls = set(), [e], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, ir.Call):
            calls.add(id(n))
            stack += [n.op, *n.args]
        elif isinstance(n, ir.Function):
            stack.append(n.body)
        elif isinstance(n, ir.Let):
            stack += [n.value, n.body]
        elif isinstance(n, ir.Tuple):
            stack += list(n.fields)
    return calls


@pytest.mark.parametrize("name", sorted(ALL))
def test_round_trip(name):
    m = ALL[name]()
    text = astext(m)
    assert text.startswith('#[version = "0.0.5"]\n')
    back = parse(text)
    assert back == m
    for gv, fn in m.functions.items():
        assert ir.structural_equal(back[gv.name], fn)
    assert astext(back) == text  # printing is stable
    assert str(m) == text


def test_round_trip_expr():
    x = ir.var("x", shape=(2,))
    e = ir.op.add(ir.op.exp(x), ir.const(1.0))
    text = astext(e)
    back = parse_expr(text, free_vars=[x])
    assert ir.structural_equal(back, e)
    f = ir.Function([x], e)
    assert ir.structural_equal(parse_expr(astext(f)), f)


def test_dag_prints_once_and_sharing_is_restored():
    x = ir.var("x", shape=(4,))
    h = x
    for _ in range(200):  # each level uses the previous one twice: a tree of 2**200 paths
        h = ir.op.add(h, h)
    m = ir.Module({"main": ir.Function([x], h)})
    text = astext(m)
    assert text.count("add(") == 200
    back = parse(text)
    assert back == m
    assert len(_nodes(back["main"])) == 200


def test_graph_form_and_names():
    m = ALL["mlp"]()
    text = astext(m)
    assert "%0 = nn.dense(%x, %w, units=3);" in text
    assert "add(%1, %1)" in text
    assert "meta[relay.Constant][0]" in text and "#[metadata]" in text
    odd = astext(ALL["odd_names"]())
    assert "%x1" in odd and "%a_b" in odd


def test_long_let_chain_is_not_recursive():
    x = ir.var("x", shape=(2,))
    vs = [ir.var(f"v{i}") for i in range(3000)]
    body: ir.Expr = vs[-1]
    for i in reversed(range(3000)):
        body = ir.Let(vs[i], ir.op.add(x if i == 0 else vs[i - 1], x), body)
    m = ir.Module({"main": ir.Function([x], body)})
    text = astext(m)
    assert text.count("let %") == 3000
    back = parse(text)
    assert back == m


def test_long_dataflow_chain():
    x = ir.var("x", shape=(2,))
    h = x
    for _ in range(3000):
        h = ir.op.nn.relu(h)
    m = ir.Module({"main": ir.Function([x], h)})
    back = parse(astext(m))
    assert back == m


def test_deep_nesting_is_a_parse_error():
    text = "fn (%x) { " + "(" * 600 + "%x" + ")" * 600 + " }"
    with pytest.raises(ParseError, match="nested deeper than 500") as err:
        parse_expr(text)
    assert err.value.line == 1
    # 400 levels parse fine
    text = "fn (%x) { " + "(" * 400 + "%x" + ")" * 400 + " }"
    assert isinstance(parse_expr(text), ir.Function)
    nested = "#[version = \"0.0.5\"]\ndef @main(%x) {\n" + "fn () {\n" * 300 + "%x" \
        + "}\n" * 300 + "}\n"
    assert parse(nested)["main"] is not None


RELAY_PROGRAM = """\
#[version = "0.0.5"]
// conv2d + bias_add + relu, as TVM prints it
def @main(%data: Tensor[(1, 3, 224, 224), float32], %weight: Tensor[(64, 3, 7, 7), float32],
          %bias: Tensor[(64), float32]) -> Tensor[(1, 64, 112, 112), float32] {
  %0 = nn.conv2d(%data, %weight, strides=[2, 2], padding=[3, 3, 3, 3], channels=64,
                 kernel_size=[7, 7]) /* ty=Tensor[(1, 64, 112, 112), float32] */;
  %1 = nn.bias_add(%0, %bias, axis=1);
  nn.relu(%1)
}
"""


def test_hand_written_relay_program():
    m = parse(RELAY_PROGRAM)
    body = m["main"].body
    assert isinstance(body, ir.Call) and body.op.name == "nn.relu"
    bias_add = body.args[0]
    conv = bias_add.args[0]
    assert conv.op.name == "nn.conv2d"
    assert conv.attrs.strides == (2, 2) and conv.attrs.padding == (3, 3, 3, 3)
    assert conv.attrs.channels == 64 and conv.attrs.kernel_size == (7, 7)
    assert conv.attrs.data_layout == "NCHW"  # default filled in
    assert conv.span == ir.Span(5, 8)
    assert m["main"].params[2].type_annotation == ir.TensorType((64,), "float32")
    assert parse(astext(m)) == m


def test_hand_written_inline_program():
    text = """
    #[version = "0.0.5"]
    type List[A] { Cons(A, List[A]), Nil }
    def @sum_list(%l: List[float32]) -> float32 {
      match (%l) { Cons(%h, %t) => add(%h, @sum_list(%t)), Nil => 0f }
    }
    def @main(%x: (float32, float32)) {
      let %y = (fn (%a) { multiply(%a, 2f) })(%x.0);
      let %z = (let %q = add(%y, 1f); %q);
      @sum_list(Cons(%z, Cons(%x.1, Nil)))
    }
    """
    m = parse(text)
    assert parse(astext(m)) == m
    main = m["main"].body
    assert isinstance(main, ir.Let) and isinstance(main.value.op, ir.Function)
    assert isinstance(main.body.value, ir.Let)


def test_spans():
    m = parse(RELAY_PROGRAM)
    fn = m["main"]
    assert fn.params[0].span.line == 3 and fn.params[0].span.column == 11
    assert fn.body.span == ir.Span(8, 3)


ERRORS = [
    # (text, line, column, message fragment)
    ("def @main(%x) {\n  %0 = nn.dense(%x, %x;\n  %0\n}", 2, 23,
     "expected ')' after the arguments of nn.dense, found ';'"),
    ("def @main(%x) {\n  nn.dense2(%x, %x)\n}", 2, 3, "unknown operator or constructor"),
    ("def @main(%x) {\n  add(%x, %y)\n}", 2, 11, "undefined variable %y"),
    ("def @main(%x) {\n  Foo(%x)\n}", 2, 3, "unknown operator or constructor 'Foo'"),
    ("def @main(%x) {\n  match (%x) { Bar(%h) => %h }\n}", 2, 16,
     "unknown constructor 'Bar' in a pattern"),
    ("def @main(%x) {\n  @g(%x)\n}", 2, 3, "undefined global @g"),
    ("def @main(%x: Tensor[(1, 2), flaot32]) {\n  %x\n}", 1, 30, "unknown dtype"),
    ("def @main(%x) {\n  let %y = add(%x, %x)\n  %y\n}", 3, 3,
     "expected ';' after the value of 'let %y'"),
    ("def @main(%x) {\n  if (%x) { %x }\n}", 3, 1, "expected 'else'"),
    ("def @main(%x) {\n  nn.relu(%x, %x)\n}", 2, 3, "nn.relu takes 1 input"),
    ("def @main(%x) {\n  nn.dense(%x, %x, unitz=3)\n}", 2, 3, "unknown attribute 'unitz'"),
    ("def @main(%x) {\n  %x\n}\nfoo", 4, 1, "expected 'def', 'type' or the end of the text"),
    ("def @main(%x) {\n  (%x, meta[relay.Constant][0])\n}", 2, 8,
     "meta[relay.Constant][0] is not in the #[metadata] section"),
    ("def @main(%x) {\n  add(%x, 300i8)\n}", 2, 11, "out of range for int8"),
    ("def @main(%x) {\n  add(%x, $)\n}", 2, 11, "unexpected character '$'"),
    ("def @main(%x) {\n  %x\n}\ndef @main(%y) {\n  %y\n}", 4, 5, "defined twice"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), ERRORS)
def test_parse_errors(text, line, column, fragment):
    with pytest.raises(ParseError) as err:
        parse(text)
    e = err.value
    assert isinstance(e, ValueError)
    assert fragment in str(e)
    assert (e.line, e.column) == (line, column), str(e)
    assert str(e).startswith(f"{line}:{column}: ")


def test_parse_error_source_name():
    with pytest.raises(ParseError, match=r"^model.rly:1:1: expected 'def'"):
        parse("%x", source="model.rly")


def test_ops_registered_later_parse():
    name = "test_text.my_op"
    if name not in ir.list_ops():
        ir.register_op(ir.OpDef(
            name=name, num_inputs=1, attrs_schema={"alpha": (float, 0.5)},
            type_relation=lambda types, attrs: types[0], pattern=ir.OpPattern.ELEMWISE,
            compute=lambda args, attrs: args[0]))
    m = parse("def @main(%x) { test_text.my_op(%x, alpha=2f) }")
    assert m["main"].body.attrs.alpha == 2.0
    assert "test_text.my_op(%x, alpha=2.0f)" in astext(m)


def test_scalar_literals():
    cases = {"1f": ("float32", 1.0), "1.5": ("float32", 1.5), "2": ("int32", 2),
             "-3i64": ("int64", -3), "7u8": ("uint8", 7), "0.25f16": ("float16", 0.25),
             "1e-3f64": ("float64", 1e-3), "True": ("bool", True), "-inff": ("float32", -np.inf)}
    for text, (dtype, value) in cases.items():
        c = parse_expr(text)
        assert isinstance(c, ir.Constant) and c.dtype == dtype and c.data[()] == value, text


def test_prelude_prints_and_parses():
    p = ir.prelude()
    text = astext(p)
    assert parse(text) == p
    assert astext(parse(text)) == text


def test_tvm_pad_value_as_an_input_is_read_as_the_attribute():
    newer = ir.parse('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2, 3), float32]) {\n'
                     '  nn.pad(%x, 1.5f, pad_width=[[0, 0], [1, 1]])\n}')
    older = ir.parse('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2, 3), float32]) {\n'
                     '  nn.pad(%x, pad_width=[[0, 0], [1, 1]], pad_value=1.5f)\n}')
    assert newer == older
    out = ir.evaluate(newer, np.zeros((2, 3), "float32"))
    np.testing.assert_array_equal(out[:, [0, -1]], 1.5)
    with pytest.raises(ir.ParseError, match="pad value must be a scalar constant"):
        ir.parse("def @main(%x: Tensor[(3,), float32], %v: float32) {\n"
                 "  nn.pad(%x, %v, pad_width=[[1, 1]])\n}")
