"""Backends of the graph IR: lowering fused functions to workloads (tuning tasks), the
build pipeline, and the executors.

- ``lower_primitive``: a ``Primitive`` function -> its tensor-expression DAG ``Workload``.
- ``optimize``, ``extract_tasks``, ``build`` (-> ``CompiledModel`` on the graph executor).
- ``runtime``: the standalone graph runtime (numpy + ctypes only); ``runtime.load`` loads an
  exported model.
"""

from . import runtime
from .build import CompiledModel, Task, TaskReport, build, extract_tasks, optimize
from .graph_executor import GraphBuildError, plan_graph, plan_memory
from .lower import LoweredFunction, lower_primitive

__all__ = ["CompiledModel", "GraphBuildError", "LoweredFunction", "Task", "TaskReport", "build",
           "extract_tasks", "lower_primitive", "optimize", "plan_graph", "plan_memory",
           "runtime"]
