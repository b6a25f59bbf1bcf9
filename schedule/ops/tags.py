"""Tags on the compute stages of the operator library.

A stage's tag is a comma-separated list: first its category (``injective`` for
stages computing each element independently, ``reduction`` for stages whose body
is a reduction), then finer kinds (``elemwise``, ``broadcast``, ``pad``, or the
operator name such as ``conv2d_nchw``). Sketch rules can ask ``has_tag(t, "pad")``.
"""

from __future__ import annotations

from typing import Any

INJECTIVE = "injective"
REDUCTION = "reduction"
ELEMWISE = "elemwise"
BROADCAST = "broadcast"
PAD = "pad"


def make(*parts: str) -> str:
    """Join tag parts: ``make(INJECTIVE, PAD) == "injective,pad"``."""
    return ",".join(parts)


def has_tag(tensor_or_op: Any, part: str) -> bool:
    """Whether a tensor's (or operation's) tag lists ``part``."""
    op = getattr(tensor_or_op, "op", tensor_or_op)
    tag = getattr(op, "tag", "") or ""
    return part in tag.split(",")
