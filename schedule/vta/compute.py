"""What a workload computes on the ``vta`` accelerator: the same operator over tensors in the
GEMM core's packed layout, the host's packing of the workload's inputs and unpacking of its
output, the core's GEMM intrinsic, and the schedule template the search fills in.

With the core's ``BATCH x BLOCK_IN x BLOCK_OUT`` (B, BI, BO):

- an int8 dense layer ``Y = requantize(X @ W^T, shift)`` (``X: (M, K)``, ``W: (N, K)``;
  a matmul is the same with its operands transposed as needed on the host)
  packs ``X`` to ``(M/B, K/BI, B, BI)`` (one input-buffer entry per innermost pair), ``W``
  to ``(N/BO, K/BI, BO, BI)`` (one weight entry), and computes ``Y`` as
  ``(M/B, N/BO, B, BO)``;
- an int8 convolution (``conv2d_nchw``, groups 1, dilation 1) packs data NCHW to
  ``NCHW{B}n{BI}c`` = ``(N/B, C/BI, H, W, B, BI)``, the kernel OIHW to
  ``(K/BO, C/BI, R, S, BO, BI)``, and computes ``(N/B, K/BO, OH, OW, B, BO)``; its zero
  padding is a stage inlined into the input copy (the DMA writes the zeros).

Every dimension is padded with zeros to whole blocks on the host, and the output cropped.
In both, ``C`` (int32, the accumulator) is the sum of int8 products and ``Y`` its
requantization (ALU operations), after the layer's optional int32 bias (per output
feature / channel: packed ``(N/BO, B, BO)``, each accumulator entry's bias, loaded into the
accumulator buffer and added there) and ReLU. Packing is the host's work (a model's
weights are packed once, when it is compiled); the accelerator's cycles are what a
measurement reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..intrin import TensorIntrin, decl_tensor_intrin
from ..schedule import Schedule, ScheduleError, create_schedule
from ..steps import Steps
from ..te import all as te_all
from ..te import cast, compute, floordiv, if_then_else, placeholder, reduce_axis
from ..te import max as te_max
from ..te import min as te_min
from ..te import sum as te_sum
from ..tensor import Tensor
from ..workload import Workload
from .config import VtaConfig


class VtaUnsupported(ValueError):
    """A workload the accelerator cannot compute (the message says what would be needed)."""


@dataclass(frozen=True)
class Packing:
    """An array blocked for the accelerator along its first two dimensions: zero-padded to
    whole ``block`` tiles there and laid out ``(d0 / b0, d1 / b1, *rest, b0, b1)``.
    ``transposed``: the array arrives as the transpose of ``shape`` (2-D only)."""

    shape: tuple[int, ...]
    block: tuple[int, int]
    transposed: bool = False

    @property
    def packed_shape(self) -> tuple[int, ...]:
        (d0, d1, *rest), (b0, b1) = self.shape, self.block
        return (math.ceil(d0 / b0), math.ceil(d1 / b1), *rest, b0, b1)

    def pack(self, array: np.ndarray) -> np.ndarray:
        if self.transposed:
            array = array.T
        o0, o1, *rest, b0, b1 = self.packed_shape
        padded = np.zeros((o0 * b0, o1 * b1, *rest), array.dtype)
        padded[: self.shape[0], : self.shape[1]] = array
        n = len(rest)
        blocked = padded.reshape(o0, b0, o1, b1, *rest)
        return np.ascontiguousarray(blocked.transpose(0, 2, *range(4, 4 + n), 1, 3))

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        o0, o1, *rest, b0, b1 = self.packed_shape
        n = len(rest)
        blocked = packed.reshape(self.packed_shape).transpose(0, n + 2, 1, n + 3,
                                                              *range(2, 2 + n))
        whole = blocked.reshape(o0 * b0, o1 * b1, *rest)
        return np.ascontiguousarray(whole[: self.shape[0], : self.shape[1]])


def gemm_intrin(config: VtaConfig) -> TensorIntrin:
    """The GEMM core's operation, ``out[b, o] = sum_i a[b, i] * w[o, i]`` (int8 in, int32
    accumulated), declared (and registered by name) for the core's shape."""
    b, bi, bo = config.batch, config.block_in, config.block_out
    a = placeholder((b, bi), "int8", name="a")
    w = placeholder((bo, bi), "int8", name="w")
    i = reduce_axis((0, bi), name="i")
    out = compute((b, bo), lambda x, y: te_sum(cast("int32", a[x, i]) * cast("int32", w[y, i]),
                                               axis=i), name="gemm")
    return decl_tensor_intrin(out, f"vta_gemm_{b}x{bi}x{bo}", targets=("vta",))


