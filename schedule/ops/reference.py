"""Straightforward numpy references for every operator, independent of the te definitions.

Floats are computed in float64 and integers in int64, then cast to the output dtype
(``out_dtype``, default the input dtype). Convolutions and pooling loop over the kernel
window with numpy slicing.

Under :func:`native_precision` nothing is widened: the same code then computes in the
inputs' own dtype, which is what a numpy user gets (the speed baseline of the benchmarks
and of ``tensortune tune``).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Sequence

import numpy as np

from .layout import Layout, check_pair

IntOrPair = int | Sequence[int]


_NATIVE = contextvars.ContextVar("native_precision", default=False)


@contextlib.contextmanager
def native_precision() -> Iterator[None]:
    """Within this block the references compute in their inputs' dtype."""
    token = _NATIVE.set(True)
    try:
        yield
    finally:
        _NATIVE.reset(token)


def _wide(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if _NATIVE.get():
        return x
    if x.dtype.kind == "f":
        return x.astype(np.float64)
    if x.dtype.kind in "iu":
        return x.astype(np.int64)
    return x


def _out(x: np.ndarray, dtype: str | np.dtype) -> np.ndarray:
    return np.array(x, dtype=dtype, order="C")  # keeps 0-d results 0-d


def _pair(v: IntOrPair) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _pads(v: IntOrPair) -> tuple[int, int, int, int]:
    if not isinstance(v, int) and len(v) == 4:
        return tuple(int(p) for p in v)  # type: ignore[return-value]
    ph, pw = _pair(v)
    return ph, pw, ph, pw


# ---------------------------------------------------------------------------- linear algebra


def matmul(a: np.ndarray, b: np.ndarray, transpose_a: bool = False, transpose_b: bool = False,
           out_dtype: str | None = None) -> np.ndarray:
    x = a.T if transpose_a else a
    y = b.T if transpose_b else b
    return _out(_wide(x) @ _wide(y), out_dtype or a.dtype)


def dense(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None,
          activation: str = "none", out_dtype: str | None = None) -> np.ndarray:
    y = bias_activation(_wide(x) @ _wide(w).T, bias, activation, axis=1)
    return _out(y, out_dtype or x.dtype)


def batch_matmul(a: np.ndarray, b: np.ndarray, transpose_b: bool = False,
                 out_dtype: str | None = None) -> np.ndarray:
    y = np.swapaxes(b, 1, 2) if transpose_b else b
    return _out(np.matmul(_wide(a), _wide(y)), out_dtype or a.dtype)


# ---------------------------------------------------------------------------- convolution


def _window_slice(start: int, count: int, step: int) -> slice:
    return slice(start, start + (count - 1) * step + 1, step)


def _out_size(size: int, k: int, stride: int, pad_total: int, dilation: int) -> int:
    return (size + pad_total - (k - 1) * dilation - 1) // stride + 1


def conv2d_nchw(data: np.ndarray, kernel: np.ndarray, stride: IntOrPair = 1,
                padding: IntOrPair = 0, dilation: IntOrPair = 1, groups: int = 1,
                out_dtype: str | None = None) -> np.ndarray:
    """data (N, C, H, W), kernel (K, C/groups, R, S) -> (N, K, OH, OW)."""
    return _conv2d("nchw", data, kernel, stride, padding, dilation, groups, out_dtype)


def conv2d_nhwc(data: np.ndarray, kernel: np.ndarray, stride: IntOrPair = 1,
                padding: IntOrPair = 0, dilation: IntOrPair = 1, groups: int = 1,
                out_dtype: str | None = None) -> np.ndarray:
    """data (N, H, W, C), kernel (R, S, C/groups, K) -> (N, OH, OW, K)."""
    return _conv2d("nhwc", data, kernel, stride, padding, dilation, groups, out_dtype)


# The dimension order of the data, kernel and output of each layout (N batch, C input channels
# per group in the kernel, H x W image, K output channels, R x S window), and the product of
# a window position's input patch with the kernel's (K, C) or (C, K) matrix at that position.
_CONV_LAYOUTS = {
    "nchw": ("NCHW", "KCRS", "NKHW", lambda patch, w: np.einsum("nchw,kc->nkhw", patch, w)),
    "nhwc": ("NHWC", "RSCK", "NHWK", np.matmul),
}


def _conv2d(layout: str, data: np.ndarray, kernel: np.ndarray, stride: IntOrPair,
            padding: IntOrPair, dilation: IntOrPair, groups: int,
            out_dtype: str | None) -> np.ndarray:
    data_layout, kernel_layout, out_layout, product = _CONV_LAYOUTS[layout]
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = _pair(stride), _pair(dilation), _pads(padding)
    N, H, W = (data.shape[data_layout.index(d)] for d in "NHW")
    K, Cg, R, S = (kernel.shape[kernel_layout.index(d)] for d in "KCRS")
    OH, OW = _out_size(H, R, sh, pt + pb, dh), _out_size(W, S, sw, pl + pr, dw)
    pads = {"H": (pt, pb), "W": (pl, pr)}
    x = np.pad(_wide(data), tuple(pads.get(d, (0, 0)) for d in data_layout))
    w = _wide(kernel)
    extents = {"N": N, "K": K, "H": OH, "W": OW}
    out = np.zeros(tuple(extents[d] for d in out_layout), dtype=x.dtype)
    Kg = K // groups
    for g in range(groups):
        ks = slice(g * Kg, (g + 1) * Kg)
        out_g = out[tuple(ks if d == "K" else slice(None) for d in out_layout)]
        for r in range(R):
            for s in range(S):
                at = {"N": slice(None), "C": slice(g * Cg, (g + 1) * Cg),
                      "H": _window_slice(r * dh, OH, sh), "W": _window_slice(s * dw, OW, sw)}
                patch = x[tuple(at[d] for d in data_layout)]
                tap = {"K": ks, "C": slice(None), "R": r, "S": s}
                out_g += product(patch, w[tuple(tap[d] for d in kernel_layout)])
    return _out(out, out_dtype or data.dtype)


def depthwise_conv2d_nchw(data: np.ndarray, kernel: np.ndarray, stride: IntOrPair = 1,
                          padding: IntOrPair = 0, dilation: IntOrPair = 1,
                          out_dtype: str | None = None) -> np.ndarray:
    """data (N, C, H, W), kernel (C, M, R, S) -> (N, C*M, OH, OW)."""
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = _pair(stride), _pair(dilation), _pads(padding)
    N, C, H, W = data.shape
    _, M, R, S = kernel.shape
    OH, OW = _out_size(H, R, sh, pt + pb, dh), _out_size(W, S, sw, pl + pr, dw)
    x = np.pad(_wide(data), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    w = _wide(kernel)
    out = np.zeros((N, C, M, OH, OW), dtype=x.dtype)
    for r in range(R):
        for s in range(S):
            patch = x[:, :, _window_slice(r * dh, OH, sh), _window_slice(s * dw, OW, sw)]
            out += patch[:, :, None] * w[None, :, :, r, s, None, None]
    return _out(out.reshape(N, C * M, OH, OW), out_dtype or data.dtype)


# ---------------------------------------------------------------------------- pooling


def _pool_windows(x: np.ndarray, R: int, S: int, sh: int, sw: int, OH: int, OW: int):
    for r in range(R):
        for s in range(S):
            yield x[:, :, _window_slice(r, OH, sh), _window_slice(s, OW, sw)]


def max_pool2d(data: np.ndarray, pool_size: IntOrPair, stride: IntOrPair = 1,
               padding: IntOrPair = 0) -> np.ndarray:
    (R, S), (sh, sw), (pt, pl, pb, pr) = _pair(pool_size), _pair(stride), _pads(padding)
    N, C, H, W = data.shape
    OH, OW = _out_size(H, R, sh, pt + pb, 1), _out_size(W, S, sw, pl + pr, 1)
    low = -np.inf if data.dtype.kind == "f" else np.iinfo(data.dtype).min
    x = np.pad(_wide(data), ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=low)
    out = np.full((N, C, OH, OW), low, dtype=x.dtype)
    for patch in _pool_windows(x, R, S, sh, sw, OH, OW):
        out = np.maximum(out, patch)
    return _out(out, data.dtype)


def avg_pool2d(data: np.ndarray, pool_size: IntOrPair, stride: IntOrPair = 1,
               padding: IntOrPair = 0, count_include_pad: bool = False) -> np.ndarray:
    """Window means; without ``count_include_pad`` padding is left out of the count."""
    (R, S), (sh, sw), (pt, pl, pb, pr) = _pair(pool_size), _pair(stride), _pads(padding)
    N, C, H, W = data.shape
    OH, OW = _out_size(H, R, sh, pt + pb, 1), _out_size(W, S, sw, pl + pr, 1)
    pads = ((0, 0), (0, 0), (pt, pb), (pl, pr))
    x = np.pad(_wide(data), pads)
    ones = np.pad(np.ones((1, 1, H, W)), pads)
    total = np.zeros((N, C, OH, OW))
    count = np.zeros((1, 1, OH, OW))
    for patch, valid in zip(_pool_windows(x, R, S, sh, sw, OH, OW),
                            _pool_windows(ones, R, S, sh, sw, OH, OW), strict=True):
        total += patch
        count += valid
    return _out(total / (R * S if count_include_pad else count), data.dtype)


def global_avg_pool2d(data: np.ndarray) -> np.ndarray:
    return _out(_wide(data).mean(axis=(2, 3), keepdims=True), data.dtype)


# ---------------------------------------------------------------------------- normalisation


def softmax(x: np.ndarray) -> np.ndarray:
    v = _wide(x)
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return _out(e / e.sum(axis=-1, keepdims=True), x.dtype)


def log_softmax(x: np.ndarray) -> np.ndarray:
    v = _wide(x)
    shifted = v - v.max(axis=-1, keepdims=True)
    return _out(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)), x.dtype)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
               eps: float = 1e-5) -> np.ndarray:
    v = _wide(x)
    mean = v.mean(axis=-1, keepdims=True)
    var = v.var(axis=-1, keepdims=True)
    return _out((v - mean) / np.sqrt(var + eps) * _wide(gamma) + _wide(beta), x.dtype)


