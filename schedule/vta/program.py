"""A compiled ``vta`` program as data: the instruction stream, the micro-op kernels, and
where each argument lives in DRAM. It travels as JSON (what a build produces and a device
— the simulator or a board's server — runs), and prints as a readable listing."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .config import VtaConfig
from .isa import Gemm, Instruction, IsaError, Load, Store, Uop, from_json, to_json
from .kernels import pack_uops

#: A program's size limit (instructions), so that a malformed one cannot exhaust a device.
MAX_INSTRUCTIONS = 1_000_000


@dataclass(frozen=True)
class DramArg:
    """A memory argument: its buffer kind (inp, wgt or out), packed shape, dtype and first
    entry (in entries of its kind)."""

    name: str
    mem: str
    shape: list[int]
    dtype: str
    base: int


@dataclass
class VtaProgram:
    instructions: list[Instruction]
    uops: list[Uop]
    args: list[DramArg]
    uop_base: int  # in 4-byte micro-op entries
    dram_bytes: int
    buffer_use: dict[str, int] = field(default_factory=dict)  # peak entries per buffer

    # ------------------------------------------------------------------ DRAM
    def dram_image(self, inputs: list[np.ndarray], config: VtaConfig) -> np.ndarray:
        """The DRAM the program starts from: the packed inputs, in argument order, and the
        micro-ops."""
        dram = np.zeros(self.dram_bytes, np.uint8)
        ins = [a for a in self.args if a.mem != "out"]
        if len(inputs) != len(ins):
            raise ValueError(f"vta program: {len(ins)} inputs expected, got {len(inputs)}")
        for arg, array in zip(ins, inputs, strict=True):
            if list(array.shape) != arg.shape or array.dtype != np.dtype(arg.dtype):
                raise ValueError(f"vta program: input {arg.name} must be {arg.dtype}"
                                 f"{arg.shape}, got {array.dtype}{list(array.shape)}")
            start = arg.base * config.entry_bytes(arg.mem)
            raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
            dram[start: start + raw.size] = raw
        words = pack_uops(self.uops)
        dram[self.uop_base * 4: self.uop_base * 4 + words.size] = words
        return dram

    def output(self, dram: np.ndarray, config: VtaConfig) -> np.ndarray:
        """The (packed) output in a DRAM image after a run."""
        arg = next(a for a in self.args if a.mem == "out")
        start = arg.base * config.entry_bytes("out")
        count = int(np.prod(arg.shape))
        return dram[start: start + count].view(np.int8).reshape(arg.shape).copy()

    # ------------------------------------------------------------------ facts
    def stats(self, config: VtaConfig) -> dict[str, Any]:
        """Static facts: instruction counts by kind, DMA bytes, GEMM micro-op executions
        (core operations) and the buffers' peak use."""
        kinds = Counter(type(i).__name__.lower() for i in self.instructions)
        dma = sum(i.y_size * i.x_size * config.entry_bytes(i.mem if isinstance(i, Load)
                                                           else "out")
                  for i in self.instructions if isinstance(i, Load | Store))
        gemm_ops = sum(i.loops.count for i in self.instructions
                       if isinstance(i, Gemm) and not i.reset)
        return {"instructions": len(self.instructions), "by_kind": dict(kinds),
                "dma_bytes": int(dma), "gemm_ops": int(gemm_ops), "uops": len(self.uops),
                "buffer_use": dict(self.buffer_use)}

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        return {"instructions": [to_json(i) for i in self.instructions],
                "uops": [u.pack() for u in self.uops],
                "args": [vars(a) for a in self.args], "uop_base": self.uop_base,
                "dram_bytes": self.dram_bytes, "buffer_use": self.buffer_use}

    def dumps(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, doc: Any) -> VtaProgram:
        """Parse a program (an object, or its JSON text); ``IsaError`` names what is
        malformed."""
        if isinstance(doc, bytes | str):
            try:
                doc = json.loads(doc)
            except ValueError as err:
                raise IsaError(f"a vta program is JSON: {err}") from None
        try:
            insns = doc["instructions"]
            if not isinstance(insns, list) or len(insns) > MAX_INSTRUCTIONS:
                raise IsaError(f"instructions: a list of at most {MAX_INSTRUCTIONS}")
            uops = [Uop.unpack(int(w)) for w in doc["uops"]]
            args = [DramArg(str(a["name"]), str(a["mem"]), [int(x) for x in a["shape"]],
                            str(a["dtype"]), int(a["base"])) for a in doc["args"]]
            program = cls([from_json(i) for i in insns], uops, args, int(doc["uop_base"]),
                          int(doc["dram_bytes"]), dict(doc.get("buffer_use", {})))
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, IsaError):
                raise
            raise IsaError(f"a malformed vta program: {err!r}") from None
        if not 0 <= program.dram_bytes <= 1 << 31:
            raise IsaError("dram_bytes: 0 to 2 GiB")
        return program

    def __str__(self) -> str:
        lines = [f"vta program: {len(self.instructions)} instructions, {len(self.uops)} "
                 f"micro-ops, {self.dram_bytes} bytes of DRAM"]
        lines += [f"  arg {a.name}: {a.mem} {a.dtype}{a.shape} at entry {a.base}"
                  for a in self.args]
        lines += [f"  {n:5d}  {i}" for n, i in enumerate(self.instructions)]
        return "\n".join(lines)
