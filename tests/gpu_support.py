"""Skip markers for the GPU tests: PoCL (OpenCL on the CPU, which .ci/run installs) runs
GPU programs, nvcc compiles CUDA ones, an NVIDIA GPU with its driver runs them; without
them those tests skip, saying why."""

from __future__ import annotations

import functools

import pytest

from schedule import Target, cuda_missing, nvcc_path
from schedule.target import host_cuda_target

POCL = "opencl -device=pocl"


@functools.lru_cache(maxsize=1)
def pocl_missing() -> str:
    """Why PoCL cannot run programs here ("" when it can)."""
    try:
        from schedule.gpu_build import opencl_queue

        opencl_queue("pocl")
    except Exception as err:  # no pyopencl, no ICD loader, no PoCL platform
        return f"{type(err).__name__}: {err}"
    return ""


needs_pocl = pytest.mark.skipif(bool(pocl_missing()),
                                reason=f"PoCL is not usable here ({pocl_missing()}); "
                                       ".ci/run installs Debian's pocl-opencl-icd")
needs_nvcc = pytest.mark.skipif(nvcc_path() is None,
                                reason="nvcc (the CUDA toolkit) is not installed")
needs_cuda = pytest.mark.skipif(
    nvcc_path() is None or bool(cuda_missing()),
    reason=f"no NVIDIA GPU to run CUDA programs on here ({cuda_missing() or 'no nvcc'}); "
           "these tests run where one is (the device tool lends one to some sessions)")


def cuda_target() -> Target:
    """The target of this machine's first GPU (only where ``needs_cuda`` lets a test run)."""
    return host_cuda_target()


def cuda_translation_unit(sources: list[str]) -> str:
    """Several generated CUDA programs as one file (their shared lines printed once), so one
    nvcc run compiles them all."""
    lines: list[str] = []
    seen: set[str] = set()
    for src in sources:
        for line in src.splitlines():
            if line.startswith(("__device__", "#include")):
                if line in seen:
                    continue
                seen.add(line)
            lines.append(line)
    return "\n".join(lines)
