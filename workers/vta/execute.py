"""What each ``vta`` instruction does to the accelerator's state, bit-exactly, with numpy:
the on-chip buffers (input and weight int8, accumulator int32 with its int8 output mirror,
decoded micro-ops) and the DRAM it reads and writes (a byte array; DRAM addresses count
entries of the buffer's kind). Timing is the simulator's (``workers.vta.simulator``).

Anything a program could do wrong is a :class:`SimulationError` naming the instruction: an
access past a buffer's capacity, a micro-op out of range, a DRAM address outside the
program's memory. Integer arithmetic wraps at 32 bits, as the hardware's does.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from schedule import vta

#: Micro-op executions a GEMM handles per numpy step (bounds the temporary arrays).
_CHUNK = 1 << 14


class SimulationError(RuntimeError):
    """The program cannot run: ``kind`` is one of buffer_overflow, bad_uop, dram_range,
    deadlock, bad_program; the message names the instruction."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class VtaState:
    """The buffers of one accelerator and the DRAM a program runs against."""

    def __init__(self, config: vta.VtaConfig, dram: np.ndarray):
        c = config
        self.config = c
        self.inp = np.zeros((c.inp_depth, c.batch, c.block_in), np.int8)
        self.wgt = np.zeros((c.wgt_depth, c.block_out, c.block_in), np.int8)
        self.acc = np.zeros((c.acc_depth, c.batch, c.block_out), np.int32)
        self.out = np.zeros((c.acc_depth, c.batch, c.block_out), np.int8)
        self.uop = np.zeros((c.uop_depth, 3), np.int64)  # dst, src, wgt
        self.dram = np.ascontiguousarray(dram, dtype=np.uint8).reshape(-1).copy()

    # ------------------------------------------------------------------ DMA
    def _buffer(self, mem: vta.Mem) -> np.ndarray:
        return {vta.Mem.INP: self.inp, vta.Mem.WGT: self.wgt, vta.Mem.ACC: self.acc,
                vta.Mem.UOP: self.uop,
                vta.Mem.OUT: self.out}[mem]

    def _dram_entries(self, n: int, insn: vta.Load | vta.Store, mem: vta.Mem) -> np.ndarray:
        """DRAM entry indices of a DMA's rows (row-major), checked against the memory."""
        rows = insn.dram_base + np.arange(insn.y_size, dtype=np.int64) * insn.x_stride
        index = (rows[:, None] + np.arange(insn.x_size, dtype=np.int64)[None, :]).reshape(-1)
        size = self.config.entry_bytes(mem)
        if int(index[-1]) >= self.dram.size // size:
            raise SimulationError("dram_range", f"instruction {n} ({insn}): DRAM entry "
                                  f"{int(index[-1])} is past the program's memory of "
                                  f"{self.dram.size // size} {mem} entries")
        return index

    def _check_sram(self, n: int, insn: vta.Instruction, mem: vta.Mem, last: int) -> None:
        depth = len(self._buffer(mem))
        if last >= depth:
            raise SimulationError("buffer_overflow", f"instruction {n} ({insn}): writes {mem} "
                                  f"buffer entry {last}, past its {depth} entries")

    def load(self, n: int, insn: vta.Load) -> None:
        top, bottom, left, right = insn.pad
        rows, cols = insn.y_size + top + bottom, insn.x_size + left + right
        self._check_sram(n, insn, insn.mem, insn.sram_base + rows * cols - 1)
        size = self.config.entry_bytes(insn.mem)
        index = self._dram_entries(n, insn, insn.mem)
        raw = self.dram[: self.dram.size // size * size].reshape(-1, size)[index]
        buf = self._buffer(insn.mem)
        if insn.mem is vta.Mem.UOP:
            words = raw.view("<u4").reshape(-1).astype(np.int64)
            dst_bits, src_bits = vta.UOP_BITS["dst"], vta.UOP_BITS["src"]
            values = np.stack([words & ((1 << dst_bits) - 1),
                               (words >> dst_bits) & ((1 << src_bits) - 1),
                               words >> (dst_bits + src_bits)], axis=1)
        else:
            dtype = "<i4" if insn.mem is vta.Mem.ACC else np.int8
            values = raw.view(dtype).reshape(-1, *buf.shape[1:])
        tile = np.zeros((rows, cols, *buf.shape[1:]), buf.dtype)
        tile[top: top + insn.y_size, left: left + insn.x_size] = values.reshape(
            insn.y_size, insn.x_size, *buf.shape[1:])
        buf[insn.sram_base: insn.sram_base + rows * cols] = tile.reshape(-1, *buf.shape[1:])
        if insn.mem is vta.Mem.ACC:
            span = slice(insn.sram_base, insn.sram_base + rows * cols)
            self.out[span] = self.acc[span].astype(np.int8)

    def store(self, n: int, insn: vta.Store) -> None:
        count = insn.y_size * insn.x_size
        self._check_sram(n, insn, vta.Mem.OUT, insn.sram_base + count - 1)
        size = self.config.entry_bytes(vta.Mem.OUT)
        index = self._dram_entries(n, insn, vta.Mem.OUT)
        view = self.dram[: self.dram.size // size * size].reshape(-1, size)
        view[index] = self.out[insn.sram_base: insn.sram_base + count].reshape(
            count, -1).view(np.uint8)

    # ------------------------------------------------------------------ compute
    def _chunks(self, n: int, insn: vta.Gemm | vta.Alu
                ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The micro-op executions in the hardware's order, ``_CHUNK`` at a time: their dst,
        src and wgt entries. Every index is checked first (their largest values follow
        from the loop bounds: the factors are not negative)."""
        lp: vta.Loops = insn.loops
        if lp.uop_end > len(self.uop):
            raise SimulationError("bad_uop", f"instruction {n} ({insn}): micro-ops up to "
                                  f"{lp.uop_end} of a {len(self.uop)}-entry buffer")
        uops = self.uop[lp.uop_bgn: lp.uop_end]
        factors = ((lp.dst_out, lp.dst_in), (lp.src_out, lp.src_in), (lp.wgt_out, lp.wgt_in))
        limits = {"dst": len(self.acc)}
        if isinstance(insn, vta.Gemm):
            limits.update(src=len(self.inp), wgt=len(self.wgt))
        elif insn.imm is None:
            limits["src"] = len(self.acc)
        for col, (name, (out, inner)) in enumerate(zip(("dst", "src", "wgt"), factors,
                                                       strict=True)):
            top = int(uops[:, col].max()) + (lp.iter_out - 1) * out + (lp.iter_in - 1) * inner
            if name in limits and top >= limits[name]:
                raise SimulationError("bad_uop", f"instruction {n} ({insn}): a micro-op's "
                                      f"{name} reaches entry {top} of {limits[name]}")
        per_i = lp.iter_in * len(uops)
        for lo in range(0, lp.count, _CHUNK):
            flat = np.arange(lo, min(lo + _CHUNK, lp.count), dtype=np.int64)
            i, j, u = flat // per_i, flat // len(uops) % lp.iter_in, flat % len(uops)
            yield tuple(uops[u, col] + i * out + j * inner  # type: ignore[misc]
                        for col, (out, inner) in enumerate(factors))

    def gemm(self, n: int, insn: vta.Gemm) -> None:
        acc = self.acc.astype(np.int64)
        touched = np.zeros(len(acc), bool)
        for dst, src, wgt in self._chunks(n, insn):
            touched[dst] = True
            if insn.reset:
                acc[dst] = 0
                continue
            products = np.einsum("nbk,nok->nbo", self.inp[src].astype(np.int64),
                                 self.wgt[wgt].astype(np.int64))
            np.add.at(acc, dst, products)
        self.acc[touched] = _wrap32(acc[touched])
        self.out[touched] = self.acc[touched].astype(np.int8)

    def alu(self, n: int, insn: vta.Alu) -> None:
        for dst, src, _ in self._chunks(n, insn):
            for d, s in zip(dst.tolist(), src.tolist(), strict=True):  # in order: dst repeats
                a = self.acc[d].astype(np.int64)
                b = np.int64(insn.imm) if insn.imm is not None else \
                    self.acc[s].astype(np.int64)
                self.acc[d] = _wrap32(_alu(insn.op, a, b))
                self.out[d] = self.acc[d].astype(np.int8)

    def execute(self, n: int, insn: vta.Instruction) -> None:
        if isinstance(insn, vta.Load):
            self.load(n, insn)
        elif isinstance(insn, vta.Store):
            self.store(n, insn)
        elif isinstance(insn, vta.Gemm):
            self.gemm(n, insn)
        elif isinstance(insn, vta.Alu):
            self.alu(n, insn)
        elif not isinstance(insn, vta.Finish):
            raise SimulationError("bad_program", f"instruction {n}: not an instruction: "
                                  f"{type(insn).__name__}")


def _wrap32(values: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int32, as 32-bit hardware arithmetic does."""
    return (values & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _alu(op: vta.AluOp, a: np.ndarray, b: np.ndarray | np.int64) -> np.ndarray:
    if op is vta.AluOp.MIN:
        return np.minimum(a, b)
    if op is vta.AluOp.MAX:
        return np.maximum(a, b)
    if op is vta.AluOp.ADD:
        return a + b
    if op is vta.AluOp.MUL:
        return a * b
    shift = np.clip(b, -31, 31)  # shr: a negative amount shifts left
    return np.where(shift >= 0, a >> np.maximum(shift, 0), a << np.maximum(-shift, 0))
