"""Model blocks built with the builder API for the fusion and build tests: a ResNet basic
block, a MobileNetV2 inverted-residual block and a transformer encoder layer."""

from __future__ import annotations

import numpy as np

import ir

RNG = np.random.default_rng(3)


def weight(*shape: int, scale: float = 0.3) -> ir.Constant:
    return ir.const((RNG.standard_normal(shape) * scale).astype("float32"))


def _conv_bn(x: ir.Expr, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1
             ) -> ir.Expr:
    y = ir.op.nn.conv2d(x, weight(cout, cin // groups, k, k), strides=stride,
                        padding=k // 2, groups=groups)
    gamma, beta = weight(cout), weight(cout)
    mean = weight(cout)
    var = ir.const((RNG.random(cout) + 0.5).astype("float32"))
    return ir.TupleGetItem(ir.op.nn.batch_norm(y, gamma, beta, mean, var), 0)


def resnet_basic_block(c: int = 8, hw: int = 8) -> ir.Module:
    x = ir.var("x", shape=(1, c, hw, hw))
    y = ir.op.nn.relu(_conv_bn(x, c, c, 3))
    y = _conv_bn(y, c, c, 3)
    y = ir.op.nn.relu(ir.op.add(y, x))
    return ir.infer_type(ir.Module({"main": ir.Function([x], y)}))


def mobilenet_inverted_residual(c: int = 8, expand: int = 4, hw: int = 8) -> ir.Module:
    x = ir.var("x", shape=(1, c, hw, hw))
    h = c * expand
    y = ir.op.clip(_conv_bn(x, c, h, 1), a_min=0.0, a_max=6.0)
    y = ir.op.clip(_conv_bn(y, h, h, 3, groups=h), a_min=0.0, a_max=6.0)
    y = _conv_bn(y, h, c, 1)
    return ir.infer_type(ir.Module({"main": ir.Function([x], ir.op.add(y, x))}))


def _linear(x: ir.Expr, n_in: int, n_out: int) -> ir.Expr:
    return ir.op.nn.bias_add(ir.op.nn.dense(x, weight(n_out, n_in)), weight(n_out), axis=-1)


def _gelu(x: ir.Expr) -> ir.Expr:
    half = ir.const(np.float32(0.5))
    inner = ir.op.erf(ir.op.multiply(x, ir.const(np.float32(1 / np.sqrt(2)))))
    return ir.op.multiply(ir.op.multiply(x, half), ir.op.add(ir.const(np.float32(1)), inner))


def transformer_layer(seq: int = 8, hidden: int = 16, heads: int = 2) -> ir.Module:
    x = ir.var("x", shape=(seq, hidden))
    d = hidden // heads

    def split_heads(t: ir.Expr) -> ir.Expr:
        return ir.op.transpose(ir.op.reshape(t, newshape=(seq, heads, d)), axes=(1, 0, 2))

    q, k, v = (split_heads(_linear(x, hidden, hidden)) for _ in range(3))
    scores = ir.op.multiply(ir.op.nn.batch_matmul(q, k),
                            ir.const(np.float32(1 / np.sqrt(d))))
    attn = ir.op.nn.batch_matmul(ir.op.nn.softmax(scores),
                                 ir.op.transpose(v, axes=(0, 2, 1)))
    merged = ir.op.reshape(ir.op.transpose(attn, axes=(1, 0, 2)), newshape=(seq, hidden))
    y = ir.op.nn.layer_norm(ir.op.add(_linear(merged, hidden, hidden), x), weight(hidden),
                            weight(hidden))
    ffn = _linear(_gelu(_linear(y, hidden, 4 * hidden)), 4 * hidden, hidden)
    out = ir.op.nn.layer_norm(ir.op.add(ffn, y), weight(hidden), weight(hidden))
    return ir.infer_type(ir.Module({"main": ir.Function([x], out)}))
