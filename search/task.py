"""A search task: one workload on one target, with the hardware facts the rules use."""

from __future__ import annotations

from dataclasses import dataclass, field

from schedule import Target, Workload

from .registry import check_task, searchable_kinds


@dataclass
class SearchTask:
    """What to tune (``workload``) and where (``target``; a string is parsed once here)."""

    workload: Workload
    target: Target
    name: str = field(default="")

    def __post_init__(self) -> None:
        self.target = Target.parse(self.target)
        if self.target.kind not in searchable_kinds():
            raise ValueError(f"search: no sketch rules for target kind {self.target.kind!r} "
                             f"yet (no registered policy searches it; searchable: "
                             f"{', '.join(searchable_kinds())})")
        check_task(self.workload, self.target)
        if not self.name:
            self.name = repr(self.workload)

    @property
    def cores(self) -> int:
        return self.target.cores

    def vector_lanes(self, dtype_bytes: int) -> int:
        return self.target.vector_lanes(dtype_bytes)
