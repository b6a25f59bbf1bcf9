"""ONNX's backend tests on the graph executor: the same cases as ``test_onnx_node_tests``,
each imported model built with ``ir.build`` (optimised, fused, lowered and compiled with
the default schedules; a fused group without a lowering runs on numpy inside the compiled
model) and run by the graph runtime; ONNX's runner checks dtypes, shapes and values.
``bench/onnx_node_tests.py --executor graph`` counts how many ran every group compiled.
"""

from __future__ import annotations

from .node_tests import backend_test_classes
from .onnx_backend import GraphBackend

globals().update(backend_test_classes(GraphBackend, __name__))