# ---------------------------------------------------------------------------- element-wise

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _relu(v: np.ndarray) -> np.ndarray:
    return np.maximum(v, 0)


def _gelu(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0)))


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _out(_wide(a) + _wide(b), np.result_type(a, b))


def subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _out(_wide(a) - _wide(b), np.result_type(a, b))


def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _out(_wide(a) * _wide(b), np.result_type(a, b))


def divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _out(_wide(a) / _wide(b), np.result_type(a, b))


def relu(x: np.ndarray) -> np.ndarray:
    return _out(_relu(_wide(x)), x.dtype)


def gelu(x: np.ndarray) -> np.ndarray:
    return _out(_gelu(_wide(x)), x.dtype)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return _out(_sigmoid(_wide(x)), x.dtype)


def tanh(x: np.ndarray) -> np.ndarray:
    return _out(np.tanh(_wide(x)), x.dtype)


def clip(x: np.ndarray, a_min: float, a_max: float) -> np.ndarray:
    return _out(np.clip(_wide(x), a_min, a_max), x.dtype)


def requantize(x: np.ndarray, shift: int) -> np.ndarray:
    return _out(np.clip(np.floor_divide(_wide(x), 1 << shift), -128, 127), "int8")


def bias_add(data: np.ndarray, bias: np.ndarray, axis: int = 1) -> np.ndarray:
    axis %= data.ndim
    shape = [1] * data.ndim
    shape[axis] = bias.shape[0]
    return _out(_wide(data) + _wide(bias).reshape(shape), data.dtype)


