"""Winograd's minimal filtering for 3x3 stride-1 convolutions on packed channels, as two
tensor-expression operators around a batched matrix product:

    V = winograd_input_nchwc(data)        (alpha^2, P, C)   B^T d B of every input tile
    M = batch_matmul(V, U)                (alpha^2, P, K)   U = G g G^T, the kernel, once
    y = winograd_output_nchwc(M)          (N, K/b, OH, OW, b)   A^T m A of every tile

with ``alpha = tile + 2`` and ``P`` the output tiles of ``tile x tile`` (``F(2x2, 3x3)``
or ``F(4x4, 3x3)``; matrices in ``reference.winograd_matrices``). F(4x4, 3x3) does the
convolution's multiply-adds in a product 4x smaller (36 positions instead of 9 x 16
taps), plus the two transforms, whose cost grows with the channels only linearly.

The transforms are sums of a few input values with constant coefficients: each of the
``alpha^2`` positions (or ``tile^2`` output pixels) has its own sum, written out with its
non-zero coefficients only and chosen by a balanced tree of conditions on the position
index. The condition does not depend on the channel axis, so a vectorized channel loop
keeps one scalar branch per vector, and where a schedule unrolls the position loop the C
compiler folds the conditions away.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import te
from ..tensor import Tensor
from . import tags
from ._util import as_padding, check_ndim, check_out_size
from .reference import winograd_matrices, winograd_tiles
from .transform import pad


def _combination(coefficients: np.ndarray, value_at: Sequence, dtype: str) -> te.Expr:
    """``sum(c * v)`` over the non-zero coefficients, with no multiplication by +-1."""
    expr = None
    for c, value in zip(coefficients.ravel(), value_at, strict=True):
        if c == 0:
            continue
        magnitude = value if abs(c) == 1 else value * te.const(float(abs(c)), dtype)
        if expr is None:
            expr = magnitude if c > 0 else magnitude * te.const(-1.0, dtype)
        else:
            expr = expr + magnitude if c > 0 else expr - magnitude
    assert expr is not None, "a Winograd matrix has a row of zeros"
    return expr


def _choose(index: te.Expr, options: Sequence[te.Expr], start: int = 0) -> te.Expr:
    """``options[index - start]`` as a balanced tree of ``index < k`` conditions."""
    if len(options) == 1:
        return options[0]
    half = len(options) // 2
    return te.if_then_else(index < start + half, _choose(index, options[:half], start),
                           _choose(index, options[half:], start + half))


def winograd_input_nchwc(data: Tensor, tile: int, padding: int | Sequence[int] = 1,
                         name: str = "winograd_input") -> Tensor:
    """``data (N, C/b, H, W, b)`` -> ``(alpha^2, N*TH*TW, C)``: every input tile of a 3x3
    stride-1 convolution with ``padding`` (top, left, bottom, right or one int) in the
    Winograd domain, ``B^T d B``; tile ``t`` is ``(n, ty, tx)`` in row-major order."""
    op = "winograd_input_nchwc"
    check_ndim(data, 5, op, "data")
    bt, _, _ = winograd_matrices(tile)
    N, Co, H, W, block = data.shape
    pads = as_padding(padding, f"{op}: padding")
    OH, OW = H + pads[0] + pads[2] - 2, W + pads[1] + pads[3] - 2
    check_out_size(f"{op} output height", OH)
    check_out_size(f"{op} output width", OW)
    TH, TW = winograd_tiles(OH, OW, tile)
    alpha = tile + 2
    after = (TH * tile + 2 - H - pads[0], TW * tile + 2 - W - pads[1])
    src = data
    if any(pads[:2]) or any(after):
        src = pad(data, (0, 0, pads[0], pads[1], 0), (0, 0, after[0], after[1], 0),
                  name=f"{name}_pad")
    per_image = TH * TW

    def body(e: te.Var, t: te.Var, c: te.Var) -> te.Expr:
        n = t // per_image if N > 1 else 0
        row, col = (t // TW) % TH * tile, t % TW * tile
        window = [src[n, c // block, row + i, col + j, c % block]
                  for i in range(alpha) for j in range(alpha)]
        sums = [_combination(np.outer(bt[a], bt[b]), window, data.dtype)
                for a in range(alpha) for b in range(alpha)]
        return _choose(e, sums)

    return te.compute((alpha * alpha, N * per_image, Co * block), body, name=name,
                      tag=tags.make(tags.INJECTIVE, op))


def winograd_output_nchwc(products: Tensor, tile: int, out_size: Sequence[int], block: int,
                          name: str = "winograd_output") -> Tensor:
    """``products (alpha^2, N*TH*TW, K)`` -> the convolution's output ``(N, K/block, OH, OW,
    block)``, ``A^T m A`` of every tile cropped to ``out_size`` (OH, OW)."""
    op = "winograd_output_nchwc"
    check_ndim(products, 3, op, "products")
    _, _, at = winograd_matrices(tile)
    alpha = tile + 2
    positions, count, K = products.shape
    OH, OW = out_size
    TH, TW = winograd_tiles(OH, OW, tile)
    if positions != alpha * alpha or count % (TH * TW) or K % block:
        raise ValueError(f"{op}: products {list(products.shape)} are not ({alpha * alpha}, "
                         f"N * {TH * TW}, K) with K a multiple of {block} for F({tile}x{tile}, "
                         f"3x3) and a {OH}x{OW} output")
    N, per_image = count // (TH * TW), TH * TW

    def body(n: te.Var, kb: te.Var, h: te.Var, w: te.Var, ki: te.Var) -> te.Expr:
        t = (n * per_image if N > 1 else 0) + h // tile * TW + w // tile
        k = kb * block + ki
        values = [products[e, t, k] for e in range(alpha * alpha)]
        rows = [_choose(w % tile, [_combination(np.outer(at[i], at[j]), values, products.dtype)
                                   for j in range(tile)])
                for i in range(tile)]
        return _choose(h % tile, rows)

    return te.compute((N, K // block, OH, OW, block), body, name=name,
                      tag=tags.make(tags.INJECTIVE, op))
