"""Lookup of the registered workload operators by name (``get_op``, ``list_ops``)."""

from __future__ import annotations

from .spec import OpSpec
from .workloads import ALL

_REGISTRY: dict[str, OpSpec] = {spec.name: spec for spec in ALL}


class UnknownOpError(KeyError, ValueError):
    """No registered operator has this name (both a ``KeyError`` and a ``ValueError``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def list_ops() -> list[str]:
    """Names of the registered workload operators, sorted."""
    return sorted(_REGISTRY)


def get_op(name: str) -> OpSpec:
    """The ``OpSpec`` registered as ``name``; ``UnknownOpError`` lists the known names."""
    spec = _REGISTRY.get(name) if isinstance(name, str) else None
    if spec is None:
        raise UnknownOpError(f"unknown operator {name!r}; known operators: "
                             f"{', '.join(list_ops())}")
    return spec
