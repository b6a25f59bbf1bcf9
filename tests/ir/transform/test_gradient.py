"""The gradient pass on whole programs: an MLP and a small CNN against PyTorch autograd (both
modes), a recursive RNN over a list, closures, ``if``, references and the prelude's
higher-order functions (higher-order mode) against PyTorch or finite differences,
gradients of gradients, forward mode (``jvp``) on the same programs against the reverse
mode (``grad . u == J u``), and the gradient functions run by the compiled paths (graph
executor, VM)."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.op import nn
from ir.transform import gradient, jvp
from ir.transform.ad import GradientError

torch = pytest.importorskip("torch")

F64 = "float64"
MODES = ("first_order", "higher_order")


def tvar(name: str, *shape: int, dtype: str = F64) -> ir.Var:
    return ir.var(name, shape=shape, dtype=dtype)


def torch_grads(fn, inputs: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
    ts = [torch.tensor(x, requires_grad=True) for x in inputs]
    out = fn(*ts)
    out.sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in ts]


def check_against(f: ir.Function | ir.Module, torch_fn, inputs: list[np.ndarray], modes=MODES,
                  rtol: float = 1e-9) -> None:
    want_value, want = torch_grads(torch_fn, inputs)
    for mode in modes:
        value, grads = ir.evaluate(gradient(f, mode=mode), *inputs)
        np.testing.assert_allclose(value, want_value, rtol=rtol)
        for i, (got, exp) in enumerate(zip(grads, want, strict=True)):
            np.testing.assert_allclose(got, exp, rtol=rtol, atol=1e-12,
                                       err_msg=f"{mode}: parameter {i}")


# ----------------------------------------------------------------------------- models

def mlp_function(labels: np.ndarray) -> ir.Function:
    """Mean cross-entropy of a 10-16-3 ReLU MLP on 8 rows (``labels`` one-hot, its dtype
    the model's)."""
    dt = str(labels.dtype)
    x, w1, b1 = tvar("x", 8, 10, dtype=dt), tvar("w1", 16, 10, dtype=dt), tvar("b1", 16, dtype=dt)
    w2, b2 = tvar("w2", 3, 16, dtype=dt), tvar("b2", 3, dtype=dt)
    h = nn.relu(nn.bias_add(nn.dense(x, w1), b1))
    logits = nn.bias_add(nn.dense(h, w2), b2)
    picked = ir.op.sum(ir.op.multiply(nn.log_softmax(logits), ir.const(labels)), axis=(1,))
    return ir.Function([x, w1, b1, w2, b2], ir.op.negative(ir.op.mean(picked)))


def torch_mlp(labels):
    target = torch.tensor(labels.argmax(1))

    def run(x, w1, b1, w2, b2):
        h = torch.relu(x @ w1.T + b1)
        return torch.nn.functional.cross_entropy(h @ w2.T + b2, target)

    return run


def mlp_inputs(rng) -> list[np.ndarray]:
    return [rng.standard_normal(s) for s in [(8, 10), (16, 10), (16,), (3, 16), (3,)]]


def test_mlp_against_pytorch():
    rng = np.random.default_rng(0)
    labels = np.eye(3)[rng.integers(0, 3, 8)]
    check_against(mlp_function(labels), torch_mlp(labels), mlp_inputs(rng))


def cnn_function() -> ir.Function:
    """conv-bias-relu-maxpool, strided conv-relu, global pooling, dense, log-softmax."""
    x, w1, b1 = tvar("x", 2, 3, 8, 8), tvar("w1", 4, 3, 3, 3), tvar("b1", 4)
    w2, wd = tvar("w2", 6, 4, 3, 3), tvar("wd", 5, 6)
    y = nn.relu(nn.bias_add(nn.conv2d(x, w1, padding=(1, 1)), b1))
    y = nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    y = nn.relu(nn.conv2d(y, w2, strides=(2, 2), padding=(1, 1)))
    y = ir.op.reshape(nn.global_avg_pool2d(y), newshape=(2, 6))
    out = ir.op.sum(nn.log_softmax(nn.dense(y, wd)), axis=(1,))
    return ir.Function([x, w1, b1, w2, wd], out)


def cnn_inputs(rng) -> list[np.ndarray]:
    return [rng.standard_normal(s) for s in [(2, 3, 8, 8), (4, 3, 3, 3), (4,), (6, 4, 3, 3),
                                             (5, 6)]]


def test_small_cnn_against_pytorch():
    F = torch.nn.functional

    def run(x, w1, b1, w2, wd):
        y = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2, 2)
        y = F.relu(F.conv2d(y, w2, stride=2, padding=1)).mean((2, 3))
        return F.log_softmax(y @ wd.T, dim=1).sum(1)

    check_against(cnn_function(), run, cnn_inputs(np.random.default_rng(1)))


