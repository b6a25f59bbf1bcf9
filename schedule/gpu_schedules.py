"""A GPU schedule for any tensor-expression DAG: every stage one thread per output element.

The GPU counterpart of a CPU program's default loop nest (a GPU target runs nothing on
the host, so every stage needs its loops bound): injective stages that are not outputs
(padding, bias, activations) are inlined into their consumers, and each remaining stage's
spatial axes are fused and split into blocks of ``threads`` threads. Reductions stay
serial inside each thread. Correct for every op; far from fast: the search's GPU sketches
are where speed comes from.
"""

from __future__ import annotations

from .schedule import Schedule, create_schedule
from .tensor import ComputeOp, Tensor


def fallback_gpu_schedule(outputs: Tensor | list[Tensor], threads: int = 64) -> Schedule:
    """A schedule of ``outputs`` whose every stage runs one GPU thread per element."""
    outs = outputs if isinstance(outputs, list) else [outputs]
    s = create_schedule(outs)
    for stage in list(s.stages):
        op = stage.op
        if not isinstance(op, ComputeOp) or stage.is_output:
            continue
        if op.is_injective:
            stage.compute_inline()
    for stage in list(s.stages):
        if not isinstance(stage.op, ComputeOp) or stage.attach == "inline":
            continue
        axes = list(stage.op.axis)
        fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
        block, thread = stage.split(fused, factor=threads)
        stage.bind(block, "blockIdx.x")
        stage.bind(thread, "threadIdx.x")
    return s
