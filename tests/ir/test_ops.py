"""The operator registry's operators: numpy computes against references, type relations
(broadcasting, reshape, concat, conv/pool windows, reductions) with symbolic and dynamic
dimensions, their error messages, the fusion patterns, and a few lowerings built and run."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ir
from ir.op.relations import broadcast_shapes

P = ir.OpPattern
RNG = np.random.default_rng(7)


def tensor(*shape, dtype: str = "float32") -> ir.TensorType:
    return ir.TensorType(shape, dtype)


def rand(*shape, dtype: str = "float32") -> np.ndarray:
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    if dtype.startswith("int"):
        return RNG.integers(-20, 20, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def positive(*shape) -> np.ndarray:
    return (RNG.random(shape) + 0.1).astype("float32")


def type_of(value) -> ir.Type:
    if isinstance(value, tuple | list):
        return ir.TupleType(tuple(type_of(v) for v in value))
    return ir.TensorType(value.shape, str(value.dtype))


def run(name: str, inputs: list, **attrs):
    """The op's compute on ``inputs``, checked against its type relation's output type."""
    opdef = ir.get_op_def(name)
    full = opdef.make_attrs(attrs)
    out = opdef.compute(inputs, full)
    expected_type = opdef.infer_type([type_of(x) for x in inputs], full)
    assert type_of(out) == expected_type, (name, type_of(out), expected_type)
    return out


# ------------------------------------------------------------------- computes vs numpy

def _erf_ref(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(v) for v in x.ravel().tolist()]).reshape(x.shape)


def _naive_conv_nchw(x, w, strides, pads, dilation, groups):
    n, c, h, wd = x.shape
    o, i, r, s = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilation, pads
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr), np.float64)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh = (h + pt + pb - (r - 1) * dh - 1) // sh + 1
    ow = (wd + pl + pr - (s - 1) * dw - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for b, k, y, z in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = k // og
        acc = 0.0
        for ci, ry, rx in itertools.product(range(i), range(r), range(s)):
            acc += xp[b, g * i + ci, y * sh + ry * dh, z * sw + rx * dw] * w[k, ci, ry, rx]
        out[b, k, y, z] = acc
    return out


def _naive_conv_transpose_nchw(x, w, strides, pads, dilation, groups, output_padding):
    """Each input pixel scattered through the (I, O/groups, R, S) kernel, then cropped."""
    n, c, h, wd = x.shape
    _, og, r, s = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr), (oph, opw) = strides, dilation, pads, output_padding
    full = np.zeros((n, og * groups, (h - 1) * sh + (r - 1) * dh + 1 + oph,
                     (wd - 1) * sw + (s - 1) * dw + 1 + opw))
    ic = c // groups
    for b, ci, y, z, o, ry, rx in itertools.product(range(n), range(c), range(h), range(wd),
                                                    range(og), range(r), range(s)):
        full[b, (ci // ic) * og + o, y * sh + ry * dh, z * sw + rx * dw] += (
            x[b, ci, y, z] * w[ci, o, ry, rx])
    return full[:, :, pt:full.shape[2] - pb, pl:full.shape[3] - pr]


def _naive_pool_nchw(x, kind, size, strides, pads, ceil_mode=False, include_pad=False):
    n, c, h, w = x.shape
    (r, s), (sh, sw), (pt, pl, pb, pr) = size, strides, pads
    rnd = math.ceil if ceil_mode else math.floor
    oh = rnd((h + pt + pb - r) / sh) + 1
    ow = rnd((w + pl + pr - s) / sw) + 1
    out = np.zeros((n, c, oh, ow))
    for b, k, y, z in itertools.product(range(n), range(c), range(oh), range(ow)):
        vals, padded = [], 0
        for ry, rx in itertools.product(range(r), range(s)):
            yy, zz = y * sh + ry - pt, z * sw + rx - pl
            if 0 <= yy < h and 0 <= zz < w:
                vals.append(x[b, k, yy, zz])
            elif -pt <= yy < h + pb and -pl <= zz < w + pr:
                padded += 1
        if kind == "max":
            out[b, k, y, z] = max(vals)
        else:
            out[b, k, y, z] = sum(vals) / (len(vals) + (padded if include_pad else 0))
    return out


def _naive_pool_grad_nchw(g, x, kind, size, strides, pads):
    """The adjoint of a pool: each window's gradient to its first largest element (max) or
    shared by the window's input elements (avg, padding not counted)."""
    n, c, h, w = x.shape
    (r, s), (sh, sw), (pt, pl, _, _) = size, strides, pads
    out = np.zeros(x.shape)
    for b, k, y, z in itertools.product(range(n), range(c), *map(range, g.shape[2:])):
        cells = [(y * sh + ry - pt, z * sw + rx - pl)
                 for ry, rx in itertools.product(range(r), range(s))]
        cells = [(yy, zz) for yy, zz in cells if 0 <= yy < h and 0 <= zz < w]
        if kind == "max":
            best = max(cells, key=lambda cell: (x[b, k, cell[0], cell[1]],
                                                -cells.index(cell)))
            out[b, k, best[0], best[1]] += g[b, k, y, z]
        else:
            for yy, zz in cells:
                out[b, k, yy, zz] += g[b, k, y, z] / len(cells)
    return out


def _naive_conv_weight_grad(g, x, size, strides, pads):
    o, (r, s), (sh, sw), (pt, pl, _, _) = g.shape[1], size, strides, pads
    out = np.zeros((o, x.shape[1], r, s))
    for b, k, y, z in itertools.product(*map(range, g.shape)):
        for i, ry, rx in itertools.product(range(x.shape[1]), range(r), range(s)):
            yy, zz = y * sh + ry - pt, z * sw + rx - pl
            if 0 <= yy < x.shape[2] and 0 <= zz < x.shape[3]:
                out[k, i, ry, rx] += g[b, k, y, z] * x[b, i, yy, zz]
    return out


def _naive_take_grad(g, indices, shape):
    out = np.zeros(shape)
    for j, i in itertools.product(range(shape[0]), range(indices.size)):
        out[j, min(max(int(indices.flat[i]), 0), shape[1] - 1)] += g[j].flat[i]
    return out


def _softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _pack(x, b):
    """NCHW ``x`` packed to NCHW[b]c, by hand."""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2))


def _pack_kernel(w, ic, oc):
    """OIHW ``w`` packed to OIHW[ic]i[oc]o, by hand."""
    o, i, r, s = w.shape
    return np.ascontiguousarray(
        w.reshape(o // oc, oc, i // ic, ic, r, s).transpose(0, 2, 4, 5, 3, 1))


def _unpack(x):
    """NCHW[b]c ``x`` back to NCHW, by hand."""
    n, co, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, co * b, h, w))


def _unpack_int8_kernel(w):
    """(K/oc, C/4, R, S, oc, 4) back to OIHW, by hand."""
    ko, co, r, s, oc, four = w.shape
    return np.ascontiguousarray(w.transpose(0, 4, 1, 5, 2, 3).reshape(ko * oc, co * four, r, s))


