"""The search policies by name, and the target kinds each can search.

A policy is registered with the kinds of target its rules know (the sketch policies:
``cpu``); a search task, and a job, for a kind no registered policy serves is refused with
a clear error. A new device kind becomes tunable by registering a policy for it, with no
change to the tuner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

PolicyFactory = Callable[..., Any]
"""Makes a policy: ``factory(task, cost_model_name, seed=..., params=...)``."""

#: The policies by name (``tensortune tune --policy``); see :func:`register_policy`.
POLICIES: dict[str, PolicyFactory] = {}
_KINDS: dict[str, tuple[str, ...]] = {}


def register_policy(name: str, factory: PolicyFactory,
                    target_kinds: Iterable[str] = ("cpu",)) -> None:
    """Make a policy available by ``name`` for targets of ``target_kinds``."""
    POLICIES[name] = factory
    _KINDS[name] = tuple(target_kinds)


def unregister_policy(name: str) -> None:
    """Remove a policy registered with :func:`register_policy` (no error if absent)."""
    POLICIES.pop(name, None)
    _KINDS.pop(name, None)


def policy_kinds(name: str) -> tuple[str, ...]:
    """The target kinds the policy ``name`` can search (none for an unknown name)."""
    return _KINDS.get(name, ())


def searchable_kinds() -> list[str]:
    """Every target kind some registered policy can search."""
    return sorted({kind for kinds in _KINDS.values() for kind in kinds})
