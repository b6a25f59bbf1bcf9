"""Build a schedule into a native module: C source, the system compiler, ctypes.

Modules are cached by a hash of their source, flags and compiler version under
``$TENSORTUNE_HOME/kernels`` (default ``~/.tensortune/kernels``), written
atomically, so thousands of tuning candidates with equal programs compile once.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import dtype as dt
from .codegen_c import entry_name, generate_c
from .loop_ir import LoweredFunc
from .lower import lower
from .schedule import Schedule
from .target import Target
from .tensor import Tensor

BASE_FLAGS = ("-O3", "-std=gnu11", "-shared", "-fPIC", "-fopenmp", "-fno-math-errno",
              "-fno-plt", "-w")


class BuildError(RuntimeError):
    """The C compiler rejected the generated program (a bug, or an unsupported construct)."""


class CompileTimeout(BuildError):
    """The C compiler did not finish within the allowed time (it was killed)."""


def tensortune_home() -> Path:
    return Path(os.environ.get("TENSORTUNE_HOME", Path.home() / ".tensortune"))


@functools.lru_cache(maxsize=4)
def compiler_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BuildError(f"C compiler {cc!r} cannot be run: {err}") from None
    return out.stdout.splitlines()[0].strip() if out.stdout else cc


def c_compiler() -> str:
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        raise BuildError(f"C compiler {cc!r} not found; install gcc or set CC")
    return cc


@dataclass(frozen=True)
class ArgSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    is_output: bool


@dataclass(frozen=True)
class KernelSignature:
    """What a caller needs to load and call a compiled kernel: its entry symbol and its
    arguments. Plain data (``to_json``), so a built library can be shipped to another
    process or node and loaded there with ``load_module``."""

    entry: str
    args: tuple[ArgSpec, ...]

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry,
                "args": [[a.name, list(a.shape), a.dtype, a.is_output] for a in self.args]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> KernelSignature:
        try:
            args = tuple(ArgSpec(str(n), tuple(int(x) for x in shape), dt.check_dtype(d),
                                 bool(o)) for n, shape, d, o in doc["args"])
            return cls(str(doc["entry"]), args)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"malformed kernel signature: {err}") from None


class ArrayKernel:
    """What every built program shares, whatever runs it: a signature, and the check that
    the numpy arrays a caller passes fit it."""

    def __init__(self, signature: KernelSignature):
        self.signature = signature
        #: per argument what ``check_fit`` compares: shape, numpy dtype, whether written
        self._fits = [(a.shape, dt.numpy_dtype(a.dtype), a.is_output) for a in signature.args]
        self._outputs = [i for i, a in enumerate(signature.args) if a.is_output]

    def check_args(self, arrays: Sequence[np.ndarray]) -> None:
        """Raise a clear error unless ``arrays`` fit the kernel: count, type, dtype, shape,
        C order, writable outputs that overlap no other argument. The common case (all
        fine) takes a fast path: a call costs microseconds, which matter to small kernels."""
        self.check_fit(arrays)
        if any(i != j and np.may_share_memory(arrays[i], other)  # exact: C order
               for i in self._outputs for j, other in enumerate(arrays)):
            self._explain(arrays)

    def check_fit(self, arrays: Sequence[np.ndarray]) -> None:
        """``check_args`` without the overlap of outputs and other arguments."""
        if len(arrays) != len(self._fits):
            self._explain(arrays)
        for arr, (shape, dtype, is_output) in zip(arrays, self._fits, strict=True):
            if type(arr) is not np.ndarray or arr.shape != shape or arr.dtype != dtype:
                self._explain(arrays)
            flags = arr.flags
            if not flags.c_contiguous or (is_output and not flags.writeable):
                self._explain(arrays)

    def _explain(self, arrays: Sequence[np.ndarray]) -> None:
        specs = self.signature.args
        if len(arrays) != len(specs):
            raise TypeError(f"the kernel takes {len(specs)} arrays "
                            f"({', '.join(a.name for a in specs)}), got {len(arrays)}")
        for arr, spec in zip(arrays, specs, strict=True):
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"argument {spec.name} must be a numpy array, got "
                                f"{type(arr).__name__}")
            if arr.dtype != dt.numpy_dtype(spec.dtype):
                raise TypeError(f"argument {spec.name} must have dtype {spec.dtype}, got "
                                f"{arr.dtype}")
            if arr.shape != spec.shape:
                raise ValueError(f"argument {spec.name} must have shape {list(spec.shape)}, "
                                 f"got {list(arr.shape)}")
            if not arr.flags.c_contiguous:
                raise ValueError(f"argument {spec.name} must be C-contiguous "
                                 "(use np.ascontiguousarray)")
            if spec.is_output and not arr.flags.writeable:
                raise ValueError(f"output {spec.name} is read-only")
        for i in self._outputs:
            for j, other in enumerate(arrays):
                if i != j and np.shares_memory(arrays[i], other):
                    raise ValueError(f"output {specs[i].name} overlaps argument "
                                     f"{specs[j].name}")

    def check_timing(self, arrays: Sequence[np.ndarray], number: int, repeat: int,
                     min_repeat_ms: int, flush_bytes: int) -> None:
        """``check_args`` plus the timing settings' bounds."""
        self.check_args(arrays)
        for name, value in (("number", number), ("repeat", repeat)):
            if not 1 <= value < 2**31:
                raise ValueError(f"{name} must be between 1 and 2**31 - 1, got {value}")
        if min_repeat_ms < 0 or flush_bytes < 0:
            raise ValueError("min_repeat_ms and flush_bytes must not be negative")


