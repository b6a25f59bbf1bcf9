"""2-d convolutions: NCHW (kernel OIHW), NHWC (kernel HWIO), grouped, depthwise NCHW, and
the packed-channel NCHW[x]c variants of plain and depthwise convolution.

Padding is a separate ``pad`` stage (only when some padding is non-zero) built with
``te.if_then_else`` so schedules can inline it; the reduction runs over
``(C / groups, R, S)`` as axes ``rc, ry, rx``. An NCHW convolution with a column stride
reads its input through a ``phases`` stage instead (padding included): the columns
de-interleaved by the stride, so that consecutive output columns (the vector lanes) read
consecutive elements rather than every stride-th one.
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


#: The dimension order of each convolution layout's data, kernel and output tensors: N batch,
#: C input channels (per group in the kernel), H x W the image, K output channels, R x S
#: the kernel window. The reduce axes (``rc, ry, rx`` for C, R, S) follow the kernel's order.
CONV_LAYOUTS = {
    "conv2d_nchw": ("NCHW", "KCRS", "NKHW"),  # kernel OIHW
    "conv2d_nhwc": ("NHWC", "RSCK", "NHWK"),  # kernel HWIO
}


def conv2d_nchw(data: Tensor, kernel: Tensor, stride: IntOrPair = 1, padding: IntOrPair = 0,
                dilation: IntOrPair = 1, groups: int = 1, out_dtype: str | None = None,
                name: str = "conv") -> Tensor:
    """Convolution of ``data (N, C, H, W)`` with ``kernel (K, C/groups, R, S)``.

    ``padding`` is an int, a pair (h, w) or (top, left, bottom, right).
    """
    return _conv2d("conv2d_nchw", data, kernel, stride, padding, dilation, groups, out_dtype,
                   name)


def conv2d_nhwc(data: Tensor, kernel: Tensor, stride: IntOrPair = 1, padding: IntOrPair = 0,
                dilation: IntOrPair = 1, groups: int = 1, out_dtype: str | None = None,
                name: str = "conv") -> Tensor:
    """Convolution of ``data (N, H, W, C)`` with ``kernel (R, S, C/groups, K)`` (HWIO)."""
    return _conv2d("conv2d_nhwc", data, kernel, stride, padding, dilation, groups, out_dtype,
                   name)


def _conv2d(op: str, data: Tensor, kernel: Tensor, stride: IntOrPair, padding: IntOrPair,
            dilation: IntOrPair, groups: int, out_dtype: str | None, name: str) -> Tensor:
    """The convolution ``op`` of ``CONV_LAYOUTS``."""
    data_layout, kernel_layout, out_layout = CONV_LAYOUTS[op]
    check_ndim(data, 4, op, "data")
    check_ndim(kernel, 4, op, "kernel")
    N, C, H, W = (data.shape[data_layout.index(d)] for d in "NCHW")
    K, Cg, R, S = (kernel.shape[kernel_layout.index(d)] for d in "KCRS")
    _check_groups(op, C, K, Cg, groups)
    (sh, sw), pads, (dh, dw), OH, OW = _window(op, H, W, R, S, stride, padding, dilation)
    dtype = out_dtype or data.dtype
    phased = data_layout == "NCHW" and sw > 1
    if phased:
        src = _column_phases(data, pads, sw)
    elif any(pads):
        before, after = {"H": pads[0], "W": pads[1]}, {"H": pads[2], "W": pads[3]}
        src = pad(data, [before.get(d, 0) for d in data_layout],
                  [after.get(d, 0) for d in data_layout])
    else:
        src = data
    Kg = K // groups
    window = {"C": ("rc", Cg), "R": ("ry", R), "S": ("rx", S)}
    reduce_axes = {d: te.reduce_axis((0, window[d][1]), name=window[d][0])
                   for d in kernel_layout if d in window}
    rc, ry, rx = reduce_axes["C"], reduce_axes["R"], reduce_axes["S"]

    def value(n: te.Var, k: te.Var, oh: te.Var, ow: te.Var) -> te.Expr:
        c = rc if groups == 1 else k // Kg * Cg + rc.var
        h = scaled(oh, sh) + scaled(ry.var, dh)
        if phased:  # column ow * sw + rx * dw is phase (rx * dw) % sw, ow + (rx * dw) // sw
            tap_w = scaled(rx.var, dw)
            x = src[n, c, h, tap_w % sw, ow + tap_w // sw]
        else:
            at = {"N": n, "C": c, "H": h, "W": scaled(ow, sw) + scaled(rx.var, dw)}
            x = src[tuple(at[d] for d in data_layout)]
        tap = {"K": k, "C": rc, "R": ry, "S": rx}
        weight = kernel[tuple(tap[d] for d in kernel_layout)]
        return te.sum(to(dtype, x) * to(dtype, weight), axis=list(reduce_axes.values()))

    # the output's axes take their names from the parameters of the compute function
    if out_layout == "NKHW":
        def body(n: te.Var, k: te.Var, oh: te.Var, ow: te.Var) -> te.Expr:
            return value(n, k, oh, ow)
    else:
        def body(n: te.Var, oh: te.Var, ow: te.Var, k: te.Var) -> te.Expr:
            return value(n, k, oh, ow)

    extents = {"N": N, "K": K, "H": OH, "W": OW}
    return te.compute(tuple(extents[d] for d in out_layout), body, name=name,
                      tag=tags.make(tags.REDUCTION, op))


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


def _column_phases(data: Tensor, pads: tuple[int, ...], stride: int) -> Tensor:
    """``data (N, C, H, W)`` padded with zeros on H and W, its columns de-interleaved by
    ``stride``: ``phases[n, c, h, p, q]`` is padded column ``q * stride + p`` (zero past the
    padded width)."""
    N, C, H, W = data.shape
    top, left, bottom, right = pads
    width = -(-(left + W + right) // stride)

    def body(n: te.Var, c: te.Var, h: te.Var, p: te.Var, q: te.Var) -> te.Expr:
        w = q * stride + p
        inside = [w >= left, w < left + W]
        if top or bottom:
            inside += [h >= top, h < top + H]
        return te.if_then_else(te.all(*inside), data[n, c, h - top, w - left],
                               te.const(0, data.dtype))

    return te.compute((N, C, top + H + bottom, stride, width), body, name="phases",
                      tag=tags.make(tags.INJECTIVE, tags.PAD))


def _padded_hw(data: Tensor, pads: tuple[int, ...]) -> Tensor:
    """``data`` (axes N, C-outer, H, W, then blocks) padded with zeros on H and W."""
    if not any(pads):
        return data
    rest = [0] * (data.ndim - 4)
    return pad(data, [0, 0, pads[0], pads[1], *rest], [0, 0, pads[2], pads[3], *rest])


def conv2d_nchwc(data: Tensor, kernel: Tensor, stride: IntOrPair = 1, padding: IntOrPair = 0,
                 dilation: IntOrPair = 1, out_dtype: str | None = None,
                 name: str = "conv") -> Tensor:
    """Convolution with packed channels: ``data (N, C/ic, H, W, ic)`` (layout NCHW[ic]c)
    and ``kernel (K/oc, C/ic, R, S, ic, oc)`` (OIHW[ic]i[oc]o) give ``(N, K/oc, OH, OW, oc)``
    (NCHW[oc]c). The innermost output axis is ``oc`` consecutive output channels, so a
    vector of them is one load of the kernel and one broadcast input value, at any stride."""
    op = "conv2d_nchwc"
    check_ndim(data, 5, op, "data")
    check_ndim(kernel, 6, op, "kernel")
    N, Co, H, W, ic = data.shape
    Ko, Co2, R, S, ic2, oc = kernel.shape
    if (Co2, ic2) != (Co, ic):
        raise ValueError(f"{op}: kernel {list(kernel.shape)} does not take the input channels "
                         f"of data {list(data.shape)} (want kernel[1] = {Co}, kernel[4] = {ic})")
    (sh, sw), pads, (dh, dw), OH, OW = _window(op, H, W, R, S, stride, padding, dilation)
    dtype = out_dtype or data.dtype
    src = _padded_hw(data, pads)
    rco = te.reduce_axis((0, Co), name="rco")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    rci = te.reduce_axis((0, ic), name="rci")

    def body(n: te.Var, ko: te.Var, oh: te.Var, ow: te.Var, ki: te.Var) -> te.Expr:
        x = src[n, rco, scaled(oh, sh) + scaled(ry.var, dh), scaled(ow, sw) + scaled(rx.var, dw),
                rci]
        return te.sum(to(dtype, x) * to(dtype, kernel[ko, rco, ry, rx, rci, ki]),
                      axis=[rco, ry, rx, rci])

    return te.compute((N, Ko, OH, OW, oc), body, name=name,
                      tag=tags.make(tags.REDUCTION, op))


def conv2d_nchw4c_int8(data: Tensor, kernel: Tensor, stride: IntOrPair = 1,
                       padding: IntOrPair = 0, name: str = "conv") -> Tensor:
    """An 8-bit convolution in the blocked layouts of a 4-byte dot-product instruction
    (x86's ``vpdpbusd``): ``data (N, C/4, H, W, 4)`` uint8 (NCHW4c; activations after a
    ReLU are non-negative) and ``kernel (K/oc, C/4, R, S, oc, 4)`` int8 (OIHW[oc]o4i)
    give the int32 ``(N, K/oc, OH, OW, oc)`` (NCHW[oc]c). The innermost loops, ``oc``
    output channels by the 4 input channels of a block, are one such instruction: one
    4-byte input word against ``oc`` x 4 consecutive kernel bytes."""
    op = "conv2d_nchw4c_int8"
    check_ndim(data, 5, op, "data")
    check_ndim(kernel, 6, op, "kernel")
    N, Co, H, W, four = data.shape
    Ko, Co2, R, S, oc, four2 = kernel.shape
    if (four, four2, Co2) != (4, 4, Co):
        raise ValueError(f"{op}: data {list(data.shape)} and kernel {list(kernel.shape)} do "
                         f"not have the blocked layouts (N, C/4, H, W, 4) and "
                         f"(K/oc, C/4, R, S, oc, 4)")
    if (data.dtype, kernel.dtype) != ("uint8", "int8"):
        raise ValueError(f"{op}: data must be uint8 and kernel int8, got {data.dtype} and "
                         f"{kernel.dtype}")
    (sh, sw), pads, _, OH, OW = _window(op, H, W, R, S, stride, padding, 1)
    src = _padded_hw(data, pads)
    rco = te.reduce_axis((0, Co), name="rco")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    rci = te.reduce_axis((0, 4), name="rci")

    def body(n: te.Var, ko: te.Var, oh: te.Var, ow: te.Var, ki: te.Var) -> te.Expr:
        x = src[n, rco, scaled(oh, sh) + ry.var, scaled(ow, sw) + rx.var, rci]
        return te.sum(to("int32", x) * to("int32", kernel[ko, rco, ry, rx, ki, rci]),
                      axis=[rco, ry, rx, rci])

    return te.compute((N, Ko, OH, OW, oc), body, name=name,
                      tag=tags.make(tags.REDUCTION, op))


def depthwise_conv2d_nchwc(data: Tensor, kernel: Tensor, stride: IntOrPair = 1,
                           padding: IntOrPair = 0, dilation: IntOrPair = 1,
                           out_dtype: str | None = None,
                           name: str = "depthwise_conv") -> Tensor:
    """Depthwise convolution with packed channels: ``data (N, C/b, H, W, b)`` and ``kernel
    (C/b, 1, R, S, 1, b)`` give ``(N, C/b, OH, OW, b)``; channel ``c`` of the output reads
    channel ``c`` of the input only."""
    op = "depthwise_conv2d_nchwc"
    check_ndim(data, 5, op, "data")
    check_ndim(kernel, 6, op, "kernel")
    N, Co, H, W, b = data.shape
    Co2, one, R, S, one2, b2 = kernel.shape
    if (Co2, one, one2, b2) != (Co, 1, 1, b):
        raise ValueError(f"{op}: kernel {list(kernel.shape)} must have shape "
                         f"({Co}, 1, R, S, 1, {b}) for data {list(data.shape)}")
    (sh, sw), pads, (dh, dw), OH, OW = _window(op, H, W, R, S, stride, padding, dilation)
    dtype = out_dtype or data.dtype
    src = _padded_hw(data, pads)
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")

    def body(n: te.Var, c: te.Var, oh: te.Var, ow: te.Var, ci: te.Var) -> te.Expr:
        x = src[n, c, scaled(oh, sh) + scaled(ry.var, dh), scaled(ow, sw) + scaled(rx.var, dw),
                ci]
        return te.sum(to(dtype, x) * to(dtype, kernel[c, 0, ry, rx, 0, ci]), axis=[ry, rx])

    return te.compute((N, Co, OH, OW, b), body, name=name,
                      tag=tags.make(tags.REDUCTION, op))


def conv2d_transpose_nchw(data: Tensor, kernel: Tensor, stride: IntOrPair = 1,
                          padding: IntOrPair = 0, output_padding: IntOrPair = 0,
                          dilation: IntOrPair = 1, groups: int = 1,
                          out_dtype: str | None = None,
                          name: str = "conv_transpose") -> Tensor:
    """Transposed convolution of ``data (N, C, H, W)`` with ``kernel (C, K/groups, R, S)``
    (IOHW): output ``(N, K, (H-1)*stride + (R-1)*dilation + 1 + output_padding - pads)``.
    Written as a gather: output row ``y`` takes input row ``(y + top - r*dilation) / stride``
    of each tap ``r`` where that divides exactly and lies inside the input."""
    op = "conv2d_transpose_nchw"
    check_ndim(data, 4, op, "data")
    check_ndim(kernel, 4, op, "kernel")
    N, C, H, W = data.shape
    C2, Kg, R, S = kernel.shape
    if C2 != C or C % groups:
        raise ValueError(f"{op}: kernel {list(kernel.shape)} does not fit data "
                         f"{list(data.shape)} with groups={groups}")
    sh, sw = as_pair(stride, f"{op}: stride")
    dh, dw = as_pair(dilation, f"{op}: dilation")
    oph, opw = as_pair(output_padding, f"{op}: output_padding", minimum=0)
    pt, pl, pb, pr = as_padding(padding, f"{op}: padding")
    OH = (H - 1) * sh + (R - 1) * dh + 1 + oph - pt - pb
    OW = (W - 1) * sw + (S - 1) * dw + 1 + opw - pl - pr
    check_out_size(f"{op} output height", OH)
    check_out_size(f"{op} output width", OW)
    dtype = out_dtype or data.dtype
    Cg = C // groups
    rc = te.reduce_axis((0, Cg), name="rc")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")

    def tap(o: te.Expr, r: te.Expr, top: int, st: int, dil: int, size: int
            ) -> tuple[te.Expr, te.Expr]:
        """The input index of output ``o`` under tap ``r`` (clamped into range) and whether
        that tap reaches it."""
        at = o + top - scaled(r, dil)
        index = at // st if st > 1 else at
        hits = [at >= 0, index < size]
        if st > 1:
            hits.append(te.equal(at % st, 0))
        return te.max(te.min(index, size - 1), 0), te.all(*hits)

    def body(n: te.Var, k: te.Var, oy: te.Var, ox: te.Var) -> te.Expr:
        c = rc if groups == 1 else k // Kg * Cg + rc.var
        iy, y_ok = tap(oy, ry.var, pt, sh, dh, H)
        ix, x_ok = tap(ox, rx.var, pl, sw, dw, W)
        m = k if groups == 1 else k % Kg
        product = to(dtype, data[n, c, iy, ix]) * to(dtype, kernel[c, m, ry, rx])
        return te.sum(te.if_then_else(te.all(y_ok, x_ok), product, te.const(0, dtype)),
                      axis=[rc, ry, rx])

    return te.compute((N, Kg * groups, OH, OW), body, name=name,
                      tag=tags.make(tags.REDUCTION, op))
