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

#: The policies by name (``tensortune tune --policy``); see :func:`register_policy`. Each
#: makes the policy of the task's target kind.
POLICIES: dict[str, PolicyFactory] = {}
_FACTORIES: dict[str, dict[str, PolicyFactory]] = {}


def register_policy(name: str, factory: PolicyFactory,
                    target_kinds: Iterable[str] = ("cpu",)) -> None:
    """Make a policy available by ``name`` for targets of ``target_kinds``. A name may
    have one factory per kind (the ``sketch`` policy's rules differ for cpu and vta)."""
    by_kind = _FACTORIES.setdefault(name, {})
    by_kind.update(dict.fromkeys(target_kinds, factory))

    def make(task: Any, *args: Any, **kwargs: Any) -> Any:
        return by_kind[task.target.kind](task, *args, **kwargs)

    POLICIES[name] = make


_TASK_CHECKS: dict[str, Callable[[Any, Any], None]] = {}


def register_task_check(kind: str, check: Callable[[Any, Any], None]) -> None:
    """``check(workload, target)`` raises ``ValueError`` saying why targets of ``kind``
    cannot run the workload (a search task for it is refused up front)."""
    _TASK_CHECKS[kind] = check


def check_task(workload: Any, target: Any) -> None:
    """Raise ``ValueError`` if the target kind's check refuses the workload."""
    check = _TASK_CHECKS.get(target.kind)
    if check is not None:
        check(workload, target)


def unregister_policy(name: str) -> None:
    """Remove a policy registered with :func:`register_policy`, for every kind (no error
    if absent)."""
    POLICIES.pop(name, None)
    _FACTORIES.pop(name, None)


def policy_kinds(name: str) -> tuple[str, ...]:
    """The target kinds the policy ``name`` can search (none for an unknown name)."""
    return tuple(_FACTORIES.get(name, {}))


def searchable_kinds() -> list[str]:
    """Every target kind some registered policy can search."""
    return sorted({kind for kinds in _FACTORIES.values() for kind in kinds})
