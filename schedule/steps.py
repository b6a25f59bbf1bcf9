"""A schedule as a value: :class:`Steps`, the immutable list of recorded steps that travels
through the search, the workers and the database, and :func:`make_schedule`, the one place
that turns a workload and its steps back into a schedule.

Steps are JSON at every boundary (``Steps.from_json`` / ``to_json``, the format of
``Schedule.steps``); inside a process they are a frozen, hashable value whose ``key`` (its
compact JSON text) identifies the program, so no caller re-encodes them to compare.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from .schedule import Schedule, ScheduleError, create_schedule
from .tensor import Tensor
from .workload import Workload

_SCALARS = (str, int, float, bool, type(None))


def _freeze(value: Any, where: str) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v, where) for v in value)
    if isinstance(value, _SCALARS):
        return value
    raise ValueError(f"{where}: a step holds only strings, numbers, booleans and lists, "
                     f"got {type(value).__name__}")


def _thaw(value: Any) -> Any:
    return [_thaw(v) for v in value] if isinstance(value, tuple) else value


class Steps(Sequence[tuple[Any, ...]]):
    """An immutable schedule: each step a tuple (``("split", stage, axis, factor)``, ...).

    Equal to another ``Steps`` or to the JSON list it stands for; hashable by its ``key``.
    """

    __slots__ = ("_key", "_steps")

    def __init__(self, steps: Iterable[Sequence[Any]] = ()) -> None:
        frozen = []
        for n, step in enumerate(steps):
            if not isinstance(step, list | tuple) or not step or not isinstance(step[0], str):
                raise ValueError(f"step {n} must be a list starting with the step's name, "
                                 f"got {step!r}")
            frozen.append(_freeze(step, f"step {n}"))
        self._steps: tuple[tuple[Any, ...], ...] = tuple(frozen)
        self._key: str | None = None

    @classmethod
    def of(cls, steps: Steps | Iterable[Sequence[Any]]) -> Steps:
        """``steps`` itself when it is a ``Steps`` already, else a new one."""
        return steps if isinstance(steps, Steps) else cls(steps)

    @classmethod
    def from_json(cls, doc: Any) -> Steps:
        if not isinstance(doc, list | tuple):
            raise ValueError(f"steps must be a list of steps, got {type(doc).__name__}")
        return cls(doc)

    def to_json(self) -> list[list[Any]]:
        """The steps as fresh JSON lists (the format of ``Schedule.steps``)."""
        return [_thaw(step) for step in self._steps]

    @property
    def key(self) -> str:
        """The compact JSON text of the steps: equal programs, equal keys."""
        if self._key is None:
            self._key = json.dumps(self.to_json(), separators=(",", ":"))
        return self._key

    # ------------------------------------------------------------------ the sequence
    def __len__(self) -> int:
        return len(self._steps)

    @overload
    def __getitem__(self, index: int) -> tuple[Any, ...]: ...

    @overload
    def __getitem__(self, index: slice) -> Steps: ...

    def __getitem__(self, index: int | slice) -> tuple[Any, ...] | Steps:
        if isinstance(index, slice):
            return Steps(self._steps[index])
        return self._steps[index]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._steps)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Steps):
            return self.key == other.key
        if isinstance(other, list):
            return self.to_json() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Steps({self.to_json()!r})"


def make_schedule(workload: Workload, steps: Steps | Iterable[Sequence[Any]] = ()
                  ) -> tuple[Schedule, list[Tensor]]:
    """The schedule of ``workload`` with ``steps`` replayed on it, and its argument tensors
    (inputs, then outputs: the order of ``build``). Raises ``ScheduleError`` naming the
    step that does not apply."""
    if not isinstance(steps, Steps | list | tuple):
        raise ScheduleError(f"steps must be a list of steps, got {type(steps).__name__}")
    args = workload.tensors()
    s = create_schedule(args[-workload.num_outputs:])
    s.replay(steps)
    return s, args
