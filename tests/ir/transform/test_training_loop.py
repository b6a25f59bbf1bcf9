"""A training loop written in the IR: ``@loss_grad`` is the first-order gradient of an MLP's
mean cross-entropy on a synthetic three-class set (the data are constants of the program),
and ``@train(n, params...)`` recurses ``n`` times applying SGD updates. It is compiled for
the VM (kernels native code) and trained until the loss is below 0.05; the trajectory is
checked against the same SGD in PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.op import nn
from ir.transform import gradient

torch = pytest.importorskip("torch")

F32 = "float32"
SIZES = (4, 16, 3)  # inputs, hidden units, classes
STEPS, LEARNING_RATE, TARGET_LOSS = 150, 0.5, 0.05


def blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Three Gaussian blobs in 4-d, well separated (a set an MLP can fit)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((3, SIZES[0])) * 3
    labels = rng.integers(0, 3, n)
    x = centres[labels] + rng.standard_normal((n, SIZES[0])) * 0.5
    return x.astype(F32), labels


def param_types() -> list[ir.TensorType]:
    i, h, c = SIZES
    return [ir.TensorType(s, F32) for s in [(h, i), (h,), (c, h), (c,)]]


def training_module(x: np.ndarray, labels: np.ndarray, steps: int) -> ir.Module:
    params = [ir.var(n, t) for n, t in zip(("w1", "b1", "w2", "b2"), param_types(),
                                          strict=True)]
    w1, b1, w2, b2 = params
    hidden = nn.relu(nn.bias_add(nn.dense(ir.const(x), w1), b1))
    log_probs = nn.log_softmax(nn.bias_add(nn.dense(hidden, w2), b2))
    onehot = ir.const(np.eye(SIZES[2], dtype=F32)[labels])
    loss = ir.op.negative(ir.op.mean(ir.op.sum(ir.op.multiply(log_probs, onehot), axis=(1,))))
    mod = ir.Module()
    loss_grad = mod.add("loss_grad", gradient(ir.Function(params, loss), mode="first_order"))

    # @train(n, w1, b1, w2, b2) -> (last loss, w1, b1, w2, b2)
    n = ir.var("n", shape=(), dtype="int32")
    args = [ir.var(p.name_hint, t) for p, t in zip(params, param_types(), strict=True)]
    result, grads = ir.var("result"), ir.var("grads")
    lr = ir.const(np.float32(LEARNING_RATE))
    updated = [ir.op.subtract(p, ir.op.multiply(lr, ir.TupleGetItem(grads, i)))
               for i, p in enumerate(args)]
    train = ir.GlobalVar("train")
    again = ir.Call(train, [ir.op.subtract(n, ir.const(1)), *updated])
    done = ir.Tuple([ir.TupleGetItem(result, 0), *updated])
    body = ir.Let(result, ir.Call(loss_grad, args),
                  ir.Let(grads, ir.TupleGetItem(result, 1),
                         ir.If(ir.op.equal(n, ir.const(1)), done, again)))
    mod.add(train, ir.Function([n, *args], body))
    main_args = [ir.var(p.name_hint, t) for p, t in zip(params, param_types(), strict=True)]
    mod.add("main", ir.Function(main_args, ir.Call(train, [ir.const(np.int32(steps)),
                                                           *main_args])))
    return mod


def initial_params(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(t.shape) * 0.3).astype(F32) for t in param_types()]


def torch_sgd(x, labels, params, steps) -> tuple[float, list[np.ndarray]]:
    ts = [torch.tensor(p, requires_grad=True) for p in params]
    opt = torch.optim.SGD(ts, lr=LEARNING_RATE)
    data, target = torch.tensor(x), torch.tensor(labels)
    for _ in range(steps):
        opt.zero_grad()
        w1, b1, w2, b2 = ts
        loss = torch.nn.functional.cross_entropy(torch.relu(data @ w1.T + b1) @ w2.T + b2,
                                                 target)
        loss.backward()
        last = float(loss.detach())
        opt.step()
    return last, [t.detach().numpy() for t in ts]


def test_mlp_trains_on_the_vm_until_the_loss_is_low():
    x, labels = blobs(96, seed=0)
    init = initial_params(seed=1)
    vm = ir.backend.VirtualMachine(ir.backend.vm.compile(training_module(x, labels, STEPS),
                                                         target="cpu"))
    last_loss, *trained = vm(*init)
    assert vm.stats.kernel_calls > 0
    want_loss, want = torch_sgd(x, labels, init, STEPS)
    assert float(last_loss) < TARGET_LOSS
    np.testing.assert_allclose(float(last_loss), want_loss, rtol=1e-3, atol=1e-5)
    for got, exp in zip(trained, want, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-3, atol=1e-4)
    first_loss, *_ = ir.evaluate(training_module(x, labels, 1), *init)
    assert float(first_loss) > 10 * TARGET_LOSS  # it did learn
