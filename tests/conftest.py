"""Shared pytest setup. Markers (slow, ray, postgres, gpu) are declared in pyproject.toml."""
