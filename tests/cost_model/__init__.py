"""Tests of the cost_model layer."""
