"""2-d pooling over NCHW data (or NCHW[x]c: channels packed in a trailing block axis, which
pools like a batch axis): max, average and global average.

``avg_pool2d`` divides by the number of *valid* (non-padding) elements of each window by
default (``count_include_pad=False``, PyTorch's ``count_include_pad=False`` semantics);
the registered ``avg_pool2d`` workload uses that default. Padding must be smaller than
the window so every window holds at least one valid element.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import te
from ..dtype import is_float
from ..tensor import IterVar, Tensor
from . import tags
from ._util import as_padding, as_pair, check_out_size, conv_out_size, scaled
from .transform import pad

IntOrPair = int | Sequence[int]


def _geometry(op: str, data: Tensor, pool_size: IntOrPair, stride: IntOrPair,
              padding: IntOrPair) -> tuple[int, int, int, int, tuple[int, ...], int, int]:
    if data.ndim not in (4, 5):
        raise ValueError(f"{op}: data must be NCHW (4-d) or NCHW[x]c (5-d), got shape "
                         f"{list(data.shape)}")
    R, S = as_pair(pool_size, f"{op}: pool_size")
    sh, sw = as_pair(stride, f"{op}: stride")
    pads = as_padding(padding, f"{op}: padding")
    if max(pads[0], pads[2]) >= R or max(pads[1], pads[3]) >= S:
        raise ValueError(f"{op}: padding {padding!r} must be smaller than the window {R}x{S}")
    H, W = data.shape[2:4]
    OH = conv_out_size(H, R, sh, pads[0] + pads[2], 1)
    OW = conv_out_size(W, S, sw, pads[1] + pads[3], 1)
    check_out_size(f"{op} output height", OH)
    check_out_size(f"{op} output width", OW)
    return R, S, sh, sw, pads, OH, OW


def _padded(data: Tensor, pads: tuple[int, ...], value: te.Expr) -> Tensor:
    if not any(pads):
        return data
    rest = [0] * (data.ndim - 4)
    return pad(data, [0, 0, pads[0], pads[1], *rest], [0, 0, pads[2], pads[3], *rest], value)


def _window_load(src: Tensor, idx: tuple[te.Var, ...], sh: int, sw: int, ry: IterVar,
                 rx: IterVar) -> te.Expr:
    """The element of window tap ``(ry, rx)`` for output index ``idx`` (n, c, oh, ow...)."""
    n, c, oh, ow, *rest = idx
    return src[(n, c, scaled(oh, sh) + ry.var, scaled(ow, sw) + rx.var, *rest)]


def _out_shape(data: Tensor, OH: int, OW: int) -> tuple[int, ...]:
    return (*data.shape[:2], OH, OW, *data.shape[4:])


def max_pool2d(data: Tensor, pool_size: IntOrPair, stride: IntOrPair = 1,
               padding: IntOrPair = 0, name: str = "pool_max") -> Tensor:
    """Maximum over each ``pool_size`` window; padding holds the dtype's lowest value."""
    R, S, sh, sw, pads, OH, OW = _geometry("max_pool2d", data, pool_size, stride, padding)
    src = _padded(data, pads, te.min_value(data.dtype))
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    return te.compute(
        _out_shape(data, OH, OW),
        lambda *idx: te.max(_window_load(src, idx, sh, sw, ry, rx), axis=[ry, rx]),
        name=name, tag=tags.make(tags.REDUCTION, "pool_max"))


def avg_pool2d(data: Tensor, pool_size: IntOrPair, stride: IntOrPair = 1,
               padding: IntOrPair = 0, count_include_pad: bool = False,
               name: str = "pool_avg") -> Tensor:
    """Mean over each window (float dtypes). Stages: ``pool_sum`` then ``pool_avg``."""
    R, S, sh, sw, pads, OH, OW = _geometry("avg_pool2d", data, pool_size, stride, padding)
    if not is_float(data.dtype):
        raise ValueError(f"avg_pool2d: needs a float tensor, got {data.dtype}")
    src = _padded(data, pads, te.const(0, data.dtype))
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    H, W = data.shape[2:4]
    total = te.compute(
        _out_shape(data, OH, OW),
        lambda *idx: te.sum(_window_load(src, idx, sh, sw, ry, rx), axis=[ry, rx]),
        name="pool_sum", tag=tags.make(tags.REDUCTION, "pool_sum"))

    def count(oh: te.Var, ow: te.Var) -> te.Expr:
        if count_include_pad or not any(pads):
            return te.const(float(R * S), data.dtype)
        h0, w0 = scaled(oh, sh) - pads[0], scaled(ow, sw) - pads[1]
        rows = te.min(h0 + R, H) - te.max(h0, 0)
        cols = te.min(w0 + S, W) - te.max(w0, 0)
        return te.cast(data.dtype, rows * cols)

    return te.compute(_out_shape(data, OH, OW),
                      lambda *idx: total[idx] / count(idx[2], idx[3]),
                      name=name, tag=tags.make(tags.INJECTIVE, tags.ELEMWISE))


def global_avg_pool2d(data: Tensor, name: str = "global_pool_avg") -> Tensor:
    """Mean over H and W of NCHW (or NCHW[x]c) data; output shape ``(N, C, 1, 1)`` (or
    ``(N, C/x, 1, 1, x)``) like TVM."""
    if data.ndim not in (4, 5):
        raise ValueError(f"global_avg_pool2d: data must be NCHW (4-d) or NCHW[x]c (5-d), "
                         f"got shape {list(data.shape)}")
    if not is_float(data.dtype):
        raise ValueError(f"global_avg_pool2d: needs a float tensor, got {data.dtype}")
    H, W = data.shape[2:4]
    ry = te.reduce_axis((0, H), name="ry")
    rx = te.reduce_axis((0, W), name="rx")
    shape = _out_shape(data, 1, 1)
    total = te.compute(shape,
                       lambda n, c, i, j, *rest: te.sum(data[(n, c, ry, rx, *rest)],
                                                        axis=[ry, rx]),
                       name="global_pool_sum", tag=tags.make(tags.REDUCTION, "pool_sum"))
    return te.compute(shape,
                      lambda *idx: total[idx] / float(H * W),
                      name=name, tag=tags.make(tags.INJECTIVE, tags.ELEMWISE))
