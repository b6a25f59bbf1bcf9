"""Tests of the workers layer."""
