"""Support for the GPU tests: skip markers (PoCL, OpenCL on the CPU, which .ci/run
installs, runs GPU programs; nvcc compiles CUDA ones; an NVIDIA GPU with its driver runs
them; without them those tests skip, saying why), and a CPU emulation of CUDA programs
(``run_on_cuda_emulator``) for the CUDA-only code paths where no GPU is lent."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from schedule import Target, cuda_missing, nvcc_path
from schedule.gpu_build import GpuSource
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
        source = src.splitlines()
        while source:
            line = source.pop(0)
            if not line.startswith(("__device__", "#include")):
                lines.append(line)
                continue
            shared = [line]  # a helper over several lines ends at its closing brace
            while shared[0].startswith("__device__") and not shared[-1].endswith("}"):
                shared.append(source.pop(0))
            if "\n".join(shared) not in seen:
                seen.add("\n".join(shared))
                lines += shared
    return "\n".join(lines)


_EMULATOR_HEADER = Path(__file__).parent / "cuda_emulator" / "cuda_emulator.h"
_C_TYPES = {"float32": "float", "int32": "int", "int64": "long long", "int8": "signed char",
            "uint8": "unsigned char"}

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ (C++20) is needed to emulate CUDA on the CPU")


def run_on_cuda_emulator(program: GpuSource, inputs: list[np.ndarray],
                         timeout: float = 60) -> list[np.ndarray]:
    """The outputs of a generated CUDA program run on the CPU by ``cuda_emulator.h`` (its
    blocks' threads as host threads, warp shuffles by their documented rules): how the
    tests check CUDA code's results where no GPU is lent. It runs as its own process, so
    a lane outside its shuffle mask (an abort) or lanes that never meet (a hang, stopped
    at ``timeout``) fail the calling test and nothing else."""
    specs = program.signature.args
    arrays = {spec.name: np.ascontiguousarray(value, dtype=spec.dtype)
              for spec, value in zip((a for a in specs if not a.is_output), inputs,
                                     strict=True)}
    arrays |= {spec.name: np.zeros(spec.shape, spec.dtype) for spec in specs
               if spec.is_output}
    arrays |= {name: np.zeros(size, dtype) for name, dtype, size in program.plan.temporaries}
    names = list(arrays)
    lines = [program.source, "#include <fstream>", "int main(int, char** files) {"]
    for i, name in enumerate(names):
        ctype, size = _C_TYPES[str(arrays[name].dtype)], arrays[name].nbytes
        lines += [f"  static {ctype} b{i}[{arrays[name].size}];",
                  f'  std::ifstream(files[{i + 1}], std::ios::binary).read((char*)b{i}, {size});']
    for k in program.plan.kernels:
        params = ", ".join(f"b{names.index(p)}" for p in k.params)
        grid, block = (", ".join(map(str, dims)) for dims in (k.grid, k.block))
        lines.append(f"  tt_emu::launch({{{grid}}}, {{{block}}}, [=] {{ {k.name}({params}); }});")
    for i, name in enumerate(names):
        lines.append(f"  std::ofstream(files[{i + 1}], std::ios::binary)"
                     f".write((char*)b{i}, {arrays[name].nbytes});")
    lines += ["}", ""]
    with tempfile.TemporaryDirectory(prefix="tt-cuda-emu-") as tmp:
        source, binary = Path(tmp) / "kernel.cpp", Path(tmp) / "kernel"
        source.write_text("\n".join(lines))
        subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-include",
                        str(_EMULATOR_HEADER), "-o", str(binary), str(source)],
                       check=True, capture_output=True, text=True, timeout=120)
        files = [Path(tmp) / f"{i}.bin" for i in range(len(names))]
        for name, file in zip(names, files, strict=True):
            arrays[name].tofile(file)
        subprocess.run([str(binary), *map(str, files)], check=True, timeout=timeout)
        return [np.fromfile(files[names.index(spec.name)], spec.dtype).reshape(spec.shape)
                for spec in specs if spec.is_output]
