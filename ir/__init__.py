"""Graph IR layer: the Relay-like graph IR, type/shape inference, fusion, task extraction,
importers (ONNX) and the graph executor.

Imports only ``schedule`` (its top-level package).
"""