@dataclass(frozen=True)
class Template:
    """The knobs of a vta schedule, in core blocks: the output tile ``tile_m`` (batch) x
    ``tile_n`` (output features / channels) x ``tile_h`` x ``tile_w`` (output rows and
    columns of a convolution; 1 for dense), the reduction tile ``tile_k`` (input features
    / channels), and 1 or 2 virtual threads over the tiles of ``vthread_axis`` (m, n or h)."""

    tile_m: int = 1
    tile_n: int = 1
    tile_k: int = 1
    vthreads: int = 1
    vthread_axis: str = "n"
    tile_h: int = 1
    tile_w: int = 1


@dataclass(frozen=True)
class GemmShape:
    """A computation as the core sees it: ``m x n x k`` blocks, over an ``h x w`` output
    plane with an ``r x s`` window moved by ``stride`` (all 1 for dense)."""

    m: int
    n: int
    k: int
    h: int = 1
    w: int = 1
    r: int = 1
    s: int = 1
    stride: int = 1

    def extent(self, axis: str) -> int:
        return {"m": self.m, "n": self.n, "k": self.k, "h": self.h, "w": self.w}[axis]

    def input_rows(self, tile: int) -> int:
        """Input rows (or columns) an output tile of ``tile`` rows reads."""
        return (tile - 1) * self.stride + self.r


@dataclass(frozen=True)
class BiasPacking:
    """A bias of ``n`` int32 values as accumulator entries: zero-padded to whole ``block``s
    and repeated over the ``batch`` rows of an entry, ``(n / block, batch, block)``."""

    n: int
    batch: int
    block: int

    @property
    def packed_shape(self) -> tuple[int, ...]:
        return (math.ceil(self.n / self.block), self.batch, self.block)

    def pack(self, bias: np.ndarray) -> np.ndarray:
        blocks, batch, block = self.packed_shape
        padded = np.zeros(blocks * block, np.int32)
        padded[: self.n] = bias
        rows = np.broadcast_to(padded.reshape(blocks, 1, block), self.packed_shape)
        return np.ascontiguousarray(rows)


def _requantized(acc: Tensor, shift: int, bias: Tensor | None, relu: bool) -> Tensor:
    """``Y = int8(clip(relu(C + bias) >> shift))`` (bias indexed by the output block and
    the entry's row and column)."""

    def body(*i):
        v = acc[i]
        if bias is not None:
            v = v + bias[i[1], i[-2], i[-1]]
        if relu:
            v = te_max(v, 0)
        return cast("int8", te_min(te_max(floordiv(v, 1 << shift), -128), 127))

    return compute(acc.shape, body, name="Y")


