"""The worked example: the generative RNN of the Relay paper. A recursive global
``@generate(n, input, hidden, params)`` runs an RNN cell and conses each output onto a
``List`` until ``n == 0``; the output of a step is the next step's input. It runs in the
interpreter and matches a numpy loop step by step; it type-checks when ``ir.infer_type``
exists, and reads from the text format when ``ir.parse`` does."""

from __future__ import annotations

import numpy as np
import pytest

import ir

F32 = "float32"
IN, HID, STEPS = 8, 16, 12


def list_type() -> tuple[ir.TypeData, ir.Constructor, ir.Constructor]:
    lst, a = ir.GlobalTypeVar("List"), ir.TypeVar("a")
    nil = ir.Constructor("Nil", (), lst, 0)
    cons = ir.Constructor("Cons", (a, ir.TypeCall(lst, (a,))), lst, 1)
    return ir.TypeData(lst, (a,), (nil, cons)), nil, cons


def rnn_module(in_size: int = IN, hidden: int = HID) -> ir.Module:
    data, nil, cons = list_type()
    mod = ir.Module(type_definitions={data.header: data})
    vec_in, vec_hid = ir.TensorType((1, in_size), F32), ir.TensorType((1, hidden), F32)
    params_t = ir.TupleType((ir.TensorType((hidden, in_size), F32),
                             ir.TensorType((hidden, hidden), F32),
                             ir.TensorType((hidden,), F32), ir.TensorType((in_size, hidden), F32)))

    # @cell(%input, %hidden, %params) -> (output, hidden')
    x, h, p = ir.var("input", vec_in), ir.var("hidden", vec_hid), ir.var("params", params_t)
    h2, out = ir.var("new_hidden"), ir.var("output")
    w_ih, w_hh, b, w_ho = (ir.TupleGetItem(p, i) for i in range(4))
    cell = ir.Function([x, h, p], ir.Let(
        h2, ir.op.tanh(ir.op.add(ir.op.add(ir.op.nn.dense(x, w_ih), ir.op.nn.dense(h, w_hh)),
                                 b)),
        ir.Let(out, ir.op.nn.dense(h2, w_ho), ir.Tuple([out, h2]))))
    cell_gv = mod.add("cell", cell)

    # @generate(%n, %input, %hidden, %params) -> List[Tensor[(1, in_size)]]
    n = ir.var("n", shape=(), dtype="int32")
    x, h, p = ir.var("input", vec_in), ir.var("hidden", vec_hid), ir.var("params", params_t)
    step = ir.var("step")
    gen = ir.GlobalVar("generate")
    body = ir.If(
        ir.op.equal(n, ir.const(0)),
        ir.Call(nil, []),
        ir.Let(step, ir.Call(cell_gv, [x, h, p]),
               ir.Call(cons, [ir.TupleGetItem(step, 0), ir.Call(gen, [
                   ir.op.subtract(n, ir.const(1)), ir.TupleGetItem(step, 0),
                   ir.TupleGetItem(step, 1), p])])))
    list_out = ir.TypeCall(data.header, (vec_in,))
    mod.add(gen, ir.Function([n, x, h, p], body, ret_type=list_out))

    # @main(%n, %input, %hidden, %w_ih, %w_hh, %b, %w_ho)
    args = [ir.var("n", shape=(), dtype="int32"), ir.var("input", vec_in),
            ir.var("hidden", vec_hid)] + [ir.var(name, t) for name, t in zip(
                ("w_ih", "w_hh", "b", "w_ho"), params_t.fields, strict=True)]
    mod.add("main", ir.Function(args, ir.Call(gen, [*args[:3], ir.Tuple(args[3:])])))
    return mod


def numpy_generate(n, x, h, w_ih, w_hh, b, w_ho) -> list[np.ndarray]:
    outputs = []
    for _ in range(n):
        h = np.tanh(x @ w_ih.T + h @ w_hh.T + b)
        x = h @ w_ho.T
        outputs.append(x)
    return outputs


def to_list(value: ir.ADTValue) -> list:
    items = []
    while value.name == "Cons":
        head, value = value.fields
        items.append(head)
    assert value == ("Nil", ())
    return items


