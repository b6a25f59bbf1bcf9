"""The foundation layer: tensor expressions, schedules and their steps, lowering to a loop
IR, and code generation for targets.

    from schedule import te, ops, build, lower

``loop_ir`` (the lowered program: loops, stores, buffers) and ``expr`` (its expression nodes)
are public for the layers that analyse lowered programs, such as the cost model's features.
GPU targets (``cuda``, ``opencl``): ``gpu_source`` prints a schedule as CUDA or OpenCL C with
its launch plan, ``OpenCLModule`` runs it through OpenCL, ``compile_cuda`` compiles it
with nvcc (checked with ptxas) and ``CudaModule`` runs the cubin through the CUDA driver.
"""

from . import cpu_intrin, expr, intrin, loop_ir, ops, te, vta
from .buffers import ALIGNMENT, PAGE, aligned, aligned_empty, allocator, buffer_alignment, placed
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
from .cuda_driver import CudaError, CudaUnavailable, cuda_missing
from .cuda_driver import round_trip as cuda_round_trip
from .dag import canonical_text, post_order, workload_key
from .gpu_build import (
    CudaModule,
    GpuSource,
    LaunchPlan,
    OpenCLModule,
    build_cuda,
    check_cuda_resources,
    compile_cuda,
    gpu_source,
    nvcc_path,
)
from .gpu_lower import lower_gpu
from .gpu_schedules import fallback_gpu_schedule
from .loop_ir import LoweredFunc
from .lower import lower
from .schedule import Schedule, ScheduleError
from .steps import Steps, make_schedule
from .target import Target, cuda_arch, host_cpu_target, nvidia_gpus, opencl_device_name
from .tensor import TensorExprError
from .workload import Workload

__all__ = [
    "ALIGNMENT",
    "PAGE",
    "Artifact",
    "BuildError",
    "CompileTimeout",
    "CudaError",
    "CudaModule",
    "CudaUnavailable",
    "GpuSource",
    "KernelSignature",
    "KernelSource",
    "LaunchPlan",
    "LoweredFunc",
    "Module",
    "OpenCLModule",
    "Schedule",
    "ScheduleError",
    "Steps",
    "Target",
    "TensorExprError",
    "Workload",
    "aligned",
    "aligned_empty",
    "allocator",
    "buffer_alignment",
    "build",
    "build_cuda",
    "canonical_text",
    "check_cuda_resources",
    "compile_cuda",
    "compile_library",
    "compile_schedule",
    "compile_source",
    "cpu_intrin",
    "cuda_arch",
    "cuda_missing",
    "cuda_round_trip",
    "expr",
    "fallback_gpu_schedule",
    "gpu_source",
    "host_cpu_target",
    "intrin",
    "kernel_source",
    "load_module",
    "loop_ir",
    "lower",
    "lower_gpu",
    "make_schedule",
    "nvcc_path",
    "nvidia_gpus",
    "opencl_device_name",
    "ops",
    "placed",
    "post_order",
    "te",
    "vta",
    "workload_key",
]
