"""The accelerator's instruction set, as data: what code generation emits for ``vta`` and
what a device (the simulator, or a board) runs.

Three in-order modules take the instructions: **load** (LOAD of input and weight tiles),
**compute** (LOAD of micro-ops and accumulators, GEMM, ALU, FINISH) and **store** (STORE of
the output buffer). Each instruction carries four dependency flags: it *pops* a token from
its previous / next module before it starts and *pushes* one to them when it is done
(load's next is compute, compute's previous is load and its next is store). Tokens are
how a program says "this tile is loaded" (load -> compute) or "this buffer may be
overwritten" (compute -> load), so that the modules overlap safely.

- ``Load(mem, sram_base, dram_base, y_size, x_size, x_stride, pad)``: a 2-D strided DMA of
  ``y_size`` rows of ``x_size`` entries (rows ``x_stride`` entries apart in DRAM) into the
  ``mem`` buffer from entry ``sram_base``, with ``pad = (top, bottom, left, right)`` rows and
  columns of zeros written around it (no DRAM traffic for them). DRAM addresses count
  entries of the buffer's kind.
- ``Store(...)``: the same DMA from the output buffer to DRAM (no padding).
- ``Gemm(loops, reset)``: ``for i < iter_out, j < iter_in, uop in [uop_bgn, uop_end)``:
  ``acc[d] = (0 if reset else acc[d]) + inp[s] . wgt[w]^T`` with
  ``d = uop.dst + i*dst_out + j*dst_in`` (likewise ``s``, ``w``).
- ``Alu(op, loops, imm)``: ``acc[d] = op(acc[d], imm if imm is not None else acc[s])`` for
  ``op`` in min, max, add, shr (arithmetic shift right), mul.
- ``Finish()``: the end of the program (compute module).

Every accumulator write also writes the output buffer entry, truncated to int8.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from .config import UOP_BITS


class IsaError(ValueError):
    """A malformed instruction or micro-op; the message names the field."""


class Module(StrEnum):
    LOAD = "load"
    COMPUTE = "compute"
    STORE = "store"


class Mem(StrEnum):
    UOP = "uop"
    WGT = "wgt"
    INP = "inp"
    ACC = "acc"
    OUT = "out"


class AluOp(StrEnum):
    MIN = "min"
    MAX = "max"
    ADD = "add"
    SHR = "shr"
    MUL = "mul"


_FIELD_MAX = (1 << 16) - 1  # sram addresses, sizes and strides are 16-bit fields
_DRAM_MAX = (1 << 32) - 1
_PAD_MAX = 15  # 4-bit padding fields
_ITER_MAX = (1 << 14) - 1


def _check(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise IsaError(f"{name}: an integer in {low}..{high}, got {value!r}")


@dataclass(frozen=True)
class Deps:
    """Dependency flags: tokens popped before the instruction starts, pushed after it."""

    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, bool):
                raise IsaError(f"deps.{name}: true or false, got {value!r}")

    def __str__(self) -> str:
        names = [n.replace("_", " ") for n, v in asdict(self).items() if v]
        return f"  [{', '.join(names)}]" if names else ""


@dataclass(frozen=True)
class Uop:
    """A micro-op: the accumulator, source (input or accumulator) and weight entries."""

    dst: int
    src: int
    wgt: int = 0

    def __post_init__(self) -> None:
        for name, bits in UOP_BITS.items():
            _check(f"uop.{name}", getattr(self, name), 0, (1 << bits) - 1)

    def pack(self) -> int:
        """As the 32-bit word stored in DRAM (dst low, then src, then wgt)."""
        return self.dst | self.src << UOP_BITS["dst"] | \
            self.wgt << (UOP_BITS["dst"] + UOP_BITS["src"])

    @classmethod
    def unpack(cls, word: int) -> Uop:
        dst_bits, src_bits = UOP_BITS["dst"], UOP_BITS["src"]
        return cls(word & ((1 << dst_bits) - 1), (word >> dst_bits) & ((1 << src_bits) - 1),
                   word >> (dst_bits + src_bits))


@dataclass(frozen=True)
class Loops:
    """The two-level loop of a GEMM or ALU instruction around micro-ops
    ``[uop_bgn, uop_end)``, with each index's factor per loop level."""

    uop_bgn: int
    uop_end: int
    iter_out: int = 1
    iter_in: int = 1
    dst_out: int = 0
    dst_in: int = 0
    src_out: int = 0
    src_in: int = 0
    wgt_out: int = 0
    wgt_in: int = 0

    def __post_init__(self) -> None:
        _check("uop_bgn", self.uop_bgn, 0, _FIELD_MAX)
        _check("uop_end", self.uop_end, self.uop_bgn + 1, _FIELD_MAX + 1)
        for name in ("iter_out", "iter_in"):
            _check(name, getattr(self, name), 1, _ITER_MAX)
        for name in ("dst_out", "dst_in", "src_out", "src_in", "wgt_out", "wgt_in"):
            _check(name, getattr(self, name), 0, _FIELD_MAX)

    @property
    def count(self) -> int:
        """Micro-op executions: one core operation each."""
        return self.iter_out * self.iter_in * (self.uop_end - self.uop_bgn)

    def __str__(self) -> str:
        return (f"uops [{self.uop_bgn},{self.uop_end}) x {self.iter_out} x {self.iter_in} "
                f"dst+={self.dst_out},{self.dst_in} src+={self.src_out},{self.src_in} "
                f"wgt+={self.wgt_out},{self.wgt_in}")


