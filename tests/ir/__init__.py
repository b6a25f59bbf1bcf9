"""Tests of the ir layer."""
