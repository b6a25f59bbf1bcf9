"""An ``onnx.backend.base.Backend`` over the IR, for ONNX's backend node tests (helpers, not
tests): ``IRBackend.prepare(model)`` gives a rep whose ``run(inputs)`` imports the model with
``ir.frontend.from_onnx`` and runs it with ``execute``.

ONNX's node tests feed every operand as a graph input, also those our importer needs at
import time (a Reshape's shape, a Slice's bounds, reduction axes). The rep therefore
imports at ``run`` time, and binds a graph input to its given value (turns it into an
initializer) whenever the import says that input must be a constant
(``OnnxImportError.needs_constant``); the other inputs stay parameters. Every imported
module is also checked to round-trip through the text format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

import ir
from ir.frontend import OnnxImportError, from_onnx


def execute(module: ir.Module, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run the imported ``@main`` on ``args``: the one place that says how imported models
    run (the numpy interpreter for now; the compiled executor later)."""
    out = ir.evaluate(module, *args)
    return [np.asarray(v) for v in (out if isinstance(out, tuple) else (out,))]


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
    def __init__(self, model: onnx.ModelProto):
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            inputs = [inputs[i.name] for i in self.model.graph.input if i.name in inputs]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        module, args = import_with_inputs(self.model, list(inputs))
        if ir.parse(ir.astext(module)) != module:
            raise AssertionError("the imported module does not round-trip through the text "
                                 "format")
        return tuple(execute(module, args))


class IRBackend(Backend):
    """Runs ONNX models on the IR (CPU only)."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any
                ) -> IRBackendRep:
        return IRBackendRep(model)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


__all__ = ["IRBackend", "IRBackendRep", "bind_inputs", "execute", "import_with_inputs"]