class Module(ArrayKernel):
    """A compiled kernel callable on numpy arrays: ``mod(a, b, c)`` writes the outputs.
    The module keeps a reference to the arrays of its last call (see ``_pointers``)."""

    def __init__(self, signature: KernelSignature, library: Path, source: str = "",
                 build_seconds: float = 0.0, func: LoweredFunc | None = None,
                 flags: tuple[str, ...] = ()):
        super().__init__(signature)
        self.func = func
        self.source = source
        self.library_path = library
        self.build_seconds = build_seconds
        self.flags = flags
        n = len(signature.args)
        self._lib = ctypes.CDLL(str(library))
        self._fn = getattr(self._lib, signature.entry)
        self._fn.argtypes = [ctypes.c_void_p] * n
        self._fn.restype = ctypes.c_int32
        self._time_fn = getattr(self._lib, f"{signature.entry}_time")
        self._time_fn.argtypes = [ctypes.c_void_p] * n + [
            ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_double,
            ctypes.c_void_p]
        self._time_fn.restype = ctypes.c_int32
        self._held: tuple[tuple[np.ndarray, ...], tuple[int, ...], list[int]] | None = None

    def __call__(self, *arrays: np.ndarray) -> None:
        code = self._fn(*self._pointers(arrays))
        if code != 0:
            raise MemoryError("the kernel could not allocate an intermediate buffer")

    def time(self, *arrays: np.ndarray, number: int = 1, repeat: int = 3,
             min_repeat_ms: int = 0, flush_bytes: int = 0,
             warm_s: float | None = None) -> list[float]:
        """Seconds per call, one figure per repeat, timed by a loop inside the native code
        (see ``codegen_c``): a warm-up call (unless ``warm_s`` is given: the caller made one,
        which took that many seconds), then ``repeat`` timings of ``number`` calls, each
        lasting at least ``min_repeat_ms`` (``number`` grows from the warm-up call's time
        where that says too few); with ``flush_bytes`` > 0 a scratch buffer that large is
        written before each repeat to evict the caches."""
        self.check_timing(arrays, number, repeat, min_repeat_ms, flush_bytes)
        results = (ctypes.c_double * repeat)()
        code = self._time_fn(*[_address(a) for a in arrays], number, repeat, min_repeat_ms,
                             flush_bytes, -1.0 if warm_s is None else max(warm_s, 0.0),
                             results)
        if code != 0:
            raise MemoryError("the kernel could not allocate a buffer while timing")
        return list(results)

    def _pointers(self, arrays: tuple[np.ndarray, ...]) -> list[int]:
        """The arrays' addresses, checked (``check_args``). The arrays of the last call are
        held with their addresses: passed again, only what an array can change in place
        (shape, dtype, flags) is checked again, which saves most of a call's microseconds
        for small kernels. Held, an array cannot be resized in place (numpy refuses while
        another reference exists), so its address stays valid."""
        held = self._held
        ids = tuple(map(id, arrays))  # the held arrays are alive: their ids are theirs alone
        if held is not None and ids == held[1]:
            self.check_fit(arrays)
            return held[2]
        self.check_args(arrays)
        pointers = [_address(a) for a in arrays]
        self._held = (arrays, ids, pointers)  # one assignment: a thread reads it whole
        return pointers

    def __repr__(self) -> str:
        return f"Module({self.signature.entry}, args={[a.name for a in self.signature.args]})"


def _address(a: np.ndarray) -> int:
    """The address of an array's data: through the buffer protocol where it is writable and
    not empty (about 3x faster than ``a.ctypes.data``)."""
    if a.flags.writeable and a.nbytes:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return a.ctypes.data


def load_module(library: str | Path, signature: KernelSignature) -> Module:
    """Load a compiled kernel library (e.g. one built on another node) for calling/timing."""
    return Module(signature, Path(library))


def compile_source(source: str, flags: Sequence[str],
                   timeout: float | None = None) -> tuple[Path, float]:
    """Compile C source to a shared library (cached by content); returns its path and the
    build seconds (0 on a cache hit). Raises ``CompileTimeout`` after ``timeout`` seconds."""
    cc = c_compiler()
    all_flags = (*BASE_FLAGS, *flags)
    digest = hashlib.sha256("\0".join([compiler_version(cc), *all_flags, source])
                            .encode()).hexdigest()[:32]
    cache = tensortune_home() / "kernels"
    cache.mkdir(parents=True, exist_ok=True)
    library = cache / f"{digest}.so"
    if library.exists():
        return library, 0.0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tt-build-", dir=cache) as tmp:
        src = Path(tmp) / "kernel.c"
        src.write_text(source)
        out = Path(tmp) / "kernel.so"
        run_compiler([cc, *all_flags, str(src), "-o", str(out), "-lm"], timeout)
        os.replace(out, library)
    return library, time.perf_counter() - start


