"""Side by side: a task's leading programs timed in interleaved rounds at the end of a job,
ranked by how they compare in the same moment instead of by their records.

Each program's record was taken in its own moment, and a shared host's speed moves by
tens of percent from minute to minute, so the program with the lowest record is often the
one measured in the fastest minute. At the end of a job the few programs with the lowest
records are measured again in rounds (A B C, A B C, A B C): within a round they see the
same machine. Each program's standing is the median over the rounds of its cost divided
by the cost of the record leader (the first program) in that round. The winner is the
program with the lowest standing; it replaces the record leader only when it is faster
by more than ``MARGIN`` (two programs that close are the same program, as far as a
measurement can tell). The records of programs slower than the winner by more than the
margin that rank ahead of every other program's get an outranking verdict
(``db.Database.outrank``), so the best query passes over them; the program it answers
with then is the one the job reports. A verdict needs two rounds that compared
something (one, where only one was measured: a simulator's figures do not move).

A round in which the record leader was disturbed or failed compares nothing; a program
with no quiet figure in any compared round cannot be ranked, and nothing behind it in
record order can pass it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from workers import MeasureResult

#: Rounds of the end-of-job comparison (each measures every leading program once).
ROUNDS = 3
#: How much faster than the record leader, side by side, another program must be to take
#: its place.
MARGIN = 1.02


@dataclass(frozen=True)
class Comparison:
    """The outcome: ``standings[p]`` is program ``p``'s median per-round ratio to program 0
    (None when it could not be compared); ``winner`` the index of the program that ranks
    first; ``figures[p]`` program ``p``'s quiet costs over the rounds and ``noise[p]`` the
    largest slowdown the device measured in any of them; ``compared`` how many of the
    ``rounds`` compared anything."""

    standings: list[float | None]
    figures: list[list[float]]
    noise: list[float]
    winner: int
    compared: int
    rounds: int

    def outranked(self) -> list[tuple[int, float]]:
        """The programs slower than the winner by more than ``MARGIN``, each with how many
        times the winner's time it took. None on the word of a single round when more
        than one was measured: a verdict outlives the job."""
        if self.compared < min(2, self.rounds):
            return []
        best = self.standings[self.winner]
        assert best is not None
        return [(p, standing / best) for p, standing in enumerate(self.standings)
                if standing is not None and standing > best * MARGIN]


def compare(rounds: Sequence[Sequence[MeasureResult]]) -> Comparison | None:
    """Rank the programs of ``rounds`` (each round: one result per program, in record
    order); None when no round has a quiet figure of the record leader."""
    programs = len(rounds[0])
    ratios: list[list[float]] = [[] for _ in range(programs)]
    figures: list[list[float]] = [[] for _ in range(programs)]
    noise = [1.0] * programs
    compared = 0
    for results in rounds:
        costs = [quiet_cost(r) for r in results]
        for p, cost in enumerate(costs):
            if cost is not None:
                figures[p].append(cost)
                noise[p] = max(noise[p], results[p].noise)
        if costs[0] is None:
            continue
        compared += 1
        for p, cost in enumerate(costs):
            if cost is not None:
                ratios[p].append(cost / costs[0])
    if not ratios[0]:
        return None
    standings = [statistics.median(r) if r else None for r in ratios]
    comparable = next((p for p, s in enumerate(standings) if s is None), programs)
    winner = min(range(comparable), key=lambda p: (standings[p], p))
    if standings[0] < standings[winner] * MARGIN:  # type: ignore[operator]
        winner = 0
    return Comparison(standings, figures, noise, winner, compared, len(rounds))


def quiet_cost(result: MeasureResult) -> float | None:
    """The figure of a result that ran and that nothing disturbed, else None."""
    return None if result.disturbed or not result.ok else result.median_cost
