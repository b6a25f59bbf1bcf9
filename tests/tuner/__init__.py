"""Tests of the tuner layer."""