def inputs(seed: int = 0, in_size: int = IN, hidden: int = HID, steps: int = STEPS
           ) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "n": np.int32(steps),
        "input": rng.standard_normal((1, in_size)).astype(F32),
        "hidden": np.zeros((1, hidden), F32),
        "w_ih": (rng.standard_normal((hidden, in_size)) / np.sqrt(in_size)).astype(F32),
        "w_hh": (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(F32),
        "b": (0.1 * rng.standard_normal(hidden)).astype(F32),
        "w_ho": (rng.standard_normal((in_size, hidden)) / np.sqrt(hidden)).astype(F32),
    }


def test_generative_rnn_matches_a_numpy_loop_step_by_step() -> None:
    args = inputs()
    result = ir.evaluate(rnn_module(), **args)
    steps = to_list(result)
    expected = numpy_generate(*args.values())
    assert len(steps) == len(expected) == STEPS
    for got, want in zip(steps, expected, strict=True):
        assert got.shape == (1, IN) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # n = 0: the empty list
    assert ir.evaluate(rnn_module(), **{**args, "n": np.int32(0)}) == ("Nil", ())


def test_generative_rnn_in_a_normal_form_means_the_same() -> None:
    args = inputs(1)
    mod = rnn_module()
    expected = to_list(ir.evaluate(mod, **args))
    for other in (ir.to_a_normal_form(mod), ir.to_graph_normal_form(ir.to_a_normal_form(mod))):
        for got, want in zip(to_list(ir.evaluate(other, **args)), expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_generative_rnn_type_checks() -> None:
    infer_type = getattr(ir, "infer_type", None)
    if infer_type is None:
        pytest.skip("ir.infer_type is not there yet (type inference lands separately)")
    mod = infer_type(rnn_module())
    gen = mod["generate"]
    assert str(gen.checked_type.ret_type) == f"List[Tensor[(1, {IN}), float32]]"


RNN_TEXT = f"""#[version = "0.0.5"]
type List[A] {{
  Cons(A, List[A]),
  Nil,
}}

def @cell(%input: Tensor[(1, {IN}), float32], %hidden: Tensor[(1, {HID}), float32],
          %params: (Tensor[({HID}, {IN}), float32], Tensor[({HID}, {HID}), float32],
                    Tensor[({HID}), float32], Tensor[({IN}, {HID}), float32])) {{
  let %new_hidden = tanh(add(add(nn.dense(%input, %params.0), nn.dense(%hidden, %params.1)),
                             %params.2));
  let %output = nn.dense(%new_hidden, %params.3);
  (%output, %new_hidden)
}}

def @generate(%n: int32, %input: Tensor[(1, {IN}), float32],
              %hidden: Tensor[(1, {HID}), float32],
              %params: (Tensor[({HID}, {IN}), float32], Tensor[({HID}, {HID}), float32],
                        Tensor[({HID}), float32], Tensor[({IN}, {HID}), float32]))
    -> List[Tensor[(1, {IN}), float32]] {{
  if (equal(%n, 0)) {{
    Nil
  }} else {{
    let %step = @cell(%input, %hidden, %params);
    Cons(%step.0, @generate(subtract(%n, 1), %step.0, %step.1, %params))
  }}
}}

def @main(%n: int32, %input: Tensor[(1, {IN}), float32], %hidden: Tensor[(1, {HID}), float32],
          %w_ih: Tensor[({HID}, {IN}), float32], %w_hh: Tensor[({HID}, {HID}), float32],
          %b: Tensor[({HID}), float32], %w_ho: Tensor[({IN}, {HID}), float32]) {{
  @generate(%n, %input, %hidden, (%w_ih, %w_hh, %b, %w_ho))
}}
"""


def test_generative_rnn_in_the_text_format() -> None:
    parse = getattr(ir, "parse", None)
    if parse is None:
        pytest.skip("ir.parse is not there yet (the text format lands separately)")
    mod = parse(RNN_TEXT)
    args = inputs(2)
    expected = numpy_generate(*args.values())
    for got, want in zip(to_list(ir.evaluate(mod, **args)), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if hasattr(ir, "infer_type"):
        ir.infer_type(mod)
