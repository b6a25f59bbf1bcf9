"""The ``vta`` target's accelerator as data: its configuration (GEMM shape, buffers, clock,
bus) and its instruction set; what a workload computes there (``compute``: packed layouts, the GEMM
intrinsic, the schedule template) and the code generation that turns a lowered schedule into
a program (``codegen``, ``program``). Devices (``workers``) run the programs."""

from .codegen import VtaCodegenError, compile_workload, generate
from .compute import GemmShape, Packing, Template, VtaCompute, VtaUnsupported, gemm_intrin
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
from .program import DramArg, VtaProgram

__all__ = ["PRESETS", "UOP_BITS", "Alu", "AluOp", "Deps", "DramArg", "DramImage", "Finish",
           "Gemm", "GemmShape", "Instruction", "IsaError", "Kernel", "Load", "Loops", "Mem",
           "Module", "Packing", "Store", "Template", "Uop", "VtaCodegenError", "VtaCompute",
           "VtaConfig", "VtaConfigError", "VtaProgram", "VtaUnsupported", "compile_workload",
           "from_json", "gemm_intrin", "generate", "matmul_kernel", "pack_uops", "to_json"]
