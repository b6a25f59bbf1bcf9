"""``ir.build``: optimise, fuse, lower each fused function to a workload, schedule it with
the steps the caller supplies (or the default schedule), compile every kernel into one
library, and return a runnable model on the graph executor.

``optimize(module)`` is THE pipeline: task extraction (``extract_tasks``) and ``build``
both run it, so a task's workload key at build time is the key it was tuned under.

``schedules`` maps a workload to its steps: a ``Mapping`` from workload key to steps, or
a callable ``schedules(workload) -> steps | None`` (``tuner.compile`` passes one that asks
the database). ``ir`` knows nothing of the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..expr import Call, Function
from ..module import Module
from ..transform import (
    ConvertLayout,
    DeadCodeElimination,
    EliminateCommonSubexpr,
    FoldConstant,
    FoldScaleAxis,
    InferType,
    PassContext,
    Sequential,
    SimplifyInference,
)
from ..transform.fuse_ops import FuseOps
from ..transform.pack_dense import PackDenseWeights
from ..transform.pack_int8 import PackInt8Convolutions
from ..transform.sink_reshape import SinkReshape
from ..transform.winograd import ConvertWinograd
from ..visitor import ExprVisitor
from .graph_executor import GraphBuildError, GraphPlan, MemoryPlan, plan_graph, plan_memory
from .lower import LoweredFunction, lower_primitive, operator_names
from .runtime import GRAPH_VERSION, GraphRuntime, save_artifact

__all__ = ["CompiledModel", "Task", "TaskReport", "build", "extract_tasks", "optimize",
           "tuned_flops_share"]

Schedules = Mapping[str, Any] | Callable[[Any], Any] | None


def optimize(module: Module, opt_level: int = 3, target: Any = None) -> Module:
    """The optimisation and fusion pipeline shared by task extraction and build. For a CPU
    ``target`` the convolutions run on channels packed in blocks of its float32 vector
    lanes (``ConvertLayout`` to ``NCHW<lanes>c``; the large 3x3 stride-1 ones by Winograd's
    F(4x4, 3x3): ``ConvertWinograd``), quantized ones on the 8-bit dot
    product's layouts (``PackInt8Convolutions``), and products by a constant matrix read
    it in panels of that many columns (``PackDenseWeights``). Element-wise operators move
    before reshapes (``SinkReshape``) so that products absorb their bias and activation."""
    passes = [InferType(), SimplifyInference(), FoldConstant(), FoldScaleAxis()]
    lanes = _float32_lanes(target)
    if lanes is not None:
        passes.append(PackInt8Convolutions())
        passes.append(ConvertLayout({"nn.conv2d": (f"NCHW{lanes}c", "default")}))
        passes.append(ConvertWinograd())
        passes.append(PackDenseWeights(lanes))
    passes += [SinkReshape(), FoldConstant(), EliminateCommonSubexpr(), DeadCodeElimination()]
    passes += [InlineExternal(), FuseOps(), InferType()]
    outer = PassContext.current()  # passes disabled or required around the call still are
    with PassContext(opt_level=opt_level, disabled_pass=outer.disabled_pass,
                     required_pass=outer.required_pass, config=outer.config):
        return Sequential(passes, "Optimize")(module)


def InlineExternal() -> Any:
    """Calls of partitioned global functions (``Compiler`` attribute) become calls of the
    functions themselves, which fusion keeps whole (they are ``Primitive``) and the
    executors hand to their codegens."""
    from ..expr import GlobalVar
    from ..transform.pass_infra import module_pass
    from ..visitor import ExprMutator

    class Inline(ExprMutator):
        def __init__(self, module: Module):
            super().__init__()
            self.module = module

        def visit_call(self, e: Call) -> Any:
            call = super().visit_call(e)
            if isinstance(e.op, GlobalVar) and self.module[e.op].attrs.get("Compiler"):
                return Call(self.module[e.op], call.args, call.attrs, span=call.span)
            return call

    def run(module: Module, ctx: Any) -> Module:
        if not any(f.attrs.get("Compiler") for f in module.functions.values()):
            return module
        out = module.copy()
        for gv, func in module.functions.items():
            if not func.attrs.get("Compiler"):
                out.add(gv, Function(func.params, Inline(module).visit(func.body),
                                     func.ret_type, func.type_params, func.attrs),
                        update=True)
        return out

    return module_pass("InlineExternal", 0)(run)


def _float32_lanes(target: Any) -> int | None:
    """The float32 vector lanes of a CPU target (None for no target or another kind)."""
    if target is None:
        return None
    from schedule import Target

    target = target if isinstance(target, Target) else Target.parse(target)
    return max(1, target.vector_bits // 32) if target.kind == "cpu" else None


@dataclass
class Task:
    """A tuning task of a model: a fused function's workload and how often it runs."""

    workload: Any
    weight: int
    flops: float
    name: str
    ops: list[str]