def bias_activation(y: np.ndarray, bias: np.ndarray | None, activation: str,
                    axis: int = 1) -> np.ndarray:
    """``activation(y + bias)`` with the bias along ``axis``, in ``y``'s (wide) dtype."""
    if bias is not None:
        shape = [1] * y.ndim
        shape[axis % y.ndim] = bias.shape[0]
        y = y + _wide(bias).reshape(shape)
    return {"none": lambda v: v, "relu": _relu, "gelu": _gelu}[activation](y)


_CHAIN_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
_CHAIN_UNARY = {"relu": _relu, "gelu": _gelu, "sigmoid": _sigmoid, "tanh": np.tanh,
                "clip": lambda v: np.clip(v, -1, 1)}


def elementwise_chain(x: np.ndarray, ops: Sequence[str],
                      operands: Sequence[np.ndarray] = ()) -> np.ndarray:
    """``ops`` applied in order; binary ops take the next operand. Float chains round to the
    dtype after each op (like the stage-by-stage te program); integer ones stay exact."""
    rest = list(operands)
    dtype = x.dtype
    y = _wide(x)
    for op in ops:
        binary = _CHAIN_BINARY.get(op)
        y = binary(y, _wide(rest.pop(0))) if binary else _CHAIN_UNARY[op](y)
        if dtype.kind == "f":
            y = _wide(y.astype(dtype))
    return _out(y, dtype)


