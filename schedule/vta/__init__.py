"""The ``vta`` target's accelerator as data: its configuration (GEMM shape, buffers, clock,
bus) and its instruction set. Devices (``workers``) run programs of these instructions;
code generation for ``vta`` emits them."""

from .config import PRESETS, UOP_BITS, VtaConfig, VtaConfigError
from .isa import (
    Alu,
    AluOp,
    Deps,
    Finish,
    Gemm,
    Instruction,
    IsaError,
    Load,
    Loops,
    Mem,
    Module,
    Store,
    Uop,
    from_json,
    to_json,
)
from .kernels import DramImage, Kernel, matmul_kernel, pack_uops

__all__ = ["PRESETS", "UOP_BITS", "Alu", "AluOp", "Deps", "DramImage", "Finish", "Gemm",
           "Instruction", "IsaError", "Kernel", "Load", "Loops", "Mem", "Module", "Store", "Uop",
           "VtaConfig", "VtaConfigError", "from_json", "matmul_kernel", "pack_uops", "to_json"]