class _PrimitiveCalls(ExprVisitor):
    """Collects the calls of ``Primitive`` functions, in evaluation order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Function] = []

    def visit_call(self, e: Call) -> None:
        super().visit_call(e)
        if isinstance(e.op, Function) and e.op.attrs.get("Primitive"):
            self.found.append(e.op)


def _primitive_calls(module: Module) -> list[Function]:
    """The primitive functions called in the module's functions, in order, with repeats."""
    collector = _PrimitiveCalls()
    for func in module.functions.values():
        if not func.attrs.get("Primitive"):
            collector.visit(func.body)
    return collector.found


def extract_tasks(module: Module, target: Any = "cpu", opt_level: int = 3) -> list[Task]:
    """The model's tuning tasks after the build pipeline: one per distinct fused workload,
    weighted by its number of occurrences, in order of first occurrence. Fused functions
    without a lowering are not tasks (they run on numpy), nor are partitioned functions
    (their external codegen runs them)."""
    fused = optimize(module, opt_level, target)
    tasks: dict[str, Task] = {}
    for func in _primitive_calls(fused):
        if func.attrs.get("Compiler"):
            continue
        lowered = lower_primitive(func)
        if lowered.workload is None:
            continue
        key = lowered.workload.key
        if key in tasks:
            tasks[key].weight += 1
        else:
            tasks[key] = Task(lowered.workload, 1, lowered.workload.flops, lowered.name,
                              operator_names(func))
    return list(tasks.values())


@dataclass
class TaskReport:
    """How one fused function was built: its workload key, tuned or default schedule."""

    name: str
    key: str | None
    count: int
    flops: float
    tuned: bool
    note: str = ""


@dataclass
class CompiledModel:
    """A model built for the graph executor: call it on numpy arrays."""

    runtime: GraphRuntime
    graph: dict[str, Any]
    params: dict[str, np.ndarray]
    library: Any
    tasks: list[TaskReport] = field(default_factory=list)
    memory: Any = None
    build_seconds: float = 0.0
    exportable: bool = True

    def __call__(self, *args: np.ndarray, **kwargs: np.ndarray) -> Any:
        return self.runtime(*args, **kwargs)

    @property
    def input_names(self) -> list[str]:
        return self.runtime.input_names

    def export(self, path: Any) -> Any:
        """Save as one self-contained file (graph, weights, kernel library, the runtime):
        it loads with ``runtime.load(path)`` where only numpy is installed."""
        if not self.exportable:
            raise GraphBuildError("the model has fused functions without compiled kernels "
                                  "(they run on numpy here): it cannot be exported")
        return save_artifact(path, self.graph, self.params, self.library)

    def tuned_share(self) -> float:
        """The share of the model's FLOPs whose kernels use tuned schedules."""
        return tuned_flops_share(self.tasks)


def tuned_flops_share(tasks: list[TaskReport]) -> float:
    """The share of a build's FLOPs (``TaskReport``s: flops x count) with tuned schedules."""
    total = sum(t.flops * t.count for t in tasks)
    return sum(t.flops * t.count for t in tasks if t.tuned) / total if total else 0.0


def _steps_for(schedules: Schedules, workload: Any) -> Any:
    if schedules is None:
        return None
    if callable(schedules):
        return schedules(workload)
    return schedules.get(workload.key)


def build(module: Module, target: Any = "cpu", schedules: Schedules = None,
          opt_level: int = 3, default_schedule: Callable[[Any], Any] | None = None
          ) -> CompiledModel:
    """Build ``module``'s ``@main`` for the graph executor (see the module docstring).
    ``default_schedule(workload) -> steps`` schedules the kernels ``schedules`` has nothing
    for (default: the unscheduled program)."""
    from schedule import Target, compile_library

    start = time.perf_counter()
    target = Target.parse(target) if not isinstance(target, Target) else target
    main, plan, memory = _plan(module, opt_level, target)
    kernels = KernelSet(target, schedules, default_schedule)
    python_kernels: dict[int, Callable[..., Any]] = {}
    nodes: list[dict[str, Any]] = []
    for func, inputs, outs in plan.calls:
        if func.attrs.get("Compiler"):
            index = len(python_kernels)
            python_kernels[index] = _external_kernel(func, inputs)
            nodes.append({"python": index, "name": str(func.attrs.get("global_symbol")),
                          "inputs": [i for g in inputs for i in g], "outputs": outs})
            continue
        lowered = lower_primitive(func)
        if lowered.workload is None:
            index = len(python_kernels)
            python_kernels[index] = _numpy_kernel(func, inputs)
            nodes.append({"python": index, "name": lowered.name,
                          "inputs": [i for g in inputs for i in g], "outputs": outs})
            kernels.count_numpy(lowered.name, lowered.reason)
            continue
        flat_in = [inputs[p][0] for p in lowered.param_order]
        nodes.append({"kernel": kernels.entry(lowered), "name": lowered.name,
                      "args": [*flat_in, *outs]})
    library = None
    if kernels.sources:
        library, _ = compile_library(kernels.sources, tuple(target.compiler_flags()))
    graph = {"version": GRAPH_VERSION, "entries": plan.entries, "storages": memory.storages,
             "nodes": nodes, "inputs": plan.inputs, "input_names": plan.input_names,
             "outputs": plan.outputs, "output_structure": plan.output_structure,
             "output_names": _output_names(main, len(plan.outputs))}
    runtime = GraphRuntime(graph, plan.params, library, python_kernels)
    return CompiledModel(runtime, graph, plan.params, library, kernels.reports, memory,
                         time.perf_counter() - start, exportable=not python_kernels)