# ---------------------------------------------------------------------------- layout and reductions


def pad(data: np.ndarray, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
        value: float = 0) -> np.ndarray:
    after = pad_before if pad_after is None else pad_after
    return np.pad(data, list(zip(pad_before, after, strict=True)), constant_values=value)


def transpose(data: np.ndarray, axes: Sequence[int] | None = None) -> np.ndarray:
    return np.array(np.transpose(data, axes), order="C")


def reshape(data: np.ndarray, newshape: Sequence[int]) -> np.ndarray:
    return np.array(np.reshape(data, tuple(newshape)), order="C")


def concatenate(arrays: Sequence[np.ndarray], axis: int = 0) -> np.ndarray:
    return np.concatenate(list(arrays), axis=axis)


def reduce_sum(data: np.ndarray, axis: int | Sequence[int] | None = None,
               keepdims: bool = False) -> np.ndarray:
    ax = axis if axis is None or isinstance(axis, int) else tuple(axis)
    return _out(np.sum(_wide(data), axis=ax, keepdims=keepdims), data.dtype)


def reduce_max(data: np.ndarray, axis: int | Sequence[int] | None = None,
               keepdims: bool = False) -> np.ndarray:
    ax = axis if axis is None or isinstance(axis, int) else tuple(axis)
    return _out(np.max(data, axis=ax, keepdims=keepdims), data.dtype)


