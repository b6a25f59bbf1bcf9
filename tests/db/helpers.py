"""Record factories shared by the database tests (plain dicts, as the tuner will send)."""

from __future__ import annotations

import hashlib
from typing import Any

TARGET = "cpu -isa=avx512 -cores=2"
DEVICE = "AMD EPYC 9R45"
TOOLCHAIN = "gcc 12.2.0"


def key(name: str) -> str:
    """A workload key (32 hex digits) derived from a name."""
    return hashlib.sha256(name.encode()).hexdigest()[:32]


def workload(name: str) -> dict[str, Any]:
    size = 64 + sum(map(ord, name)) % 512
    return {"op": "matmul", "params": {"M": size, "N": size, "K": size, "dtype": "float32"}}


def record(
    name: str = "mm",
    costs: list[float] | None = None,
    *,
    error_kind: str = "none",
    timestamp: float = 1_790_000_000.0,
    target: str = TARGET,
    device_model: str = DEVICE,
    toolchain: str = TOOLCHAIN,
    steps: list[list[Any]] | None = None,
    job_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A valid record dict; costs default to [1e-3] (or [] for an error)."""
    if costs is None:
        costs = [] if error_kind != "none" else [1e-3]
    data = {
        "version": 1,
        "workload_key": key(name),
        "workload": workload(name),
        "flops": 2.0 * workload(name)["params"]["M"] ** 3,
        "target": target,
        "steps": steps if steps is not None else [["split", "C", "i", 8]],
        "costs": costs,
        "error_kind": error_kind,
        "error_msg": "" if error_kind == "none" else f"{error_kind} happened",
        "build_s": 0.25,
        "run_s": 0.05,
        "timestamp": timestamp,
        "host": "node-1",
        "device_model": device_model,
        "toolchain": toolchain,
        "flags": "-O3",
        "measure": {"number": 10, "repeat": len(costs) or 3, "min_repeat_ms": 0,
                    "cache_flush": True},
        "job_id": job_id,
    }
    data.update(extra)
    return data


def batch(start: int, stop: int, *, workloads: int = 5, prefix: str = "w") -> list[dict[str, Any]]:
    """Records number start..stop-1 spread over ``workloads`` workloads; record i always
    gets the same content, so overlapping ranges overlap in measurement ids."""
    out = []
    for i in range(start, stop):
        out.append(
            record(
                f"{prefix}{i % workloads}",
                [1e-3 * (1 + (i * 7919) % 1000) / 100, 2e-3],
                timestamp=1_790_000_000.0 + i,
                steps=[["split", "C", "i", 1 + i % 64], ["parallel", "C", "i.outer"]],
            )
        )
    return out
