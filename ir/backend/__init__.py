"""Backends of the graph IR: lowering fused functions to workloads (tuning tasks), the
build pipeline, and the executors.

- ``lower_primitive``: a ``Primitive`` function -> its tensor-expression DAG ``Workload``.
- ``optimize``, ``extract_tasks``, ``build`` (-> ``CompiledModel`` on the graph executor).
- ``vm``: the virtual machine for programs with control flow: ``vm.compile`` (->
  ``VMExecutable``: bytecode and kernels), ``VirtualMachine(executable)(*args)``.
- ``runtime``: the standalone graph runtime (numpy + ctypes only); ``runtime.load`` loads an
  exported model.
- ``external``: external codegens (bring your own codegen): ``ExternalCodegen``,
  ``register_codegen``; ``external_blas`` registers ``blas`` (numpy's BLAS).
- ``aot_compile`` (-> ``AotModel``): the whole model as one C translation unit in one
  library; ``aot.load`` loads an exported one (``aot_runtime``: numpy + ctypes only).
"""

from . import aot_runtime, external, external_blas, runtime, vm
from .aot import AotCompileError, AotModel, aot_compile
from .build import (
    CompiledModel,
    Task,
    TaskReport,
    build,
    extract_tasks,
    optimize,
    tuned_flops_share,
)
from .external import ExternalCodegen, ExternalModule, get_codegen, list_codegens, register_codegen
from .graph_executor import GraphBuildError, plan_graph, plan_memory
from .lower import LoweredFunction, lower_primitive
from .vm import VirtualMachine, VMClosure, VMError, VMExecutable, VMStats
from .vm_compiler import VMCompileError

__all__ = ["AotCompileError", "AotModel", "CompiledModel", "ExternalCodegen", "ExternalModule",
           "GraphBuildError", "LoweredFunction", "Task", "TaskReport", "VMClosure",
           "VMCompileError", "VMError", "VMExecutable", "VMStats", "VirtualMachine",
           "aot_compile", "aot_runtime", "build", "external", "external_blas", "extract_tasks",
           "get_codegen", "list_codegens", "lower_primitive", "optimize", "plan_graph",
           "plan_memory", "register_codegen", "runtime", "tuned_flops_share", "vm"]
