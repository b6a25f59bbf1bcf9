"""Neural-network operators (``ir.op.nn.*``): activations, dense / matmul / batch_matmul,
conv2d and conv2d_transpose, pooling, normalization (batch_norm, layer_norm), softmax,
bias_add, dropout, pad.

``ir.op.nn.<name>(...)`` builds a call of any operator registered as ``nn.<name>``.
Attribute names and defaults are Relay's. Layouts: data ``NCHW`` or ``NHWC`` (any order of
those letters), conv kernels ``OIHW`` or ``HWIO`` (any order of OIHW); ``out_layout`` ''
means the data layout. Window parameters take 1 or 2 ints, paddings 1, 2 or 4 ints
((top, left, bottom, right)). Symbolic or dynamic spatial sizes give ``Any`` output sizes
(a 1x1 window with stride 1 and no padding keeps them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..attrs import Attrs
from ..errors import IRTypeError
from ..op_registry import OpDef, OpPattern, register_op
from ..types import Any, Dim, TensorType, TupleType, Type, format_shape
from . import lowering as low
from . import relations as rel
from ._make import namespace_getattr, namespace_ops


def _relu(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = args[0]
    return np.maximum(x, np.zeros((), x.dtype))


register_op(OpDef(
    name="nn.relu", num_inputs=1, attrs_schema={},
    type_relation=rel.identity_relation("nn.relu"), pattern=OpPattern.ELEMWISE,
    compute=_relu, lowering=low.unary("relu"), doc="max(x, 0), elementwise."))



def _leaky_relu_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    t = rel.expect_tensor("nn.leaky_relu", types[0])
    rel.expect_float("nn.leaky_relu", t)
    return t


def _leaky_relu(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    return np.where(x > 0, x, x * np.asarray(attrs.alpha, x.dtype)).astype(x.dtype, copy=False)


register_op(OpDef(
    name="nn.leaky_relu", num_inputs=1, attrs_schema={"alpha": (float, 0.01)},
    type_relation=_leaky_relu_relation, pattern=OpPattern.ELEMWISE, compute=_leaky_relu,
    lowering=low.leaky_relu,
    doc="``x`` where x > 0, else ``alpha * x``, elementwise (float dtypes)."))


def _dense_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    data = rel.expect_tensor("nn.dense", types[0], "input")
    weight = rel.expect_tensor("nn.dense", types[1], "weight")
    if data.ndim < 1 or weight.ndim != 2:
        raise IRTypeError(f"nn.dense: input {format_shape(data.shape)} must have rank >= 1 "
                          f"and weight {format_shape(weight.shape)} rank 2")
    rel.product_dtypes("nn.dense", data, weight, attrs.out_dtype)
    k_data, k_weight = data.shape[-1], weight.shape[1]
    if k_data != k_weight and Any not in (k_data, k_weight):
        raise IRTypeError(f"nn.dense: input {format_shape(data.shape)} and weight "
                          f"{format_shape(weight.shape)} disagree on the reduction dimension "
                          f"{k_data} vs {k_weight}")
    units = weight.shape[0]
    if attrs.units is not None and isinstance(units, int) and units != attrs.units:
        raise IRTypeError(f"nn.dense: units={attrs.units} but weight "
                          f"{format_shape(weight.shape)} has {units} output units")
    return TensorType((*data.shape[:-1], units), attrs.out_dtype or data.dtype)


def _dense(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = args
    dtype = attrs.out_dtype or x.dtype  # accumulate in it: int8 products overflow int8
    return np.matmul(x.astype(dtype, copy=False), w.T.astype(dtype, copy=False))


register_op(OpDef(
    name="nn.dense", num_inputs=2,
    attrs_schema={"units": (int, None), "out_dtype": (str, "")},
    type_relation=_dense_relation, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, compute=_dense,
    lowering=low.dense,
    doc="data (..., K) times weight (N, K) transposed -> (..., N); ``out_dtype`` '' keeps "
        "the input's."))

# ----------------------------------------------------------------------- matmul variants


def _matmul_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.matmul"
    a = rel.expect_tensor(op, types[0], "input")
    b = rel.expect_tensor(op, types[1], "weight")
    ta, tb = attrs.transpose_a, attrs.transpose_b
    if a.ndim < (2 if ta else 1) or b.ndim != 2:
        raise IRTypeError(f"{op}: input {format_shape(a.shape)} must have rank >= "
                          f"{2 if ta else 1} and weight {format_shape(b.shape)} rank 2")
    rel.same_dtype(op, [a, b])
    if ta:
        lead, k_a = (*a.shape[:-2], a.shape[-1]), a.shape[-2]
    else:
        lead, k_a = a.shape[:-1], a.shape[-1]
    k_b, n = (b.shape[1], b.shape[0]) if tb else (b.shape[0], b.shape[1])
    if not rel.dims_agree(k_a, k_b):
        raise IRTypeError(f"{op}: input {format_shape(a.shape)} and weight "
                          f"{format_shape(b.shape)} disagree on the reduction dimension "
                          f"{k_a} vs {k_b} (transpose_a={ta}, transpose_b={tb})")
    if attrs.units is not None and isinstance(n, int) and n != attrs.units:
        raise IRTypeError(f"{op}: units={attrs.units} but weight {format_shape(b.shape)} has "
                          f"{n} output units (transpose_b={tb})")
    return TensorType((*lead, n), attrs.out_dtype or a.dtype)


def _matmul(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = (np.asarray(x) for x in args)
    dtype = attrs.out_dtype or a.dtype
    a = np.swapaxes(a, -1, -2) if attrs.transpose_a else a
    b = b.T if attrs.transpose_b else b
    return np.matmul(a.astype(dtype, copy=False), b.astype(dtype, copy=False))


register_op(OpDef(
    name="nn.matmul", num_inputs=2,
    attrs_schema={"units": (int, None), "out_dtype": (str, ""), "transpose_a": (bool, False),
                  "transpose_b": (bool, False)},
    type_relation=_matmul_relation, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, compute=_matmul,
    lowering=low.matmul,
    doc="input (..., K) (``transpose_a``: (..., K, M)) times weight (K, N) (``transpose_b``: "
        "(N, K))."))


def _batch_matmul_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.batch_matmul"
    x = rel.expect_tensor(op, types[0], "x")
    y = rel.expect_tensor(op, types[1], "y")
    if x.ndim != 3 or y.ndim != 3:
        raise IRTypeError(f"{op}: x {format_shape(x.shape)} and y {format_shape(y.shape)} "
                          "must have rank 3")
    rel.same_dtype(op, [x, y])
    ta, tb = attrs.transpose_a, attrs.transpose_b
    m, k_x = (x.shape[2], x.shape[1]) if ta else (x.shape[1], x.shape[2])
    k_y, n = (y.shape[2], y.shape[1]) if tb else (y.shape[1], y.shape[2])
    batch = rel.broadcast_dim(x.shape[0], y.shape[0])
    if batch is None:
        raise IRTypeError(f"{op}: x {format_shape(x.shape)} and y {format_shape(y.shape)} have "
                          f"batch sizes {x.shape[0]} and {y.shape[0]}, which do not broadcast")
    if not rel.dims_agree(k_x, k_y):
        raise IRTypeError(f"{op}: x {format_shape(x.shape)} and y {format_shape(y.shape)} "
                          f"disagree on the reduction dimension {k_x} vs {k_y} "
                          f"(transpose_a={ta}, transpose_b={tb})")
    return TensorType((batch, m, n), attrs.out_dtype or x.dtype)


def _batch_matmul(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, y = (np.asarray(a) for a in args)
    dtype = attrs.out_dtype or x.dtype
    x = np.swapaxes(x, 1, 2) if attrs.transpose_a else x
    y = np.swapaxes(y, 1, 2) if attrs.transpose_b else y
    return np.matmul(x.astype(dtype, copy=False), y.astype(dtype, copy=False))


register_op(OpDef(
    name="nn.batch_matmul", num_inputs=2,
    attrs_schema={"out_dtype": (str, ""), "transpose_a": (bool, False),
                  "transpose_b": (bool, True)},
    type_relation=_batch_matmul_relation, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    compute=_batch_matmul, lowering=low.batch_matmul,
    doc="Batched x (B, M, K) times y (B, N, K) transposed (``transpose_b`` True, Relay's "
        "default) or y (B, K, N); a batch of 1 broadcasts."))

# ---------------------------------------------------------------------------------- conv2d


def _conv2d_geometry(types: Sequence[Type], attrs: Attrs) -> tuple:
    op = "nn.conv2d"
    data = rel.expect_tensor(op, types[0], "input")
    weight = rel.expect_tensor(op, types[1], "weight")
    dl = rel.layout_axes(op, attrs.data_layout, "NCHW", "data_layout")
    kl = rel.layout_axes(op, attrs.kernel_layout, "OIHW", "kernel_layout")
    out_layout = attrs.out_layout or attrs.data_layout
    rel.layout_axes(op, out_layout, "NCHW", "out_layout")
    if data.ndim != 4 or weight.ndim != 4:
        raise IRTypeError(f"{op}: input {format_shape(data.shape)} and weight "
                          f"{format_shape(weight.shape)} must have rank 4 "
                          f"({attrs.data_layout} and {attrs.kernel_layout})")
    rel.product_dtypes(op, data, weight, attrs.out_dtype)
    n, c, h, w = (data.shape[dl[x]] for x in "NCHW")
    o, i, r, s = (weight.shape[kl[x]] for x in "OIHW")
    strides = rel.pair(op, attrs.strides, "strides")
    dilation = rel.pair(op, attrs.dilation, "dilation")
    pads = rel.padding2d(op, attrs.padding)
    groups = attrs.groups
    if groups < 1:
        raise IRTypeError(f"{op}: groups must be >= 1, got {groups}")
    shapes = (f"input {format_shape(data.shape)} ({attrs.data_layout}) and weight "
              f"{format_shape(weight.shape)} ({attrs.kernel_layout})")
    if isinstance(c, int) and isinstance(i, int) and c != i * groups:
        raise IRTypeError(f"{op}: {shapes} disagree on the input channels: the input has "
                          f"{c}, the weight takes {i} per group x groups={groups} = "
                          f"{i * groups}")
    if isinstance(o, int) and o % groups:
        raise IRTypeError(f"{op}: {shapes}: the weight's {o} output channels are not "
                          f"divisible by groups={groups}")
    if attrs.channels is not None and isinstance(o, int) and o != attrs.channels:
        raise IRTypeError(f"{op}: channels={attrs.channels} but {shapes} gives {o} output "
                          "channels")
    if attrs.kernel_size is not None:
        ks = rel.pair(op, attrs.kernel_size, "kernel_size")
        for want, got in zip(ks, (r, s), strict=True):
            if isinstance(got, int) and got != want:
                raise IRTypeError(f"{op}: kernel_size={ks} but {shapes} has a "
                                  f"{r}x{s} window")
    oh = rel.window_out_dim(h, r, strides[0], pads[0] + pads[2], dilation[0])
    ow = rel.window_out_dim(w, s, strides[1], pads[1] + pads[3], dilation[1])
    for what, d in (("height", oh), ("width", ow)):
        if isinstance(d, int) and d < 1:
            raise IRTypeError(f"{op}: the {r}x{s} window (dilation {dilation}) does not fit "
                              f"{shapes} with padding {pads}: output {what} {d}")
    out = {"N": n, "C": o, "H": oh, "W": ow}
    out_type = TensorType(tuple(out[x] for x in out_layout), attrs.out_dtype or data.dtype)
    return out_type, dl, kl, out_layout, strides, dilation, pads


def _conv2d_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    return _conv2d_geometry(types, attrs)[0]


def _tt(x: np.ndarray) -> TensorType:
    return TensorType(x.shape, str(x.dtype))


def _conv2d(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = (np.asarray(a) for a in args)
    out_type, dl, kl, out_layout, (sh, sw), (dh, dw), (pt, pl, pb, pr) = _conv2d_geometry(
        [_tt(x), _tt(w)], attrs)
    dtype = out_type.dtype
    xn = np.transpose(x, [dl[c] for c in "NCHW"]).astype(dtype)
    wn = np.transpose(w, [kl[c] for c in "OIHW"]).astype(dtype)
    n, c, _, _ = xn.shape
    o, i, r, s = wn.shape
    g = attrs.groups
    xp = np.pad(xn, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh, ow = (out_type.shape[out_layout.index(k)] for k in "HW")
    xg = xp.reshape(n, g, i, *xp.shape[2:])
    wg = wn.reshape(g, o // g, i, r, s)
    out = np.zeros((n, g, o // g, oh, ow), dtype)
    for ry in range(r):
        for rx in range(s):
            patch = xg[:, :, :, ry * dh:ry * dh + sh * (oh - 1) + 1:sh,
                       rx * dw:rx * dw + sw * (ow - 1) + 1:sw]
            out += np.einsum("ngihw,goi->ngohw", patch, wg[:, :, :, ry, rx])
    out = out.reshape(n, o, oh, ow)
    return np.ascontiguousarray(np.transpose(out, ["NCHW".index(k) for k in out_layout]))


register_op(OpDef(
    name="nn.conv2d", num_inputs=2,
    attrs_schema={"strides": (tuple, (1, 1)), "padding": (tuple, (0, 0)),
                  "dilation": (tuple, (1, 1)), "groups": (int, 1), "channels": (int, None),
                  "kernel_size": (tuple, None), "data_layout": (str, "NCHW"),
                  "kernel_layout": (str, "OIHW"), "out_layout": (str, ""),
                  "out_dtype": (str, "")},
    type_relation=_conv2d_relation, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, compute=_conv2d,
    lowering=low.conv2d,
    doc="2-d convolution (grouped with ``groups``): data NCHW (or NHWC) with weight OIHW (or "
        "HWIO), I = C / groups; padding 1, 2 or 4 ints (top, left, bottom, right)."))

# ------------------------------------------------------------------------ conv2d_transpose


def _conv2d_transpose_geometry(types: Sequence[Type], attrs: Attrs) -> tuple:
    op = "nn.conv2d_transpose"
    data = rel.expect_tensor(op, types[0], "input")
    weight = rel.expect_tensor(op, types[1], "weight")
    layouts = (attrs.data_layout, attrs.kernel_layout, attrs.out_layout or attrs.data_layout)
    if layouts != ("NCHW", "IOHW", "NCHW"):
        raise IRTypeError(f"{op}: layouts {layouts} are not supported (NCHW data, IOHW "
                          "kernel)")
    if data.ndim != 4 or weight.ndim != 4:
        raise IRTypeError(f"{op}: input {format_shape(data.shape)} and weight "
                          f"{format_shape(weight.shape)} must have rank 4 (NCHW and IOHW)")
    rel.same_dtype(op, [data, weight])
    n, c, h, w = data.shape
    i, o, r, s = weight.shape
    strides = rel.pair(op, attrs.strides, "strides")
    dilation = rel.pair(op, attrs.dilation, "dilation")
    pads = rel.padding2d(op, attrs.padding)
    out_pad = rel.pair(op, attrs.output_padding, "output_padding", minimum=0)
    groups = attrs.groups
    shapes = f"input {format_shape(data.shape)} and weight {format_shape(weight.shape)} (IOHW)"
    if groups < 1:
        raise IRTypeError(f"{op}: groups must be >= 1, got {groups}")
    if not rel.dims_agree(c, i):
        raise IRTypeError(f"{op}: {shapes} disagree on the input channels: {c} vs {i}")
    if isinstance(c, int) and c % groups:
        raise IRTypeError(f"{op}: {shapes}: {c} input channels are not divisible by "
                          f"groups={groups}")
    channels = o * groups if isinstance(o, int) else Any
    if attrs.channels is not None and isinstance(channels, int) and channels != attrs.channels:
        raise IRTypeError(f"{op}: channels={attrs.channels} but {shapes} with groups={groups} "
                          f"gives {channels} output channels")
    dims = []
    for size, k, st, d, before, after, extra in ((h, r, strides[0], dilation[0], pads[0],
                                                  pads[2], out_pad[0]),
                                                 (w, s, strides[1], dilation[1], pads[1],
                                                  pads[3], out_pad[1])):
        if isinstance(size, int) and isinstance(k, int):
            dim = (size - 1) * st + (k - 1) * d + 1 + extra - before - after
            if dim < 1:
                raise IRTypeError(f"{op}: {shapes} with padding {pads} leaves an output "
                                  f"size of {dim}")
            dims.append(dim)
        else:
            dims.append(Any)
    out_type = TensorType((n, channels, *dims), attrs.out_dtype or data.dtype)
    return out_type, strides, dilation, pads, out_pad


def _conv2d_transpose(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = (np.asarray(a) for a in args)
    out_type, (sh, sw), (dh, dw), (pt, pl, pb, pr), (oph, opw) = _conv2d_transpose_geometry(
        [_tt(x), _tt(w)], attrs)
    dtype = out_type.dtype
    n, c, h, wd = x.shape
    _, og, r, s = w.shape
    g = attrs.groups
    full_h = (h - 1) * sh + (r - 1) * dh + 1 + oph
    full_w = (wd - 1) * sw + (s - 1) * dw + 1 + opw
    full = np.zeros((n, g, og, full_h, full_w), np.float64 if dtype.startswith("float")
                    else dtype)
    xg = x.reshape(n, g, c // g, h, wd)
    wg = w.reshape(g, c // g, og, r, s)
    for ry in range(r):
        for rx in range(s):
            # each input pixel scatters its taps to a strided grid of the output
            full[:, :, :, ry * dh:ry * dh + sh * (h - 1) + 1:sh,
                 rx * dw:rx * dw + sw * (wd - 1) + 1:sw] += np.einsum(
                     "ngihw,gio->ngohw", xg, wg[:, :, :, ry, rx])
    out = full.reshape(n, g * og, full_h, full_w)[:, :, pt:full_h - pb, pl:full_w - pr]
    return np.ascontiguousarray(out.astype(dtype))


register_op(OpDef(
    name="nn.conv2d_transpose", num_inputs=2,
    attrs_schema={"strides": (tuple, (1, 1)), "padding": (tuple, (0, 0)),
                  "output_padding": (tuple, (0, 0)), "dilation": (tuple, (1, 1)),
                  "groups": (int, 1), "channels": (int, None), "kernel_size": (tuple, None),
                  "data_layout": (str, "NCHW"), "kernel_layout": (str, "IOHW"),
                  "out_layout": (str, ""), "out_dtype": (str, "")},
    type_relation=lambda types, attrs: _conv2d_transpose_geometry(types, attrs)[0],
    pattern=OpPattern.OUT_ELEMWISE_FUSABLE, compute=_conv2d_transpose,
    lowering=low.conv2d_transpose,
    doc="Transposed 2-d convolution (the gradient of conv2d with respect to its input): "
        "data NCHW with weight IOHW (I = C, O = output channels / groups); the output is "
        "(H - 1) * stride + (R - 1) * dilation + 1 + output_padding - padding."))

# --------------------------------------------------------------------------------- pooling


def _pool_geometry(op: str, types: Sequence[Type], attrs: Attrs) -> tuple:
    data = rel.expect_tensor(op, types[0])
    dl = rel.layout_axes(op, attrs.layout, "NCHW", "layout")
    out_layout = attrs.out_layout or attrs.layout
    rel.layout_axes(op, out_layout, "NCHW", "out_layout")
    if data.ndim != 4:
        raise IRTypeError(f"{op}: input {format_shape(data.shape)} must have rank 4 "
                          f"({attrs.layout})")
    n, c, h, w = (data.shape[dl[x]] for x in "NCHW")
    size = rel.pair(op, attrs.pool_size, "pool_size")
    strides = rel.pair(op, attrs.strides, "strides")
    dilation = rel.pair(op, attrs.dilation, "dilation")
    pads = rel.padding2d(op, attrs.padding)
    oh = rel.window_out_dim(h, size[0], strides[0], pads[0] + pads[2], dilation[0],
                            attrs.ceil_mode)
    ow = rel.window_out_dim(w, size[1], strides[1], pads[1] + pads[3], dilation[1],
                            attrs.ceil_mode)
    for what, d in (("height", oh), ("width", ow)):
        if isinstance(d, int) and d < 1:
            raise IRTypeError(f"{op}: the {size[0]}x{size[1]} window does not fit input "
                              f"{format_shape(data.shape)} ({attrs.layout}) with padding "
                              f"{pads}: output {what} {d}")
    out = {"N": n, "C": c, "H": oh, "W": ow}
    out_type = TensorType(tuple(out[x] for x in out_layout), data.dtype)
    return out_type, dl, out_layout, size, strides, dilation, pads


def _unpacked(op: str, data: TensorType, attrs: Attrs) -> tuple[TensorType, Attrs, int] | None:
    """For pooling in a packed ``NCHW<b>c`` layout: the type of the NCHW input it stands
    for, the attributes for NCHW, and the block (None for unpacked layouts)."""
    block = rel.packed_block(attrs.layout)
    if block is None:
        return None
    if (attrs.out_layout or attrs.layout) != attrs.layout:
        raise IRTypeError(f"{op}: a packed layout {attrs.layout} needs out_layout equal to it")
    if data.ndim != 5 or data.shape[4] != block or not isinstance(data.shape[1], int):
        raise IRTypeError(f"{op}: input {format_shape(data.shape)} is not {attrs.layout} "
                          f"(N, C/{block}, H, W, {block})")
    n, co, h, w, _ = data.shape
    return (TensorType((n, co * block, h, w), data.dtype),
            attrs.replace(layout="NCHW", out_layout=""), block)


def _packed_type(t: TensorType, block: int) -> TensorType:
    n, c, h, w = t.shape
    return TensorType((n, c // block, h, w, block), t.dtype)  # type: ignore[operator]


def _packed_compute(op: str, compute: Callable) -> Callable:
    """``compute`` (over NCHW) for NCHW or packed-layout inputs: a packed input is
    unpacked, computed on, and the result packed again."""
    def run(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        if rel.packed_block(attrs.layout) is None:
            return compute(args, attrs)
        from schedule import ops

        _, nchw_attrs, _ = _unpacked(op, _tt(x), attrs)
        out = compute([ops.reference.layout_transform(x, attrs.layout, "NCHW")], nchw_attrs)
        return ops.reference.layout_transform(out, "NCHW", attrs.layout)

    return run


def _pool_relation(op: str, relation: Callable | None = None) -> Callable:
    def packed_relation(types: Sequence[Type], attrs: Attrs) -> Type:
        data = rel.expect_tensor(op, types[0])
        unpacked = _unpacked(op, data, attrs)
        plain = relation or (lambda ts, a: _pool_geometry(op, ts, a)[0])
        if unpacked is None:
            return plain(types, attrs)
        t, nchw_attrs, block = unpacked
        return _packed_type(plain([t], nchw_attrs), block)

    return packed_relation


def _window_reduce(xp: np.ndarray, size: tuple, strides: tuple, dilation: tuple, oh: int,
                   ow: int, fn: Callable) -> np.ndarray:
    """``fn``-reduce (np.maximum / np.add) the windows of the last two axes of ``xp``."""
    acc = None
    for ry in range(size[0]):
        for rx in range(size[1]):
            y0, x0 = ry * dilation[0], rx * dilation[1]
            tap = xp[..., y0:y0 + strides[0] * (oh - 1) + 1:strides[0],
                     x0:x0 + strides[1] * (ow - 1) + 1:strides[1]]
            acc = tap.copy() if acc is None else fn(acc, tap)
    return acc


def _pool(op: str, args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    out_type, dl, out_layout, size, strides, dilation, (pt, pl, pb, pr) = _pool_geometry(
        op, [_tt(x)], attrs)
    xn = np.transpose(x, [dl[c] for c in "NCHW"])
    h, w = xn.shape[2:]
    oh, ow = (out_type.shape[out_layout.index(k)] for k in "HW")
    # ceil_mode: the last windows may reach past the padding; that area counts as padding
    eb = max(0, (oh - 1) * strides[0] + (size[0] - 1) * dilation[0] + 1 - (h + pt + pb))
    er = max(0, (ow - 1) * strides[1] + (size[1] - 1) * dilation[1] + 1 - (w + pl + pr))
    widths = ((0, 0), (0, 0), (pt, pb + eb), (pl, pr + er))
    if op == "nn.max_pool2d":
        low_value = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = np.pad(xn, widths, constant_values=np.array(low_value).astype(x.dtype))
        out = _window_reduce(xp, size, strides, dilation, oh, ow, np.maximum)
    else:
        acc = np.float64 if x.dtype.kind == "f" else np.int64
        xp = np.pad(xn.astype(acc), widths)
        total = _window_reduce(xp, size, strides, dilation, oh, ow, np.add)
        if attrs.count_include_pad:
            mask = np.pad(np.ones((h + pt + pb, w + pl + pr)), ((0, eb), (0, er)))
        else:
            mask = np.pad(np.ones((h, w)), ((pt, pb + eb), (pl, pr + er)))
        count = np.maximum(_window_reduce(mask, size, strides, dilation, oh, ow, np.add), 1)
        out = total / count
        if x.dtype.kind != "f":
            out = np.trunc(out)
        out = out.astype(x.dtype)
    return np.ascontiguousarray(np.transpose(out, ["NCHW".index(k) for k in out_layout]))


_POOL_SCHEMA = {"pool_size": (tuple, (1, 1)), "strides": (tuple, (1, 1)),
                "dilation": (tuple, (1, 1)), "padding": (tuple, (0, 0)),
                "layout": (str, "NCHW"), "out_layout": (str, ""), "ceil_mode": (bool, False)}

register_op(OpDef(
    name="nn.max_pool2d", num_inputs=1, attrs_schema=_POOL_SCHEMA,
    type_relation=_pool_relation("nn.max_pool2d"), pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    compute=_packed_compute("nn.max_pool2d",
                            lambda args, attrs: _pool("nn.max_pool2d", args, attrs)),
    lowering=low.max_pool2d,
    doc="Maximum over ``pool_size`` windows; padding never wins."))

register_op(OpDef(
    name="nn.avg_pool2d", num_inputs=1,
    attrs_schema={**_POOL_SCHEMA, "count_include_pad": (bool, False)},
    type_relation=_pool_relation("nn.avg_pool2d"), pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    compute=_packed_compute("nn.avg_pool2d",
                            lambda args, attrs: _pool("nn.avg_pool2d", args, attrs)),
    lowering=low.avg_pool2d,
    doc="Mean over ``pool_size`` windows, divided by the number of input elements in the "
        "window (``count_include_pad``: of elements in the padded input)."))


def _global_pool_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.global_avg_pool2d"
    data = rel.expect_tensor(op, types[0])
    rel.layout_axes(op, attrs.layout, "NCHW", "layout")
    out_layout = attrs.out_layout or attrs.layout
    rel.layout_axes(op, out_layout, "NCHW", "out_layout")
    if data.ndim != 4:
        raise IRTypeError(f"{op}: input {format_shape(data.shape)} must have rank 4 "
                          f"({attrs.layout})")
    dims = {x: data.shape[attrs.layout.index(x)] for x in "NC"}
    return TensorType(tuple(dims.get(x, 1) for x in out_layout), data.dtype)


def _global_avg_pool(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    out_layout = attrs.out_layout or attrs.layout
    axes = (attrs.layout.index("H"), attrs.layout.index("W"))
    out = np.mean(x, axis=axes, keepdims=True, dtype=np.float64)
    if x.dtype.kind != "f":
        out = np.trunc(out)
    out = np.transpose(out.astype(x.dtype), [attrs.layout.index(k) for k in out_layout])
    return np.ascontiguousarray(out)


register_op(OpDef(
    name="nn.global_avg_pool2d", num_inputs=1,
    attrs_schema={"layout": (str, "NCHW"), "out_layout": (str, "")},
    type_relation=_pool_relation("nn.global_avg_pool2d", _global_pool_relation),
    pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    compute=_packed_compute("nn.global_avg_pool2d", _global_avg_pool),
    lowering=low.global_avg_pool2d,
    doc="Mean over the whole H x W plane; H and W become 1."))

# --------------------------------------------------------------------------- normalization


def _channel_param(op: str, data: TensorType, axis: int, t: Type, what: str) -> TensorType:
    p = rel.expect_tensor(op, t, what)
    dim = data.shape[axis]
    if p.ndim != 1 or not rel.dims_agree(p.shape[0], dim):
        raise IRTypeError(f"{op}: {what} {format_shape(p.shape)} must have shape ({dim},): "
                          f"dimension {axis} of input {format_shape(data.shape)}")
    if p.dtype != data.dtype:
        raise IRTypeError(f"{op}: input dtypes differ: {data.dtype} vs {p.dtype} ({what})")
    return p


def _batch_norm_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.batch_norm"
    data = rel.expect_tensor(op, types[0], "input")
    if data.ndim == 0:
        raise IRTypeError(f"{op}: input must have rank >= 1, got a scalar")
    axis = rel.normalize_axis(op, attrs.axis, data.ndim, data.shape)
    for t, what in zip(types[1:], ("gamma", "beta", "moving_mean", "moving_var"),
                       strict=True):
        _channel_param(op, data, axis, t, what)
    stat = TensorType((data.shape[axis],), data.dtype)
    return TupleType((data, stat, stat))


def _along(p: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return p.reshape(shape)


def _batch_norm(args: Sequence[np.ndarray], attrs: Attrs) -> tuple:
    x, gamma, beta, mean, var = (np.asarray(a) for a in args)
    axis = attrs.axis % x.ndim
    scale = 1.0 / np.sqrt(var.astype(np.float64) + attrs.epsilon)
    if attrs.scale:
        scale = scale * gamma
    out = (x - _along(mean, x.ndim, axis)) * _along(scale, x.ndim, axis)
    if attrs.center:
        out = out + _along(beta, x.ndim, axis)
    return out.astype(x.dtype), mean.copy(), var.copy()


register_op(OpDef(
    name="nn.batch_norm", num_inputs=5,
    attrs_schema={"axis": (int, 1), "epsilon": (float, 1e-5), "center": (bool, True),
                  "scale": (bool, True)},
    type_relation=_batch_norm_relation, pattern=OpPattern.OPAQUE, compute=_batch_norm,
    doc="Inference batch normalization of data with (gamma, beta, moving_mean, moving_var) "
        "along ``axis``: a tuple (out, moving_mean, moving_var) like Relay's."))


def _layer_norm_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.layer_norm"
    data = rel.expect_tensor(op, types[0], "input")
    if data.ndim == 0:
        raise IRTypeError(f"{op}: input must have rank >= 1, got a scalar")
    axis = rel.normalize_axis(op, attrs.axis, data.ndim, data.shape)
    _channel_param(op, data, axis, types[1], "gamma")
    _channel_param(op, data, axis, types[2], "beta")
    return data


def _layer_norm(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, gamma, beta = (np.asarray(a) for a in args)
    axis = attrs.axis % x.ndim
    xf = x.astype(np.float64)
    mean = xf.mean(axis=axis, keepdims=True)
    var = xf.var(axis=axis, keepdims=True)
    out = (xf - mean) / np.sqrt(var + attrs.epsilon)
    if attrs.scale:
        out = out * _along(gamma, x.ndim, axis)
    if attrs.center:
        out = out + _along(beta, x.ndim, axis)
    return out.astype(x.dtype)


register_op(OpDef(
    name="nn.layer_norm", num_inputs=3,
    attrs_schema={"axis": (int, -1), "epsilon": (float, 1e-5), "center": (bool, True),
                  "scale": (bool, True)},
    type_relation=_layer_norm_relation, pattern=OpPattern.OPAQUE, compute=_layer_norm,
    lowering=low.layer_norm,
    doc="Normalize over ``axis`` to zero mean and unit (biased) variance, then scale by "
        "gamma and shift by beta (both of that axis's length)."))


def _softmax_relation(op: str) -> Callable:
    def relation(types: Sequence[Type], attrs: Attrs) -> Type:
        t = rel.expect_tensor(op, types[0])
        rel.expect_float(op, t)
        if t.ndim == 0:
            raise IRTypeError(f"{op}: input must have rank >= 1, got a scalar")
        rel.normalize_axis(op, attrs.axis, t.ndim, t.shape)
        return t

    return relation


def _softmax(log: bool) -> Callable:
    def compute(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        shifted = x.astype(np.float64) - np.max(x, axis=attrs.axis, keepdims=True)
        total = np.sum(np.exp(shifted), axis=attrs.axis, keepdims=True)
        out = shifted - np.log(total) if log else np.exp(shifted) / total
        return out.astype(x.dtype)

    return compute


register_op(OpDef(
    name="nn.softmax", num_inputs=1, attrs_schema={"axis": (int, -1)},
    type_relation=_softmax_relation("nn.softmax"), pattern=OpPattern.OPAQUE,
    compute=_softmax(False), lowering=low.softmax,
    doc="``exp(x) / sum(exp(x))`` along ``axis`` (max-shifted)."))

register_op(OpDef(
    name="nn.log_softmax", num_inputs=1, attrs_schema={"axis": (int, -1)},
    type_relation=_softmax_relation("nn.log_softmax"), pattern=OpPattern.OPAQUE,
    compute=_softmax(True), lowering=low.log_softmax,
    doc="``x - log(sum(exp(x)))`` along ``axis`` (max-shifted)."))

# ------------------------------------------------------------------ bias_add, dropout, pad


def _bias_add_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "nn.bias_add"
    data = rel.expect_tensor(op, types[0], "input")
    if data.ndim == 0:
        raise IRTypeError(f"{op}: input must have rank >= 1, got a scalar")
    axis = rel.normalize_axis(op, attrs.axis, data.ndim, data.shape)
    bias = rel.expect_tensor(op, types[1], "bias")
    if bias.ndim != 1 or not rel.dims_agree(bias.shape[0], data.shape[axis]):
        raise IRTypeError(f"{op}: bias {format_shape(bias.shape)} must have shape "
                          f"({data.shape[axis]},): dimension {axis} of input "
                          f"{format_shape(data.shape)}")
    rel.same_dtype(op, [data, bias])
    return data


register_op(OpDef(
    name="nn.bias_add", num_inputs=2, attrs_schema={"axis": (int, 1)},
    type_relation=_bias_add_relation, pattern=OpPattern.BROADCAST,
    compute=lambda args, attrs: np.asarray(args[0] + _along(
        np.asarray(args[1]), np.ndim(args[0]), attrs.axis % np.ndim(args[0]))).astype(
        np.asarray(args[0]).dtype, copy=False),
    lowering=low.bias_add, doc="Add the 1-d bias along ``axis`` (1: NCHW channels)."))


def _dropout_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    t = rel.expect_tensor("nn.dropout", types[0])
    if not 0.0 <= attrs.rate < 1.0:
        raise IRTypeError(f"nn.dropout: rate must be in [0, 1), got {attrs.rate}")
    return TupleType((t, t))


register_op(OpDef(
    name="nn.dropout", num_inputs=1, attrs_schema={"rate": (float, 0.5)},
    type_relation=_dropout_relation, pattern=OpPattern.OPAQUE,
    compute=lambda args, attrs: (np.array(args[0]), np.ones_like(args[0])),
    doc="Dropout; at inference the identity: a tuple (data, mask of ones) like Relay's."))


def _pad_widths(t: TensorType, attrs: Attrs) -> list[tuple[int, int]]:
    op = "nn.pad"
    widths = attrs.pad_width
    if widths is None:
        raise IRTypeError(f"{op}: attribute pad_width is required")
    if len(widths) != t.ndim:
        raise IRTypeError(f"{op}: pad_width has {len(widths)} pairs but input "
                          f"{format_shape(t.shape)} has rank {t.ndim}")
    out = []
    for p in widths:
        if (not isinstance(p, tuple) or len(p) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                           for v in p)):
            raise IRTypeError(f"{op}: pad_width {widths} must hold (before, after) pairs of "
                              "ints >= 0")
        out.append(p)
    if attrs.pad_mode not in ("constant", "edge", "reflect"):
        raise IRTypeError(f"{op}: pad_mode must be 'constant', 'edge' or 'reflect', got "
                          f"{attrs.pad_mode!r}")
    return out


def _pad_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    t = rel.expect_tensor("nn.pad", types[0])
    shape: list[Dim] = []
    for d, (b, a) in zip(t.shape, _pad_widths(t, attrs), strict=True):
        if attrs.pad_mode == "reflect" and isinstance(d, int) and max(a, b) >= d:
            raise IRTypeError(f"nn.pad: reflect padding {(b, a)} must be smaller than the "
                              f"dimension {d} of input {format_shape(t.shape)}")
        shape.append(d + b + a if isinstance(d, int) else (d if a == b == 0 else Any))
    return TensorType(tuple(shape), t.dtype)


def _pad(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    widths = _pad_widths(_tt(x), attrs)
    if attrs.pad_mode == "constant":
        fill = np.array(attrs.pad_value).astype(x.dtype)
        return np.pad(x, widths, mode="constant", constant_values=fill)
    return np.pad(x, widths, mode=attrs.pad_mode)


register_op(OpDef(
    name="nn.pad", num_inputs=1,
    attrs_schema={"pad_width": (tuple, None), "pad_value": (float, 0.0),
                  "pad_mode": (str, "constant")},
    type_relation=_pad_relation, pattern=OpPattern.INJECTIVE, compute=_pad, lowering=low.pad,
    doc="Pad each axis by its (before, after) pair of ``pad_width`` with ``pad_value`` "
        "(``pad_mode`` 'constant'), or by repeating the edge ('edge') or reflecting "
        "('reflect')."))

__getattr__ = namespace_getattr("nn")


def __dir__() -> list[str]:
    return namespace_ops("nn")