def _plan(module: Module, opt_level: int, target: Any
          ) -> tuple[Function, GraphPlan, MemoryPlan]:
    """Optimise and fuse ``module`` for ``target``; its ``@main``, the graph plan and the
    memory plan."""
    fused = optimize(module, opt_level, target)
    if "main" not in fused:
        raise GraphBuildError("the module has no @main function")
    main = fused["main"]
    plan = plan_graph(main)
    onnx_inputs = main.attrs.get("input_names")
    if onnx_inputs is not None and len(onnx_inputs) == len(plan.input_names):
        plan.input_names = [str(n) for n in onnx_inputs]  # the names the model's users know
    return main, plan, plan_memory(plan)


def _kernel_source(lowered: LoweredFunction, target: Any, name: str, schedules: Schedules,
                   default_schedule: Callable[[Any], Any] | None) -> tuple[Any, TaskReport]:
    """The C source of a lowered function's kernel (entry ``tt_<name>``) scheduled with the
    caller's steps, else the default schedule, else unscheduled (also when the steps do not
    apply), and its report (count 0)."""
    from schedule import ScheduleError, kernel_source, make_schedule, te

    steps = _steps_for(schedules, lowered.workload)
    tuned, note = steps is not None, ""  # a tuned best may be no steps at all
    if steps is None and default_schedule is not None:
        steps = default_schedule(lowered.workload)
    try:
        s, args = make_schedule(lowered.workload, steps or ())
    except ScheduleError as exc:
        note = f"its steps do not apply ({exc}); unscheduled program"
        tuned = False
        args = lowered.workload.tensors()
        s = te.create_schedule(args[-lowered.workload.num_outputs:])
    k = kernel_source(s, args, target, name=name)
    return k, TaskReport(lowered.name, lowered.workload.key, 0, lowered.workload.flops, tuned,
                         note)

class KernelSet:
    """The kernels of one build (graph executor, VM or AOT): one C source per distinct
    workload key, scheduled by ``_kernel_source``, with its entry symbol
    (``tt_<prefix><n>``) and a ``TaskReport`` counting the fused calls it serves; fused
    calls without a kernel are counted too, by name and reason."""

    def __init__(self, target: Any, schedules: Schedules,
                 default_schedule: Callable[[Any], Any] | None, prefix: str = "k"):
        self.target, self.schedules, self.default_schedule = target, schedules, default_schedule
        self.prefix = prefix
        self.sources: list[str] = []
        self.entries: dict[str, str] = {}  # workload key -> entry symbol
        self._reports: dict[str, TaskReport] = {}

    def entry(self, lowered: LoweredFunction) -> str:
        """The entry symbol of ``lowered``'s kernel (its source made on first use)."""
        key = lowered.workload.key
        if key not in self.entries:
            k, self._reports[key] = _kernel_source(
                lowered, self.target, f"{self.prefix}{len(self.entries)}", self.schedules,
                self.default_schedule)
            self.sources.append(k.source)
            self.entries[key] = k.signature.entry
        self._reports[key].count += 1
        return self.entries[key]

    def count_numpy(self, name: str, reason: str) -> None:
        """Count a fused call of ``name`` that runs without a kernel, and why."""
        report = self._reports.setdefault(f"numpy:{name}:{reason}", TaskReport(
            name, None, 0, 0.0, False, f"numpy: {reason}"))
        report.count += 1

    @property
    def reports(self) -> list[TaskReport]:
        return list(self._reports.values())


def _output_names(main: Function, count: int) -> list[str]:
    """The model's output names (``output_names`` in ``@main``'s attributes, as the ONNX
    importer records them), else ``out`` / ``out_0, out_1, ...``."""
    names = main.attrs.get("output_names")
    if names is not None and len(names) == count:
        return [str(n) for n in names]
    return ["out"] if count == 1 else [f"out_{i}" for i in range(count)]


def _external_kernel(func: Function, inputs: list[list[int]]) -> Callable[..., Any]:
    """A partitioned function, run by its external codegen's module."""
    from .external import external_function

    module = external_function(func)
    if any(len(g) != 1 for g in inputs):
        raise GraphBuildError(f"{func.attrs.get('global_symbol')}: an external function "
                              "takes tensors")
    return module


def _numpy_kernel(func: Function, inputs: list[list[int]]) -> Callable[..., Any]:
    """A fused function without a kernel, run by the interpreter on its flat inputs."""
    from ..interpreter import evaluate
    from ..types import TupleType

    sizes = [len(g) for g in inputs]
    tuple_param = [isinstance(p.checked_type, TupleType) for p in func.params]

    def run(*flat: np.ndarray) -> Any:
        args, at = [], 0
        for size, is_tuple in zip(sizes, tuple_param, strict=True):
            group = flat[at:at + size]
            args.append(tuple(group) if is_tuple else group[0])
            at += size
        return evaluate(func, *args)

    return run