# --------------------------------------------------- higher-order: ADTs, recursion, closures

def rnn_module(steps: int, dt: str = F64) -> ir.Module:
    """``@rnn(xs, h, wx, wh)`` folds a tanh cell over a List of inputs by recursion;
    ``@main`` builds the list from its parameters."""
    mod = ir.prelude()
    lst = mod.get_global_type_var("List")
    cons, nil = mod.get_constructor("Cons"), mod.get_constructor("Nil")
    x_t, h_t = ir.TensorType((1, 4), dt), ir.TensorType((1, 5), dt)
    xs, h, wx, wh = ir.var("xs", ir.TypeCall(lst, (x_t,))), ir.var("h", h_t), \
        tvar("wx", 5, 4, dtype=dt), tvar("wh", 5, 5, dtype=dt)
    head, tail = ir.var("x", x_t), ir.var("t")
    rnn = ir.GlobalVar("rnn")
    step = ir.op.tanh(ir.op.add(nn.dense(head, wx), nn.dense(h, wh)))
    body = ir.Match(xs, [
        ir.Clause(ir.PatternConstructor(cons, [ir.PatternVar(head), ir.PatternVar(tail)]),
                  ir.Call(rnn, [tail, step, wx, wh])),
        ir.Clause(ir.PatternConstructor(nil), h)])
    mod.add(rnn, ir.Function([xs, h, wx, wh], body, h_t))
    inputs = [tvar(f"x{i}", 1, 4, dtype=dt) for i in range(steps)]
    h0, wx0, wh0 = tvar("h0", 1, 5, dtype=dt), tvar("wx", 5, 4, dtype=dt), \
        tvar("wh", 5, 5, dtype=dt)
    items: ir.Expr = ir.Call(nil, [])
    for v in reversed(inputs):
        items = ir.Call(cons, [v, items])
    mod.add("main", ir.Function([*inputs, h0, wx0, wh0], ir.op.sum(ir.op.multiply(
        ir.Call(rnn, [items, h0, wx0, wh0]), ir.const(np.arange(5.0, dtype=dt).reshape(1, 5))))))
    return mod


def test_recursive_rnn_over_a_list_against_pytorch():
    steps = 4
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((1, 4)) for _ in range(steps)] + [
        rng.standard_normal((1, 5)), rng.standard_normal((5, 4)), rng.standard_normal((5, 5))]

    def run(*args):
        *xs, h, wx, wh = args
        for x in xs:
            h = torch.tanh(x @ wx.T + h @ wh.T)
        return (h * torch.arange(5.0, dtype=torch.float64)).sum()

    mod = rnn_module(steps)
    check_against(mod, run, inputs, modes=("higher_order",))
    grad_mod = gradient(mod)
    assert "rnn_grad" in grad_mod and "rnn" in grad_mod  # the original stays
    with pytest.raises(GradientError, match="not dataflow code"):
        gradient(mod, mode="first_order")


def numeric_gradients(f, inputs: list[np.ndarray], h: float = 1e-6) -> list[np.ndarray]:
    out = []
    for i, x in enumerate(inputs):
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            up, down = [a.copy() for a in inputs], [a.copy() for a in inputs]
            up[i][idx] += h
            down[i][idx] -= h
            g[idx] = (float(np.sum(ir.evaluate(f, *up))) -
                      float(np.sum(ir.evaluate(f, *down)))) / (2 * h)
        out.append(g)
    return out