def layout_transform(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """``x`` (in layout ``src``, e.g. NCHW) in layout ``dst`` (e.g. NCHW16c)."""
    s, d = Layout.parse(src), Layout.parse(dst)
    check_pair(s, d)
    extents = s.extents(x.shape)
    d.shape(extents)  # raises when a blocked axis does not divide
    # unpack: each primal axis followed by its block, then merge the two
    order = []
    for letter in s.primal:
        order.append(s.axes.index((letter, None)))
        if s.block(letter) is not None:
            order.append(s.axes.index((letter.lower(), s.block(letter))))
    primal = np.transpose(x, order).reshape([extents[a] for a in s.primal])
    primal = np.transpose(primal, [s.primal.index(a) for a in d.primal])
    # pack: split each blocked primal axis in two, then put the axes in dst's order
    split_shape, names = [], []
    for letter in d.primal:
        block = d.block(letter)
        if block is None:
            split_shape.append(extents[letter])
            names.append(letter)
        else:
            split_shape += [extents[letter] // block, block]
            names += [letter, letter.lower()]
    packed = primal.reshape(split_shape)
    return np.ascontiguousarray(np.transpose(packed, [names.index(a) for a, _ in d.axes]))


def conv2d_nchwc(data: np.ndarray, kernel: np.ndarray, stride: IntOrPair = 1,
                 padding: IntOrPair = 0, dilation: IntOrPair = 1,
                 out_dtype: str | None = None) -> np.ndarray:
    """data (N, C/ic, H, W, ic), kernel (K/oc, C/ic, R, S, ic, oc) -> (N, K/oc, OH, OW, oc)."""
    ic, oc = data.shape[4], kernel.shape[5]
    out = conv2d_nchw(layout_transform(data, f"NCHW{ic}c", "NCHW"),
                      layout_transform(kernel, f"OIHW{ic}i{oc}o", "OIHW"), stride, padding,
                      dilation, 1, out_dtype)
    return layout_transform(out, "NCHW", f"NCHW{oc}c")


def dense_blocked_int8(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x (M, K) uint8, w (N/16, K/4, 16, 4) int8 -> int32 (M, N/16, 16)."""
    no, ko, lanes, four = w.shape
    weight = w.transpose(0, 2, 1, 3).reshape(no * lanes, ko * four).astype(np.int32)
    return (x.astype(np.int32) @ weight.T).reshape(x.shape[0], no, lanes)


def conv2d_nchw4c_int8(data: np.ndarray, kernel: np.ndarray, stride: IntOrPair = 1,
                       padding: IntOrPair = 0) -> np.ndarray:
    """data (N, C/4, H, W, 4) uint8, kernel (K/oc, C/4, R, S, oc, 4) int8 -> int32
    (N, K/oc, OH, OW, oc)."""
    n, co, h, w, _ = data.shape
    ko, _, r, s, oc, _ = kernel.shape
    # in int32 also at native precision: that is how a numpy user avoids the overflow
    nchw = data.transpose(0, 1, 4, 2, 3).reshape(n, co * 4, h, w).astype(np.int32)
    oihw = kernel.transpose(0, 4, 1, 5, 2, 3).reshape(ko * oc, co * 4, r, s).astype(np.int32)
    out = conv2d_nchw(nchw, oihw, stride, padding, out_dtype="int32")
    return layout_transform(out, "NCHW", f"NCHW{oc}c")


def depthwise_conv2d_nchwc(data: np.ndarray, kernel: np.ndarray, stride: IntOrPair = 1,
                           padding: IntOrPair = 0, dilation: IntOrPair = 1,
                           out_dtype: str | None = None) -> np.ndarray:
    """data (N, C/b, H, W, b), kernel (C/b, 1, R, S, 1, b) -> (N, C/b, OH, OW, b)."""
    b = data.shape[4]
    out = depthwise_conv2d_nchw(layout_transform(data, f"NCHW{b}c", "NCHW"),
                                layout_transform(kernel, f"OIHW1i{b}o", "OIHW"), stride,
                                padding, dilation, out_dtype)
    return layout_transform(out, "NCHW", f"NCHW{b}c")


def winograd_matrices(tile: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(B^T, G, A^T)`` of Winograd's minimal filtering ``F(tile x tile, 3 x 3)`` (Lavin
    and Gray, 2016), for ``tile`` 2 (interpolation points 0, 1, -1) or 4 (0, 1, -1, 2, -2):
    the output tile of a 3x3 convolution is ``A^T [(G g G^T) * (B^T d B)] A`` for an input
    tile ``d`` of ``tile + 2`` squared values and a kernel ``g``."""
    if tile == 2:
        bt = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
        g = [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]
        at = [[1, 1, 1, 0], [0, 1, -1, -1]]
    elif tile == 4:
        bt = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
              [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
        g = [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
             [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]
        at = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
              [0, 1, -1, 8, -8, 1]]
    else:
        raise ValueError(f"winograd: tile must be 2 or 4, got {tile!r}")
    return np.array(bt, np.float64), np.array(g, np.float64), np.array(at, np.float64)


def winograd_tiles(out_h: int, out_w: int, tile: int) -> tuple[int, int]:
    """How many ``tile x tile`` output tiles cover an ``out_h x out_w`` output."""
    return -(-out_h // tile), -(-out_w // tile)


def winograd_weight(kernel: np.ndarray, tile: int) -> np.ndarray:
    """A 3x3 kernel ``(K, C, 3, 3)`` (OIHW) in the Winograd domain: ``(alpha^2, C, K)``
    with ``alpha = tile + 2``, position ``a * alpha + b`` holding ``(G g G^T)[a, b]``."""
    if kernel.ndim != 4 or kernel.shape[2:] != (3, 3):
        raise ValueError(f"winograd_weight: want a (K, C, 3, 3) kernel, got {kernel.shape}")
    _, g, _ = winograd_matrices(tile)
    u = np.einsum("ai,kcij,bj->abck", g, _wide(kernel), g)
    alpha = tile + 2
    return _out(u.reshape(alpha * alpha, kernel.shape[1], kernel.shape[0]), kernel.dtype)


def winograd_input_nchwc(data: np.ndarray, tile: int, padding: IntOrPair) -> np.ndarray:
    """The input tiles of a 3x3 stride-1 convolution of ``data (N, C/b, H, W, b)`` with
    ``padding``, in the Winograd domain: ``(alpha^2, N * TH * TW, C)`` where ``TH x TW``
    tiles of ``tile`` outputs cover the output (position-major, then tile, then channel:
    the batched product's left operand)."""
    n, _, h, w, block = data.shape
    top, left, bottom, right = _pads(padding)
    th, tw = winograd_tiles(h + top + bottom - 2, w + left + right - 2, tile)
    alpha = tile + 2
    x = layout_transform(_wide(data), f"NCHW{block}c", "NCHW")
    padded = np.zeros((n, x.shape[1], th * tile + 2, tw * tile + 2), x.dtype)
    rows, cols = min(h, padded.shape[2] - top), min(w, padded.shape[3] - left)
    padded[:, :, top:top + rows, left:left + cols] = x[:, :, :rows, :cols]
    windows = np.lib.stride_tricks.sliding_window_view(padded, (alpha, alpha), axis=(2, 3))
    tiles = windows[:, :, ::tile, ::tile]  # (N, C, TH, TW, alpha, alpha)
    bt, _, _ = winograd_matrices(tile)
    v = np.einsum("ai,nctwij,bj->abntwc", bt, tiles, bt)
    return _out(v.reshape(alpha * alpha, n * th * tw, x.shape[1]), data.dtype)


def winograd_output_nchwc(m: np.ndarray, tile: int, out_size: IntOrPair,
                          block: int) -> np.ndarray:
    """The inverse transform: the products ``(alpha^2, N * TH * TW, K)`` of the Winograd
    domain back to the convolution's output ``(N, K/block, OH, OW, block)``."""
    oh, ow = _pair(out_size)
    th, tw = winograd_tiles(oh, ow, tile)
    alpha = tile + 2
    k = m.shape[2]
    products = _wide(m).reshape(alpha, alpha, -1, th, tw, k)
    _, _, at = winograd_matrices(tile)
    y = np.einsum("ia,abntwk,jb->nktiwj", at, products, at)
    y = y.reshape(y.shape[0], k, th * tile, tw * tile)[:, :, :oh, :ow]
    return _out(layout_transform(y, "NCHW", f"NCHW{block}c"), m.dtype)
