"""What a workload computes on the ``vta`` accelerator: the same operator over tensors in the
GEMM core's packed layout, the host's packing of the workload's inputs and unpacking of its
output, the core's GEMM intrinsic, and the schedule template the search fills in.

An int8 dense layer ``Y = requantize(X @ W^T, shift)`` (``X: (M, K)``, ``W: (N, K)``)
becomes, with the core's ``BATCH x BLOCK_IN x BLOCK_OUT``:

- ``X`` packed to ``(M/BATCH, K/BLOCK_IN, BATCH, BLOCK_IN)`` (one input-buffer entry per
  innermost pair), ``W`` to ``(N/BLOCK_OUT, K/BLOCK_IN, BLOCK_OUT, BLOCK_IN)`` (one weight
  entry), each padded with zeros to whole blocks on the host;
- ``C`` (int32, the accumulator) the sum over both K dimensions; ``Y`` packed
  ``(M/BATCH, N/BLOCK_OUT, BATCH, BLOCK_OUT)`` = the requantization of ``C`` (ALU ops),
  unpacked and cropped on the host.

Packing is the host's work (a model's weights are packed once, when it is compiled); the
accelerator's cycles are what a measurement reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..intrin import TensorIntrin, decl_tensor_intrin
from ..schedule import Schedule, ScheduleError, create_schedule
from ..steps import Steps
from ..te import cast, compute, floordiv, placeholder, reduce_axis
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
    """A 2-D array blocked for the accelerator: zero-padded to whole ``block`` tiles and laid
    out tile by tile, ``(rows / br, cols / bc, br, bc)``."""

    shape: tuple[int, int]
    block: tuple[int, int]

    @property
    def packed_shape(self) -> tuple[int, int, int, int]:
        (rows, cols), (br, bc) = self.shape, self.block
        return (math.ceil(rows / br), math.ceil(cols / bc), br, bc)

    def pack(self, array: np.ndarray) -> np.ndarray:
        r0, c0, br, bc = self.packed_shape
        padded = np.zeros((r0 * br, c0 * bc), array.dtype)
        padded[: self.shape[0], : self.shape[1]] = array
        return np.ascontiguousarray(padded.reshape(r0, br, c0, bc).transpose(0, 2, 1, 3))

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        r0, c0, br, bc = self.packed_shape
        whole = packed.reshape(r0, c0, br, bc).transpose(0, 2, 1, 3).reshape(r0 * br, c0 * bc)
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
    """The knobs of a vta dense schedule: output tile (``tile_m`` x ``tile_n`` blocks),
    reduction tile (``tile_k`` blocks) and virtual threads (1 or 2) over the ``vthread_axis``
    (``m`` or ``n``) tiles."""

    tile_m: int = 1
    tile_n: int = 1
    tile_k: int = 1
    vthreads: int = 1
    vthread_axis: str = "n"


class VtaCompute:
    """A workload as the accelerator computes it: packed argument tensors (inputs, then the
    output), their packings, and the stage names the schedule template uses."""

    def __init__(self, workload: Workload, config: VtaConfig):
        self.workload = workload
        self.config = config
        p = workload.params
        if workload.op_name != "dense":
            raise VtaUnsupported(f"vta computes int8 dense layers; {workload.op_name or 'a DAG'}"
                                 " stays on the host cpu")
        if p["dtype"] != "int8" or p["requant_shift"] < 0 or p["bias"] or \
                p["activation"] != "none":
            raise VtaUnsupported("vta computes dense with dtype=int8, requant_shift >= 0 (its "
                                 "output is int8), no bias and no activation; got "
                                 f"{workload}")
        c = config
        m, n, k = p["M"], p["N"], p["K"]
        self.packings = [Packing((m, k), (c.batch, c.block_in)),
                         Packing((n, k), (c.block_out, c.block_in)),
                         Packing((m, n), (c.batch, c.block_out))]
        self.intrin = gemm_intrin(c)
        x = placeholder(self.packings[0].packed_shape, "int8", name="X")
        w = placeholder(self.packings[1].packed_shape, "int8", name="W")
        ko = reduce_axis((0, x.shape[1]), name="ko")
        ki = reduce_axis((0, c.block_in), name="ki")
        acc = compute(self.packings[2].packed_shape,
                      lambda mo, no, mi, ni: te_sum(cast("int32", x[mo, ko, mi, ki])
                                                    * cast("int32", w[no, ko, ni, ki]),
                                                    axis=[ko, ki]), name="C")
        shift = p["requant_shift"]
        out = compute(acc.shape, lambda *i: cast("int8", te_min(te_max(
            floordiv(acc[i], 1 << shift), -128), 127)), name="Y")
        self.tensors: list[Tensor] = [x, w, out]
        self.macs = m * n * k

    @property
    def blocks(self) -> tuple[int, int, int]:
        """The GEMM's size in core blocks: (M / BATCH, N / BLOCK_OUT, K / BLOCK_IN)."""
        x, w = self.tensors[0].shape, self.tensors[1].shape
        return x[0], w[0], x[1]

    def pack_inputs(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [p.pack(a) for p, a in zip(self.packings, inputs, strict=False)]

    def unpack_output(self, packed: np.ndarray) -> np.ndarray:
        return self.packings[-1].unpack(packed)

    def schedule(self, steps: Steps | list = ()) -> Schedule:
        """The packed computation's schedule with ``steps`` replayed on it."""
        s = create_schedule(self.tensors[-1])
        s.replay(steps)
        return s

    def template_steps(self, t: Template) -> Steps:
        """The steps of template ``t`` (``ScheduleError`` if its tiles do not divide the
        blocks): output tiles with the accumulator in the acc buffer, computed per tile;
        input and weight tiles cached into their buffers per reduction tile; the core's
        intrinsic on the innermost block; the tiles of one axis spread over virtual threads."""
        bm, bn, bk = self.blocks
        for name, tile, total in (("tile_m", t.tile_m, bm), ("tile_n", t.tile_n, bn),
                                  ("tile_k", t.tile_k, bk)):
            if tile < 1 or total % tile:
                raise ScheduleError(f"vta template: {name}={tile} does not divide {total} blocks")
        if t.vthreads not in (1, 2) or t.vthread_axis not in ("m", "n"):
            raise ScheduleError("vta template: vthreads 1 or 2, over axis m or n")
        s = create_schedule(self.tensors[-1])
        x, w, out = self.tensors
        acc = out.op.input_tensors[0]
        so, sc = s[out], s[acc]
        sc.set_scope("acc")
        mo, no, mi, ni = so.op.axis
        mo_o, mo_i = so.split(mo, factor=t.tile_m)
        no_o, no_i = so.split(no, factor=t.tile_n)
        outer = [mo_o, no_o]
        if t.vthreads > 1:
            axis = 0 if t.vthread_axis == "m" else 1
            tiles = (bm // t.tile_m, bn // t.tile_n)[axis]
            if tiles % t.vthreads:
                raise ScheduleError(f"vta template: {tiles} {t.vthread_axis} tiles do not "
                                    f"split over {t.vthreads} virtual threads")
            vt, rest = so.split(outer[axis], nparts=t.vthreads)
            so.bind(vt, "vthread")
            outer = [vt, mo_o, rest] if axis == 1 else [vt, rest, no_o]
        so.reorder(*outer, mo_i, no_i, mi, ni)
        sc.compute_at(so, outer[-1])
        cmo, cno, cmi, cni = sc.op.axis
        ko, ki = sc.op.reduce_axis
        ko_o, ko_i = sc.split(ko, factor=t.tile_k)
        sc.reorder(ko_o, cmo, cno, ko_i, cmi, cni, ki)
        sc.tensorize(cmi, self.intrin)
        for tensor, scope in ((x, "inp"), (w, "wgt")):
            cached = s.cache_read(tensor, scope, [sc])
            s[cached].compute_at(sc, ko_o)
        return Steps.of(s.steps)
