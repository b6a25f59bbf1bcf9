"""The configuration of a VTA-style accelerator: the GEMM core's shape (from the target's
``-config=BATCHxBLOCK_INxBLOCK_OUT``), the on-chip buffers, the clock and the DRAM bus.

Buffers hold *entries*: an input entry is ``BATCH x BLOCK_IN`` int8 values, a weight entry
``BLOCK_OUT x BLOCK_IN`` int8, an accumulator entry ``BATCH x BLOCK_OUT`` int32 (the output
buffer mirrors it in int8), a micro-op 4 bytes. The defaults are VTA's (32 KiB input, 256 KiB
weight, 128 KiB accumulator, 32 KiB micro-op); presets name the clock and bus of a board:
``pynq`` (100 MHz, 64-bit bus, VTA's Pynq-Z1 default) and ``ultra96`` (333 MHz, 128-bit).
A configuration is also read from JSON (``VtaConfig.from_json``), e.g. a board's file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..target import Target

KIB = 1024
#: Micro-op fields (bits): destination (accumulator), source (input or accumulator), weight.
UOP_BITS = {"dst": 11, "src": 11, "wgt": 10}

PRESETS: dict[str, dict[str, Any]] = {
    "pynq": {"clock_mhz": 100.0, "bus_bytes": 8},
    "ultra96": {"clock_mhz": 333.0, "bus_bytes": 16},
}


class VtaConfigError(ValueError):
    """A configuration the accelerator model cannot have; the message names the field."""


@dataclass(frozen=True)
class VtaConfig:
    """One accelerator. ``*_bytes``: buffer capacities; ``queue_depth``: the command and
    dependency-token queues' capacity; ``dma_latency``: cycles from a DMA request to its
    first beat."""

    batch: int = 1
    block_in: int = 16
    block_out: int = 16
    inp_bytes: int = 32 * KIB
    wgt_bytes: int = 256 * KIB
    acc_bytes: int = 128 * KIB
    uop_bytes: int = 32 * KIB
    clock_mhz: float = 100.0
    bus_bytes: int = 8
    queue_depth: int = 8
    dma_latency: int = 16
    name: str = "pynq"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "name":
                if not isinstance(value, str) or not value or len(value) > 64:
                    raise VtaConfigError("name: 1 to 64 characters")
            elif f.name == "clock_mhz":
                if isinstance(value, bool) or not isinstance(value, int | float) or \
                        not 1.0 <= value <= 10_000.0:
                    raise VtaConfigError(f"clock_mhz: 1 to 10000, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise VtaConfigError(f"{f.name}: a positive integer, got {value!r}")
        for name in ("batch", "block_in", "block_out", "bus_bytes"):
            if getattr(self, name) & (getattr(self, name) - 1):
                raise VtaConfigError(f"{name}: a power of two, got {getattr(self, name)}")
        for name, entry in (("inp_bytes", self.inp_entry_bytes),
                            ("wgt_bytes", self.wgt_entry_bytes),
                            ("acc_bytes", self.acc_entry_bytes), ("uop_bytes", 4)):
            if getattr(self, name) % entry:
                raise VtaConfigError(f"{name}: a multiple of its entry size {entry}")
        for field, depth in (("dst", self.acc_depth), ("src", max(self.inp_depth,
                                                                   self.acc_depth)),
                             ("wgt", self.wgt_depth)):
            if depth > 1 << UOP_BITS[field]:
                raise VtaConfigError(f"a micro-op's {field} field ({UOP_BITS[field]} bits) "
                                     f"cannot address {depth} buffer entries")

    # ------------------------------------------------------------------ entries
    @property
    def inp_entry_bytes(self) -> int:
        return self.batch * self.block_in

    @property
    def wgt_entry_bytes(self) -> int:
        return self.block_out * self.block_in

    @property
    def acc_entry_bytes(self) -> int:
        return self.batch * self.block_out * 4

    @property
    def out_entry_bytes(self) -> int:
        return self.batch * self.block_out

    def entry_bytes(self, mem: str) -> int:
        """The bytes of one entry of buffer ``mem`` (inp, wgt, acc, out, uop) in DRAM."""
        return {"inp": self.inp_entry_bytes, "wgt": self.wgt_entry_bytes,
                "acc": self.acc_entry_bytes, "out": self.out_entry_bytes, "uop": 4}[mem]

    @property
    def inp_depth(self) -> int:
        return self.inp_bytes // self.inp_entry_bytes

    @property
    def wgt_depth(self) -> int:
        return self.wgt_bytes // self.wgt_entry_bytes

    @property
    def acc_depth(self) -> int:
        return self.acc_bytes // self.acc_entry_bytes

    @property
    def uop_depth(self) -> int:
        return self.uop_bytes // 4

    @property
    def macs_per_cycle(self) -> int:
        """The GEMM core's peak: one BATCH x BLOCK_IN by BLOCK_IN x BLOCK_OUT product."""
        return self.batch * self.block_in * self.block_out

    def seconds(self, cycles: float) -> float:
        return cycles / (self.clock_mhz * 1e6)

    # ------------------------------------------------------------------ construction
    @classmethod
    def for_target(cls, target: Target | str, preset: str = "pynq") -> VtaConfig:
        """The configuration of a ``vta`` target's GEMM shape on a board ``preset``."""
        target = Target.parse(target)
        if target.kind != "vta":
            raise VtaConfigError(f"not a vta target: {target}")
        if preset not in PRESETS:
            raise VtaConfigError(f"unknown preset {preset!r}; one of {', '.join(PRESETS)}")
        return cls(batch=target.batch, block_in=target.block_in, block_out=target.block_out,
                   name=preset, **PRESETS[preset])

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Any) -> VtaConfig:
        """From a JSON object (a parsed document, or its text) of these fields; a
        ``preset`` field fills clock and bus first."""
        if isinstance(doc, str | bytes):
            try:
                doc = json.loads(doc)
            except ValueError as err:
                raise VtaConfigError(f"not JSON: {err}") from None
        if not isinstance(doc, Mapping):
            raise VtaConfigError("a vta configuration is a JSON object")
        doc = dict(doc)
        preset = doc.pop("preset", None)
        if preset is not None:
            if preset not in PRESETS:
                raise VtaConfigError(f"unknown preset {preset!r}; one of {', '.join(PRESETS)}")
            doc = {**PRESETS[preset], "name": preset, **doc}
        names = {f.name for f in fields(cls)}
        extra = sorted(set(doc) - names)
        if extra:
            raise VtaConfigError(f"unexpected field(s) {extra}; accepted: {sorted(names)}")
        return cls(**doc)
