"""The graph executor's compiler: from a fused static ``@main`` to a graph (plain JSON, see
``runtime``), a memory plan and one kernel library.

``plan_graph(function)`` walks the fused dataflow graph (calls of ``Primitive`` functions,
tuples, projections, parameters and constants) in order and gives every tensor value an
entry; ``plan_memory`` then lets temporaries whose lifetimes do not overlap share storage
(greedy best fit, in execution order; a kernel's outputs never share with its own inputs).
Anything that is not a static dataflow graph (``if``, ``match``, closures, recursion,
dynamic shapes) is refused with a ``BuildError`` naming it: such programs run on the VM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..expr import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from ..types import TensorType, TupleType, Type
from ..visitor import dataflow_post_order

__all__ = ["GraphBuildError", "GraphPlan", "MemoryPlan", "plan_graph", "plan_memory"]


class GraphBuildError(ValueError):
    """The program is not a static dataflow graph (run it on the VM instead)."""


@dataclass
class GraphPlan:
    """The graph before kernels are attached: entries, calls and their order."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    #: (primitive function, flat input entries per parameter, output entries)
    calls: list[tuple[Function, list[list[int]], list[int]]] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    output_structure: Any = None
    params: dict[str, np.ndarray] = field(default_factory=dict)

    def new_entry(self, t: Type, kind: str, **extra: Any) -> int:
        if not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
            raise GraphBuildError(f"a value of type {t} has no static tensor shape")
        self.entries.append({"shape": [int(d) for d in t.shape], "dtype": t.dtype,
                             "kind": kind, **extra})
        return len(self.entries) - 1


def _flatten(structure: Any) -> list[int]:
    if isinstance(structure, list):
        return [i for s in structure for i in _flatten(s)]
    return [structure]


def plan_graph(main: Function, tuple_params: bool = False) -> GraphPlan:
    """The graph of a fused, type-checked ``@main`` (see the module docstring). With
    ``tuple_params`` a parameter may be a tuple (of tuples) of tensors: its fields are
    inputs of their own, in order (``name.0``, ``name.1``...)."""
    plan = GraphPlan()
    values: dict[int, Any] = {}

    def add_input(t: Type, name: str) -> Any:
        if tuple_params and isinstance(t, TupleType):
            return [add_input(f, f"{name}.{i}") for i, f in enumerate(t.fields)]
        entry = plan.new_entry(t, "input", index=len(plan.inputs))
        plan.inputs.append(entry)
        plan.input_names.append(name)
        return entry

    for p in main.params:
        values[id(p)] = add_input(p.checked_type, p.name_hint)

    def value(e: Expr) -> Any:
        """An operand's entries (a constant gets its entry when first met)."""
        if id(e) not in values:
            if isinstance(e, Constant):
                name = f"c{len(plan.params)}"
                plan.params[name] = e.data
                values[id(e)] = plan.new_entry(e.checked_type, "param", name=name)
            elif isinstance(e, Var):
                raise GraphBuildError(f"free variable %{e.name_hint} in @main")
            else:
                raise GraphBuildError(f"@main is not a static dataflow graph (it has "
                                      f"{type(e).__name__}): run it on the VM instead")
        return values[id(e)]

    for e in dataflow_post_order(main.body):
        if isinstance(e, Tuple):
            values[id(e)] = [value(f) for f in e.fields]
        elif isinstance(e, TupleGetItem):
            values[id(e)] = value(e.tuple_value)[e.index]
        elif isinstance(e, Call) and isinstance(e.op, Function) and e.op.attrs.get("Primitive"):
            t = e.checked_type
            out_types = list(t.fields) if not isinstance(t, TensorType) else [t]
            inputs = [_flatten(value(a)) for a in e.args]
            outs = [plan.new_entry(ot, "temp") for ot in out_types]
            plan.calls.append((e.op, inputs, outs))
            values[id(e)] = outs[0] if isinstance(t, TensorType) else outs
        else:
            raise GraphBuildError("@main is not a static dataflow graph (it has a call of a "
                                  "non-fused function): run it on the VM instead")
    result = value(main.body)
    flat = _flatten(result)
    plan.outputs = flat
    positions = iter(range(len(flat)))

    def structure(r: Any) -> Any:
        return [structure(x) for x in r] if isinstance(r, list) else next(positions)

    plan.output_structure = structure(result)
    return plan


@dataclass
class MemoryPlan:
    """Storage sizes, and the bytes of temporaries with and without sharing."""

    storages: list[int]
    bytes_unshared: int
    bytes_planned: int


def _nbytes(entry: dict[str, Any]) -> int:
    return int(np.prod(entry["shape"], dtype=np.int64)) * np.dtype(entry["dtype"]).itemsize


def plan_memory(plan: GraphPlan) -> MemoryPlan:
    """Give every temporary entry a ``storage`` (see the module docstring)."""
    last_use: dict[int, int] = {}
    for step, (_, inputs, _) in enumerate(plan.calls):
        for group in inputs:
            for i in group:
                last_use[i] = step
    keep = set(plan.outputs)
    storages: list[int] = []
    free: list[int] = []
    unshared = 0
    for step, (_, inputs, outs) in enumerate(plan.calls):
        for i in outs:
            size = _nbytes(plan.entries[i])
            unshared += size
            fitting = [s for s in free if storages[s] >= size]
            if fitting:
                sid = min(fitting, key=lambda s: storages[s])
            elif free:  # grow the largest free buffer rather than adding one
                sid = max(free, key=lambda s: storages[s])
                storages[sid] = size
            else:
                storages.append(size)
                sid = len(storages) - 1
            if sid in free:
                free.remove(sid)
            plan.entries[i]["storage"] = sid
        released = {i for group in inputs for i in group if last_use.get(i) == step}
        released |= {i for i in outs if i not in last_use}  # computed but never read
        for i in released:
            entry = plan.entries[i]
            if entry["kind"] == "temp" and i not in keep and entry["storage"] not in free:
                free.append(entry["storage"])
    return MemoryPlan(storages, unshared, sum(storages))
