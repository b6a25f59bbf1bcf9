"""Operators that gradients need and no forward program uses: the adjoints of pooling
(``nn.max_pool2d_grad``, ``nn.avg_pool2d_grad``), of a convolution with respect to its
weight (``nn.conv2d_backward_weight``), and the scatters that undo a gather or a slice
(``take_grad``, ``strided_slice_grad``). Each takes the output's adjoint first.

They run on their numpy reference everywhere (the graph executor and the VM call it for an
operator without a lowering). Layouts are NCHW / OIHW, as the gradient rules require.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..attrs import Attrs
from ..errors import IRTypeError
from ..op_registry import OpDef, OpPattern, register_op
from ..types import TensorType, Type, format_shape
from . import relations as rel
from .nn import _POOL_SCHEMA, _pool_geometry, _tt
from .transform import _slice_relation, slice_plan

# ----------------------------------------------------------------------------- pooling


def _pool_grad_relation(op: str, forward: str) -> Callable:
    def relation(types: Sequence[Type], attrs: Attrs) -> Type:
        grad = rel.expect_tensor(op, types[0], "output gradient")
        data = rel.expect_tensor(op, types[1], "data")
        if attrs.layout != "NCHW" or attrs.out_layout not in ("", "NCHW"):
            raise IRTypeError(f"{op}: only the NCHW layout is supported, got {attrs.layout}")
        out = _pool_geometry(forward, [data], attrs)[0]
        if tuple(grad.shape) != tuple(out.shape):
            raise IRTypeError(f"{op}: output gradient {format_shape(grad.shape)} is not the "
                              f"shape of {forward}'s output {format_shape(out.shape)}")
        rel.same_dtype(op, [grad, data])
        return data

    return relation


def _taps(size: tuple, strides: tuple, dilation: tuple, oh: int, ow: int):
    """For each window tap: its index slices into the padded plane."""
    for ry in range(size[0]):
        for rx in range(size[1]):
            y0, x0 = ry * dilation[0], rx * dilation[1]
            yield (slice(y0, y0 + strides[0] * (oh - 1) + 1, strides[0]),
                   slice(x0, x0 + strides[1] * (ow - 1) + 1, strides[1]))


def _padded_geometry(op: str, x: np.ndarray, attrs: Attrs) -> tuple:
    """(padded plane shape, the crop back to the input, the taps, the plane's mask of
    elements an average counts)."""
    out_type, _, _, size, strides, dilation, (pt, pl, pb, pr) = _pool_geometry(
        op, [_tt(x)], attrs)
    h, w = x.shape[2:]
    oh, ow = out_type.shape[2:]
    # ceil_mode: the last windows may reach past the padding; that area counts as padding
    eb = max(0, (oh - 1) * strides[0] + (size[0] - 1) * dilation[0] + 1 - (h + pt + pb))
    er = max(0, (ow - 1) * strides[1] + (size[1] - 1) * dilation[1] + 1 - (w + pl + pr))
    plane = (h + pt + pb + eb, w + pl + pr + er)
    counted = np.zeros(plane)
    if getattr(attrs, "count_include_pad", False):
        counted[:h + pt + pb, :w + pl + pr] = 1
    else:
        counted[pt:pt + h, pl:pl + w] = 1
    crop = (slice(None), slice(None), slice(pt, pt + h), slice(pl, pl + w))
    return plane, crop, list(_taps(size, strides, dilation, oh, ow)), counted


def _max_pool_grad(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """Each window's adjoint goes to its first largest element (PyTorch's choice)."""
    g, x = (np.asarray(a) for a in args)
    plane, crop, taps, counted = _padded_geometry("nn.max_pool2d", x, attrs)
    xp = np.full((*x.shape[:2], *plane), -np.inf)
    xp[crop] = x
    best = np.full(g.shape, -np.inf)
    choice = np.zeros(g.shape, np.int64)
    for k, (ys, xs) in enumerate(taps):
        tap = xp[:, :, ys, xs]
        better = tap > best
        best = np.where(better, tap, best)
        choice = np.where(better, k, choice)
    out = np.zeros(xp.shape)
    for k, (ys, xs) in enumerate(taps):
        out[:, :, ys, xs] += np.where(choice == k, g, 0.0)
    return np.ascontiguousarray(out[crop].astype(x.dtype))


def _avg_pool_grad(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """Each window's adjoint, divided by the window's count, to every element it counts."""
    g, x = (np.asarray(a) for a in args)
    plane, crop, taps, counted = _padded_geometry("nn.avg_pool2d", x, attrs)
    count = sum(counted[ys, xs] for ys, xs in taps)
    share = g / np.maximum(count, 1)
    out = np.zeros((*x.shape[:2], *plane))
    for ys, xs in taps:
        out[:, :, ys, xs] += share
    return np.ascontiguousarray(out[crop].astype(x.dtype))


register_op(OpDef(
    name="nn.max_pool2d_grad", num_inputs=2, attrs_schema=_POOL_SCHEMA,
    type_relation=_pool_grad_relation("nn.max_pool2d_grad", "nn.max_pool2d"),
    pattern=OpPattern.OPAQUE, compute=_max_pool_grad,
    doc="The adjoint of nn.max_pool2d (same attributes): (output gradient, data) -> data's "
        "gradient; each window's gradient goes to its first largest element."))

register_op(OpDef(
    name="nn.avg_pool2d_grad", num_inputs=2,
    attrs_schema={**_POOL_SCHEMA, "count_include_pad": (bool, False)},
    type_relation=_pool_grad_relation("nn.avg_pool2d_grad", "nn.avg_pool2d"),
    pattern=OpPattern.OPAQUE, compute=_avg_pool_grad,
    doc="The adjoint of nn.avg_pool2d (same attributes): (output gradient, data) -> data's "
        "gradient."))

# --------------------------------------------------------------- convolution's weight


def _conv_weight_geometry(types: Sequence[Type], attrs: Attrs) -> tuple:
    op = "nn.conv2d_backward_weight"
    grad = rel.expect_tensor(op, types[0], "output gradient")
    data = rel.expect_tensor(op, types[1], "data")
    if grad.ndim != 4 or data.ndim != 4 or not (rel.is_static(grad.shape)
                                                 and rel.is_static(data.shape)):
        raise IRTypeError(f"{op}: output gradient {format_shape(grad.shape)} and data "
                          f"{format_shape(data.shape)} must be static NCHW tensors")
    rel.same_dtype(op, [grad, data])
    if attrs.kernel_size is None:
        raise IRTypeError(f"{op}: attribute kernel_size is required")
    r, s = rel.pair(op, attrs.kernel_size, "kernel_size")
    strides = rel.pair(op, attrs.strides, "strides")
    dilation = rel.pair(op, attrs.dilation, "dilation")
    pads = rel.padding2d(op, attrs.padding)
    n, c, h, w = data.shape
    o, groups = grad.shape[1], attrs.groups
    if groups < 1 or c % groups or o % groups:
        raise IRTypeError(f"{op}: groups={groups} must divide the data's {c} and the "
                          f"gradient's {o} channels")
    oh = rel.window_out_dim(h, r, strides[0], pads[0] + pads[2], dilation[0])
    ow = rel.window_out_dim(w, s, strides[1], pads[1] + pads[3], dilation[1])
    if grad.shape != (n, o, oh, ow):
        raise IRTypeError(f"{op}: output gradient {format_shape(grad.shape)} is not the "
                          f"convolution's output {format_shape((n, o, oh, ow))}")
    weight = TensorType((o, c // groups, r, s), attrs.out_dtype or data.dtype)
    return weight, strides, dilation, pads


def _conv2d_backward_weight(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    g, x = (np.asarray(a, np.float64) for a in args)
    weight, (sh, sw), (dh, dw), (pt, pl, pb, pr) = _conv_weight_geometry(
        [_tt(np.asarray(args[0])), _tt(np.asarray(args[1]))], attrs)
    o, i, r, s = weight.shape
    n, _, oh, ow = g.shape
    groups = attrs.groups
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    xg = xp.reshape(n, groups, i, *xp.shape[2:])
    gg = g.reshape(n, groups, o // groups, oh, ow)
    out = np.zeros((groups, o // groups, i, r, s))
    for ry in range(r):
        for rx in range(s):
            patch = xg[:, :, :, ry * dh:ry * dh + sh * (oh - 1) + 1:sh,
                       rx * dw:rx * dw + sw * (ow - 1) + 1:sw]
            out[..., ry, rx] = np.einsum("ngihw,ngohw->goi", patch, gg)
    return np.ascontiguousarray(out.reshape(o, i, r, s).astype(weight.dtype))


register_op(OpDef(
    name="nn.conv2d_backward_weight", num_inputs=2,
    attrs_schema={"strides": (tuple, (1, 1)), "padding": (tuple, (0, 0)),
                  "dilation": (tuple, (1, 1)), "groups": (int, 1),
                  "kernel_size": (tuple, None), "out_dtype": (str, "")},
    type_relation=lambda types, attrs: _conv_weight_geometry(types, attrs)[0],
    pattern=OpPattern.OPAQUE, compute=_conv2d_backward_weight,
    doc="The gradient of nn.conv2d (NCHW data, OIHW weight) with respect to its weight: "
        "(output gradient, data) -> (O, C / groups, kernel_size)."))

# ------------------------------------------------------------ scatters: take, slices


def _shape_of(op: str, attrs: Attrs) -> tuple[int, ...]:
    shape = rel.shape_attr(op, attrs.shape)
    if not rel.is_static(shape):
        raise IRTypeError(f"{op}: shape {format_shape(shape)} must be static")
    return shape  # type: ignore[return-value]


def _take_grad_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    from .transform import _take_relation

    op = "take_grad"
    grad = rel.expect_tensor(op, types[0], "output gradient")
    indices = rel.expect_tensor(op, types[1], "indices")
    data = TensorType(_shape_of(op, attrs), grad.dtype)
    out = _take_relation([data, indices], _take_attrs(attrs))
    if tuple(out.shape) != tuple(grad.shape):
        raise IRTypeError(f"{op}: output gradient {format_shape(grad.shape)} is not the "
                          f"shape of take's output {format_shape(out.shape)}")
    return data


def _take_attrs(attrs: Attrs) -> Attrs:
    from ..expr import Op

    return Op.get("take").opdef.make_attrs({"axis": attrs.axis, "mode": attrs.mode,
                                            "batch_dims": attrs.batch_dims})


def _take_grad(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    g, indices = np.asarray(args[0]), np.asarray(args[1])
    shape = _shape_of("take_grad", attrs)
    out = np.zeros(shape, np.float64)
    flat = out.reshape(-1) if attrs.axis is None else out
    axis = 0 if attrs.axis is None else attrs.axis % len(shape)
    size = flat.shape[axis]
    idx = np.mod(indices, size) if attrs.mode == "wrap" else np.clip(indices, 0, size - 1)
    bd = attrs.batch_dims % indices.ndim if attrs.batch_dims < 0 else attrs.batch_dims
    for b in np.ndindex(*flat.shape[:bd]):
        target, sub_idx, sub_g = flat[b], idx[b], g[b]
        moved = np.moveaxis(target, axis - bd, 0)
        lead = sub_idx.ndim
        grads = np.moveaxis(sub_g, list(range(axis - bd, axis - bd + lead)),
                            list(range(lead)))
        np.add.at(moved, sub_idx, grads)
    return out.astype(g.dtype)


register_op(OpDef(
    name="take_grad", num_inputs=2,
    attrs_schema={"shape": (tuple, None), "batch_dims": (int, 0), "axis": (int, None),
                  "mode": (str, "clip")},
    type_relation=_take_grad_relation, pattern=OpPattern.OPAQUE, compute=_take_grad,
    doc="The adjoint of take (same attributes, plus the data's ``shape``): (output "
        "gradient, indices) -> zeros of ``shape`` with each gathered element's gradient "
        "added back where it came from."))


def _slice_attrs(attrs: Attrs) -> Attrs:
    from ..expr import Op

    return Op.get("strided_slice").opdef.make_attrs({k: attrs[k] for k in (
        "begin", "end", "strides", "axes", "slice_mode")})


def _slice_grad_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "strided_slice_grad"
    grad = rel.expect_tensor(op, types[0], "output gradient")
    data = TensorType(_shape_of(op, attrs), grad.dtype)
    out = _slice_relation([data], _slice_attrs(attrs))
    if tuple(out.shape) != tuple(grad.shape):
        raise IRTypeError(f"{op}: output gradient {format_shape(grad.shape)} is not the "
                          f"shape of the slice {format_shape(out.shape)}")
    return data


def _slice_grad(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    g = np.asarray(args[0])
    out = np.zeros(_shape_of("strided_slice_grad", attrs), g.dtype)
    index = [slice(None)] * out.ndim
    for a, (b, e, s) in slice_plan(_tt(out), _slice_attrs(attrs)).items():
        index[a] = slice(b, e, s)
    out[tuple(index)] = g
    return out


register_op(OpDef(
    name="strided_slice_grad", num_inputs=1,
    attrs_schema={"shape": (tuple, None), "begin": (tuple, None), "end": (tuple, None),
                  "strides": (tuple, None), "axes": (tuple, None),
                  "slice_mode": (str, "end")},
    type_relation=_slice_grad_relation, pattern=OpPattern.OPAQUE, compute=_slice_grad,
    doc="The adjoint of strided_slice (same attributes, plus the data's ``shape``): the "
        "output gradient written into zeros of ``shape`` where the slice came from."))
