"""A search task: one workload on one target, with the hardware facts the rules use."""

from __future__ import annotations

from dataclasses import dataclass, field

from schedule import Target, Workload, te


@dataclass
class SearchTask:
    """What to tune (``workload``) and where (``target``)."""

    workload: Workload
    target: Target
    name: str = field(default="")

    def __post_init__(self) -> None:
        self.target = Target.parse(self.target)
        if self.target.kind != "cpu":
            raise ValueError(f"search: no sketch rules for target kind {self.target.kind!r} yet")
        if not self.name:
            self.name = repr(self.workload)

    @property
    def cores(self) -> int:
        return self.target.cores

    def vector_lanes(self, dtype_bytes: int) -> int:
        return self.target.vector_lanes(dtype_bytes)

    @property
    def l1_bytes(self) -> int:
        return self.target.l1d_bytes

    @property
    def l2_bytes(self) -> int:
        return self.target.l2_bytes

    def new_schedule(self) -> tuple[te.Schedule, list[te.Tensor]]:
        """A fresh default schedule of the workload and its argument tensors."""
        args = self.workload.tensors()
        return te.create_schedule(args[-self.workload.num_outputs:]), args