def _naive_winograd_input(x, tile, pads):
    """NCHW ``x``'s 3x3 input tiles, tile by tile: ``B^T d B`` -> (alpha^2, tiles, C)."""
    from schedule.ops.reference import winograd_matrices

    bt = winograd_matrices(tile)[0]
    alpha = tile + 2
    n, c, h, w = x.shape
    oh, ow = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
    th, tw = -(-oh // tile), -(-ow // tile)
    padded = np.zeros((n, c, th * tile + 2, tw * tile + 2))
    padded[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = x
    out = np.zeros((alpha * alpha, n * th * tw, c))
    for i in range(n):
        for ty in range(th):
            for tx in range(tw):
                for ch in range(c):
                    d = padded[i, ch, ty * tile:ty * tile + alpha, tx * tile:tx * tile + alpha]
                    out[:, (i * th + ty) * tw + tx, ch] = (bt @ d @ bt.T).ravel()
    return out.astype(x.dtype)


def _naive_winograd_output(m, tile, out_size, block):
    """``A^T m A`` tile by tile, cropped to ``out_size`` and packed in ``block`` channels."""
    from schedule.ops.reference import winograd_matrices

    at = winograd_matrices(tile)[2]
    alpha = tile + 2
    th, tw = -(-out_size[0] // tile), -(-out_size[1] // tile)
    n, k = m.shape[1] // (th * tw), m.shape[2]
    y = np.zeros((n, k, th * tile, tw * tile))
    for t in range(m.shape[1]):
        i, ty, tx = t // (th * tw), t // tw % th, t % tw
        for ch in range(k):
            y[i, ch, ty * tile:(ty + 1) * tile, tx * tile:(tx + 1) * tile] = \
                at @ m[:, t, ch].reshape(alpha, alpha) @ at.T
    return _pack(y[:, :, :out_size[0], :out_size[1]], block).astype(m.dtype)


A34, B14 = rand(3, 4), rand(1, 4)
W_PANELS = rand(2, 4, 4)
POS = positive(2, 3)
X4 = rand(2, 3, 4, 5)
I32 = rand(3, 4, dtype="int32")
W_CONV = rand(6, 1, 3, 3)
W_CONV_T = rand(4, 3, 3, 2)
G_POOL = rand(2, 3, 2, 3)  # a 3x3 stride-2 pool's output over X4, padding 1
G_CONV = rand(2, 6, 2, 2)  # a 3x2 stride-2 conv's output over X4, padding (1, 0, 1, 0)
U8_PACKED = np.random.default_rng(2).integers(0, 256, (1, 2, 6, 6, 4)).astype("uint8")
W_INT8_PACKED = np.random.default_rng(3).integers(-128, 128, (1, 2, 3, 3, 16, 4)).astype("int8")
TAKE_INDICES = np.array([[3, 0, 3], [1, 5, -2]], "int32")
G_TAKE = rand(3, 2, 3)
X4_8, W_PACK, W_DEPTHWISE = rand(1, 8, 5, 6), rand(6, 8, 3, 3), rand(8, 1, 3, 3)
BN_PARAMS = [rand(3), rand(3), rand(3), positive(3)]
W_PRODUCTS = rand(16, 9, 8)  # F(2x2, 3x3) products of a 5x6 output's 3x3 tiles

# (op, inputs, attrs, reference output(s), tolerance)
COMPUTE_CASES = [
    ("add", [A34, B14], {}, A34 + B14),
    ("subtract", [A34, B14], {}, A34 - B14),
    ("multiply", [A34, B14], {}, A34 * B14),
    ("divide", [A34, POS[:1, :1]], {}, A34 / POS[:1, :1]),
    ("divide", [np.array([7, -7, 7], "int32"), np.array([2, 2, -2], "int32")], {},
     np.array([3, -3, -3], "int32")),
    ("power", [POS, POS], {}, POS ** POS),
    ("maximum", [A34, B14], {}, np.maximum(A34, B14)),
    ("minimum", [A34, B14], {}, np.minimum(A34, B14)),
    ("negative", [A34], {}, -A34),
    ("exp", [A34], {}, np.exp(A34)),
    ("log", [POS], {}, np.log(POS)),
    ("sqrt", [POS], {}, np.sqrt(POS)),
    ("tanh", [A34], {}, np.tanh(A34)),
    ("sigmoid", [A34 * 30], {}, 1 / (1 + np.exp(-A34.astype(np.float64) * 30))),
    ("erf", [A34 * 2], {}, _erf_ref(A34 * 2)),
    ("nn.relu", [A34], {}, np.maximum(A34, 0)),
    ("clip", [A34], {"a_min": -0.5, "a_max": 0.5}, np.clip(A34, -0.5, 0.5)),
    ("clip", [I32], {"a_min": -3, "a_max": 4}, np.clip(I32, -3, 4)),
    ("cast", [A34 * 10], {"dtype": "int32"}, (A34 * 10).astype("int32")),
    ("reshape", [X4], {"newshape": (0, -1, 5)}, X4.reshape(2, 12, 5)),
    ("reshape", [X4], {"newshape": (-1,)}, X4.reshape(-1)),
    ("transpose", [X4], {"axes": (0, 2, 3, 1)}, X4.transpose(0, 2, 3, 1)),
    ("transpose", [X4], {}, X4.transpose()),
    ("squeeze", [rand(1, 3, 1)], {}, None),
    ("squeeze", [B14], {"axis": (0,)}, B14[0]),
    ("expand_dims", [A34], {"axis": 1, "num_newaxis": 2}, A34[:, None, None, :]),
    ("expand_dims", [A34], {"axis": -1}, A34[..., None]),
    ("concatenate", [(A34, B14, A34)], {"axis": 0}, np.concatenate([A34, B14, A34])),
    ("split", [X4], {"indices_or_sections": 2, "axis": 0}, tuple(np.split(X4, 2))),
    ("split", [X4], {"indices_or_sections": (1, 3), "axis": 2},
     tuple(np.split(X4, [1, 3], axis=2))),
    ("strided_slice", [X4], {"begin": (0, 1), "end": (2, 3)}, X4[0:2, 1:3]),
    ("strided_slice", [X4], {"begin": (4, -1), "end": (0, -5), "strides": (-2, -1),
                             "axes": (3, 2)}, X4[:, :, -1:-5:-1, 4:0:-2]),
    ("strided_slice", [X4], {"begin": (1,), "end": (2,), "axes": (1,), "slice_mode": "size"},
     X4[:, 1:3]),
    ("take", [A34, np.array([[0, 5], [-1, 2]], "int32")], {"axis": 1},
     np.take(A34, [[0, 5], [-1, 2]], axis=1, mode="clip")),
    ("take", [A34, np.array([0, 13], "int64")], {"mode": "wrap"},
     np.take(A34, [0, 13], mode="wrap")),
    ("take", [A34, np.array([[1, 0], [3, 3], [2, 1]], "int32")], {"axis": 1, "batch_dims": 1},
     np.stack([A34[b][[[1, 0], [3, 3], [2, 1]][b]] for b in range(3)])),
    ("broadcast_to", [B14], {"shape": (2, 3, 4)}, np.broadcast_to(B14, (2, 3, 4))),
    ("sum", [X4], {"axis": (1, 3)}, X4.sum(axis=(1, 3))),
    ("mean", [X4], {"axis": (1,), "keepdims": True}, X4.mean(axis=1, keepdims=True)),
    ("max", [X4], {"axis": (0, 2), "exclude": True}, X4.max(axis=(1, 3))),
    ("min", [X4], {}, X4.min()),
    ("argmax", [X4], {"axis": (2,)}, X4.argmax(axis=2).astype("int32")),
    ("argmax", [X4], {}, np.int32(X4.argmax())),
    ("argmax", [X4], {"axis": (1, 3), "keepdims": True},
     X4.transpose(0, 2, 1, 3).reshape(2, 4, 15).argmax(-1).astype("int32")[:, None, :, None]),
    ("nn.dense", [rand(2, 6), rand(5, 6)], {}, None),
    ("nn.matmul", [rand(2, 6), rand(6, 5)], {}, None),
    ("nn.matmul", [rand(6, 2), rand(5, 6)], {"transpose_a": True, "transpose_b": True}, None),
    ("nn.batch_matmul", [rand(3, 2, 6), rand(3, 5, 6)], {}, None),
    ("nn.batch_matmul", [rand(3, 2, 6), rand(1, 6, 5)], {"transpose_b": False}, None),
    ("nn.softmax", [X4], {"axis": 1}, _softmax_ref(X4.astype(np.float64), 1)),
    ("nn.log_softmax", [X4], {}, np.log(_softmax_ref(X4.astype(np.float64), -1))),
    ("nn.bias_add", [X4, rand(3)], {}, None),
    ("nn.bias_add", [X4, rand(5)], {"axis": -1}, None),
    ("nn.dropout", [A34], {"rate": 0.3}, (A34, np.ones_like(A34))),
    ("nn.pad", [A34], {"pad_width": ((1, 0), (2, 1)), "pad_value": 2.5},
     np.pad(A34, ((1, 0), (2, 1)), constant_values=2.5)),
    ("nn.pad", [A34], {"pad_width": ((1, 1), (0, 2)), "pad_mode": "edge"},
     np.pad(A34, ((1, 1), (0, 2)), mode="edge")),
    ("zeros", [], {"shape": (2, 3)}, np.zeros((2, 3), "float32")),
    ("ones", [], {"shape": (4,), "dtype": "int8"}, np.ones(4, "int8")),
    ("full", [np.array(3, "int32")], {"shape": (2, 2)}, np.full((2, 2), 3, "int32")),
    ("full", [np.array(3, "int32")], {"shape": (2,), "dtype": "float32"},
     np.full(2, 3, "float32")),
    ("less", [A34, B14], {}, A34 < B14),
    ("greater", [A34, B14], {}, A34 > B14),
    ("equal", [I32, I32[:1]], {}, I32[:1] == I32),
    ("logical_and", [A34 > 0, B14 > 0], {}, (A34 > 0) & (B14 > 0)),
    ("logical_or", [A34 > 0, B14 > 0], {}, (A34 > 0) | (B14 > 0)),
    ("logical_not", [A34 > 0], {}, A34 <= 0),
]


# Operators beyond the list (registered, so checked the same way).
EXTRA_CASES = [
    ("abs", [A34], {}, np.abs(A34)),
    ("ceil", [A34 * 3], {}, np.ceil(A34 * 3)),
    ("floor", [A34 * 3], {}, np.floor(A34 * 3)),
    ("rsqrt", [POS], {}, 1 / np.sqrt(POS)),
    ("argmin", [X4], {"axis": (3,)}, X4.argmin(axis=3).astype("int32")),
    ("prod", [X4], {"axis": (1,)}, X4.prod(axis=1)),
    ("greater_equal", [I32, I32[:1]], {}, I32[:1] <= I32),
    ("less_equal", [I32, I32[:1]], {}, I32[:1] >= I32),
    ("not_equal", [I32, I32[:1]], {}, I32[:1] != I32),
    ("logical_xor", [A34 > 0, B14 > 0], {}, (A34 > 0) ^ (B14 > 0)),
    ("nn.conv2d", [X4[:, :, :, :4], W_CONV], {"padding": 1, "strides": 2, "groups": 3},
     _naive_conv_nchw(X4[:, :, :, :4], W_CONV, (2, 2), (1, 1, 1, 1), (1, 1), 3)),
    ("nn.max_pool2d", [X4], {"pool_size": 2, "padding": 1},
     _naive_pool_nchw(X4, "max", (2, 2), (1, 1), (1, 1, 1, 1))),
    ("nn.avg_pool2d", [X4], {"pool_size": 3, "strides": 2, "ceil_mode": True},
     _naive_pool_nchw(X4, "avg", (3, 3), (2, 2), (0, 0, 0, 0), ceil_mode=True)),
    ("nn.global_avg_pool2d", [X4], {}, X4.mean(axis=(2, 3), keepdims=True)),
    ("nn.batch_norm", [X4, *BN_PARAMS], {"epsilon": 1e-3},
     ((X4 - BN_PARAMS[2][:, None, None]) / np.sqrt(BN_PARAMS[3][:, None, None] + 1e-3)
      * BN_PARAMS[0][:, None, None] + BN_PARAMS[1][:, None, None], BN_PARAMS[2], BN_PARAMS[3])),
    ("nn.layer_norm", [X4, rand(5), rand(5)], {}, None),
    # added for the ONNX importer
    ("where", [A34 > 0, A34, B14], {}, np.where(A34 > 0, A34, B14)),
    ("where", [np.array(True), I32, I32[:1]], {}, I32),
    ("nn.leaky_relu", [A34], {"alpha": 0.2}, np.where(A34 > 0, A34, 0.2 * A34)),
    ("nn.conv2d_transpose", [X4[:, :, :, :4].reshape(2, 4, 4, 3), W_CONV_T],
     {"strides": (2, 3), "padding": (1, 0, 2, 1), "output_padding": (1, 2), "dilation": (2, 1),
      "groups": 2},
     _naive_conv_transpose_nchw(X4[:, :, :, :4].reshape(2, 4, 4, 3), W_CONV_T, (2, 3),
                                (1, 0, 2, 1), (2, 1), 2, (1, 2))),
    # packed channels (ConvertLayout's NCHW[x]c)
    ("layout_transform", [X4_8], {"src_layout": "NCHW", "dst_layout": "NCHW4c"},
     _pack(X4_8, 4)),
    ("nn.conv2d_nchwc", [_pack(X4_8, 4), _pack_kernel(W_PACK, 4, 2)],
     {"strides": 2, "padding": 1},
     _pack(_naive_conv_nchw(X4_8, W_PACK, (2, 2), (1, 1, 1, 1), (1, 1), 1), 2)),
    ("nn.depthwise_conv2d_nchwc", [_pack(X4_8, 4), _pack_kernel(W_DEPTHWISE, 1, 4)],
     {"padding": 1}, _pack(_naive_conv_nchw(X4_8, W_DEPTHWISE, (1, 1), (1, 1, 1, 1), (1, 1),
                                            8), 4)),
    # a weight in column panels (PackDenseWeights): W_PANELS[p, k, b] is column p*4 + b
    ("nn.dense_packed", [A34, W_PANELS], {},
     np.einsum("ik,pkb->ipb", A34, W_PANELS).reshape(3, 8)),
    # the transforms of a Winograd convolution (ConvertWinograd)
    ("nn.winograd_input", [_pack(X4_8, 4)], {"tile": 2, "padding": (1, 0, 2, 1)},
     _naive_winograd_input(X4_8, 2, (1, 0, 2, 1))),
    ("nn.winograd_input", [_pack(X4_8, 2)], {"tile": 4, "padding": (1, 1, 1, 1)},
     _naive_winograd_input(X4_8, 4, (1, 1, 1, 1))),
    ("nn.winograd_output", [W_PRODUCTS], {"tile": 2, "out_size": (5, 6), "block": 4},
     _naive_winograd_output(W_PRODUCTS, 2, (5, 6), 4)),
    ("nn.max_pool2d", [_pack(X4_8, 4)], {"pool_size": 2, "padding": 1, "layout": "NCHW4c"},
     _pack(_naive_pool_nchw(X4_8, "max", (2, 2), (1, 1), (1, 1, 1, 1)), 4)),
    ("nn.global_avg_pool2d", [_pack(X4_8, 2)], {"layout": "NCHW2c"},
     _pack(X4_8.mean(axis=(2, 3), keepdims=True), 2)),
    # the adjoints gradients use (ir.op.grad_ops)
    ("nn.max_pool2d_grad", [G_POOL, X4], {"pool_size": 3, "strides": 2, "padding": 1},
     _naive_pool_grad_nchw(G_POOL, X4, "max", (3, 3), (2, 2), (1, 1, 1, 1))),
    ("nn.avg_pool2d_grad", [G_POOL, X4], {"pool_size": 3, "strides": 2, "padding": 1},
     _naive_pool_grad_nchw(G_POOL, X4, "avg", (3, 3), (2, 2), (1, 1, 1, 1))),
    ("nn.conv2d_backward_weight", [G_CONV, X4], {"strides": 2, "padding": (1, 0, 1, 0),
                                                 "kernel_size": (3, 2)},
     _naive_conv_weight_grad(G_CONV, X4, (3, 2), (2, 2), (1, 0, 1, 0))),
    ("take_grad", [G_TAKE, TAKE_INDICES], {"shape": (3, 4), "axis": 1},
     _naive_take_grad(G_TAKE, TAKE_INDICES, (3, 4))),
    ("nn.conv2d_nchw4c_int8", [U8_PACKED, W_INT8_PACKED], {"strides": 2, "padding": 1},
     _pack(_naive_conv_nchw(_unpack(U8_PACKED).astype("int64"),
                            _unpack_int8_kernel(W_INT8_PACKED).astype("int64"), (2, 2),
                            (1, 1, 1, 1), (1, 1), 1), 16).astype("int32")),
    # quantization: round half up, clip (ir.op.qnn); annotations: the identity
    ("qnn.simulated_quantize", [A34], {"scale": 0.1, "signed": False},
     np.clip(np.floor(A34 / 0.1 + 0.5), 0, 255) * 0.1),
    ("qnn.quantize", [A34], {"scale": 0.01, "out_dtype": "int8"},
     np.clip(np.floor(A34 / 0.01 + 0.5), -128, 127).astype("int8")),
    ("qnn.dequantize", [I32], {"scale": 0.5}, (I32 * 0.5).astype("float32")),
    ("qnn.requantize", [I32 * 100], {"multiplier": 3 << 28, "shift": 31, "out_dtype": "int32"},
     np.floor(I32 * 100 * 0.375 + 0.5).astype("int32")),
    ("qnn.requantize_per_channel", [np.arange(-6, 6, dtype="int32").reshape(3, 4),
                                    np.array([1, 2, 3], "int64")],
     {"shift": 1, "axis": 0, "out_dtype": "int8"},
     np.floor(np.arange(-6, 6).reshape(3, 4) * np.array([[0.5], [1.0], [1.5]]) + 0.5)
     .astype("int8")),
    ("annotation.compiler_begin", [A34], {"compiler": "blas"}, A34),
    ("annotation.compiler_end", [A34], {"compiler": "blas", "region": 3}, A34),
    ("strided_slice_grad", [A34[:, 1::2]], {"shape": (3, 4), "begin": (1,), "end": (4,),
                                            "strides": (2,), "axes": (1,)},
     np.stack([np.zeros(3), A34[:, 1], np.zeros(3), A34[:, 3]], axis=1)),
]


def _reference(name, inputs, attrs):
    """References that need the inputs (the table's ``None`` entries)."""
    x = inputs[0]
    if name == "squeeze":
        return np.squeeze(x)
    if name == "nn.dense":
        return x @ inputs[1].T
    if name == "nn.matmul":
        a = x.T if attrs.get("transpose_a") else x
        b = inputs[1].T if attrs.get("transpose_b") else inputs[1]
        return a @ b
    if name == "nn.batch_matmul":
        y = inputs[1] if attrs.get("transpose_b") is False else inputs[1].transpose(0, 2, 1)
        return np.matmul(x, y)
    if name == "nn.layer_norm":
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * inputs[1] + inputs[2]
    if name == "nn.bias_add":
        shape = [1] * x.ndim
        shape[attrs.get("axis", 1)] = -1
        return x + inputs[1].reshape(shape)
    raise AssertionError(name)


ALL_CASES = COMPUTE_CASES + EXTRA_CASES


def _expected(name, inputs, attrs, expected):
    return _reference(name, inputs, attrs) if expected is None else expected


def _assert_close(out, expected, rtol=1e-5, atol=1e-6) -> None:
    if isinstance(expected, tuple):
        assert isinstance(out, tuple) and len(out) == len(expected)
        for o, e in zip(out, expected, strict=True):
            np.testing.assert_allclose(o, e, rtol=rtol, atol=atol)
    else:
        np.testing.assert_allclose(out, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize(("name", "inputs", "attrs", "expected"), ALL_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ALL_CASES)])
def test_compute_matches_numpy(name, inputs, attrs, expected) -> None:
    _assert_close(run(name, inputs, **attrs), _expected(name, inputs, attrs, expected))


@pytest.mark.parametrize("mode", ["numpy", "compiled"])
@pytest.mark.parametrize(("name", "inputs", "attrs", "expected"), ALL_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ALL_CASES)])
def test_interpreter_runs_every_operator(name, inputs, attrs, expected, mode) -> None:
    """Each case as a typed one-call ``@main``, type-checked and run by ``ir.evaluate``:
    the interpreter's operator path (attributes, tuple inputs and outputs) and, in compiled
    mode, the JIT kernels of the operators with a lowering."""
    params = [ir.var(f"x{i}", type_of(v)) for i, v in enumerate(inputs)]
    module = ir.Module({"main": ir.Function(params, getattr_op(name)(*params, **attrs))})
    module = ir.infer_type(module)
    out = ir.evaluate(module, *inputs, mode=mode)
    _assert_close(out, _expected(name, inputs, attrs, expected), rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("error")
def test_arithmetic_wraps_and_overflows_without_warnings() -> None:
    """Integer arithmetic wraps (as the kernels' does) and float arithmetic reaches inf or
    nan, with no numpy warning either way (the integer path skips ``np.errstate``)."""
    big = np.array(2**31 - 1, "int32")
    assert run("add", [big, np.array(1, "int32")]) == -(2**31)
    assert run("multiply", [np.array([2**62], "int64"), np.array([4], "int64")])[0] == 0
    assert run("subtract", [np.array(5, "int32"), np.array(7, "int32")]).dtype == np.int32
    huge = np.array([3e38], "float32")
    assert np.isinf(run("multiply", [huge, huge])[0])
    assert np.isnan(run("subtract", [np.array([np.inf], "float32"),
                                     np.array([np.inf], "float32")])[0])
    run("divide", [np.array([1], "int32"), np.array([0], "int32")])  # no warning raised


def test_every_registered_operator_runs_in_the_interpreter() -> None:
    assert {c[0] for c in ALL_CASES} == set(ir.list_ops())


def getattr_op(name: str):
    namespace = ir.op
    for part in name.split(".")[:-1]:
        namespace = getattr(namespace, part)
    return getattr(namespace, name.rsplit(".", 1)[-1])


def test_every_listed_operator_is_registered_and_tested() -> None:
    listed = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "negative",
              "exp", "log", "sqrt", "tanh", "sigmoid", "erf", "nn.relu", "clip", "cast",
              "reshape", "transpose", "squeeze", "expand_dims", "concatenate", "split",
              "strided_slice", "take", "broadcast_to", "sum", "mean", "max", "min", "argmax",
              "nn.dense", "nn.matmul", "nn.batch_matmul", "nn.conv2d", "nn.max_pool2d",
              "nn.avg_pool2d", "nn.global_avg_pool2d", "nn.batch_norm", "nn.layer_norm",
              "nn.softmax", "nn.log_softmax", "nn.bias_add", "nn.dropout", "nn.pad", "zeros",
              "ones", "full", "less", "greater", "equal", "logical_and", "logical_or",
              "logical_not"]
    assert set(listed) <= set(ir.list_ops())
    tested = {c[0] for c in COMPUTE_CASES} | {"nn.conv2d", "nn.max_pool2d", "nn.avg_pool2d",
                                              "nn.global_avg_pool2d", "nn.batch_norm",
                                              "nn.layer_norm"}
    assert set(listed) <= tested