@dataclass(frozen=True)
class Load:
    mem: Mem
    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, bottom, left, right
    deps: Deps = field(default_factory=Deps)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mem", _enum(Mem, self.mem, "mem"))
        if self.mem is Mem.OUT:
            raise IsaError("mem: LOAD reads uop, wgt, inp or acc (out is stored, not loaded)")
        _dma_fields(self)
        pad = tuple(self.pad) if isinstance(self.pad, list | tuple) else self.pad
        if not isinstance(pad, tuple) or len(pad) != 4:
            raise IsaError(f"pad: (top, bottom, left, right), got {self.pad!r}")
        for name, value in zip(("top", "bottom", "left", "right"), pad, strict=True):
            _check(f"pad.{name}", value, 0, _PAD_MAX)
        if any(pad) and self.mem in (Mem.UOP, Mem.WGT):
            raise IsaError(f"pad: {self.mem} loads are not padded")
        object.__setattr__(self, "pad", pad)

    @property
    def module(self) -> Module:
        return Module.LOAD if self.mem in (Mem.INP, Mem.WGT) else Module.COMPUTE

    @property
    def entries(self) -> int:
        """Buffer entries written, padding included."""
        return (self.y_size + self.pad[0] + self.pad[1]) * (self.x_size + self.pad[2]
                                                            + self.pad[3])

    def __str__(self) -> str:
        pad = f" pad={list(self.pad)}" if any(self.pad) else ""
        return (f"LOAD {self.mem} sram={self.sram_base} dram={self.dram_base} "
                f"{self.y_size}x{self.x_size} stride={self.x_stride}{pad}{self.deps}")


@dataclass(frozen=True)
class Store:
    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    deps: Deps = field(default_factory=Deps)
    module = Module.STORE

    def __post_init__(self) -> None:
        _dma_fields(self)

    @property
    def entries(self) -> int:
        return self.y_size * self.x_size

    def __str__(self) -> str:
        return (f"STORE out sram={self.sram_base} dram={self.dram_base} "
                f"{self.y_size}x{self.x_size} stride={self.x_stride}{self.deps}")


@dataclass(frozen=True)
class Gemm:
    loops: Loops
    reset: bool = False
    deps: Deps = field(default_factory=Deps)
    module = Module.COMPUTE

    def __str__(self) -> str:
        return f"GEMM{' reset' if self.reset else ''} {self.loops}{self.deps}"


@dataclass(frozen=True)
class Alu:
    op: AluOp
    loops: Loops
    imm: int | None = None
    deps: Deps = field(default_factory=Deps)
    module = Module.COMPUTE

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", _enum(AluOp, self.op, "op"))
        if self.imm is not None:
            _check("imm", self.imm, -(1 << 15), (1 << 15) - 1)

    def __str__(self) -> str:
        operand = f" imm={self.imm}" if self.imm is not None else ""
        return f"ALU {self.op}{operand} {self.loops}{self.deps}"


@dataclass(frozen=True)
class Finish:
    deps: Deps = field(default_factory=Deps)
    module = Module.COMPUTE

    def __str__(self) -> str:
        return f"FINISH{self.deps}"


Instruction = Load | Store | Gemm | Alu | Finish
_KINDS: dict[str, type] = {"load": Load, "store": Store, "gemm": Gemm, "alu": Alu,
                           "finish": Finish}


def _enum(kind: type[StrEnum], value: Any, name: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise IsaError(f"{name}: one of {', '.join(kind)}, got {value!r}") from None


def _dma_fields(insn: Load | Store) -> None:
    _check("sram_base", insn.sram_base, 0, _FIELD_MAX)
    _check("dram_base", insn.dram_base, 0, _DRAM_MAX)
    _check("y_size", insn.y_size, 1, _FIELD_MAX)
    _check("x_size", insn.x_size, 1, _FIELD_MAX)
    _check("x_stride", insn.x_stride, insn.x_size, _FIELD_MAX)
    if not isinstance(insn.deps, Deps):
        raise IsaError("deps: a Deps")


def to_json(insn: Instruction) -> dict[str, Any]:
    """An instruction as a JSON object (``{"op": "load", ...}``; an ALU's operation is
    ``"alu"``)."""
    doc = asdict(insn)
    if isinstance(insn, Alu):
        doc["alu"] = str(doc.pop("op"))
    if "mem" in doc:
        doc["mem"] = str(doc["mem"])
    if "pad" in doc:
        doc["pad"] = list(doc["pad"])
    return {"op": type(insn).__name__.lower(), **doc}


def from_json(doc: Any) -> Instruction:
    """The instruction of :func:`to_json`'s object; ``IsaError`` names a bad field."""
    if not isinstance(doc, dict) or doc.get("op") not in _KINDS:
        raise IsaError(f"an instruction is an object with 'op' one of {', '.join(_KINDS)}")
    doc = dict(doc)
    kind = _KINDS[doc.pop("op")]
    try:
        if "deps" in doc:
            doc["deps"] = Deps(**doc["deps"])
        if "loops" in doc:
            doc["loops"] = Loops(**doc["loops"])
        if kind is Alu:
            doc["op"] = doc.pop("alu", None)
        return kind(**doc)
    except TypeError as err:
        raise IsaError(f"{kind.__name__.lower()}: {err}") from None
