"""An ``onnx.backend.base.Backend`` over the IR, for ONNX's backend node tests (helpers, not
tests): ``IRBackend.prepare(model)`` gives a rep whose ``run(inputs)`` imports the model with
``ir.frontend.from_onnx`` and runs it with ``execute`` on the interpreter;
``GraphBackend`` builds it for the graph executor instead (compiled kernels).

ONNX's node tests feed every operand as a graph input, also those our importer needs at
import time (a Reshape's shape, a Slice's bounds, reduction axes). The rep therefore
imports at ``run`` time, and binds a graph input to its given value (turns it into an
initializer) whenever the import says that input must be a constant
(``OnnxImportError.needs_constant``); the other inputs stay parameters. Every imported
module is also checked to round-trip through the text format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

import ir
from ir.frontend import OnnxImportError, from_onnx

#: How an imported model runs: the numpy interpreter, or built for the graph executor
#: (fused, lowered and compiled with the default schedules; a fused group without a
#: lowering runs on numpy inside the compiled model).
EXECUTORS = ("interpreter", "graph")


@dataclass
class Execution:
    """The outputs of one run, and whether every fused group ran as a compiled kernel."""

    outputs: list[np.ndarray]
    all_compiled: bool


def execute(module: ir.Module, args: Sequence[np.ndarray], executor: str = "interpreter"
            ) -> Execution:
    """Run the imported ``@main`` on ``args`` with ``executor`` (one of ``EXECUTORS``)."""
    if executor == "graph":
        compiled = ir.build(module, "cpu")
        out = compiled(*args)
        all_compiled = compiled.exportable  # no fused group fell back to numpy
    elif executor == "interpreter":
        out, all_compiled = ir.evaluate(module, *args), False
    else:
        raise ValueError(f"unknown executor {executor!r}; one of {', '.join(EXECUTORS)}")
    values = out if isinstance(out, tuple) else (out,)
    return Execution([np.asarray(v) for v in values], all_compiled)


def bind_inputs(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs named in ``values`` are initializers."""
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    kept = [i for i in bound.graph.input if i.name not in values]
    del bound.graph.input[:]
    bound.graph.input.extend(kept)
    for name, value in values.items():
        bound.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    return bound


def import_with_inputs(model: onnx.ModelProto, inputs: Sequence[np.ndarray]
                       ) -> tuple[ir.Module, list[np.ndarray]]:
    """The module of ``model`` and the arguments of its ``@main``, binding the graph inputs
    that must be known at import time to their values in ``inputs``."""
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    given = dict(zip(names, inputs, strict=False))
    bound: dict[str, np.ndarray] = {}
    while True:
        try:
            module = from_onnx(bind_inputs(model, bound) if bound else model)
        except OnnxImportError as exc:
            name = exc.needs_constant
            if name in given and name not in bound:
                bound[name] = given[name]
                continue
            raise
        return module, [given[n] for n in names if n not in bound]


class IRBackendRep(BackendRep):
    def __init__(self, model: onnx.ModelProto, executor: str):
        self.model = model
        self.executor = executor
        self.last: Execution | None = None

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            inputs = [inputs[i.name] for i in self.model.graph.input if i.name in inputs]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        module, args = import_with_inputs(self.model, list(inputs))
        if ir.parse(ir.astext(module)) != module:
            raise AssertionError("the imported module does not round-trip through the text "
                                 "format")
        self.last = execute(module, args, self.executor)
        return tuple(self.last.outputs)


class IRBackend(Backend):
    """Runs ONNX models on the IR's interpreter (CPU only)."""

    executor = "interpreter"

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any
                ) -> IRBackendRep:
        return IRBackendRep(model, cls.executor)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


class GraphBackend(IRBackend):
    """Runs ONNX models built for the graph executor (compiled kernels)."""

    executor = "graph"


__all__ = ["EXECUTORS", "Execution", "GraphBackend", "IRBackend", "IRBackendRep", "bind_inputs",
           "execute", "import_with_inputs"]
