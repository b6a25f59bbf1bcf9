"""Graph IR speed: type inference, printing and parsing of ResNet models built with the
builder API, and the interpreter's overhead per operator call.

    .venv/bin/python bench/ir_speed.py [--depths 50 101 152] [--rounds 5]

Each model is a ResNet (NCHW, batch 1, 224x224) with every batch norm written out as
Relay's SimplifyInference leaves it (add epsilon to the variance, sqrt, divide the scale by
it, subtract the mean, multiply, add the shift: six operators), weights as parameters of
@main: ResNet-50 is 441 operator calls, ResNet-152 1,291. Each figure is the
median of ``--rounds`` runs. The interpreter's overhead is a chain of ``add`` calls on
1-element tensors, timed against the same number of ``numpy.add`` calls made directly.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import ir

_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


class _Net:
    """Builds the ResNet-50 graph and collects its weight parameters."""

    def __init__(self) -> None:
        self.params: list[ir.Var] = []
        self.calls = 0

    def weight(self, name: str, shape: tuple[int, ...]) -> ir.Var:
        var = ir.var(f"{name}_{len(self.params)}", shape)
        self.params.append(var)
        return var

    def op(self, make: Callable[..., ir.Expr], *args: object, **attrs: object) -> ir.Expr:
        self.calls += 1
        return make(*args, **attrs)

    def conv_bn(self, x: ir.Expr, cin: int, cout: int, k: int, stride: int,
                relu: bool) -> ir.Expr:
        w = self.weight("w", (cout, cin, k, k))
        y = self.op(ir.op.nn.conv2d, x, w, strides=[stride, stride],
                    padding=[k // 2, k // 2])
        channel = (cout, 1, 1)
        std = self.op(ir.op.sqrt, self.op(ir.op.add, self.weight("var", channel),
                                          ir.const(1e-5)))
        scale = self.op(ir.op.divide, self.weight("gamma", channel), std)
        y = self.op(ir.op.subtract, y, self.weight("mean", channel))
        y = self.op(ir.op.add, self.op(ir.op.multiply, y, scale), self.weight("beta", channel))
        return self.op(ir.op.nn.relu, y) if relu else y

    def bottleneck(self, x: ir.Expr, cin: int, width: int, stride: int) -> ir.Expr:
        cout = width * 4
        y = self.conv_bn(x, cin, width, 1, 1, True)
        y = self.conv_bn(y, width, width, 3, stride, True)
        y = self.conv_bn(y, width, cout, 1, 1, False)
        shortcut = x if cin == cout and stride == 1 else self.conv_bn(x, cin, cout, 1,
                                                                      stride, False)
        return self.op(ir.op.nn.relu, self.op(ir.op.add, y, shortcut))

    def resnet(self, depth: int) -> ir.Module:
        data = ir.var("data", (1, 3, 224, 224))
        x = self.conv_bn(data, 3, 64, 7, 2, True)
        x = self.op(ir.op.nn.max_pool2d, x, pool_size=[3, 3], strides=[2, 2],
                    padding=[1, 1])
        cin = 64
        for width, blocks, stride in zip((64, 128, 256, 512), _BLOCKS[depth], (1, 2, 2, 2),
                                         strict=True):
            for n in range(blocks):
                x = self.bottleneck(x, cin, width, stride if n == 0 else 1)
                cin = width * 4
        x = self.op(ir.op.nn.global_avg_pool2d, x)
        x = self.op(ir.op.reshape, x, newshape=[1, -1])
        x = self.op(ir.op.nn.dense, x, self.weight("fc", (1000, 2048)))
        x = self.op(ir.op.nn.softmax, x)
        return ir.Module.from_expr(ir.Function([data, *self.params], x))


def _median_ms(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def interpreter_overhead_us(calls: int, rounds: int) -> tuple[float, float]:
    """(µs per add call in the interpreter, µs per direct numpy.add call)."""
    x = ir.var("x", (1,))
    body: ir.Expr = x
    for _ in range(calls):
        body = ir.op.add(body, x)
    chain = ir.Module.from_expr(ir.Function([x], body))
    one = np.ones(1, "float32")
    interpreted = _median_ms(lambda: ir.evaluate(chain, one), rounds) * 1e3 / calls

    def direct() -> None:
        y = one
        for _ in range(calls):
            y = np.add(y, one)

    return interpreted, _median_ms(direct, rounds) * 1e3 / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[50, 101, 152],
                        choices=sorted(_BLOCKS))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for depth in args.depths:
        net = _Net()
        model = net.resnet(depth)
        out = ir.infer_type(model)["main"].checked_type.ret_type
        text = ir.astext(model)
        assert ir.parse(text) == model  # the round trip holds
        infer = _median_ms(lambda model=model: ir.infer_type(model), args.rounds)
        show = _median_ms(lambda model=model: ir.astext(model), args.rounds)
        parse = _median_ms(lambda text=text: ir.parse(text), args.rounds)
        print(f"ResNet-{depth}: {net.calls} operator calls, {len(net.params)} weights, "
              f"output {out}: type inference {infer:.1f} ms, print {show:.1f} ms, "
              f"parse {parse:.1f} ms")
    interpreted, direct = interpreter_overhead_us(2000, args.rounds)
    print(f"interpreter: {interpreted:.1f} µs per operator call (numpy add on 1 element), "
          f"direct numpy.add {direct:.2f} µs: overhead {interpreted - direct:.1f} µs per call")


if __name__ == "__main__":
    main()