def test_erf_is_accurate() -> None:
    x = np.linspace(-6, 6, 1001).astype("float64")
    out = ir.get_op_def("erf").compute([x], ir.Attrs())
    assert np.max(np.abs(out - _erf_ref(x))) < 1e-12
    assert ir.get_op_def("erf").compute([x.astype("float32")], ir.Attrs()).dtype == np.float32


def test_batch_norm_and_layer_norm() -> None:
    x = rand(2, 3, 4, 4)
    gamma, beta, mean, var = rand(3), rand(3), rand(3), positive(3)
    out, m, v = run("nn.batch_norm", [x, gamma, beta, mean, var], epsilon=1e-3)
    shape = (1, 3, 1, 1)
    expected = ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-3)
                * gamma.reshape(shape) + beta.reshape(shape))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m, mean)
    np.testing.assert_array_equal(v, var)
    out = run("nn.batch_norm", [x, gamma, beta, mean, var], center=False, scale=False)[0]
    np.testing.assert_allclose(out, (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape)
                                                                        + 1e-5), rtol=1e-5)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = run("nn.batch_norm", [nhwc, gamma, beta, mean, var], axis=-1, epsilon=1e-3)[0]
    np.testing.assert_allclose(out, expected.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)

    y, g, b = rand(2, 5, 6), rand(6), rand(6)
    mu, sd = y.mean(-1, keepdims=True), np.sqrt(y.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(run("nn.layer_norm", [y, g, b]), (y - mu) / sd * g + b,
                               rtol=1e-4, atol=1e-5)
    g1, b1 = rand(5), rand(5)
    mu1, sd1 = y.mean(1, keepdims=True), np.sqrt(y.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(run("nn.layer_norm", [y, g1, b1], axis=1),
                               (y - mu1) / sd1 * g1[:, None] + b1[:, None], rtol=1e-4,
                               atol=1e-5)
    assert ir.get_op_def("nn.batch_norm").infer_type(
        [tensor("n", 3, ir.Any, 4)] + [tensor(3)] * 4) == ir.TupleType(
        (tensor("n", 3, ir.Any, 4), tensor(3), tensor(3)))


# ------------------------------------------------------------------------ patterns


def test_op_patterns_follow_relay() -> None:
    expected = {
        P.BROADCAST: "add subtract multiply divide power maximum minimum less greater equal "
                     "logical_and logical_or broadcast_to expand_dims nn.bias_add",
        P.ELEMWISE: "negative exp log sqrt tanh sigmoid erf nn.relu clip cast logical_not "
                    "zeros ones full",
        P.INJECTIVE: "reshape transpose squeeze concatenate split strided_slice take nn.pad",
        P.COMM_REDUCE: "sum mean max min argmax",
        P.OUT_ELEMWISE_FUSABLE: "nn.dense nn.matmul nn.batch_matmul nn.conv2d nn.max_pool2d "
                                "nn.avg_pool2d nn.global_avg_pool2d",
        P.OPAQUE: "nn.batch_norm nn.layer_norm nn.softmax nn.log_softmax nn.dropout",
    }
    for pattern, names in expected.items():
        for name in names.split():
            assert ir.get_op_def(name).pattern == pattern, name


def test_attribute_defaults_follow_relay() -> None:
    conv = ir.get_op_def("nn.conv2d").make_attrs()
    assert (conv.strides, conv.padding, conv.dilation, conv.groups) == ((1, 1), (0, 0),
                                                                         (1, 1), 1)
    assert (conv.data_layout, conv.kernel_layout, conv.out_dtype) == ("NCHW", "OIHW", "")
    assert ir.get_op_def("nn.batch_matmul").make_attrs().transpose_b is True
    pool = ir.get_op_def("nn.avg_pool2d").make_attrs()
    assert (pool.ceil_mode, pool.count_include_pad, pool.layout) == (False, False, "NCHW")
    assert ir.get_op_def("take").make_attrs().mode == "clip"
    assert ir.get_op_def("nn.bias_add").make_attrs().axis == 1
    bn = ir.get_op_def("nn.batch_norm").make_attrs()
    assert (bn.axis, bn.epsilon, bn.center, bn.scale) == (1, 1e-5, True, True)
    # padding as 1, 2 or 4 ints; a single int is wrapped
    x, w = ir.var("x", shape=(1, 3, 8, 8)), ir.var("w", shape=(4, 3, 3, 3))
    assert ir.op.nn.conv2d(x, w, padding=1).attrs.padding == (1,)


# -------------------------------------------------------------------- broadcasting


@pytest.mark.parametrize(("a", "b", "out"), [
    ((3,), (2, 4, 3), (2, 4, 3)),  # rank mismatch
    ((2, 1, 5), (4, 1), (2, 4, 5)),
    ((), ("n", 3), ("n", 3)),
    (("n", 1, "m"), (7, 1), ("n", 7, "m")),
    ((ir.Any, 4), ("n", 1), ("n", 4)),
    ((ir.Any,), (ir.Any,), (ir.Any,)),
])
def test_broadcast_with_rank_mismatch_and_symbolic_dims(a, b, out) -> None:
    for name in ("add", "power", "minimum", "less"):
        got = ir.get_op_def(name).infer_type([tensor(*a), tensor(*b)])
        assert got == tensor(*out, dtype="bool" if name == "less" else "float32")
        assert ir.get_op_def(name).infer_type([tensor(*b), tensor(*a)]).shape == got.shape


dims = st.integers(1, 4)
shapes = st.lists(st.sampled_from([1, 1, 2, 3]), min_size=0, max_size=4)


@settings(max_examples=200, deadline=None)
@given(shapes, shapes, st.lists(st.booleans(), min_size=4, max_size=4))
def test_broadcast_relation_equals_numpy(a, b, ones) -> None:
    # make the shapes compatible about half the time
    b = [1 if (k < len(ones) and ones[k]) else d for k, d in enumerate(b)]
    try:
        expected = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        with pytest.raises(ir.IRTypeError, match="do not broadcast"):
            ir.get_op_def("multiply").infer_type([tensor(*a), tensor(*b)])
        return
    assert ir.get_op_def("multiply").infer_type([tensor(*a), tensor(*b)]).shape == expected
    assert broadcast_shapes(a, b) == expected


# ------------------------------------------------------------------------- reshape


@pytest.mark.parametrize(("shape", "newshape", "out"), [
    ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (0, -1), (2, 12)),
    ((2, 3, 4), (4, 0, -1), (4, 3, 2)),
    ((2, 3, 4), (-1, 0, 0), (2, 3, 4)),
    ((2, 3, 4), (6, 1, -1), (6, 1, 4)),
    ((2, 3, 4), (-2,), (2, 3, 4)),
    ((2, 3, 4), (0, -2), (2, 3, 4)),
    ((2, 3, 4), (-3, 4), (6, 4)),
    ((2, 3, 4), (0, -4, 3, -1, 0), (2, 3, 1, 4)),
    (("n", 3, 4), (0, -1), ("n", 12)),
    (("n", 3, 4), (-1, 12), ("n", 12)),
    (("n", 3, 4), (6, -1), (6, ir.Any)),
    (("n", 3), (-1,), (ir.Any,)),
    (("n", 3, 4), (-1, 4), (ir.Any, 4)),
    ((ir.Any, 3, 4), (0, -1), (ir.Any, 12)),
    ((ir.Any, 3, 4), (-1, 6), (ir.Any, 6)),
])
def test_reshape_relation(shape, newshape, out) -> None:
    got = ir.get_op_def("reshape").infer_type([tensor(*shape)], {"newshape": newshape})
    assert got == tensor(*out)
    if all(isinstance(d, int) for d in shape):
        x = np.zeros(shape, "float32")
        assert run("reshape", [x], newshape=newshape).shape == out


def test_reshape_symbolic_division_and_mismatches() -> None:
    reshape = ir.get_op_def("reshape")
    assert reshape.infer_type([tensor("n", 3)], {"newshape": (3, -1)}) == tensor(3, "n")
    assert reshape.infer_type([tensor("n", 3)], {"newshape": (0, 3)}) == tensor("n", 3)
    with pytest.raises(ir.IRTypeError) as err:
        reshape.infer_type([tensor(2, 3)], {"newshape": (4, 2)})
    assert str(err.value) == ("reshape: cannot reshape input (2, 3) (6 elements) into (4, 2) "
                              "(8 elements)")
    with pytest.raises(ir.IRTypeError, match=r"reshape: cannot reshape input \(2, 3\) into "
                                             r"newshape \(4, -1\)"):
        reshape.infer_type([tensor(2, 3)], {"newshape": (4, -1)})
    with pytest.raises(ir.IRTypeError, match="more than one -1"):
        reshape.infer_type([tensor(2, 3)], {"newshape": (-1, -1)})
    with pytest.raises(ir.IRTypeError, match=r"reshape: cannot reshape input \(n, 3\) "
                                             r"\(3\*n elements\) into \(9,\) \(9 elements\)"):
        reshape.infer_type([tensor("n", 3)], {"newshape": (9,)})
    assert reshape.infer_type([tensor("n", 2, 3)], {"newshape": (0, -3)}) == tensor("n", 6)
    assert reshape.infer_type([tensor(8, 3)], {"newshape": (-4, 2, -1, 0)}) == tensor(2, 4, 3)
    with pytest.raises(ir.IRTypeError, match="refers to input dimension 2"):
        reshape.infer_type([tensor(2, 3)], {"newshape": (0, 0, 0)})


# --------------------------------------------------------------------- concatenate


@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_concatenate_of_2_to_5_tensors(count) -> None:
    arrays = [rand(2, k + 1, 3) for k in range(count)]
    out = run("concatenate", [tuple(arrays)], axis=1)
    np.testing.assert_array_equal(out, np.concatenate(arrays, axis=1))
    assert out.shape == (2, sum(range(1, count + 1)), 3)
    concat = ir.get_op_def("concatenate")
    types = ir.TupleType(tuple(tensor("n", k + 1, 3) for k in range(count)))
    assert concat.infer_type([types], {"axis": -2}) == tensor("n", out.shape[1], 3)
    dyn = ir.TupleType(tuple(tensor("n", ir.Any if k == 0 else 2) for k in range(count)))
    assert concat.infer_type([dyn], {"axis": 1}) == tensor("n", ir.Any)
    assert concat.infer_type([dyn], {"axis": 0}) == tensor(ir.Any, 2)
    # through the builder: a Tuple expression is its one input
    xs = [ir.var(f"x{k}", shape=(2, k + 1)) for k in range(count)]
    call = ir.op.concatenate(ir.Tuple(xs), axis=1)
    assert ir.structural_equal(call.args[0], ir.Tuple(xs)) and call.attrs.axis == 1


def test_concatenate_errors() -> None:
    concat = ir.get_op_def("concatenate")
    with pytest.raises(ir.IRTypeError) as err:
        concat.infer_type([ir.TupleType((tensor(2, 3), tensor(2, 3, 4)))], {"axis": 0})
    assert str(err.value) == ("concatenate: field 1 (2, 3, 4) has rank 3 but field 0 (2, 3) "
                              "has rank 2")
    with pytest.raises(ir.IRTypeError) as err:
        concat.infer_type([ir.TupleType((tensor(2, 3), tensor(5, 4)))], {"axis": 0})
    assert str(err.value) == ("concatenate: field 1 (5, 4) and field 0 (2, 3) disagree on "
                              "dimension 1 (4 vs 3); only axis 0 may differ")
    with pytest.raises(ir.IRTypeError, match="input must be a tuple of tensors"):
        concat.infer_type([tensor(2, 3)])
    with pytest.raises(ir.IRTypeError, match="axis 2 is out of range"):
        concat.infer_type([ir.TupleType((tensor(2, 3), tensor(2, 3)))], {"axis": 2})


# ----------------------------------------------------------------------- conv / pool


CONV_CASES = [
    # (N, C, H, W), (O, I, R, S), strides, padding, dilation, groups
    ((1, 3, 7, 7), (4, 3, 3, 3), (1, 1), (0,), (1, 1), 1),
    ((2, 4, 8, 9), (6, 2, 3, 2), (2, 1), (1, 2), (1, 1), 2),
    ((1, 4, 9, 9), (4, 1, 3, 3), (2, 2), (1, 0, 2, 1), (2, 1), 4),  # depthwise
    ((1, 2, 6, 5), (3, 2, 1, 1), (3, 2), (0, 0), (1, 1), 1),
    ((1, 6, 10, 8), (6, 3, 2, 3), (1, 3), (2,), (3, 2), 2),
]


def _pad4(p):
    return (p * 4 if len(p) == 1 else p * 2 if len(p) == 2 else p)


@pytest.mark.parametrize(("dshape", "wshape", "strides", "padding", "dilation", "groups"),
                         CONV_CASES)
def test_conv2d_shapes_and_values_in_both_layouts(dshape, wshape, strides, padding, dilation,
                                                  groups) -> None:
    x, w = rand(*dshape), rand(*wshape)
    attrs = {"strides": strides, "padding": padding, "dilation": dilation, "groups": groups}
    expected = _naive_conv_nchw(x, w, strides, _pad4(padding), dilation, groups)
    out = run("nn.conv2d", [x, w], **attrs)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    xh, wh = np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(
        w.transpose(2, 3, 1, 0))
    out = run("nn.conv2d", [xh, wh], data_layout="NHWC", kernel_layout="HWIO", **attrs)
    np.testing.assert_allclose(out, expected.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)
    # a symbolic batch flows through; symbolic spatial sizes give Any
    conv = ir.get_op_def("nn.conv2d")
    n, c, h, wd = dshape
    got = conv.infer_type([tensor("n", c, "h", wd), tensor(*wshape)], attrs)
    assert got.shape[0] == ir.SymDim("n") and got.shape[2] is ir.Any
    assert got.shape[1:2] + got.shape[3:] == expected.shape[1:2] + expected.shape[3:]


def test_conv2d_relation_details() -> None:
    conv = ir.get_op_def("nn.conv2d")
    # a 1x1 stride-1 convolution keeps symbolic spatial dims
    assert conv.infer_type([tensor("n", 8, "h", "w"), tensor(4, 8, 1, 1)]) == tensor(
        "n", 4, "h", "w")
    assert conv.infer_type([tensor(1, 8, 5, 5), tensor(4, 8, 3, 3)],
                           {"out_dtype": "float64", "out_layout": "NHWC"}) == tensor(
        1, 3, 3, 4, dtype="float64")
    with pytest.raises(ir.IRTypeError) as err:
        conv.infer_type([tensor(1, 3, 32, 32), tensor(8, 2, 3, 3)])
    assert str(err.value) == (
        "nn.conv2d: input (1, 3, 32, 32) (NCHW) and weight (8, 2, 3, 3) (OIHW) disagree on "
        "the input channels: the input has 3, the weight takes 2 per group x groups=1 = 2")
    with pytest.raises(ir.IRTypeError, match=r"output channels are not divisible by groups=2"):
        conv.infer_type([tensor(1, 4, 8, 8), tensor(5, 2, 3, 3)], {"groups": 2})
    with pytest.raises(ir.IRTypeError, match="takes 4 per group x groups=2 = 8"):
        conv.infer_type([tensor(1, 4, 8, 8), tensor(4, 4, 3, 3)], {"groups": 2})
    with pytest.raises(ir.IRTypeError, match="does not fit"):
        conv.infer_type([tensor(1, 3, 2, 2), tensor(4, 3, 3, 3)])
    with pytest.raises(ir.IRTypeError, match="data_layout 'NCWX' is not supported"):
        conv.infer_type([tensor(1, 3, 8, 8), tensor(4, 3, 3, 3)], {"data_layout": "NCWX"})
    with pytest.raises(ir.IRTypeError, match="padding must be 1, 2 or 4 ints"):
        conv.infer_type([tensor(1, 3, 8, 8), tensor(4, 3, 3, 3)], {"padding": (1, 1, 1)})


POOL_CASES = [
    # shape, pool_size, strides, padding, ceil_mode, count_include_pad
    ((1, 2, 7, 7), (3, 3), (2, 2), (1,), False, False),
    ((2, 3, 8, 6), (2, 3), (2, 1), (0, 1), False, True),
    ((1, 2, 7, 8), (3, 2), (2, 3), (1, 0, 0, 0), True, False),
    ((1, 1, 6, 6), (2, 2), (2, 2), (0,), True, True),
    ((1, 1, 5, 6), (3, 3), (2, 2), (1, 1), True, True),
]


@pytest.mark.parametrize(("shape", "size", "strides", "padding", "ceil_mode", "include"),
                         POOL_CASES)
def test_pool_shapes_and_values(shape, size, strides, padding, ceil_mode, include) -> None:
    x = rand(*shape)
    pads = _pad4(padding)
    common = {"pool_size": size, "strides": strides, "padding": padding,
              "ceil_mode": ceil_mode}
    expected_max = _naive_pool_nchw(x, "max", size, strides, pads, ceil_mode)
    expected_avg = _naive_pool_nchw(x, "avg", size, strides, pads, ceil_mode, include)
    out = run("nn.max_pool2d", [x], **common)
    np.testing.assert_allclose(out, expected_max, rtol=1e-6)
    out = run("nn.avg_pool2d", [x], count_include_pad=include, **common)
    np.testing.assert_allclose(out, expected_avg, rtol=1e-5, atol=1e-6)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = run("nn.max_pool2d", [xh], layout="NHWC", **common)
    np.testing.assert_allclose(out, expected_max.transpose(0, 2, 3, 1), rtol=1e-6)
    out = run("nn.avg_pool2d", [xh], layout="NHWC", count_include_pad=include, **common)
    np.testing.assert_allclose(out, expected_avg.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-6)


def test_pool_relations_and_global_pool() -> None:
    pool = ir.get_op_def("nn.max_pool2d")
    assert pool.infer_type([tensor("n", 3, 9, ir.Any)], {"pool_size": 3, "strides": 2}) == (
        tensor("n", 3, 4, ir.Any))
    assert pool.infer_type([tensor(1, 3, 9, 9)],
                           {"pool_size": 2, "strides": 2, "dilation": 2}) == tensor(1, 3, 4, 4)
    with pytest.raises(ir.IRTypeError, match=r"nn.max_pool2d: the 5x5 window does not fit "
                                             r"input \(1, 3, 3, 3\)"):
        pool.infer_type([tensor(1, 3, 3, 3)], {"pool_size": 5})
    x = rand(2, 3, 4, 5)
    np.testing.assert_allclose(run("nn.global_avg_pool2d", [x]),
                               x.mean(axis=(2, 3), keepdims=True), rtol=1e-5)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    np.testing.assert_allclose(run("nn.global_avg_pool2d", [xh], layout="NHWC"),
                               xh.mean(axis=(1, 2), keepdims=True), rtol=1e-5)
    assert ir.get_op_def("nn.global_avg_pool2d").infer_type([tensor("n", 8, "h", "w")]) == (
        tensor("n", 8, 1, 1))


# --------------------------------------------------------------------- reductions


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "argmax"])
@pytest.mark.parametrize(("axis", "keepdims", "exclude"), [
    (None, False, False), (None, True, False), ((1,), False, False), ((-1, 0), True, False),
    ((1,), False, True), ((0, 2), True, True), ((2,), True, False),
])
def test_reductions(name, axis, keepdims, exclude) -> None:
    x = rand(3, 4, 5)
    axes = tuple(range(3)) if axis is None else tuple(sorted(a % 3 for a in axis))
    if exclude:
        axes = tuple(a for a in range(3) if a not in axes)
    out = run(name, [x], axis=axis, keepdims=keepdims, exclude=exclude)
    if name == "argmax":
        kept = [a for a in range(3) if a not in axes]
        moved = x.transpose(kept + list(axes))
        ref = moved.reshape(*moved.shape[:len(kept)], -1).argmax(-1)
        if keepdims:
            ref = ref.reshape([1 if a in axes else x.shape[a] for a in range(3)])
        assert out.dtype == np.int32
    else:
        ref = getattr(np, name)(x, axis=axes, keepdims=keepdims)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    t = ir.get_op_def(name).infer_type([tensor("b", 4, ir.Any)],
                                       {"axis": axis, "keepdims": keepdims,
                                        "exclude": exclude})
    src = ("b", 4, ir.Any)
    want = [1 if a in axes else src[a] for a in range(3) if keepdims or a not in axes]
    assert t == tensor(*want, dtype="int32" if name == "argmax" else "float32")


