"""The search policy interface the tuner drives, and the values that cross it.

A :class:`SearchPolicy` proposes candidates (programs never measured before), is notified of
their measured latencies, and can learn from earlier measurements (``warm_start``). The
tuner knows nothing else of a policy: a new strategy (GPU, accelerator, another search
algorithm) is one new subclass, registered by name with :func:`search.register_policy`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schedule import Steps

from .task import SearchTask


def steps_key(steps: Steps | Sequence[Sequence[Any]]) -> str:
    """The key of a program given by its steps (``Steps.key``)."""
    return Steps.of(steps).key


@dataclass(frozen=True, eq=False)
class Candidate:
    """One program to measure: its steps, and how the policy made it (``origin``: JSON
    stored with its record, so a later search can rebuild it; None when unknown)."""

    steps: Steps

    @property
    def key(self) -> str:
        return self.steps.key

    @property
    def origin(self) -> dict[str, Any] | None:
        return None


@dataclass(frozen=True)
class PastMeasurement:
    """A program measured earlier (e.g. a database record): its steps, its median latency in
    seconds (None when it failed) and, when known, the origin it was made from."""

    steps: Steps | Sequence[Sequence[Any]]
    cost: float | None
    origin: Mapping[str, Any] | None = None


@dataclass
class SearchStats:
    """What a policy did so far: programs proposed, sampled, found invalid, and the seconds
    it spent."""

    proposals: int = 0
    sampled: int = 0
    invalid: int = 0
    seconds: float = 0.0


class SearchPolicy(ABC):
    """Searches the schedules of one task (a workload on a target)."""

    task: SearchTask
    stats: SearchStats

    @abstractmethod
    def propose(self, n: int) -> list[Candidate]:
        """The next ``n`` programs to measure, none proposed before (fewer only when the
        space is exhausted)."""

    @abstractmethod
    def notify(self, candidates: Sequence[Candidate], costs: Sequence[float | None]) -> None:
        """The measured median latency (seconds) of each candidate, None for a failure.
        Candidates may come from elsewhere (another policy, a database)."""

    def notify_disturbed(self, candidates: Sequence[Candidate],  # noqa: B027 (optional)
                         costs: Sequence[float | None]) -> None:
        """Candidates measured while other work slowed the machine (even re-measured):
        their figures are too slow by an unknown amount, so a cost model must not learn
        from them; a policy may still note them as measured (so as not to propose them
        again) and as rough figures. By default: ignored."""

    def warm_start(self, past: Sequence[PastMeasurement]) -> int:
        """Learn from earlier measurements of this task; they are never proposed again.
        Returns how many were rebuilt into the search's own population (none here)."""
        self.notify([Candidate(Steps.of(p.steps)) for p in past], [p.cost for p in past])
        return 0

    def best_candidates(self, k: int) -> list[Candidate]:
        """The ``k`` fastest programs measured so far (with their origins), for the search
        of a related task to start from (:meth:`suggest`). By default: none."""
        return []

    def suggest(self, candidates: Sequence[Candidate]) -> None:  # noqa: B027 (optional)
        """Programs that did well on related tasks (e.g. the other tasks of a model: the same
        convolution with another epilogue, or another shape of it); a policy may adapt them
        into its own search. Each call replaces the previous suggestions. By default:
        ignored."""

    def export_model(self) -> bytes | None:
        """A snapshot of what guides this policy (its cost model), or None if nothing
        was learned; another policy of the same kind on the same target can start from it
        (:meth:`import_model`)."""
        return None

    def import_model(self, data: bytes) -> None:  # noqa: B027 (optional hook)
        """Start from a snapshot made by :meth:`export_model` (``ValueError`` if it does
        not fit). By default there is nothing to import."""
