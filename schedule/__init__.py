"""The foundation layer: tensor expressions, schedules and their steps, lowering to a loop
IR, and code generation for targets.

    from schedule import te, ops, build, lower

``loop_ir`` (the lowered program: loops, stores, buffers) and ``expr`` (its expression nodes)
are public for the layers that analyse lowered programs, such as the cost model's features.
"""

from . import cpu_intrin, expr, intrin, loop_ir, ops, te, vta
from .build import (
    Artifact,
    BuildError,
    CompileTimeout,
    KernelSignature,
    KernelSource,
    Module,
    build,
    compile_library,
    compile_schedule,
    compile_source,
    kernel_source,
    load_module,
)
from .dag import canonical_text, post_order, workload_key
from .loop_ir import LoweredFunc
from .lower import lower
from .schedule import Schedule, ScheduleError
from .steps import Steps, make_schedule
from .target import Target, host_cpu_target
from .tensor import TensorExprError
from .workload import Workload

__all__ = [
    "Artifact",
    "BuildError",
    "CompileTimeout",
    "KernelSignature",
    "KernelSource",
    "LoweredFunc",
    "Module",
    "Schedule",
    "ScheduleError",
    "Steps",
    "Target",
    "TensorExprError",
    "Workload",
    "build",
    "canonical_text",
    "compile_library",
    "compile_schedule",
    "compile_source",
    "cpu_intrin",
    "expr",
    "host_cpu_target",
    "intrin",
    "kernel_source",
    "load_module",
    "loop_ir",
    "lower",
    "make_schedule",
    "ops",
    "post_order",
    "te",
    "vta",
    "workload_key",
]