def test_argmax_select_last_index_and_integer_mean() -> None:
    x = np.array([[1, 3, 3], [2, 2, 0]], "int32")
    np.testing.assert_array_equal(run("argmax", [x], axis=1), [1, 0])
    np.testing.assert_array_equal(run("argmax", [x], axis=1, select_last_index=True), [2, 1])
    np.testing.assert_array_equal(run("mean", [np.array([[-3, 0], [5, 2]], "int32")],
                                      axis=1), [-1, 3])


# ------------------------------------------------------------ other shape relations


def test_shape_relations_with_symbolic_dims() -> None:
    def infer(name, *types, **attrs):
        return ir.get_op_def(name).infer_type(list(types), attrs)

    assert infer("transpose", tensor("n", 3, ir.Any), axes=(2, 0, 1)) == tensor(ir.Any, "n", 3)
    assert infer("squeeze", tensor("n", 1, 3, 1)) == tensor("n", 3)
    assert infer("squeeze", tensor("n", 1, 3), axis=(0,)) == tensor(1, 3)
    assert infer("expand_dims", tensor("n", 3), axis=-1, num_newaxis=2) == tensor("n", 3, 1, 1)
    assert infer("split", tensor("n", 6), indices_or_sections=3, axis=1) == ir.TupleType(
        (tensor("n", 2),) * 3)
    assert infer("split", tensor("n", 6), indices_or_sections=(2, 5)) == ir.TupleType(
        (tensor(2, 6), tensor(3, 6), tensor(ir.Any, 6)))
    assert infer("split", tensor(7, 2), indices_or_sections=(2, 9)) == ir.TupleType(
        (tensor(2, 2), tensor(5, 2), tensor(0, 2)))
    assert infer("strided_slice", tensor("n", 10), begin=(0, 2), end=(2 ** 31 - 1, 8),
                 strides=(1, 3)) == tensor("n", 2)
    assert infer("strided_slice", tensor("n", 10), begin=(1,), end=(4,)) == tensor(ir.Any, 10)
    assert infer("take", tensor(5, "d"), tensor("n", 2, dtype="int64"), axis=0) == tensor(
        "n", 2, "d")
    assert infer("take", tensor(5, 4), tensor(3, dtype="int32")) == tensor(3)
    assert infer("broadcast_to", tensor(1, 3), shape=("n", 2, 3)) == tensor("n", 2, 3)
    assert infer("nn.pad", tensor("n", 3), pad_width=((0, 0), (1, 2))) == tensor("n", 6)
    assert infer("zeros", shape=("n", 2), dtype="int8") == tensor("n", 2, dtype="int8")
    assert infer("full", tensor(dtype="int32"), shape=(2,)) == tensor(2, dtype="int32")
    assert infer("nn.dropout", tensor("n", 3)) == ir.TupleType((tensor("n", 3),) * 2)
    assert infer("nn.bias_add", tensor("n", ir.Any, 4), tensor(5)) == tensor("n", ir.Any, 4)
    assert infer("cast", tensor("n"), dtype="float16") == tensor("n", dtype="float16")


