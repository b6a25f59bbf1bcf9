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
from pathlib import Path

import numpy as np

from . import dtype as dt
from .codegen_c import entry_name, generate_c
from .loop_ir import Buffer, LoweredFunc
from .lower import lower
from .schedule import Schedule
from .target import Target
from .tensor import Tensor

BASE_FLAGS = ("-O3", "-std=gnu11", "-shared", "-fPIC", "-fopenmp", "-fno-math-errno",
              "-fno-plt", "-w")


class BuildError(RuntimeError):
    """The C compiler rejected the generated program (a bug, or an unsupported construct)."""


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


class Module:
    """A compiled kernel callable on numpy arrays: ``mod(a, b, c)`` writes the outputs."""

    def __init__(self, func: LoweredFunc, source: str, library: Path, build_seconds: float,
                 outputs: set[str], flags: tuple[str, ...]):
        self.func = func
        self.source = source
        self.library_path = library
        self.build_seconds = build_seconds
        self.flags = flags
        self._outputs = outputs
        self._lib = ctypes.CDLL(str(library))
        self._fn = getattr(self._lib, entry_name(func))
        self._fn.argtypes = [ctypes.c_void_p] * len(func.args)
        self._fn.restype = ctypes.c_int32
        self._time_fn = getattr(self._lib, f"{entry_name(func)}_time")
        self._time_fn.argtypes = [ctypes.c_void_p] * len(func.args) + [
            ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p]
        self._time_fn.restype = ctypes.c_int32

    @property
    def args(self) -> list[Buffer]:
        return self.func.args

    def check_args(self, arrays: Sequence[np.ndarray]) -> None:
        if len(arrays) != len(self.func.args):
            raise TypeError(f"{self.func.name} takes {len(self.func.args)} arrays "
                            f"({', '.join(b.name for b in self.func.args)}), got {len(arrays)}")
        for arr, buf in zip(arrays, self.func.args, strict=True):
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"argument {buf.name} must be a numpy array, got "
                                f"{type(arr).__name__}")
            if arr.dtype != dt.numpy_dtype(buf.dtype):
                raise TypeError(f"argument {buf.name} must have dtype {buf.dtype}, got "
                                f"{arr.dtype}")
            if arr.shape != buf.shape:
                raise ValueError(f"argument {buf.name} must have shape {list(buf.shape)}, got "
                                 f"{list(arr.shape)}")
            if not arr.flags.c_contiguous:
                raise ValueError(f"argument {buf.name} must be C-contiguous "
                                 "(use np.ascontiguousarray)")
            if buf.name in self._outputs and not arr.flags.writeable:
                raise ValueError(f"output {buf.name} is read-only")
        for i, (arr, buf) in enumerate(zip(arrays, self.func.args, strict=True)):
            if buf.name not in self._outputs:
                continue
            for j, other in enumerate(arrays):
                if i != j and np.shares_memory(arr, other):
                    raise ValueError(f"output {buf.name} overlaps argument "
                                     f"{self.func.args[j].name}")

    def __call__(self, *arrays: np.ndarray) -> None:
        self.check_args(arrays)
        code = self._fn(*[a.ctypes.data for a in arrays])
        if code != 0:
            raise MemoryError(f"{self.func.name}: could not allocate an intermediate buffer")

    def time(self, *arrays: np.ndarray, number: int = 1, repeat: int = 3,
             min_repeat_ms: int = 0, flush_bytes: int = 0) -> list[float]:
        """Seconds per call, one figure per repeat, timed by a loop inside the native code
        (see ``codegen_c``): a warm-up call, then ``repeat`` timings of ``number`` calls,
        each lasting at least ``min_repeat_ms``; with ``flush_bytes`` > 0 a scratch buffer
        that large is written before each repeat to evict the caches."""
        self.check_args(arrays)
        for name, value in (("number", number), ("repeat", repeat)):
            if not 1 <= value < 2**31:
                raise ValueError(f"{name} must be between 1 and 2**31 - 1, got {value}")
        if min_repeat_ms < 0 or flush_bytes < 0:
            raise ValueError("min_repeat_ms and flush_bytes must not be negative")
        results = (ctypes.c_double * repeat)()
        code = self._time_fn(*[a.ctypes.data for a in arrays], number, repeat, min_repeat_ms,
                             flush_bytes, results)
        if code != 0:
            raise MemoryError(f"{self.func.name}: could not allocate a buffer while timing")
        return list(results)

    def __repr__(self) -> str:
        return f"Module({self.func.name}, args={[b.name for b in self.func.args]})"


def compile_source(source: str, flags: Sequence[str]) -> tuple[Path, float]:
    """Compile C source to a shared library (cached); returns its path and build seconds
    (0 on a cache hit)."""
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
        proc = subprocess.run([cc, *all_flags, str(src), "-o", str(out), "-lm"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"C compilation failed:\n{proc.stderr[-4000:]}")
        os.replace(out, library)
    return library, time.perf_counter() - start


def build(s: Schedule, args: Sequence[Tensor], target: str | Target = "cpu",
          name: str = "main") -> Module:
    """Lower, generate C and compile; returns a module callable on numpy arrays."""
    target = Target.parse(target)
    if target.kind != "cpu":
        raise ValueError(f"build: target {target} has no code generation yet (cpu only)")
    func = lower(s, args, name=name)
    source = generate_c(func, target.vector_bits // 8, target.cores)
    flags = tuple(target.compiler_flags())
    library, seconds = compile_source(source, flags)
    outputs = {func.args[i].name for i, t in enumerate(args) if not s[t].is_placeholder}
    return Module(func, source, library, seconds, outputs, flags)