class VtaCompute:
    """A workload as the accelerator computes it: packed argument tensors (inputs, then the
    output), their packings, its shape in core blocks, and its schedule template."""

    def __init__(self, workload: Workload, config: VtaConfig):
        self.workload = workload
        self.config = config
        self.intrin = gemm_intrin(config)
        p = workload.params
        if workload.op_name not in ("dense", "matmul", "conv2d_nchw"):
            raise VtaUnsupported(f"vta computes int8 dense, matmul and conv2d_nchw; "
                                 f"{workload.op_name or 'a DAG'} stays on the host cpu")
        if p["dtype"] != "int8" or p["requant_shift"] < 0:
            raise VtaUnsupported(f"vta computes {workload.op_name} with dtype=int8 and "
                                 "requant_shift >= 0 (its output is int8); got "
                                 f"{workload}")
        self.op = workload.op_name
        if self.op == "conv2d_nchw":
            self._conv(p)
        else:
            self._dense(p)

    def _dense(self, p: dict) -> None:
        """Dense (``X @ W^T``) or matmul (``A @ B``, either transposed): one GEMM."""
        c = self.config
        m, n, k = p["M"], p["N"], p["K"]
        matmul = self.op == "matmul"
        self.packings = [
            Packing((m, k), (c.batch, c.block_in), matmul and p["transpose_a"]),
            Packing((n, k), (c.block_out, c.block_in), matmul and not p["transpose_b"]),
            *self._bias_packing(p, n), Packing((m, n), (c.batch, c.block_out))]
        x = placeholder(self.packings[0].packed_shape, "int8", name="X")
        w = placeholder(self.packings[1].packed_shape, "int8", name="W")
        ko = reduce_axis((0, x.shape[1]), name="ko")
        ki = reduce_axis((0, c.block_in), name="ki")
        acc = compute(self.packings[-1].packed_shape,
                      lambda mo, no, mi, ni: te_sum(cast("int32", x[mo, ko, mi, ki])
                                                    * cast("int32", w[no, ko, ni, ki]),
                                                    axis=[ko, ki]), name="C")
        self.tensors: list[Tensor] = [x, w, *self._epilogue(acc, p)]
        self.shape = GemmShape(x.shape[0], w.shape[0], x.shape[1])
        self.macs = m * n * k

    def _conv(self, p: dict) -> None:
        (sh, sw), (ph, pw), (dh, dw) = p["stride"], p["padding"], p["dilation"]
        if p["groups"] != 1 or (dh, dw) != (1, 1) or sh != sw or ph != pw or \
                p["R"] != p["S"]:
            raise VtaUnsupported("vta computes conv2d_nchw with groups=1, dilation 1 and the "
                                 f"same stride, padding and window on both axes; got "
                                 f"{self.workload}")
        if ph > 15:
            raise VtaUnsupported(f"vta pads at most 15 rows in a DMA; padding={ph}")
        c = self.config
        n, ch, h, wd, k, r = p["N"], p["C"], p["H"], p["W"], p["K"], p["R"]
        oh, ow = (h + 2 * ph - r) // sh + 1, (wd + 2 * pw - r) // sw + 1
        self.packings = [Packing((n, ch, h, wd), (c.batch, c.block_in)),
                         Packing((k, ch, r, r), (c.block_out, c.block_in)),
                         *self._bias_packing(p, k),
                         Packing((n, k, oh, ow), (c.batch, c.block_out))]
        data = placeholder(self.packings[0].packed_shape, "int8", name="D")
        kernel = placeholder(self.packings[1].packed_shape, "int8", name="Kn")
        padded = data
        if ph:
            shape = (*data.shape[:2], h + 2 * ph, wd + 2 * pw, *data.shape[4:])

            def pad(b, ci, y, x, i, j):
                inside = te_all(y >= ph, y < h + ph, x >= pw, x < wd + pw)
                return if_then_else(inside, data[b, ci, y - ph, x - pw, i, j],
                                    cast("int8", 0))

            padded = compute(shape, pad, name="D_pad")
        ci = reduce_axis((0, data.shape[1]), name="ci")
        ry, rx = reduce_axis((0, r), name="ry"), reduce_axis((0, r), name="rx")
        cb = reduce_axis((0, c.block_in), name="cb")
        acc = compute(self.packings[-1].packed_shape,
                      lambda b, o, y, x, i, j: te_sum(
                          cast("int32", padded[b, ci, y * sh + ry, x * sw + rx, i, cb])
                          * cast("int32", kernel[o, ci, ry, rx, j, cb]),
                          axis=[ci, ry, rx, cb]), name="C")
        self.tensors = [data, kernel, *self._epilogue(acc, p)]
        self.shape = GemmShape(data.shape[0], kernel.shape[0], data.shape[1], oh, ow, r, r, sh)
        self.macs = n * k * oh * ow * ch * r * r

    def _bias_packing(self, p: dict, features: int) -> list[BiasPacking]:
        c = self.config
        return [BiasPacking(features, c.batch, c.block_out)] if p.get("bias") else []

    def _epilogue(self, acc: Tensor, p: dict) -> list[Tensor]:
        """The bias placeholder (when the layer has one) and the requantized output."""
        bias = placeholder(self.packings[2].packed_shape, "int32", name="Bias") \
            if p.get("bias") else None
        out = _requantized(acc, p["requant_shift"], bias, p.get("activation") == "relu")
        return [out] if bias is None else [bias, out]

    # ------------------------------------------------------------------ host side
    def pack_inputs(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [p.pack(a) for p, a in zip(self.packings, inputs, strict=False)]

    def unpack_output(self, packed: np.ndarray) -> np.ndarray:
        return self.packings[-1].unpack(packed)

    # ------------------------------------------------------------------ schedules
    def schedule(self, steps: Steps | list = ()) -> Schedule:
        """The packed computation's schedule with ``steps`` replayed on it."""
        s = create_schedule(self.tensors[-1])
        s.replay(steps)
        return s

    def default_template(self) -> Template:
        """The untuned schedule: one block of each kind at a time, a whole output row of a
        convolution per tile when its input rows fit the buffer (a block per tile would
        take one instruction stream per output pixel)."""
        g = self.shape
        whole_row = g.input_rows(1) * g.input_rows(g.w) <= self.config.inp_depth
        return Template(tile_w=g.w if whole_row else 1)

    def check_template(self, t: Template) -> None:
        """``ScheduleError`` unless ``t``'s tiles divide the shape and its virtual threads
        split their axis' tiles."""
        g = self.shape
        for axis in ("m", "n", "k", "h", "w"):
            tile = getattr(t, f"tile_{axis}")
            if tile < 1 or g.extent(axis) % tile:
                raise ScheduleError(f"vta template: tile_{axis}={tile} does not divide "
                                    f"{g.extent(axis)}")
        if t.vthreads not in (1, 2) or t.vthread_axis not in ("m", "n", "h"):
            raise ScheduleError("vta template: vthreads 1 or 2, over axis m, n or h")
        tiles = g.extent(t.vthread_axis) // getattr(t, f"tile_{t.vthread_axis}")
        if tiles % t.vthreads:
            raise ScheduleError(f"vta template: {tiles} {t.vthread_axis} tiles do not split "
                                f"over {t.vthreads} virtual threads")

    def template_steps(self, t: Template) -> Steps:
        """The steps of template ``t`` (``ScheduleError`` if its tiles do not divide the
        shape): output tiles with the accumulator in the acc buffer, computed per tile;
        input and weight tiles cached into their buffers per reduction tile; the core's
        intrinsic on the innermost block; the tiles of one axis spread over virtual threads;
        the bias tile loaded into the acc buffer and requantization per output tile."""
        self.check_template(t)
        s = create_schedule(self.tensors[-1])
        inp, wgt, *bias, out = self.tensors
        acc = next(t for t in out.op.input_tensors if getattr(t.op, "reduce_axis", None))
        so, sc = s[out], s[acc]
        sc.set_scope("acc")
        names = ("m", "n", "h", "w") if self.op == "conv2d_nchw" else ("m", "n")
        axes = dict(zip(names, so.op.axis, strict=False))
        outer, inner = {}, {}
        for name, axis in axes.items():
            outer[name], inner[name] = so.split(axis, factor=getattr(t, f"tile_{name}"))
        order = list(outer)
        if t.vthreads > 1:
            vt, rest = so.split(outer[t.vthread_axis], nparts=t.vthreads)
            so.bind(vt, "vthread")
            outer[t.vthread_axis] = rest
            loops = [vt, *(outer[a] for a in order)]
        else:
            loops = [outer[a] for a in order]
        so.reorder(*loops, *(inner[a] for a in order), *so.op.axis[len(axes):])
        sc.compute_at(so, loops[-1])
        spatial = list(sc.op.axis)
        block_i, block_j = spatial[-2:]
        reduce = list(sc.op.reduce_axis)
        k_outer, k_inner = sc.split(reduce[0], factor=t.tile_k)
        sc.reorder(k_outer, *spatial[:-2], k_inner, *reduce[1:-1], block_i, block_j, reduce[-1])
        sc.tensorize(block_i, self.intrin)
        source = acc.op.input_tensors[0]  # the (padded) input
        for tensor, scope in ((source, "inp"), (wgt, "wgt")):
            cached = s.cache_read(tensor, scope, [sc])
            s[cached].compute_at(sc, k_outer)
        if source is not inp:
            s[source].compute_inline()  # the padding: written by the DMA
        for tensor in bias:
            cached = s.cache_read(tensor, "acc", [so])
            s[cached].compute_at(so, loops[-1])
        return Steps.of(s.steps)