@dataclass(frozen=True)
class Artifact:
    """A compiled kernel on disk, not yet loaded: what a builder hands to a runner."""

    library: Path
    signature: KernelSignature
    source: str
    flags: tuple[str, ...]
    build_seconds: float
    func: LoweredFunc

    def load(self) -> Module:
        return Module(self.signature, self.library, self.source, self.build_seconds,
                      self.func, self.flags)


@dataclass(frozen=True)
class KernelSource:
    """A kernel's C source with its entry point and compiler flags, not yet compiled."""

    source: str
    signature: KernelSignature
    flags: tuple[str, ...]
    func: LoweredFunc


def kernel_source(s: Schedule, args: Sequence[Tensor], target: str | Target = "cpu",
                  name: str = "main") -> KernelSource:
    """Lower and generate C (the entry point is ``tt_<name>``), without compiling."""
    target = Target.parse(target)
    if target.kind != "cpu":
        raise ValueError(f"build: target {target} has no code generation yet (cpu only)")
    func = lower(s, args, name=name)
    source = generate_c(func, target.vector_bits // 8, target.cores,
                        x86_vnni=target.isa == "avx512", masked_tails=target.masked_vectors)
    signature = KernelSignature(entry_name(func), tuple(
        ArgSpec(buf.name, buf.shape, buf.dtype, not s[t].is_placeholder)
        for buf, t in zip(func.args, args, strict=True)))
    return KernelSource(source, signature, tuple(target.compiler_flags()), func)


def compile_schedule(s: Schedule, args: Sequence[Tensor], target: str | Target = "cpu",
                     name: str = "main", timeout: float | None = None) -> Artifact:
    """Lower, generate C and compile, without loading the library into this process."""
    k = kernel_source(s, args, target, name)
    library, seconds = compile_source(k.source, k.flags, timeout)
    return Artifact(library, k.signature, k.source, k.flags, seconds, k.func)


def compile_library(sources: Sequence[str], flags: Sequence[str],
                    timeout: float | None = None) -> tuple[Path, float]:
    """Compile several kernels (distinct entry names; their helpers are ``static``) into
    one shared library: each source to an object file, in parallel, then one link. Cached
    by content like ``compile_source``; returns the library's path and the build seconds
    (0 on a cache hit)."""
    from concurrent.futures import ThreadPoolExecutor

    cc = c_compiler()
    all_flags = (*BASE_FLAGS, *flags)
    digest = hashlib.sha256("\0".join([compiler_version(cc), *all_flags, "library", *sources])
                            .encode()).hexdigest()[:32]
    cache = tensortune_home() / "kernels"
    cache.mkdir(parents=True, exist_ok=True)
    library = cache / f"lib-{digest}.so"
    if library.exists():
        return library, 0.0
    start = time.perf_counter()
    object_flags = [f for f in all_flags if f != "-shared"]
    with tempfile.TemporaryDirectory(prefix="tt-link-", dir=cache) as tmp:
        def compile_one(i: int) -> Path:
            src, obj = Path(tmp) / f"k{i}.c", Path(tmp) / f"k{i}.o"
            src.write_text(sources[i])
            run_compiler([cc, *object_flags, "-c", str(src), "-o", str(obj)], timeout)
            return obj

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            objects = list(pool.map(compile_one, range(len(sources))))
        out = Path(tmp) / "lib.so"
        run_compiler([cc, *all_flags, *map(str, objects), "-o", str(out), "-lm"], timeout)
        os.replace(out, library)
    return library, time.perf_counter() - start


def run_compiler(command: list[str], timeout: float | None,
                 language: str = "C") -> subprocess.CompletedProcess[str]:
    """Run a compiler; ``CompileTimeout`` past ``timeout``, ``BuildError`` with the end of
    its messages when it fails. Returns the finished process (its messages included)."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CompileTimeout(f"{language} compilation took longer than {timeout} s") from None
    if proc.returncode != 0:
        raise BuildError(f"{language} compilation failed:\n{proc.stderr[-4000:]}")
    return proc


def build(s: Schedule, args: Sequence[Tensor], target: str | Target = "cpu",
          name: str = "main", timeout: float | None = None) -> ArrayKernel:
    """Lower, generate code and compile; returns a module callable on numpy arrays (C for
    a cpu target, OpenCL C run through pyopencl for an opencl target, a cubin loaded on the
    first CUDA device for a cuda target)."""
    target = Target.parse(target)
    if target.kind == "opencl":
        from .gpu_build import build_opencl  # it builds on this module

        return build_opencl(s, args, target, name)
    if target.kind == "cuda":
        from .gpu_build import build_cuda

        return build_cuda(s, args, target, name)
    return compile_schedule(s, args, target, name, timeout).load()
