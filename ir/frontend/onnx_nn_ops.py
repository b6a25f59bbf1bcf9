"""Converters of ONNX neural-network operators to IR calls: Conv, ConvTranspose, Gemm,
MatMul, pooling, BatchNormalization, InstanceNormalization, LayerNormalization, Softmax /
LogSoftmax, and the activations (LeakyRelu, PRelu, Gelu, HardSigmoid, HardSwish, Elu, Selu,
Softplus).

Convolution and pooling take NCHW data (1-d ones run as 2-d with a height of 1); ONNX pads
``[begin..., end...]`` become the IR's ``(top, left, bottom, right)``, and ``auto_pad``
is resolved here from the static input size. MatMul follows numpy's rules: 2-d operands
give ``nn.matmul``, a stack of matrices times a matrix is flattened to 2-d, and batched
operands broadcast and run as ``nn.batch_matmul``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..op.relations import window_out_dim
from .onnx_context import NodeContext, Value, converter, onnx_dtype

# ------------------------------------------------------------------ windows (conv, pool)


def _ints(ctx: NodeContext, name: str, default: Sequence[int], n: int) -> list[int]:
    value = ctx.attr(name)
    out = list(default) if value is None else [int(v) for v in value]
    if len(out) != n:
        raise ctx.unsupported(name, out, f"expected {n} values")
    return out


def _pads(ctx: NodeContext, spatial: Sequence, kernel: Sequence[int], strides: Sequence[int],
          dilations: Sequence[int]) -> list[int]:
    """ONNX pads ``[begin..., end...]`` from ``pads`` / ``auto_pad``."""
    n = len(kernel)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    pads = _ints(ctx, "pads", [0] * 2 * n, 2 * n)
    if auto_pad in ("NOTSET", ""):
        return pads
    if auto_pad == "VALID":
        return [0] * 2 * n
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.unsupported("auto_pad", auto_pad, "NOTSET, VALID, SAME_UPPER and "
                              "SAME_LOWER are")
    if not all(isinstance(d, int) for d in spatial):
        raise ctx.fail(f"auto_pad={auto_pad} needs static spatial sizes, got {tuple(spatial)}")
    begin, end = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else big)
        end.append(big if auto_pad == "SAME_UPPER" else small)
    return begin + end


def _spatial_rank(ctx: NodeContext, x: Value) -> int:
    n = x.ndim - 2
    if n not in (1, 2):
        raise ctx.fail(f"only 1-d and 2-d windows are supported, got a rank-{x.ndim} input "
                       f"{tuple(x.shape)}")
    return n


def _to_2d(ctx: NodeContext, x: Value, n: int) -> Value:
    """A 1-d (N, C, W) operand as (N, C, 1, W)."""
    return x if n == 2 else ctx.call("expand_dims", x, axis=2)


def _from_2d(ctx: NodeContext, y: Value, n: int) -> Value:
    return y if n == 2 else ctx.call("squeeze", y, axis=[2])


def _padding2d(pads: Sequence[int], n: int) -> list[int]:
    """ONNX pads as the IR's (top, left, bottom, right)."""
    return list(pads) if n == 2 else [0, pads[0], 0, pads[1]]


def _pair(values: Sequence[int], n: int, fill: int = 1) -> list[int]:
    return list(values) if n == 2 else [fill, values[0]]