def closures_and_branches() -> ir.Function:
    """``let g = fn(z) { z * x }``; ``if sum(x) > 0 { g(y) } else { g(g(y)) }``; and a
    reference written in one branch and read after."""
    x, y = tvar("x", 3), tvar("y", 3)
    z, g, cell = tvar("z", 3), ir.var("g"), ir.var("cell")
    closure = ir.Function([z], ir.op.multiply(z, x))
    positive = ir.op.greater(ir.op.sum(x), ir.const(0.0, F64))
    branch = ir.If(positive, ir.Call(g, [y]),
                   ir.Let(ir.var("_"), ir.RefWrite(cell, ir.op.exp(y)),
                          ir.Call(g, [ir.Call(g, [y])])))
    body = ir.Let(g, closure, ir.Let(cell, ir.RefCreate(y),
                                     ir.op.add(branch, ir.RefRead(cell))))
    return ir.Function([x, y], body)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_closures_if_and_references_against_finite_differences(sign):
    rng = np.random.default_rng(3)
    inputs = [sign * rng.uniform(0.5, 1.5, 3), rng.standard_normal(3)]
    f = closures_and_branches()
    value, grads = ir.evaluate(gradient(f), *inputs)
    np.testing.assert_allclose(value, ir.evaluate(f, *inputs))
    for got, want in zip(grads, numeric_gradients(f, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_prelude_foldl_with_a_closure():
    """Differentiating through a polymorphic global (``@foldl``) applied to a closure."""
    mod = ir.prelude()
    cons, nil = mod.get_constructor("Cons"), mod.get_constructor("Nil")
    a, b, w = tvar("a", 2), tvar("b", 2), tvar("w", 2)
    acc, item = tvar("acc", 2), tvar("item", 2)
    step = ir.Function([acc, item], ir.op.add(ir.op.multiply(acc, w), ir.op.tanh(item)))
    items = ir.Call(cons, [a, ir.Call(cons, [b, ir.Call(nil, [])])])
    mod.add("main", ir.Function([a, b, w], ir.Call(mod.get_global_var("foldl"), [
        step, ir.op.ones(shape=(2,), dtype=F64), items])))
    inputs = [np.array([0.3, -0.2]), np.array([1.1, 0.4]), np.array([0.7, -1.3])]
    value, grads = ir.evaluate(gradient(mod), *inputs)
    np.testing.assert_allclose(value, ir.evaluate(mod, *inputs))
    for got, want in zip(grads, numeric_gradients(mod, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_lifting_refuses_a_constructor_holding_a_tensor_directly():
    mod = ir.Module()
    box = ir.GlobalTypeVar("Box")
    make = ir.Constructor("Box", (ir.TensorType((2,), F64),), box, 0)
    mod.add_type(ir.TypeData(box, (), (make,)))
    x, v = tvar("x", 2), tvar("v", 2)
    body = ir.Match(ir.Call(make, [ir.op.exp(x)]), [
        ir.Clause(ir.PatternConstructor(make, [ir.PatternVar(v)]), v)])
    mod.add("main", ir.Function([x], body))
    with pytest.raises(GradientError, match="constructor Box holds a Tensor"):
        gradient(mod)


def test_parameters_must_be_tensors():
    p = ir.var("p", ir.TupleType((ir.TensorType((2,), F64),)))
    f = ir.Function([p], ir.TupleGetItem(p, 0))
    for mode in MODES:
        with pytest.raises(GradientError, match="parameter %p must be a tensor"):
            gradient(f, mode=mode)
    with pytest.raises(ValueError, match="unknown mode 'forward'"):
        gradient(f, mode="forward")


# --------------------------------------------------------------------- second derivatives

SECOND = {
    "tanh": (ir.op.tanh, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
    "sigmoid": (ir.op.sigmoid, lambda x: (s := 1 / (1 + np.exp(-x))) * (1 - s) * (1 - 2 * s)),
    "exp": (ir.op.exp, np.exp),
    "log": (ir.op.log, lambda x: -1 / x ** 2),
    "cube": (lambda x: ir.op.multiply(ir.op.multiply(x, x), x), lambda x: 6 * x),
}


def first_gradient(f: ir.Function, mode: str) -> ir.Function:
    """``x -> d f / d x`` (the gradient of the first parameter, as a function)."""
    g = gradient(f, mode=mode)
    params = [ir.var(p.name_hint, p.type_annotation) for p in f.params]
    return ir.Function(params, ir.TupleGetItem(ir.TupleGetItem(ir.Call(g, params), 1), 0))


@pytest.mark.parametrize("name", list(SECOND))
@pytest.mark.parametrize("inner,outer", [("first_order", "higher_order"),
                                         ("higher_order", "higher_order")])
def test_gradient_of_gradient(name, inner, outer):
    build, second = SECOND[name]
    x = tvar("x", 5)
    f = ir.Function([x], build(x))
    xs = np.random.default_rng(4).uniform(0.2, 1.5, 5)
    df = first_gradient(f, inner)
    _, (d2,) = ir.evaluate(gradient(df, mode=outer), xs)
    np.testing.assert_allclose(d2, second(xs), rtol=1e-9)


def test_gradient_of_a_first_order_gradient_graph_in_first_order_mode():
    """The first-order output is dataflow code: it differentiates in first-order mode when
    its projection is written in the same body."""
    x = tvar("x", 4)
    g = gradient(ir.Function([x], ir.op.tanh(ir.op.multiply(x, x))), mode="first_order")
    h = ir.Function(g.params, ir.TupleGetItem(ir.TupleGetItem(g.body, 1), 0))
    xs = np.array([0.1, -0.4, 0.8, 1.2])
    _, (d2,) = ir.evaluate(gradient(h, mode="first_order"), xs)
    t = np.tanh(xs * xs)
    np.testing.assert_allclose(d2, 2 * (1 - t ** 2) - 8 * xs ** 2 * t * (1 - t ** 2),
                               rtol=1e-9)


# ------------------------------------------------------------------------ compiled paths

def test_first_order_mlp_gradient_on_the_graph_executor():
    rng = np.random.default_rng(5)
    labels = np.eye(3)[rng.integers(0, 3, 8)].astype("float32")
    g = gradient(mlp_function(labels), mode="first_order")
    inputs = [x.astype("float32") for x in mlp_inputs(rng)]
    model = ir.build(ir.Module({"main": g}), target="cpu")
    value, grads = model(*inputs)
    want_value, want = ir.evaluate(g, *inputs)
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    for got, exp in zip(grads, want, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-4, atol=1e-6)


def test_higher_order_rnn_gradient_on_the_vm():
    """The recursive RNN's gradient (closures, references, an ADT) compiled for the VM,
    its kernels native code: equal to the interpreter's."""
    g = gradient(rnn_module(3, "float32"))
    rng = np.random.default_rng(6)
    shapes = [(1, 4)] * 3 + [(1, 5), (5, 4), (5, 5)]
    inputs = [rng.standard_normal(s).astype("float32") for s in shapes]
    vm = ir.backend.VirtualMachine(ir.backend.vm.compile(g, target="cpu"))
    value, grads = vm(*inputs)
    want_value, want = ir.evaluate(g, *inputs)
    assert vm.stats.kernel_calls > 0
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    for got, exp in zip(grads, want, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------------------- forward mode

def assert_forward_matches_reverse(f: ir.Function | ir.Module, inputs: list[np.ndarray],
                                   seed: int = 0) -> None:
    """``J u`` from forward mode equals ``grad . u`` from reverse mode (scalar results)."""
    rng = np.random.default_rng(seed)
    u = [rng.standard_normal(x.shape) for x in inputs]
    value, tangent = ir.evaluate(jvp(f), *inputs, *u)
    _, grads = ir.evaluate(gradient(f), *inputs)
    np.testing.assert_allclose(value, ir.evaluate(f, *inputs), rtol=1e-12)
    want = sum(float(np.sum(g * d)) for g, d in zip(grads, u, strict=True))
    np.testing.assert_allclose(float(tangent), want, rtol=1e-9)


def test_forward_mode_through_recursion_over_a_list():
    rng = np.random.default_rng(7)
    shapes = [(1, 4)] * 3 + [(1, 5), (5, 4), (5, 5)]
    mod = rnn_module(3)
    assert_forward_matches_reverse(mod, [rng.standard_normal(s) for s in shapes])


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_forward_mode_through_closures_if_and_references(sign):
    rng = np.random.default_rng(8)
    f = closures_and_branches()
    x, y = tvar("x", 3), tvar("y", 3)
    total = ir.Function([x, y], ir.op.sum(ir.Call(f, [x, y])))
    assert_forward_matches_reverse(total, [sign * rng.uniform(0.5, 1.5, 3),
                                           rng.standard_normal(3)])


def test_forward_mode_of_the_mlp_and_cnn_losses():
    rng = np.random.default_rng(9)
    labels = np.eye(3)[rng.integers(0, 3, 8)]
    assert_forward_matches_reverse(mlp_function(labels), mlp_inputs(rng))
    x = tvar("x", 2, 3, 8, 8)
    cnn = cnn_function()
    rest = [tvar(p.name_hint, *p.type_annotation.shape) for p in cnn.params[1:]]
    total = ir.Function([x, *rest], ir.op.sum(ir.Call(cnn, [x, *rest])))
    assert_forward_matches_reverse(total, cnn_inputs(rng))
