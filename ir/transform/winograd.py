"""ConvertWinograd: 3x3 stride-1 convolutions on packed channels by Winograd's minimal
filtering.

A float ``nn.conv2d_nchwc(x, W)`` with a constant 3x3 kernel, stride 1 and no dilation
becomes

    nn.winograd_output(nn.batch_matmul(nn.winograd_input(x), U), ...)

with ``U = G g G^T`` the kernel transformed once, here (``alpha^2`` positions of ``C x K``,
``alpha = tile + 2``). With F(4x4, 3x3) the product does a quarter of the direct
convolution's multiply-adds; the transforms add work proportional to the channels and
traffic through a buffer of ``alpha^2 / tile^2`` times the image (2.25x at tile 4), so
the trade pays on large images with enough channels and not on small ones, whose many
channels make ``U`` (``alpha^2 / 9`` = 4x the kernel) the thing read from memory. The
default ``tile_for`` rule (``default_tile``) takes tile 4 where the output has at least
``MIN_TILES`` tiles of 4x4 and leaves the others direct. Each of the three stages is a
kernel of its own and a tuning task of its own (the output transform absorbs the bias,
activation and residual add).
"""

from __future__ import annotations

from collections.abc import Callable

from .. import op as ops
from ..expr import Call, Constant, Expr, Op
from ..module import Module
from ..op import relations as rel
from ..visitor import ExprMutator
from ._util import map_typed_functions
from .infer_type import infer_type
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["MIN_TILES", "TILE_CONFIG", "ConvertWinograd", "default_tile"]

#: The pass context's config key that forces one tile on every convertible convolution.
TILE_CONFIG = "ConvertWinograd.tile"

#: The fewest 4x4 output tiles (per image) for which the default rule converts a
#: convolution: the product does ``tiles / 2`` multiply-adds per byte of ``U`` it reads,
#: and inside a model ``U`` comes from memory (the layers before evicted it). Measured on
#: ResNet-18's layers (bench/winograd.py, 128 trials each way): 1.9x the direct
#: convolution at 56x56 and 28x28 (196 and 49 tiles), 0.63x at 7x7 (4 tiles); at 14x14
#: (16 tiles, ``U`` 9.4 MB for 256 channels) 1.3x timed alone, but inside the tuned model
#: 1.29 ms per layer against the direct convolution's 0.90 (the product streaming ``U`` at
#: 8 GB/s; bench/RESULTS.md, 2026-11-27).
MIN_TILES = 49


def default_tile(out_h: int, out_w: int, channels: int, kernels: int) -> int | None:
    """Tile 4 where the output has at least ``MIN_TILES`` 4x4 tiles, else no Winograd."""
    tiles = -(-out_h // 4) * -(-out_w // 4)
    return 4 if tiles >= MIN_TILES and min(channels, kernels) >= 16 else None


TileRule = Callable[[int, int, int, int], "int | None"]


def _convertible(call: Call) -> bool:
    if not isinstance(call.op, Op) or call.op.name != "nn.conv2d_nchwc":
        return False
    weight, a = call.args[1], call.attrs
    data = call.args[0].checked_type_or_none
    return (isinstance(weight, Constant) and weight.data.shape[2:4] == (3, 3)
            and weight.dtype.startswith("float") and a.out_dtype in ("", weight.dtype)
            and tuple(a.strides) in ((1,), (1, 1)) and tuple(a.dilation) in ((1,), (1, 1))
            and data is not None and data.dtype == weight.dtype)


class _Convert(ExprMutator):
    def __init__(self, tile_for: TileRule) -> None:
        super().__init__()
        self.tile_for = tile_for

    def visit_call(self, e: Call) -> Expr:
        call = super().visit_call(e)
        if not _convertible(e):
            return call
        from schedule import ops as library

        out = e.checked_type
        n, ko, oh, ow, oc = out.shape
        weight = e.args[1].data
        ic = weight.shape[4]
        tile = self.tile_for(oh, ow, weight.shape[1] * ic, ko * oc)
        if tile is None:
            return call
        oihw = library.reference.layout_transform(weight, f"OIHW{ic}i{oc}o", "OIHW")
        padding = rel.padding2d("nn.conv2d_nchwc", e.attrs.padding)
        tiles = ops.nn.winograd_input(call.args[0], tile=tile, padding=padding)
        products = ops.nn.batch_matmul(
            tiles, Constant(library.reference.winograd_weight(oihw, tile)), transpose_b=False)
        return ops.nn.winograd_output(products, tile=tile, out_size=(oh, ow), block=oc)


def ConvertWinograd(tile_for: TileRule = default_tile) -> Pass:
    """The pass (opt level 3; see the module docstring): ``tile_for(OH, OW, C, K)`` gives
    the tile (2 or 4) for a convertible convolution, or None to leave it direct; the pass
    context's ``config[TILE_CONFIG]`` (2 or 4), when set, converts every one with that
    tile."""

    def run(module: Module, ctx: PassContext) -> Module:
        rule = tile_for
        if TILE_CONFIG in ctx.config:
            forced = ctx.config[TILE_CONFIG]
            if forced not in (2, 4):
                raise ValueError(f"{TILE_CONFIG} must be 2 or 4, got {forced!r}")
            rule = lambda *_: forced  # noqa: E731
        return infer_type(map_typed_functions(module, lambda f: _Convert(rule).visit(f)))

    return module_pass("ConvertWinograd", 3)(run)