@converter("Conv")
def _conv(ctx: NodeContext) -> Value:
    x, w, bias = ctx.input(0), ctx.input(1, "weight"), ctx.optional_input(2)
    n = _spatial_rank(ctx, x)
    if w.ndim != x.ndim:
        raise ctx.fail(f"weight {tuple(w.shape)} and input {tuple(x.shape)} differ in rank")
    kernel = list(w.shape[2:])
    given = ctx.attr("kernel_shape")
    if given is not None and [int(k) for k in given] != kernel:
        raise ctx.fail(f"kernel_shape {list(given)} disagrees with the weight "
                       f"{tuple(w.shape)}")
    strides = _ints(ctx, "strides", [1] * n, n)
    dilations = _ints(ctx, "dilations", [1] * n, n)
    pads = _pads(ctx, x.shape[2:], kernel, strides, dilations)
    groups = int(ctx.attr("group", 1))
    out = ctx.call("nn.conv2d", _to_2d(ctx, x, n), _to_2d(ctx, w, n),
                   strides=_pair(strides, n), padding=_padding2d(pads, n),
                   dilation=_pair(dilations, n), groups=groups,
                   channels=w.shape[0] if isinstance(w.shape[0], int) else None,
                   kernel_size=_pair(kernel, n) if all(isinstance(k, int) for k in kernel)
                   else None)
    if bias is not None:
        out = ctx.call("nn.bias_add", out, bias, axis=1)
    return _from_2d(ctx, out, n)


