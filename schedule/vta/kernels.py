"""Hand-written ``vta`` instruction streams: the reference programs the simulator's tests and
benchmarks run until code generation emits them from schedules.

``matmul_kernel(a, w, shift, weight_buffers)``: ``C = clip((A @ W^T) >> shift, -128, 127)``
for int8 ``A (M, K)`` and ``W (N, K)`` — the inputs loaded once, the weights one
``BLOCK_OUT``-row tile at a time into one buffer (each load waits until the GEMMs of the
tile before are done) or two alternating ones (a load overlaps the other buffer's GEMMs:
what a virtual thread gives), the requantisation on the ALU, one store.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import VtaConfig
from .isa import Alu, Deps, Finish, Gemm, Instruction, Load, Loops, Store, Uop


class DramImage:
    """A DRAM image laid out region by region; a region's base counts entries of its own
    size, as DMA instructions address them."""

    def __init__(self) -> None:
        self._data = bytearray()

    def put(self, values: np.ndarray, entry_bytes: int) -> int:
        """Append ``values`` (their bytes, a whole number of entries); their base entry."""
        raw = np.ascontiguousarray(values).view(np.uint8).reshape(-1)
        if raw.size % entry_bytes:
            raise ValueError(f"{raw.size} bytes are not whole {entry_bytes}-byte entries")
        self._data += bytes(-len(self._data) % entry_bytes)
        base = len(self._data) // entry_bytes
        self._data += raw.tobytes()
        return base

    def reserve(self, entries: int, entry_bytes: int) -> int:
        return self.put(np.zeros(entries * entry_bytes, np.uint8), entry_bytes)

    def array(self) -> np.ndarray:
        return np.frombuffer(bytes(self._data), np.uint8)


@dataclass(frozen=True)
class Kernel:
    """A program, the DRAM it runs against, and where its int8 output lands."""

    program: list[Instruction]
    dram: np.ndarray
    out_base: int  # in output entries
    out_shape: tuple[int, int]

    def output(self, dram: np.ndarray, config: VtaConfig) -> np.ndarray:
        """The output matrix in a DRAM image after the program ran."""
        start = self.out_base * config.out_entry_bytes
        m, n = self.out_shape
        return dram[start: start + m * n].view(np.int8).reshape(m, n)


def pack_uops(uops: list[Uop]) -> np.ndarray:
    """Micro-ops as the bytes a LOAD of ``uop`` entries reads from DRAM."""
    return np.asarray([u.pack() for u in uops], dtype="<u4").view(np.uint8)


def matmul_kernel(a: np.ndarray, w: np.ndarray, config: VtaConfig, shift: int = 8,
                  weight_buffers: int = 1) -> Kernel:
    """See the module docstring. Needs batch 1, ``K`` a multiple of ``BLOCK_IN`` and ``N``
    of ``BLOCK_OUT``; the whole of A, the micro-ops and the accumulators must fit their
    buffers."""
    c = config
    (m, k), (n, k_w) = a.shape, w.shape
    if c.batch != 1 or k != k_w or k % c.block_in or n % c.block_out:
        raise ValueError(f"matmul_kernel: shapes {a.shape} x {w.shape}^T do not tile by "
                         f"{c.block_in}x{c.block_out} (batch 1)")
    if weight_buffers not in (1, 2):
        raise ValueError("weight_buffers: 1 or 2")
    kt, tiles = k // c.block_in, n // c.block_out
    dram = DramImage()
    a_base = dram.put(a.astype(np.int8).reshape(m * kt, c.block_in), c.inp_entry_bytes)
    w_blocks = w.astype(np.int8).reshape(tiles, c.block_out, kt, c.block_in).transpose(
        0, 2, 1, 3)  # tile, k block, out row, in column
    w_base = dram.put(w_blocks.reshape(-1, c.block_out, c.block_in), c.wgt_entry_bytes)
    updates = [Uop(t, kk, (t % weight_buffers) * kt + kk) for t in range(tiles)
               for kk in range(kt)]
    resets = [Uop(t, 0, 0) for t in range(tiles)]
    uops = updates + resets
    if len(uops) > c.uop_depth or m * kt > c.inp_depth or m * tiles > c.acc_depth or \
            weight_buffers * kt > c.wgt_depth:
        raise ValueError("matmul_kernel: the operands do not fit the on-chip buffers")
    uop_base = dram.put(pack_uops(uops), 4)
    out_base = dram.reserve(m * tiles, c.out_entry_bytes)
    program: list[Instruction] = [Load("uop", 0, uop_base, 1, len(uops), len(uops)),
                                  Load("inp", 0, a_base, 1, m * kt, m * kt)]
    for t in range(tiles):
        program.append(Load("wgt", (t % weight_buffers) * kt, w_base + t * kt, 1, kt, kt,
                            deps=Deps(pop_next=t >= weight_buffers, push_next=True)))
        program.append(Gemm(Loops(len(updates) + t, len(updates) + t + 1, iter_out=m,
                                  dst_out=tiles), reset=True))
        program.append(Gemm(Loops(t * kt, (t + 1) * kt, iter_out=m, dst_out=tiles,
                                  src_out=kt),
                            deps=Deps(pop_prev=True, push_prev=t + weight_buffers < tiles)))
    # every (row, tile) accumulator, from tile 0's reset micro-op (dst 0)
    every = Loops(len(updates), len(updates) + 1, iter_out=m, iter_in=tiles, dst_out=tiles,
                  dst_in=1)
    program += [Alu("shr", every, imm=shift), Alu("max", every, imm=-128),
                Alu("min", every, imm=127, deps=Deps(push_next=True)),
                Store(0, out_base, 1, m * tiles, m * tiles,
                      deps=Deps(pop_prev=True, push_prev=True)),
                Finish(deps=Deps(pop_next=True))]
    return Kernel(program, dram.array(), out_base, (m, n))
