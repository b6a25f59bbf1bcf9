"""A stored program as text, for people: its lowered loop IR and the source generated for
its target (C for cpu, CUDA or OpenCL C for a GPU, the instruction listing for vta), made
from (workload, target, steps) in a sandbox.

Steps and workloads come from the database, which takes records from users (imports,
uploads): lowering them runs their bounds arithmetic and the code generator on sizes a
record chose, so it happens in a child process with the sandbox's limits, never in the
server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schedule import (
    Steps,
    Target,
    Workload,
    gpu_source,
    kernel_source,
    lower,
    make_schedule,
    vta,
)

from .sandbox import Sandbox, SandboxError

#: Seconds to lower and generate one program (and, first, to start its sandbox).
PROGRAM_TEXT_TIMEOUT = 20.0
_MAX_TEXT = 1 << 20


class ProgramTextError(ValueError):
    """The program cannot be shown: its steps do not replay, its target has no code
    generation, or lowering it failed or took too long. The message says which."""


def lowered_program(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: the loop IR and generated source of ``steps`` on ``workload``."""
    started()
    workload = Workload.from_json(job["workload"])
    steps, target = Steps.of(job["steps"]), Target.parse(job["target"])
    if target.kind == "vta":  # the packed computation's loops, and the instruction listing
        compute, program = vta.compile_workload(workload, steps, vta.VtaConfig.for_target(
            target))
        func = lower(compute.schedule(steps), compute.tensors, unroll=False)
        return {"loop_ir": str(func)[:_MAX_TEXT], "source": str(program)[:_MAX_TEXT]}, []
    s, args = make_schedule(workload, steps)
    kernel = gpu_source(s, args, target) if target.is_gpu else kernel_source(s, args, target)
    return {"loop_ir": str(kernel.func)[:_MAX_TEXT], "source": kernel.source[:_MAX_TEXT]}, []


def program_text(workload: dict[str, Any], target: str, steps: list[list[Any]],
                 timeout: float = PROGRAM_TEXT_TIMEOUT) -> dict[str, str]:
    """``{"loop_ir": ..., "source": ...}`` of a program, made in a fresh sandbox (ended
    after). Raises :class:`ProgramTextError`."""
    sandbox = Sandbox()
    try:
        outcome = sandbox.call("workers.program_text:lowered_program",
                               {"workload": workload, "target": target, "steps": steps},
                               start_timeout=timeout, timeout=timeout)
    except SandboxError as err:
        raise ProgramTextError(f"the sandbox failed: {err}") from None
    finally:
        sandbox.close()
    if outcome.status == "raised":
        raise ProgramTextError(f"the program cannot be lowered: {outcome.message}")
    if outcome.status != "ok":
        raise ProgramTextError(f"lowering the program {outcome.message}")
    value = outcome.value
    if not (isinstance(value, dict) and isinstance(value.get("loop_ir"), str)
            and isinstance(value.get("source"), str)):
        raise ProgramTextError("the sandbox answered with malformed text")
    return {"loop_ir": value["loop_ir"], "source": value["source"]}
