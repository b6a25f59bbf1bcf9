"""Tests of the ONNX importer (ir.frontend)."""
