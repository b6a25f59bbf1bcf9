"""ONNX's backend tests run on the IR: each included case (a one-operator model, a function
body expanded into supported operators, or one of the small PyTorch-converted models that
ship with onnx; the selection is in ``node_tests``) is imported with ``from_onnx`` and run
by ``ir.evaluate`` through our ``IRBackend``; ONNX's runner checks the output dtypes and
shapes exactly and the values to the case's tolerance (rtol 1e-3).
"""

from __future__ import annotations

from .node_tests import backend_test_classes
from .onnx_backend import IRBackend

globals().update(backend_test_classes(IRBackend, __name__))
