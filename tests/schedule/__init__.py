"""Tests of the schedule layer."""
