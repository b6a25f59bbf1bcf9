"""2-d convolutions: NCHW (kernel OIHW), NHWC (kernel HWIO), grouped, and depthwise NCHW.

Padding is a separate ``pad`` stage (only when some padding is non-zero) built with
``te.if_then_else`` so schedules can inline it; the reduction runs over
``(C / groups, R, S)`` as axes ``rc, ry, rx``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import te
from ..tensor import Tensor
from . import tags
from ._util import as_padding, as_pair, check_ndim, check_out_size, conv_out_size, scaled, to
from .transform import pad

IntOrPair = int | Sequence[int]


def _window(op: str, H: int, W: int, R: int, S: int, stride: IntOrPair, padding: IntOrPair,
            dilation: IntOrPair) -> tuple[tuple[int, int], tuple[int, ...], tuple[int, int],
                                           int, int]:
    sh, sw = as_pair(stride, f"{op}: stride")
    dh, dw = as_pair(dilation, f"{op}: dilation")
    pads = as_padding(padding, f"{op}: padding")
    OH = conv_out_size(H, R, sh, pads[0] + pads[2], dh)
    OW = conv_out_size(W, S, sw, pads[1] + pads[3], dw)
    check_out_size(f"{op} output height", OH)
    check_out_size(f"{op} output width", OW)
    return (sh, sw), pads, (dh, dw), OH, OW


def _check_groups(op: str, C: int, K: int, Cg: int, groups: int) -> None:
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if C % groups or K % groups:
        raise ValueError(f"{op}: channels C={C} and K={K} must be divisible by groups={groups}")
    if Cg != C // groups:
        raise ValueError(f"{op}: kernel has {Cg} input channels, expected C/groups = "
                         f"{C // groups}")


def conv2d_nchw(data: Tensor, kernel: Tensor, stride: IntOrPair = 1, padding: IntOrPair = 0,
                dilation: IntOrPair = 1, groups: int = 1, out_dtype: str | None = None,
                name: str = "conv") -> Tensor:
    """Convolution of ``data (N, C, H, W)`` with ``kernel (K, C/groups, R, S)``.

    ``padding`` is an int, a pair (h, w) or (top, left, bottom, right).
    """
    check_ndim(data, 4, "conv2d_nchw", "data")
    check_ndim(kernel, 4, "conv2d_nchw", "kernel")
    N, C, H, W = data.shape
    K, Cg, R, S = kernel.shape
    _check_groups("conv2d_nchw", C, K, Cg, groups)
    (sh, sw), pads, (dh, dw), OH, OW = _window("conv2d_nchw", H, W, R, S, stride, padding,
                                               dilation)
    dtype = out_dtype or data.dtype
    src = pad(data, [0, 0, pads[0], pads[1]], [0, 0, pads[2], pads[3]]) if any(pads) else data
    Kg = K // groups
    rc = te.reduce_axis((0, Cg), name="rc")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")

    def body(n: te.Var, k: te.Var, oh: te.Var, ow: te.Var) -> te.Expr:
        c = rc if groups == 1 else k // Kg * Cg + rc.var
        h = scaled(oh, sh) + scaled(ry.var, dh)
        w = scaled(ow, sw) + scaled(rx.var, dw)
        x = src[n, c, h, w]
        return te.sum(to(dtype, x) * to(dtype, kernel[k, rc, ry, rx]), axis=[rc, ry, rx])

    return te.compute((N, K, OH, OW), body, name=name,
                      tag=tags.make(tags.REDUCTION, "conv2d_nchw"))


def conv2d_nhwc(data: Tensor, kernel: Tensor, stride: IntOrPair = 1, padding: IntOrPair = 0,
                dilation: IntOrPair = 1, groups: int = 1, out_dtype: str | None = None,
                name: str = "conv") -> Tensor:
    """Convolution of ``data (N, H, W, C)`` with ``kernel (R, S, C/groups, K)`` (HWIO)."""
    check_ndim(data, 4, "conv2d_nhwc", "data")
    check_ndim(kernel, 4, "conv2d_nhwc", "kernel")
    N, H, W, C = data.shape
    R, S, Cg, K = kernel.shape
    _check_groups("conv2d_nhwc", C, K, Cg, groups)
    (sh, sw), pads, (dh, dw), OH, OW = _window("conv2d_nhwc", H, W, R, S, stride, padding,
                                               dilation)
    dtype = out_dtype or data.dtype
    src = pad(data, [0, pads[0], pads[1], 0], [0, pads[2], pads[3], 0]) if any(pads) else data
    Kg = K // groups
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    rc = te.reduce_axis((0, Cg), name="rc")

    def body(n: te.Var, oh: te.Var, ow: te.Var, k: te.Var) -> te.Expr:
        c = rc if groups == 1 else k // Kg * Cg + rc.var
        h = scaled(oh, sh) + scaled(ry.var, dh)
        w = scaled(ow, sw) + scaled(rx.var, dw)
        x = src[n, h, w, c]
        return te.sum(to(dtype, x) * to(dtype, kernel[ry, rx, rc, k]), axis=[ry, rx, rc])

    return te.compute((N, OH, OW, K), body, name=name,
                      tag=tags.make(tags.REDUCTION, "conv2d_nhwc"))


def depthwise_conv2d_nchw(data: Tensor, kernel: Tensor, stride: IntOrPair = 1,
                          padding: IntOrPair = 0, dilation: IntOrPair = 1,
                          out_dtype: str | None = None, name: str = "depthwise_conv") -> Tensor:
    """Depthwise convolution of ``data (N, C, H, W)`` with ``kernel (C, M, R, S)`` (channel
    multiplier M); output channel ``c * M + m`` reads input channel ``c``."""
    check_ndim(data, 4, "depthwise_conv2d_nchw", "data")
    check_ndim(kernel, 4, "depthwise_conv2d_nchw", "kernel")
    N, C, H, W = data.shape
    C2, mult, R, S = kernel.shape
    if C2 != C:
        raise ValueError(f"depthwise_conv2d_nchw: kernel has {C2} channels, data has {C}")
    (sh, sw), pads, (dh, dw), OH, OW = _window("depthwise_conv2d_nchw", H, W, R, S, stride,
                                               padding, dilation)
    dtype = out_dtype or data.dtype
    src = pad(data, [0, 0, pads[0], pads[1]], [0, 0, pads[2], pads[3]]) if any(pads) else data
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")

    def body(n: te.Var, k: te.Var, oh: te.Var, ow: te.Var) -> te.Expr:
        c, m = (k, 0) if mult == 1 else (k // mult, k % mult)
        h = scaled(oh, sh) + scaled(ry.var, dh)
        w = scaled(ow, sw) + scaled(rx.var, dw)
        x = src[n, c, h, w]
        return te.sum(to(dtype, x) * to(dtype, kernel[c, m, ry, rx]), axis=[ry, rx])

    return te.compute((N, C * mult, OH, OW), body, name=name,
                      tag=tags.make(tags.REDUCTION, "depthwise_conv2d_nchw"))
