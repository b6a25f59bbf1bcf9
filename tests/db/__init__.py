"""Tests of the db layer."""
