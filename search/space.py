"""Decisions: the free parameters a sketch leaves open, how to sample and mutate them.

A program in the search space is a sketch plus one value per decision. Tile decisions
choose the inner factors of a multi-level split. Unlike Ansor and MetaSchedule, which
only take perfect factorisations, a tile decision may also take factors that do not
divide the extent (the code generator guards the tail and versions the loop so full
tiles stay fast), so extents like 1000 or 197 are not stuck with poor divisors.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

# Candidate tile factors when not restricted to divisors: small integers, powers of two and
# multiples of common vector widths.
_NICE_FACTORS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96,
                 128, 192, 256)


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True)
class TileDecision:
    """Inner factors (outer to inner) of a split of ``extent`` into ``len + 1`` levels."""

    extent: int
    parts: int
    max_innermost: int = 64
    inexact_probability: float = 0.25
    #: the largest factor of each level, outer to inner (empty: only ``max_innermost``)
    level_max: tuple[int, ...] = ()
    #: the innermost factor is a multiple of this (an axis read in blocks, ``j // 16``:
    #: a vector of lanes then stays inside one block)
    innermost_multiple: int = 1

    def _limit(self, level: int) -> int:
        """The largest factor of ``level`` (counted from the innermost, 0)."""
        limit = self.max_innermost if level == 0 else self.extent
        if self.level_max:
            limit = min(limit, self.level_max[self.parts - 1 - level])
        return max(1, limit)

    def sample(self, rng: random.Random) -> tuple[int, ...]:
        if rng.random() < self.inexact_probability:
            return self._sample_inexact(rng)
        return self._sample_perfect(rng)

    def _sample_perfect(self, rng: random.Random) -> tuple[int, ...]:
        remaining = self.extent
        factors: list[int] = []
        for level in range(self.parts):  # innermost first
            choices = [d for d in divisors(remaining) if d <= self._limit(level)] or [1]
            if level == 0:
                choices = self._whole_blocks(choices)
            f = rng.choice(choices)
            factors.append(f)
            remaining //= f
        return tuple(reversed(factors))

    def _sample_inexact(self, rng: random.Random) -> tuple[int, ...]:
        remaining = self.extent
        factors: list[int] = []
        for level in range(self.parts):  # innermost first
            limit = min(self._limit(level), remaining)
            choices = [f for f in _NICE_FACTORS if f <= limit] or [1]
            if level == 0:
                choices = self._whole_blocks(choices)
            f = rng.choice(choices)
            factors.append(f)
            remaining = max(1, math.ceil(remaining / f))
        return tuple(reversed(factors))

    def innermost_choices(self) -> list[int]:
        """The innermost factors that divide the extent (whole blocks where any is)."""
        return self._whole_blocks([d for d in divisors(self.extent) if d <= self._limit(0)])

    def sample_around(self, innermost: int, rng: random.Random,
                      next_level: int | None = None) -> tuple[int, ...]:
        """A value with this innermost factor, the outer levels drawn at random (dividing
        what remains); ``next_level`` fixes the factor of the level just outside the
        innermost where it divides what remains."""
        remaining = math.ceil(self.extent / innermost)
        factors = [innermost]
        for level in range(1, self.parts):
            choices = [d for d in divisors(remaining) if d <= self._limit(level)] or [1]
            if level == 1 and next_level in choices:
                choices = [next_level]
            f = rng.choice(choices)
            factors.append(f)
            remaining //= f
        return tuple(reversed(factors))

    def _whole_blocks(self, choices: list[int]) -> list[int]:
        """The innermost choices that are whole blocks; where none is, those that are whole
        halves of one (quarters, ...: a reduction of 1000 on 16 lanes is factored by 8 or
        40, not 4 or 5), and all of them if none is even a whole pair."""
        multiple = self.innermost_multiple
        while multiple > 1:
            whole = [f for f in choices if f % multiple == 0]
            if whole:
                return whole
            multiple //= 2
        return choices

    def mutate(self, value: tuple[int, ...], rng: random.Random) -> tuple[int, ...]:
        """Move a factor between two levels (keeping the product), or re-draw one level."""
        value = list(value)
        if len(value) >= 1 and rng.random() < 0.7:
            full = [math.ceil(self.extent / math.prod(value)), *value]  # with the outer level
            src, dst = rng.sample(range(len(full)), 2) if len(full) > 1 else (0, 0)
            movable = [d for d in divisors(full[src]) if d > 1]
            if movable:
                d = rng.choice(movable)
                full[src] //= d
                full[dst] *= d
                if self.is_valid(tuple(full[1:])):
                    return tuple(full[1:])
        return self.sample(rng)

    def is_valid(self, value: Any) -> bool:
        return (isinstance(value, tuple | list) and len(value) == self.parts
                and all(isinstance(f, int) and 1 <= f <= self.extent for f in value)
                and all(f <= self._limit(self.parts - 1 - i) for i, f in enumerate(value))
                and (self.parts == 0 or value[-1] % self.innermost_multiple == 0
                     or self.extent % self.innermost_multiple != 0))


@dataclass(frozen=True)
class ChoiceDecision:
    """One of a fixed set of values (an unroll depth, a compute location, ...)."""

    choices: tuple[Any, ...]

    def sample(self, rng: random.Random) -> Any:
        return rng.choice(self.choices)

    def mutate(self, value: Any, rng: random.Random) -> Any:
        others = [c for c in self.choices if c != value]
        return rng.choice(others) if others else value

    def is_valid(self, value: Any) -> bool:
        return value in self.choices


Decision = TileDecision | ChoiceDecision