def test_shape_relation_errors() -> None:
    def fails(match, name, *types, **attrs):
        with pytest.raises(ir.IRTypeError, match=match):
            ir.get_op_def(name).infer_type(list(types), attrs)

    fails(r"transpose: axes \(0, 0\) are not a permutation of the 2 axes of input \(2, 3\)",
          "transpose", tensor(2, 3), axes=(0, 0))
    fails(r"squeeze: axis 1 of input \(2, 3\) has size 3, not 1", "squeeze", tensor(2, 3),
          axis=(1,))
    fails(r"split: dimension 7 \(axis 0 of input \(7, 2\)\) does not split into 2 equal",
          "split", tensor(7, 2), indices_or_sections=2)
    fails("strides must not be 0", "strided_slice", tensor(4), begin=(0,), end=(4,),
          strides=(0,))
    fails(r"take: indices \(3,\) must have a int or uint dtype, got float32", "take",
          tensor(4), tensor(3))
    fails(r"broadcast_to: input \(2, 3\) does not broadcast to \(4, 3\): dimension 2 vs 4",
          "broadcast_to", tensor(2, 3), shape=(4, 3))
    fails(r"full: fill_value must be a scalar", "full", tensor(2), shape=(2,))
    fails(r"nn.pad: pad_width has 1 pairs but input \(2, 3\) has rank 2", "nn.pad",
          tensor(2, 3), pad_width=((1, 1),))
    fails(r"logical_and: input 0 \(2,\) must have a bool dtype, got float32", "logical_and",
          tensor(2), tensor(2, dtype="bool"))
    fails(r"nn.bias_add: bias \(4,\) must have shape \(3,\)", "nn.bias_add", tensor(2, 3),
          tensor(4))
    fails(r"nn.layer_norm: gamma \(4,\) must have shape \(5,\)", "nn.layer_norm",
          tensor(2, 5), tensor(4), tensor(5))
    fails(r"exp: input \(2,\) must be a float tensor, got int32", "exp",
          tensor(2, dtype="int32"))
    fails(r"cast: dtype 'float33' is not a dtype", "cast", tensor(2), dtype="float33")
    fails(r"clip: a_min=2.0 is greater than a_max=1.0", "clip", tensor(2), a_min=2, a_max=1)


