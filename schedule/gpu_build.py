"""Building GPU programs: source, launch plan, OpenCL modules and CUDA binaries.

``gpu_source`` lowers a schedule for a ``cuda`` or ``opencl`` target and prints it in that
dialect, with a :class:`LaunchPlan` (plain JSON: which kernels run in which order over
which buffers, with what grid and block) so the program can be shipped to another process
and run there. :class:`OpenCLModule` runs a program through pyopencl (on PoCL, the CPU
implementation CI has, it checks that GPU schedules compute the right answer) and times
it with the queue's profiling events. :func:`compile_cuda` compiles CUDA source with
``nvcc`` to a cubin and reads each kernel's registers, spills and shared memory from
``ptxas -v`` (where ``nvcc`` is installed; no GPU is needed for that); :class:`CudaModule`
loads a cubin through the CUDA driver (``schedule.cuda_driver``), runs it and times it with
CUDA events, the L2 cache flushed between repeats.
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import dtype as dt
from .build import ArgSpec, ArrayKernel, BuildError, KernelSignature, run_compiler
from .codegen_gpu import generate_gpu
from .gpu_lower import GpuProgram, lower_gpu
from .loop_ir import LoweredFunc
from .lower import lower
from .schedule import Schedule
from .target import Target, opencl_device_name
from .tensor import Tensor


@dataclass(frozen=True)
class KernelLaunch:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: tuple[str, ...]  # buffer names: arguments or temporaries


@dataclass(frozen=True)
class LaunchPlan:
    """The kernels in launch order and the global temporaries (name, dtype, elements)."""

    kernels: tuple[KernelLaunch, ...]
    temporaries: tuple[tuple[str, str, int], ...]

    @classmethod
    def of(cls, program: GpuProgram) -> LaunchPlan:
        return cls(tuple(KernelLaunch(k.name, k.grid, k.block, tuple(b.name for b in k.params))
                         for k in program.kernels),
                   tuple((b.name, b.dtype, b.size) for b in program.temporaries))

    def to_json(self) -> dict[str, Any]:
        return {"kernels": [{"name": k.name, "grid": list(k.grid), "block": list(k.block),
                             "params": list(k.params)} for k in self.kernels],
                "temporaries": [list(t) for t in self.temporaries]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> LaunchPlan:
        try:
            kernels = tuple(KernelLaunch(str(k["name"]), _dims(k["grid"]), _dims(k["block"]),
                                         tuple(str(p) for p in k["params"]))
                            for k in doc["kernels"])
            temps = tuple((str(n), dt.check_dtype(d), int(size))
                          for n, d, size in doc["temporaries"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"malformed launch plan: {err}") from None
        return cls(kernels, temps)


def _dims(value: Any) -> tuple[int, int, int]:
    dims = tuple(int(v) for v in value)
    if len(dims) != 3 or min(dims) < 1:
        raise ValueError(f"grid and block need three positive sizes, got {value!r}")
    return dims  # type: ignore[return-value]


@dataclass(frozen=True)
class GpuSource:
    """A GPU program ready to compile or run: its source in ``dialect``, launch plan and
    argument signature, and the lowered function it came from."""

    source: str
    dialect: str
    plan: LaunchPlan
    signature: KernelSignature
    func: LoweredFunc
    program: GpuProgram


def gpu_source(s: Schedule, args: Sequence[Tensor], target: str | Target,
               name: str = "main") -> GpuSource:
    """Lower ``s`` for a cuda/opencl target and print it; ``ScheduleError`` when the
    schedule cannot run on a GPU (unbound stages, races, barriers in divergent code,
    over the target's per-block limits)."""
    target = Target.parse(target)
    if not target.is_gpu:
        raise ValueError(f"gpu_source: {target} is not a GPU target (cuda or opencl)")
    func = lower(s, args, name=name, unroll=False)
    program = lower_gpu(func, target)
    signature = KernelSignature(f"tt_{name}", tuple(
        ArgSpec(buf.name, buf.shape, buf.dtype, not s[t].is_placeholder)
        for buf, t in zip(func.args, args, strict=True)))
    return GpuSource(generate_gpu(program, target.kind), target.kind, LaunchPlan.of(program),
                     signature, func, program)


def timed_repeats(seconds_for: Callable[[int], float], number: int, repeat: int,
                  min_repeat_ms: int) -> list[float]:
    """Seconds per call, one figure per repeat: ``seconds_for(n)`` times ``n`` calls on the
    device; ``n`` grows (from ``number``, at most 2^20) until a repeat lasts
    ``min_repeat_ms``."""
    results = []
    for _ in range(repeat):
        while True:
            spent = seconds_for(number)
            if spent * 1000 >= min_repeat_ms or number >= 1 << 20:
                results.append(spent / number)
                break
            number = min(1 << 20, max(number + 1, int(number * 1.2 * min_repeat_ms
                                                      / max(spent * 1000, 1e-3))))
    return results


# ---------------------------------------------------------------------------- OpenCL


@functools.lru_cache(maxsize=4)
def opencl_queue(device: str) -> tuple[Any, Any]:
    """(context, profiling command queue) on the first device of the OpenCL platform the
    target calls ``device``; ``RuntimeError`` when there is none."""
    try:
        import pyopencl as cl
    except ImportError as err:
        raise RuntimeError(f"the opencl target needs pyopencl: {err}") from None
    try:
        platforms = cl.get_platforms()
    except cl.Error as err:
        raise RuntimeError(f"no OpenCL platform found (is an ICD such as Debian's "
                           f"pocl-opencl-icd installed?): {err}") from None
    for platform in platforms:
        if opencl_device_name(platform.name) == device:
            ctx = cl.Context([platform.get_devices()[0]])
            queue = cl.CommandQueue(
                ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
            return ctx, queue
    names = ", ".join(opencl_device_name(p.name) for p in platforms) or "none"
    raise RuntimeError(f"no OpenCL platform for device {device!r} (found: {names})")


class OpenCLModule(ArrayKernel):
    """A GPU program run through OpenCL: ``mod(a, b, c)`` copies the arrays to the
    device, launches the kernels in order and copies the outputs back."""

    def __init__(self, signature: KernelSignature, plan: LaunchPlan, source: str,
                 device: str, func: LoweredFunc | None = None):
        import pyopencl as cl

        super().__init__(signature)
        self.plan, self.source, self.func = plan, source, func
        self.ctx, self.queue = opencl_queue(device)
        start = time.perf_counter()
        try:
            program = cl.Program(self.ctx, source).build()
        except cl.Error as err:
            raise BuildError(f"OpenCL compilation failed:\n{str(err)[-4000:]}") from None
        self.build_seconds = time.perf_counter() - start
        self._kernels = [(getattr(program, k.name), k) for k in plan.kernels]
        self._temps = {name: cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE,
                                       max(1, size * dt.itemsize(dtype)))
                       for name, dtype, size in plan.temporaries}

    def _device_args(self, arrays: Sequence[np.ndarray]) -> dict[str, Any]:
        import pyopencl as cl

        flags = cl.mem_flags
        buffers = dict(self._temps)
        for arr, spec in zip(arrays, self.signature.args, strict=True):
            buffers[spec.name] = cl.Buffer(self.ctx, flags.READ_WRITE | flags.COPY_HOST_PTR,
                                           hostbuf=arr) if arr.nbytes else \
                cl.Buffer(self.ctx, flags.READ_WRITE, 1)
        return buffers

    def _launch(self, buffers: dict[str, Any]) -> list[Any]:
        events = []
        for kernel, launch in self._kernels:
            size = tuple(g * b for g, b in zip(launch.grid, launch.block, strict=True))
            events.append(kernel(self.queue, size, launch.block,
                                 *(buffers[p] for p in launch.params)))
        return events

    def __call__(self, *arrays: np.ndarray) -> None:
        import pyopencl as cl

        self.check_args(arrays)
        buffers = self._device_args(arrays)
        self._launch(buffers)
        for i in self._outputs:
            cl.enqueue_copy(self.queue, arrays[i], buffers[self.signature.args[i].name])
        self.queue.finish()

    def time(self, *arrays: np.ndarray, number: int = 1, repeat: int = 3,
             min_repeat_ms: int = 0, flush_bytes: int = 0) -> list[float]:
        """Device seconds per call (the kernels' profiling events, summed), one figure per
        repeat of ``number`` calls after a warm-up call; ``number`` grows until a repeat
        lasts ``min_repeat_ms``. ``flush_bytes`` is accepted for the runner's interface:
        device caches are not flushed between repeats."""
        self.check_timing(arrays, number, repeat, min_repeat_ms, flush_bytes)
        buffers = self._device_args(arrays)
        self._wait(self._launch(buffers))
        return timed_repeats(
            lambda calls: sum(self._wait(self._launch(buffers)) for _ in range(calls)),
            number, repeat, min_repeat_ms)

    def _wait(self, events: list[Any]) -> float:
        for e in events:
            e.wait()
        return sum((e.profile.end - e.profile.start) * 1e-9 for e in events)

    def __repr__(self) -> str:
        return f"OpenCLModule({self.signature.entry}, kernels={len(self.plan.kernels)})"


def build_opencl(s: Schedule, args: Sequence[Tensor], target: str | Target,
                 name: str = "main") -> OpenCLModule:
    """Lower, print as OpenCL C and build for the target's OpenCL device."""
    target = Target.parse(target)
    src = gpu_source(s, args, target, name)
    return OpenCLModule(src.signature, src.plan, src.source, target.device, src.func)


# ---------------------------------------------------------------------------- CUDA


@dataclass(frozen=True)
class KernelResources:
    """What ``ptxas`` reports for one kernel."""

    registers: int
    spill_bytes: int
    shared_bytes: int


@dataclass(frozen=True)
class CudaBinary:
    cubin: bytes
    resources: dict[str, KernelResources]
    build_seconds: float


_PTXAS_FUNC = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores")
_PTXAS_SHARED = re.compile(r"(\d+) bytes smem")


def nvcc_path() -> str | None:
    """``nvcc`` on the PATH or in /usr/local/cuda, else None."""
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.exists() else None


def compile_cuda(source: str, arch: str, timeout: float | None = 120) -> CudaBinary:
    """Compile CUDA C to a cubin for ``arch`` (``sm_80``) with ``nvcc``; ``BuildError``
    with the compiler's message when it fails or is missing."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise BuildError("nvcc not found: install the CUDA toolkit to compile cuda programs")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tt-cuda-") as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.cubin"
        src.write_text(source)
        proc = run_compiler([nvcc, "-cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v",
                             str(src), "-o", str(out)], timeout, "CUDA")
        cubin = out.read_bytes()
    return CudaBinary(cubin, _ptxas_resources(proc.stderr), time.perf_counter() - start)


def _ptxas_resources(log: str) -> dict[str, KernelResources]:
    out: dict[str, KernelResources] = {}
    current = None
    for line in log.splitlines():
        m = _PTXAS_FUNC.search(line)
        if m:
            current = m.group(1)
            continue
        if current is None:
            continue
        spill = _PTXAS_SPILL.search(line)
        if spill:
            out[current] = KernelResources(0, int(spill.group(1)), 0)
        regs = _PTXAS_REGS.search(line)
        if regs:
            shared = _PTXAS_SHARED.search(line)
            prior = out.get(current, KernelResources(0, 0, 0))
            out[current] = KernelResources(int(regs.group(1)), prior.spill_bytes,
                                           int(shared.group(1)) if shared else 0)
    return out


def check_cuda_resources(binary: CudaBinary, target: Target) -> None:
    """``ScheduleError`` when a kernel uses more registers per thread than the target
    allows (a kernel over a limit is never sent to a device)."""
    from .schedule import ScheduleError

    for name, res in binary.resources.items():
        if res.registers > target.registers_per_thread:
            raise ScheduleError(f"{name} uses {res.registers} registers per thread; the "
                                f"target allows {target.registers_per_thread}")


class CudaModule(ArrayKernel):
    """A compiled CUDA program on one device: ``mod(a, b, c)`` copies the arrays to the
    device, launches the kernels in order and copies the outputs back. ``BuildError`` when
    the driver refuses the cubin (built for another architecture, say); ``CudaUnavailable``
    without a driver or device. Call :meth:`close` to free the device memory."""

    def __init__(self, signature: KernelSignature, plan: LaunchPlan, cubin: bytes,
                 device: int = 0, func: LoweredFunc | None = None):
        from .cuda_driver import CudaError, driver

        super().__init__(signature)
        self.plan, self.func = plan, func
        self.info = driver().device_info(device)
        self.ctx = driver().context(device)
        try:
            module = self.ctx.load_module(cubin)
            self._kernels = [(self.ctx.function(module, k.name), k) for k in plan.kernels]
        except CudaError as err:
            self.ctx.close()
            raise BuildError(f"the CUDA driver refused the program for {self.info.name} "
                             f"({self.info.arch}): {err}") from None
        self._buffers = {name: self.ctx.alloc(size * dt.itemsize(dtype))
                         for name, dtype, size in plan.temporaries}
        self._arg_bytes = [int(np.prod(a.shape)) * dt.itemsize(a.dtype) for a in signature.args]
        for spec, nbytes in zip(signature.args, self._arg_bytes, strict=True):
            self._buffers[spec.name] = self.ctx.alloc(nbytes)
        self._flush: int | None = None

    def _copy_in(self, arrays: Sequence[np.ndarray]) -> None:
        for arr, spec, nbytes in zip(arrays, self.signature.args, self._arg_bytes, strict=True):
            self.ctx.to_device(self._buffers[spec.name], arr.ctypes.data, nbytes)

    def _launch(self) -> None:
        for fn, launch in self._kernels:
            self.ctx.launch(fn, launch.grid, launch.block,
                            [self._buffers[p] for p in launch.params])

    def __call__(self, *arrays: np.ndarray) -> None:
        self.check_args(arrays)
        self._copy_in(arrays)
        self._launch()
        self.ctx.synchronize()
        for i in self._outputs:
            spec = self.signature.args[i]
            self.ctx.to_host(arrays[i].ctypes.data, self._buffers[spec.name],
                             self._arg_bytes[i])

    def time(self, *arrays: np.ndarray, number: int = 1, repeat: int = 3,
             min_repeat_ms: int = 0, flush_bytes: int = 0) -> list[float]:
        """Device seconds per call (CUDA events around ``number`` calls), one figure per
        repeat, after a warm-up call; ``number`` grows until a repeat lasts
        ``min_repeat_ms``. Before each repeat the L2 cache is flushed by writing a buffer of
        twice its size (``flush_bytes`` is the CPU runner's setting, accepted and unused)."""
        self.check_timing(arrays, number, repeat, min_repeat_ms, flush_bytes)
        self._copy_in(arrays)
        self._launch()
        self.ctx.synchronize()
        flush_size = max(1 << 20, 2 * self.info.l2_bytes)
        if self._flush is None:
            self._flush = self.ctx.alloc(flush_size)
        start, end = self.ctx.event(), self.ctx.event()

        def calls_after_a_flush(calls: int) -> float:
            self.ctx.memset(self._flush, 0, flush_size)
            self.ctx.record(start)
            for _ in range(calls):
                self._launch()
            self.ctx.record(end)
            return self.ctx.elapsed_seconds(start, end)

        return timed_repeats(calls_after_a_flush, number, repeat, min_repeat_ms)

    def close(self) -> None:
        self.ctx.close()

    def __repr__(self) -> str:
        return f"CudaModule({self.signature.entry}, kernels={len(self.plan.kernels)}, " \
               f"device={self.info.name})"


def build_cuda(s: Schedule, args: Sequence[Tensor], target: str | Target,
               name: str = "main", device: int = 0) -> CudaModule:
    """Lower, print as CUDA C, compile with nvcc for the target's arch (checking the
    kernels' registers against its limit) and load on CUDA device ``device``."""
    target = Target.parse(target)
    src = gpu_source(s, args, target, name)
    binary = compile_cuda(src.source, target.arch)
    check_cuda_resources(binary, target)
    return CudaModule(src.signature, src.plan, binary.cubin, device, src.func)