def _pool_output_size(size: int, k: int, s: int, d: int, begin: int, end: int,
                      ceil_mode: bool) -> int:
    """ONNX's pooling output length: with ceil_mode, a last window that would start in
    the end padding is dropped."""
    span = (k - 1) * d + 1
    room = size + begin + end - span
    out = (-(-room // s) if ceil_mode else room // s) + 1
    if ceil_mode and (out - 1) * s >= size + begin:
        out -= 1
    return out


@converter("MaxPool", "AveragePool")
def _pool(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    n = _spatial_rank(ctx, x)
    is_max = ctx.op_type == "MaxPool"
    if is_max:
        if ctx.output_used(1):
            raise ctx.fail("the Indices output is not supported")
        ctx.ignore("storage_order")  # only about Indices
    kernel = ctx.attr("kernel_shape")
    if kernel is None or len(kernel) != n:
        raise ctx.fail(f"kernel_shape {kernel} must give {n} sizes")
    kernel = [int(k) for k in kernel]
    strides = _ints(ctx, "strides", [1] * n, n)
    dilations = _ints(ctx, "dilations", [1] * n, n)
    pads = _pads(ctx, x.shape[2:], kernel, strides, dilations)
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    include_pad = not is_max and bool(ctx.attr("count_include_pad", 0))
    spatial = list(x.shape[2:])
    if ceil_mode and all(isinstance(d, int) for d in spatial):
        want = [_pool_output_size(*a, pads[i], pads[i + n], True)
                for i, a in enumerate(zip(spatial, kernel, strides, dilations, strict=True))]
        ir_ceil = [window_out_dim(sz, k, s, pads[i] + pads[i + n], d, True)
                   for i, (sz, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations,
                                                         strict=True))]
        if want != ir_ceil:
            # ONNX drops a last window that starts in the padding: pad the end just enough
            # for the windows it keeps, and round down.
            ceil_mode = False
            for i, (sz, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations,
                                                  strict=True)):
                extra = max(0, (want[i] - 1) * s + (k - 1) * d + 1 - (sz + pads[i] + pads[i + n]))
                if extra and include_pad:
                    raise ctx.fail("ceil_mode with count_include_pad=1 where the last window "
                                   "starts in the padding is not supported")
                pads[i + n] += extra
    attrs = dict(pool_size=_pair(kernel, n), strides=_pair(strides, n),
                 dilation=_pair(dilations, n), padding=_padding2d(pads, n), ceil_mode=ceil_mode)
    if is_max:
        out = ctx.call("nn.max_pool2d", _to_2d(ctx, x, n), **attrs)
    else:
        out = ctx.call("nn.avg_pool2d", _to_2d(ctx, x, n), count_include_pad=include_pad,
                       **attrs)
    return _from_2d(ctx, out, n)


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if x.ndim < 3:
        raise ctx.fail(f"input {tuple(x.shape)} must have rank >= 3 (N, C, spatial...)")
    if x.ndim == 4 and ctx.op_type == "GlobalAveragePool":
        return ctx.call("nn.global_avg_pool2d", x)
    return ctx.call("mean" if ctx.op_type == "GlobalAveragePool" else "max", x,
                    axis=list(range(2, x.ndim)), keepdims=True)


@converter("ConvTranspose")
def _conv_transpose(ctx: NodeContext) -> Value:
    x, w, bias = ctx.input(0), ctx.input(1, "weight"), ctx.optional_input(2)
    n = _spatial_rank(ctx, x)
    if w.ndim != x.ndim:
        raise ctx.fail(f"weight {tuple(w.shape)} and input {tuple(x.shape)} differ in rank")
    spatial = ctx.static_shape(x, "the input's")[2:]
    kernel = _static_dims(ctx, w.shape[2:], "the weight's window")
    given = ctx.attr("kernel_shape")
    if given is not None and [int(k) for k in given] != kernel:
        raise ctx.fail(f"kernel_shape {list(given)} disagrees with the weight "
                       f"{tuple(w.shape)}")
    strides = _ints(ctx, "strides", [1] * n, n)
    dilations = _ints(ctx, "dilations", [1] * n, n)
    out_pad = _ints(ctx, "output_padding", [0] * n, n)
    groups = int(ctx.attr("group", 1))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    output_shape = ctx.attr("output_shape")
    if output_shape is not None:
        output_shape = [int(v) for v in output_shape][-n:]
    full = [s * (size - 1) + (k - 1) * d + 1 + op for size, k, s, d, op in
            zip(spatial, kernel, strides, dilations, out_pad, strict=True)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        want = output_shape or [size * s for size, s in zip(spatial, strides, strict=True)]
        begin, end = [], []
        for f, o in zip(full, want, strict=True):
            total = f - o
            small, big = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else big)
            end.append(big if auto_pad == "SAME_UPPER" else small)
    elif auto_pad in ("NOTSET", "", "VALID"):
        pads = [0] * 2 * n if auto_pad == "VALID" else _ints(ctx, "pads", [0] * 2 * n, 2 * n)
        begin, end = pads[:n], pads[n:]
        if output_shape is not None:  # the output is cut (or zero-extended) at the end
            end = [f - b - o for f, b, o in zip(full, begin, output_shape, strict=True)]
    else:
        raise ctx.unsupported("auto_pad", auto_pad, "NOTSET, VALID, SAME_UPPER and "
                              "SAME_LOWER are")
    ctx.ignore("pads")
    # a negative end padding asks for more output than the window reaches: zeros
    out_pad = [op + max(0, -e) for op, e in zip(out_pad, end, strict=True)]
    end = [max(0, e) for e in end]
    if any(b < 0 for b in begin):
        raise ctx.fail(f"pads {begin + end} would need a negative start padding")
    out = ctx.call("nn.conv2d_transpose", _to_2d(ctx, x, n), _to_2d(ctx, w, n),
                   strides=_pair(strides, n), padding=_padding2d(begin + end, n),
                   output_padding=_pair(out_pad, n, 0), dilation=_pair(dilations, n),
                   groups=groups, kernel_size=_pair(kernel, n))
    if bias is not None:
        out = ctx.call("nn.bias_add", out, bias, axis=1)
    return _from_2d(ctx, out, n)


# -------------------------------------------------------------------- matrix products


@converter("Gemm")
def _gemm(ctx: NodeContext) -> Value:
    a, b, c = ctx.input(0, "A"), ctx.input(1, "B"), ctx.optional_input(2)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    if a.ndim != 2 or b.ndim != 2:
        raise ctx.fail(f"A {tuple(a.shape)} and B {tuple(b.shape)} must be matrices")
    if ctx.opset < 7:
        ctx.ignore("broadcast")  # C broadcasts as numpy does, as from opset 7 on
    if trans_b and not trans_a:
        y = ctx.call("nn.dense", a, b)
    else:
        y = ctx.call("nn.matmul", a, b, transpose_a=trans_a, transpose_b=trans_b)
    if alpha != 1.0:
        y = ctx.call("multiply", y, ctx.scalar(alpha, y))
    if c is None or beta == 0.0:
        return y
    if beta != 1.0:
        c = ctx.call("multiply", c, ctx.scalar(beta, c))
    if c.ndim == 1 and c.shape[0] == y.shape[1]:
        return ctx.call("nn.bias_add", y, c, axis=1)
    return ctx.call("add", y, c)


def _static_dims(ctx: NodeContext, dims: Sequence, what: str) -> list[int]:
    if not all(isinstance(d, int) for d in dims):
        raise ctx.fail(f"{what} {tuple(dims)} must be static")
    return list(dims)


@converter("MatMul")
def _matmul(ctx: NodeContext) -> Value:
    return _product(ctx, ctx.input(0, "A"), ctx.input(1, "B"))


def _product(ctx: NodeContext, a: Value, b: Value) -> Value:
    """numpy's ``matmul(a, b)`` in IR operators."""
    if a.ndim == 0 or b.ndim == 0:
        raise ctx.fail("MatMul does not take scalars")
    if b.ndim == 1:  # (..., K) x (K,): a matrix-vector product
        y = _product(ctx, a, ctx.call("expand_dims", b, axis=1))
        return ctx.call("squeeze", y, axis=[y.ndim - 1])
    if b.ndim == 2:
        if a.ndim <= 2:
            return ctx.call("nn.matmul", a, b)
        # a stack of matrices times one: flatten the stack so a 2-d product does it all
        lead = a.shape[:-1]
        if not all(isinstance(d, int) for d in lead):
            return ctx.call("nn.matmul", a, b)
        flat = ctx.call("reshape", a, newshape=[math.prod(lead), a.shape[-1]])
        y = ctx.call("nn.matmul", flat, b)
        return ctx.call("reshape", y, newshape=[*lead, b.shape[1]])
    if a.ndim == 1:  # (K,) x (..., K, N)
        y = _product(ctx, ctx.call("expand_dims", a, axis=0), b)
        return ctx.call("squeeze", y, axis=[y.ndim - 2])
    batch_a = _static_dims(ctx, a.shape[:-2], "the batch dimensions of A")
    batch_b = _static_dims(ctx, b.shape[:-2], "the batch dimensions of B")
    rank = max(len(batch_a), len(batch_b))
    pa = [1] * (rank - len(batch_a)) + batch_a
    pb = [1] * (rank - len(batch_b)) + batch_b
    batch = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and 1 not in (x, y):
            raise ctx.fail(f"A {tuple(a.shape)} and B {tuple(b.shape)} have batch dimensions "
                           "that do not broadcast")
        batch.append(max(x, y))
    out = ctx.call("nn.batch_matmul", _batched(ctx, a, pa, batch), _batched(ctx, b, pb, batch),
                   transpose_b=False)
    return ctx.call("reshape", out, newshape=[*batch, a.shape[-2], b.shape[-1]])


def _batched(ctx: NodeContext, x: Value, padded_batch: list[int], batch: list[int]) -> Value:
    """``x`` (..., R, C) as (B, R, C): a batch of 1 stays 1 (batch_matmul broadcasts it),
    other batch dimensions are broadcast to ``batch`` first."""
    rows, cols = x.shape[-2:]
    if math.prod(padded_batch) == 1:
        return ctx.call("reshape", x, newshape=[1, rows, cols])
    if padded_batch != batch:
        x = ctx.call("broadcast_to", x, shape=[*batch, rows, cols])
    return ctx.call("reshape", x, newshape=[math.prod(batch), rows, cols])


# ----------------------------------------------------------------------- normalization


@converter("Softmax", "LogSoftmax")
def _softmax(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    op = "nn.softmax" if ctx.op_type == "Softmax" else "nn.log_softmax"
    axis = int(ctx.attr("axis", -1 if ctx.opset >= 13 else 1))
    if x.ndim == 0:
        raise ctx.fail("the input must have rank >= 1")
    if not -x.ndim <= axis < x.ndim:
        raise ctx.unsupported("axis", axis, f"out of range for rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    if ctx.opset >= 13 or axis == x.ndim - 1:
        return ctx.call(op, x, axis=axis)
    # before opset 13: over all the axes from ``axis`` on, as one flattened axis
    shape = ctx.static_shape(x, "the input's")
    flat = ctx.call("reshape", x, newshape=[math.prod(shape[:axis]), math.prod(shape[axis:])])
    return ctx.call("reshape", ctx.call(op, flat, axis=1), newshape=list(shape))


@converter("BatchNormalization")
def _batch_norm(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    params = [ctx.input(i, what) for i, what in
              enumerate(("scale", "B", "input_mean", "input_var"), 1)]
    ctx.ignore("momentum", "consumed_inputs")  # only about training
    if not int(ctx.attr("is_test", 1)):  # opset < 7
        raise ctx.unsupported("is_test", 0, "inference only")
    if int(ctx.attr("training_mode", 0)):
        raise ctx.unsupported("training_mode", 1, "inference only")
    if int(ctx.attr("spatial", 1)) != 1:
        raise ctx.unsupported("spatial", 0)
    if any(ctx.output_used(i) for i in range(1, ctx.num_outputs)):
        raise ctx.fail("the running mean / variance outputs (training) are not supported")
    if x.ndim < 2:
        raise ctx.fail(f"input {tuple(x.shape)} must have rank >= 2")
    params = [ctx.cast(p, x.dtype) for p in params]
    out = ctx.call("nn.batch_norm", x, *params, axis=1,
                   epsilon=float(ctx.attr("epsilon", 1e-5)))
    return ctx.item(out, 0)


@converter("LayerNormalization")
def _layer_norm(ctx: NodeContext) -> list[Value]:
    x, scale, bias = ctx.input(0), ctx.input(1, "scale"), ctx.optional_input(2)
    axis = int(ctx.attr("axis", -1))
    eps = float(ctx.attr("epsilon", 1e-5))
    stash = onnx_dtype(int(ctx.attr("stash_type", 1)))
    if stash is None or not stash.startswith("float"):
        raise ctx.unsupported("stash_type", ctx.attr("stash_type"))
    if not -x.ndim <= axis < x.ndim:
        raise ctx.unsupported("axis", axis, f"out of range for rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    extra_outputs = ctx.output_used(1) or ctx.output_used(2)
    last = x.shape[-1]
    if axis == x.ndim - 1 and not extra_outputs and isinstance(last, int):
        gamma = _as_vector(ctx, scale, last)
        beta = (_as_vector(ctx, bias, last) if bias is not None
                else ctx.const(np.zeros(last, x.dtype)))
        return [ctx.call("nn.layer_norm", x, gamma, beta, axis=-1, epsilon=eps)]
    # several axes, or Mean / InvStdDev wanted: spelled out in the stash dtype
    axes = list(range(axis, x.ndim))
    xs = ctx.cast(x, stash)
    mean = ctx.call("mean", xs, axis=axes, keepdims=True)
    d = ctx.call("subtract", xs, mean)
    var = ctx.call("mean", ctx.call("multiply", d, d), axis=axes, keepdims=True)
    inv_std = ctx.call("rsqrt", ctx.call("add", var, ctx.scalar(eps, var)))
    y = ctx.call("multiply", ctx.cast(ctx.call("multiply", d, inv_std), x.dtype), scale)
    if bias is not None:
        y = ctx.call("add", y, bias)
    return [y, mean, inv_std]


@converter("InstanceNormalization")
def _instance_norm(ctx: NodeContext) -> Value:
    x, scale, bias = ctx.input(0), ctx.input(1, "scale"), ctx.input(2, "B")
    eps = float(ctx.attr("epsilon", 1e-5))
    if x.ndim < 3:
        raise ctx.fail(f"input {tuple(x.shape)} must have rank >= 3 (N, C, spatial...)")
    axes = list(range(2, x.ndim))
    mean = ctx.call("mean", x, axis=axes, keepdims=True)
    d = ctx.call("subtract", x, mean)
    var = ctx.call("mean", ctx.call("multiply", d, d), axis=axes, keepdims=True)
    y = ctx.call("multiply", d, ctx.call("rsqrt", ctx.call("add", var, ctx.scalar(eps, var))))
    per_channel = [-1, *[1] * (x.ndim - 2)]
    y = ctx.call("multiply", y, ctx.call("reshape", scale, newshape=per_channel))
    return ctx.call("add", y, ctx.call("reshape", bias, newshape=per_channel))


def _as_vector(ctx: NodeContext, p: Value, size: int) -> Value:
    """A scale / bias broadcastable to (size,) as a (size,) tensor."""
    if tuple(p.shape) == (size,):
        return p
    if p.ndim > 1:
        p = ctx.call("reshape", p, newshape=[-1])
    return ctx.call("broadcast_to", p, shape=[size])


# -------------------------------------------------------------------------- activations


@converter("LeakyRelu")
def _leaky_relu(ctx: NodeContext) -> Value:
    return ctx.call("nn.leaky_relu", ctx.input(0), alpha=float(ctx.attr("alpha", 0.01)))


@converter("PRelu")
def _prelu(ctx: NodeContext) -> Value:
    x, slope = ctx.input(0), ctx.input(1, "slope")
    if ctx.opset < 7 and slope.ndim == 1 and x.ndim > 2 and slope.shape[0] != 1:
        # a slope per channel (axis 1), before numpy broadcasting was the rule
        slope = ctx.call("reshape", slope, newshape=[-1, *[1] * (x.ndim - 2)])
    positive = ctx.call("greater", x, ctx.scalar(0, x))
    return ctx.call("where", positive, x, ctx.call("multiply", x, slope))


def _hard_sigmoid(ctx: NodeContext, x: Value, alpha: float, beta: float) -> Value:
    y = ctx.call("add", ctx.call("multiply", x, ctx.scalar(alpha, x)), ctx.scalar(beta, x))
    return ctx.call("clip", y, a_min=0.0, a_max=1.0)


@converter("HardSigmoid")
def _hardsigmoid(ctx: NodeContext) -> Value:
    return _hard_sigmoid(ctx, ctx.input(0), float(ctx.attr("alpha", 0.2)),
                         float(ctx.attr("beta", 0.5)))


@converter("HardSwish")
def _hardswish(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    return ctx.call("multiply", x, _hard_sigmoid(ctx, x, 1.0 / 6.0, 0.5))


def _elu_negative(ctx: NodeContext, x: Value, alpha: float) -> Value:
    """``alpha * (exp(x) - 1)``."""
    em1 = ctx.call("subtract", ctx.call("exp", x), ctx.scalar(1, x))
    return ctx.call("multiply", em1, ctx.scalar(alpha, x))


@converter("Elu")
def _elu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    positive = ctx.call("greater", x, ctx.scalar(0, x))
    return ctx.call("where", positive, x, _elu_negative(ctx, x, float(ctx.attr("alpha", 1.0))))


@converter("Selu")
def _selu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.67326319217681884765625))
    gamma = float(ctx.attr("gamma", 1.05070102214813232421875))
    positive = ctx.call("greater", x, ctx.scalar(0, x))
    y = ctx.call("where", positive, x, _elu_negative(ctx, x, alpha))
    return ctx.call("multiply", y, ctx.scalar(gamma, x))


@converter("Softplus")
def _softplus(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    return ctx.call("log", ctx.call("add", ctx.call("exp", x), ctx.scalar(1, x)))


@converter("Gelu")
def _gelu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    approximate = ctx.attr("approximate", "none")
    half_x = ctx.call("multiply", x, ctx.scalar(0.5, x))
    if approximate == "none":
        inner = ctx.call("erf", ctx.call("multiply", x, ctx.scalar(1 / math.sqrt(2), x)))
    elif approximate == "tanh":
        cube = ctx.call("multiply", ctx.call("multiply", x, x), x)
        poly = ctx.call("add", x, ctx.call("multiply", cube, ctx.scalar(0.044715, x)))
        inner = ctx.call("tanh", ctx.call("multiply", poly,
                                          ctx.scalar(math.sqrt(2 / math.pi), x)))
    else:
        raise ctx.unsupported("approximate", approximate, "'none' and 'tanh' are")
    return ctx.call("multiply", half_x, ctx.call("add", inner, ctx.scalar(1, x)))


__all__: list[str] = []