def test_matmul_relations_and_errors() -> None:
    matmul = ir.get_op_def("nn.matmul")
    assert matmul.infer_type([tensor("n", 7, 16), tensor(16, 8)]) == tensor("n", 7, 8)
    assert matmul.infer_type([tensor(16, 4), tensor(8, 16)],
                             {"transpose_a": True, "transpose_b": True}) == tensor(4, 8)
    with pytest.raises(ir.IRTypeError) as err:
        matmul.infer_type([tensor(2, 5), tensor(4, 3)])
    assert str(err.value) == ("nn.matmul: input (2, 5) and weight (4, 3) disagree on the "
                              "reduction dimension 5 vs 4 (transpose_a=False, "
                              "transpose_b=False)")
    bmm = ir.get_op_def("nn.batch_matmul")
    assert bmm.infer_type([tensor("b", 4, 8), tensor(1, 6, 8)]) == tensor("b", 4, 6)
    assert bmm.infer_type([tensor(2, 8, 4), tensor(2, 8, 6)],
                          {"transpose_a": True, "transpose_b": False}) == tensor(2, 4, 6)
    with pytest.raises(ir.IRTypeError) as err:
        bmm.infer_type([tensor(2, 4, 5), tensor(2, 6, 4)])
    assert str(err.value) == ("nn.batch_matmul: x (2, 4, 5) and y (2, 6, 4) disagree on the "
                              "reduction dimension 5 vs 4 (transpose_a=False, "
                              "transpose_b=True)")
    with pytest.raises(ir.IRTypeError, match="batch sizes 2 and 3, which do not broadcast"):
        bmm.infer_type([tensor(2, 4, 5), tensor(3, 6, 5)])
    with pytest.raises(ir.IRTypeError, match=r"nn.dense: input \(1, 512\) and weight "
                                             r"\(1000, 256\) disagree on the reduction "
                                             r"dimension 512 vs 256"):
        ir.get_op_def("nn.dense").infer_type([tensor(1, 512), tensor(1000, 256)])


