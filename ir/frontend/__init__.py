"""Importers of models from other formats into the graph IR: ONNX (``from_onnx``).

``from_onnx(model, shape=None, dtype=None)`` returns a type-checked ``Module`` whose
``@main`` takes the graph's inputs (named after them; their ONNX names, and those of the
outputs, are ``@main``'s attributes ``input_names`` / ``output_names``). Everything it
cannot import raises ``OnnxImportError``. Needs the ``onnx`` package (the ``onnx`` extra).
"""

from .onnx import OnnxImportError, from_onnx, load_model, supported_ops

__all__ = ["OnnxImportError", "from_onnx", "load_model", "supported_ops"]