# ------------------------------------------------------------------------- lowering


def _build_and_run(name: str, arrays: list[np.ndarray], **attrs) -> np.ndarray:
    from schedule import build, te

    opdef = ir.get_op_def(name)
    full = opdef.make_attrs(attrs)
    out_type = opdef.infer_type([type_of(a) for a in arrays], full)
    placeholders = [te.placeholder(a.shape, str(a.dtype), name=f"x{i}")
                    for i, a in enumerate(arrays)]
    out = opdef.lowering(placeholders, full, out_type)
    assert tuple(out.shape) == out_type.shape and out.dtype == out_type.dtype
    result = np.zeros(out_type.shape, out_type.dtype)
    build(te.create_schedule(out), [*placeholders, out])(*arrays, result)
    return result


@pytest.mark.parametrize(("name", "arrays", "attrs"), [
    ("nn.conv2d", [rand(1, 4, 7, 7), rand(6, 2, 3, 3)],
     {"strides": 2, "padding": (1, 0, 1, 1), "groups": 2}),
    ("nn.conv2d", [rand(1, 6, 6, 3), rand(3, 3, 3, 4)],
     {"padding": 1, "data_layout": "NHWC", "kernel_layout": "HWIO"}),
    ("nn.dense", [rand(3, 8), rand(5, 8)], {}),
    ("add", [rand(2, 3, 4), rand(3, 1)], {}),
    ("nn.relu", [rand(4, 5)], {}),
    ("nn.softmax", [rand(3, 7)], {}),
    ("nn.avg_pool2d", [rand(1, 2, 7, 7)], {"pool_size": 3, "strides": 2, "padding": 1}),
    ("sum", [rand(2, 3, 4)], {"axis": (1,), "exclude": True, "keepdims": True}),
    ("nn.batch_matmul", [rand(2, 3, 5), rand(2, 4, 5)], {}),
])
def test_lowering_builds_and_matches_the_numpy_compute(name, arrays, attrs) -> None:
    out = _build_and_run(name, arrays, **attrs)
    expected = ir.get_op_def(name).compute(arrays, ir.get_op_def(name).make_attrs(attrs))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_lowering_slots() -> None:
    lowered = {n for n in ir.list_ops() if ir.get_op_def(n).lowering is not None}
    assert {"add", "subtract", "multiply", "divide", "nn.relu", "sigmoid", "tanh", "clip",
            "reshape", "transpose", "concatenate", "sum", "max", "nn.dense", "nn.matmul",
            "nn.batch_matmul", "nn.conv2d", "nn.max_pool2d", "nn.avg_pool2d",
            "nn.global_avg_pool2d", "nn.softmax", "nn.log_softmax", "nn.layer_norm",
            "nn.bias_add", "nn.pad"} <= lowered
    from ir.op.lowering import LoweringError

    conv = ir.get_op_def("nn.conv2d")
    attrs = conv.make_attrs({"data_layout": "NHWC"})
    with pytest.raises(LoweringError, match="layouts"):
        conv.lowering([None, None], attrs, tensor(1, 1, 1, 1))
