"""Hardware targets: what a schedule is built for and measured on.

A :class:`Target` names a device kind (``cpu``, ``cuda``, ``opencl`` or ``vta``) and the
options that change which program is best on it (the CPU's ISA and core count, the GPU
architecture and its per-block limits, the OpenCL device, the VTA configuration). Its
canonical string, e.g. ``cpu -isa=avx512 -cores=2``, ``cuda -arch=sm_90``,
``opencl -device=pocl`` or ``vta -config=1x16x16``, is part of every tuning record's
identity, so it is deterministic and round-trips: ``Target.parse(str(t)) == t``.

Canonical form: the kind, then ``-key=value`` options in the fixed key order below; keys
that are always written are marked "always", the others only when they differ from their
default (or, for ``vector-bits``, from what the ISA implies).

========  ==========================================================================
kind      options, in canonical order
========  ==========================================================================
cpu       ``isa`` (always; avx512 | avx2 | sse4 | neon | generic), ``cores`` (always;
          1..1024), ``vector-bits`` (power of two, 64..2048; default: implied by isa)
cuda      ``arch`` (always; ``sm_<1 to 4 digits>``), ``max-threads-per-block``
          (1..1024, default 1024), ``shared-memory-bytes`` (1..1 MiB, default 49152),
          ``registers-per-thread`` (16..255, default 255)
opencl    ``device`` (always; a short lower-case name such as ``pocl``),
          ``max-threads-per-block`` and ``shared-memory-bytes`` as for cuda
vta       ``config`` (always; ``BATCHxBLOCK_INxBLOCK_OUT``, powers of two, each at most
          256, default ``1x16x16``)
========  ==========================================================================

Facts about the physical device that do not change which program is best in a way the
record should be keyed on (cache sizes, the CPU model name, the GPU name) live in the
separate ``facts`` field, which equality, hashing and the canonical string ignore: two
targets parsed from the same string compare equal on every machine.

``Target.parse("cpu")`` means the host CPU (:func:`host_cpu_target`); options given after
the kind override what was detected (``cpu -isa=avx2`` keeps the host's core count).
``Target.parse("cuda")`` asks ``nvidia-smi`` for the first GPU's architecture;
``Target.parse("opencl")`` names the first OpenCL platform (through pyopencl). The
environment variable ``TENSORTUNE_CPU_ISA`` lowers the detected host ISA (to test, say,
the AVX2 path on an AVX-512 machine); it must name an ISA the host supports.

Every numeric option is bounded (``MAX_CORES`` cores at most, whatever the host), so a
target string from a request can never ask the generated code for absurd resources. A
target may still name more cores than the machine that runs it has: a device checks that
with :meth:`Target.check_cores` (or caps its threads with :meth:`Target.threads`).

This module imports only the standard library.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CPU_ISAS",
    "CPU_ISA_ENV",
    "DEFAULT_VTA_CONFIG",
    "MAX_CORES",
    "MAX_SHARED_MEMORY_BYTES",
    "MAX_VTA_DIM",
    "TARGET_KINDS",
    "Target",
    "cuda_arch",
    "host_cores",
    "host_cpu_target",
    "host_cuda_target",
    "host_opencl_target",
    "nvidia_gpus",
]

TARGET_KINDS: tuple[str, ...] = ("cpu", "cuda", "opencl", "vta")
"""The accepted target kinds."""

CPU_ISAS: tuple[str, ...] = ("avx512", "avx2", "sse4", "neon", "generic")
"""The accepted CPU ISA names."""

CPU_ISA_ENV = "TENSORTUNE_CPU_ISA"
"""Environment variable that lowers the ISA detected for the host CPU."""

DEFAULT_VTA_CONFIG = "1x16x16"

MAX_CORES = 1024
"""The most cores a cpu target may name (the generated code's ``num_threads``)."""

MAX_SHARED_MEMORY_BYTES = 1 << 20
"""The most shared memory per block a cuda target may name."""

MAX_VTA_DIM = 256
"""The largest batch / block size of a vta configuration."""

_MAX_INT_DIGITS = 20  # longer digit strings are refused before int() sees them

OptionValue = int | str

# Canonical option order per kind; this order is part of the record format.
_KEY_ORDER: dict[str, tuple[str, ...]] = {
    "cpu": ("isa", "cores", "vector-bits"),
    "cuda": ("arch", "max-threads-per-block", "shared-memory-bytes", "registers-per-thread"),
    "opencl": ("device", "max-threads-per-block", "shared-memory-bytes"),
    "vta": ("config",),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "cpu": ("isa", "cores"),
    "cuda": ("arch",),
    "opencl": ("device",),
    "vta": ("config",),
}
_INT_KEYS = frozenset({"cores", "vector-bits", "max-threads-per-block", "shared-memory-bytes",
                       "registers-per-thread"})
_GPU_DEFAULTS: dict[str, int] = {"max-threads-per-block": 1024, "shared-memory-bytes": 49152,
                                 "registers-per-thread": 255}
GPU_KINDS: tuple[str, ...] = ("cuda", "opencl")
"""Target kinds that run the GPU lowering (grids of blocks of threads)."""
WARP_SIZE = 32

_ISA_VECTOR_BITS: dict[str, int] = {
    "avx512": 512,
    "avx2": 256,
    "sse4": 128,
    "neon": 128,
    "generic": 128,
}
# gcc flags per ISA. They depend only on the ISA (never -march=native): the machine that
# builds a candidate may differ from the one that runs it.
_ISA_GCC_FLAGS: dict[str, tuple[str, ...]] = {
    "avx512": ("-march=x86-64-v4", "-mprefer-vector-width=512"),
    "avx2": ("-march=x86-64-v3",),
    "sse4": ("-march=x86-64-v2",),
    "neon": ("-march=armv8-a",),
    "generic": (),
}
# ISAs a host of each architecture family can run, weakest first.
_FAMILY_ISAS: dict[str, tuple[str, ...]] = {
    "x86": ("generic", "sse4", "avx2", "avx512"),
    "arm": ("generic", "neon"),
    "other": ("generic",),
}
_ISA_FAMILY: dict[str, str] = {"avx512": "x86", "avx2": "x86", "sse4": "x86", "neon": "arm"}

_DEFAULT_CACHE_BYTES: dict[str, int] = {
    "l1d_bytes": 32 * 1024,
    "l2_bytes": 1024 * 1024,
    "l3_bytes": 8 * 1024 * 1024,
}
_UNKNOWN_MODEL = "unknown"

_SM_RE = re.compile(r"sm_\d{1,4}")
_DEVICE_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_DIGITS_RE = re.compile(r"\d+")
_VTA_RE = re.compile(r"(\d+)x(\d+)x(\d+)")


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


# ---------------------------------------------------------------------------------------
# Option validation (shared by the constructor and the parser)
# ---------------------------------------------------------------------------------------


def _to_int(kind: str, key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{kind} option -{key}={value!r}: expected an integer, got a bool")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _DIGITS_RE.fullmatch(value):
        if len(value) > _MAX_INT_DIGITS:
            raise ValueError(f"{kind} option -{key}={value[:24]}...: the number is too large")
        return int(value)
    raise ValueError(f"{kind} option -{key}={value}: expected a non-negative integer")


def _validate_option(kind: str, key: str, value: Any) -> OptionValue:
    """Return the normalized value of one option, or raise ValueError naming it."""
    accepted = _KEY_ORDER[kind]
    if key not in accepted:
        raise ValueError(
            f"unknown option -{key} for target kind {kind!r}; "
            f"accepted: {', '.join('-' + k for k in accepted)}"
        )
    if key in _INT_KEYS:
        n = _to_int(kind, key, value)
        if key == "cores" and not 1 <= n <= MAX_CORES:
            raise ValueError(f"cpu option -cores={n}: must be in 1..{MAX_CORES}")
        if key == "vector-bits" and not (_is_power_of_two(n) and 64 <= n <= 2048):
            raise ValueError(
                f"cpu option -vector-bits={n}: must be a power of two between 64 and 2048"
            )
        if key == "max-threads-per-block" and not 1 <= n <= 1024:
            raise ValueError(f"{kind} option -max-threads-per-block={n}: must be in 1..1024")
        if key == "shared-memory-bytes" and not 1 <= n <= MAX_SHARED_MEMORY_BYTES:
            raise ValueError(f"{kind} option -shared-memory-bytes={n}: must be in "
                             f"1..{MAX_SHARED_MEMORY_BYTES}")
        if key == "registers-per-thread" and not 16 <= n <= 255:
            raise ValueError(f"cuda option -registers-per-thread={n}: must be in 16..255")
        return n
    if not isinstance(value, str):
        raise ValueError(f"{kind} option -{key}={value!r}: expected a string")
    if key == "isa":
        if value not in CPU_ISAS:
            raise ValueError(
                f"unknown cpu isa {value!r} in -isa={value}; accepted: {', '.join(CPU_ISAS)}"
            )
        return value
    if key == "arch":
        if not _SM_RE.fullmatch(value):
            raise ValueError(
                f"bad cuda arch {value[:40]!r} in -arch={value[:40]}; expected sm_<1 to 4 "
                "digits>, e.g. sm_80, sm_90"
            )
        return value
    if key == "device":
        if not _DEVICE_RE.fullmatch(value):
            raise ValueError(f"bad opencl device {value[:40]!r} in -device={value[:40]}; "
                             "expected a short lower-case name such as pocl")
        return value
    if key == "config":
        m = _VTA_RE.fullmatch(value) if len(value) <= 3 * _MAX_INT_DIGITS else None
        if not m or not all(len(g) <= _MAX_INT_DIGITS and _is_power_of_two(int(g))
                            and int(g) <= MAX_VTA_DIM for g in m.groups()):
            raise ValueError(
                f"bad vta config {value[:64]!r} in -config={value[:64]}; expected "
                f"BATCHxBLOCK_INxBLOCK_OUT with powers of two up to {MAX_VTA_DIM}, "
                "e.g. 1x16x16"
            )
        return "x".join(str(int(g)) for g in m.groups())
    raise AssertionError(f"unhandled option {key!r}")  # pragma: no cover


def _is_default(kind: str, key: str, value: OptionValue, opts: Mapping[str, OptionValue]) -> bool:
    if kind == "cpu" and key == "vector-bits":
        return value == _ISA_VECTOR_BITS[str(opts["isa"])]
    if kind in GPU_KINDS:
        return _GPU_DEFAULTS.get(key) == value
    return False


def _normalize_attrs(
    kind: str, attrs: Mapping[str, Any] | Iterable[tuple[str, Any]]
) -> tuple[tuple[str, OptionValue], ...]:
    """Validate options and return them in canonical order, defaults dropped."""
    items = list(attrs.items()) if isinstance(attrs, Mapping) else [tuple(p) for p in attrs]
    opts: dict[str, OptionValue] = {}
    for pair in items:
        if len(pair) != 2 or not isinstance(pair[0], str):
            raise ValueError(f"{kind} target attrs must be (key, value) pairs, got {pair!r}")
        key, value = pair
        if key in opts:
            raise ValueError(f"option -{key} given twice for target kind {kind!r}")
        opts[key] = _validate_option(kind, key, value)
    if kind == "vta":
        opts.setdefault("config", DEFAULT_VTA_CONFIG)
    missing = [k for k in _REQUIRED[kind] if k not in opts]
    if missing:
        raise ValueError(
            f"{kind} target is missing {', '.join('-' + k for k in missing)} "
            f"(use Target.parse({kind!r}) to detect it from this machine)"
        )
    return tuple(
        (k, opts[k])
        for k in _KEY_ORDER[kind]
        if k in opts and (k in _REQUIRED[kind] or not _is_default(kind, k, opts[k], opts))
    )


def _normalize_facts(
    facts: Mapping[str, Any] | Iterable[tuple[str, Any]],
) -> tuple[tuple[str, OptionValue], ...]:
    items = facts.items() if isinstance(facts, Mapping) else facts
    return tuple(sorted(((str(k), v) for k, v in items), key=lambda kv: kv[0]))


# ---------------------------------------------------------------------------------------
# Target
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Target:
    """An immutable, hashable description of a device to build and measure on.

    ``kind`` is one of :data:`TARGET_KINDS`; ``attrs`` holds the identity options as
    ``(key, value)`` pairs in canonical order with default values dropped (a mapping is
    accepted and normalized). ``facts`` holds non-identity device facts (``model_name``,
    ``l1d_bytes``, ``l2_bytes``, ``l3_bytes`` for a CPU; ``model_name`` for a GPU); it is
    ignored by ``==``, ``hash`` and the canonical string. Prefer :meth:`parse`,
    :meth:`cpu`, :meth:`cuda` or :meth:`vta` to building one directly.
    """

    kind: str
    attrs: tuple[tuple[str, OptionValue], ...] = ()
    facts: tuple[tuple[str, OptionValue], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.kind not in TARGET_KINDS:
            raise ValueError(
                f"unknown target kind {self.kind!r}; accepted: {', '.join(TARGET_KINDS)}"
            )
        object.__setattr__(self, "attrs", _normalize_attrs(self.kind, self.attrs))
        object.__setattr__(self, "facts", _normalize_facts(self.facts))

    # -- construction -------------------------------------------------------------------

    @classmethod
    def parse(cls, spec: Target | str) -> Target:
        """Parse ``"kind -key=value ..."`` (or return a Target unchanged).

        ``"cpu"`` alone is the detected host CPU, and options given for ``cpu`` override
        what was detected; ``"cuda"`` without ``-arch`` asks ``nvidia-smi``; ``"vta"``
        alone is the default configuration. Raises ``ValueError`` naming the bad part
        (unknown kind or key, malformed option, bad value) and listing accepted ones.
        """
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"a target is a string or a Target, not {type(spec).__name__}")
        tokens = spec.split()
        if not tokens:
            raise ValueError(f"empty target string; accepted kinds: {', '.join(TARGET_KINDS)}")
        kind, options = tokens[0], tokens[1:]
        if kind not in TARGET_KINDS:
            raise ValueError(
                f"unknown target kind {kind!r} in {spec!r}; accepted: {', '.join(TARGET_KINDS)}"
            )
        opts: dict[str, str] = {}
        for token in options:
            key, sep, value = token[1:].partition("=")
            if not token.startswith("-") or token.startswith("--") or not sep or not key:
                raise ValueError(
                    f"malformed option {token!r} in target {spec!r}; expected -key=value"
                )
            if not value:
                raise ValueError(f"option {token!r} in target {spec!r} has an empty value")
            if key in opts:
                raise ValueError(f"option -{key} given twice in target {spec!r}")
            # Validate here so the message is about the text the user wrote.
            _validate_option(kind, key, value)
            opts[key] = value
        if kind == "cpu":
            return cls.cpu(**{k.replace("-", "_"): v for k, v in opts.items()})
        if kind == "cuda" and "arch" not in opts:
            base = host_cuda_target()
            return cls("cuda", {**dict(base.attrs), **opts}, base.facts)
        if kind == "opencl" and "device" not in opts:
            base = host_opencl_target()
            return cls("opencl", {**dict(base.attrs), **opts}, base.facts)
        return cls(kind, opts)

    @classmethod
    def cpu(
        cls,
        isa: str | None = None,
        cores: int | str | None = None,
        vector_bits: int | str | None = None,
    ) -> Target:
        """A CPU target; options left as ``None`` come from :func:`host_cpu_target`.

        Cache sizes and the model name are the host's when the ISA belongs to the
        host's architecture family (x86 or arm), else defaults.
        """
        host = host_cpu_target()
        opts: dict[str, Any] = dict(host.attrs)
        if isa is not None:
            opts["isa"] = isa
            opts.pop("vector-bits", None)
        if cores is not None:
            opts["cores"] = cores
        if vector_bits is not None:
            opts["vector-bits"] = vector_bits
        isa_name = _validate_option("cpu", "isa", opts["isa"])
        family = _ISA_FAMILY.get(str(isa_name))
        facts = host.facts if family in (None, _host_family()) else ()
        return cls("cpu", opts, facts)

    @classmethod
    def cuda(
        cls,
        arch: str,
        max_threads_per_block: int = 1024,
        shared_memory_bytes: int = 49152,
    ) -> Target:
        """A CUDA target for ``arch`` (``sm_<digits>``)."""
        return cls(
            "cuda",
            {
                "arch": arch,
                "max-threads-per-block": max_threads_per_block,
                "shared-memory-bytes": shared_memory_bytes,
            },
        )

    @classmethod
    def opencl(cls, device: str = "pocl", max_threads_per_block: int = 1024,
               shared_memory_bytes: int = 49152) -> Target:
        """An OpenCL target for ``device`` (``pocl``: PoCL running kernels on the CPU)."""
        return cls("opencl", {"device": device,
                              "max-threads-per-block": max_threads_per_block,
                              "shared-memory-bytes": shared_memory_bytes})

    @classmethod
    def vta(cls, config: str = DEFAULT_VTA_CONFIG) -> Target:
        """A VTA target with ``config`` = ``BATCHxBLOCK_INxBLOCK_OUT``."""
        return cls("vta", {"config": config})

    def with_options(self, **options: OptionValue) -> Target:
        """A copy with some options replaced (``cores=1``, ``max_threads_per_block=512``).

        Keyword names use ``_`` where the option key uses ``-``. Facts are kept.
        """
        opts: dict[str, Any] = dict(self.attrs)
        for name, value in options.items():
            key = name.replace("_", "-")
            if self.kind == "cpu" and key == "isa":
                opts.pop("vector-bits", None)
            opts[key] = value
        return Target(self.kind, opts, self.facts)

    # -- identity -----------------------------------------------------------------------

    @property
    def canonical(self) -> str:
        """The canonical string: kind, then ``-key=value`` in the fixed key order."""
        return " ".join([self.kind, *(f"-{k}={v}" for k, v in self.attrs)])

    def __str__(self) -> str:
        return self.canonical

    def __repr__(self) -> str:
        return f"Target({self.canonical!r})"

    @property
    def options(self) -> dict[str, OptionValue]:
        """The identity options as a new dict (defaults omitted)."""
        return dict(self.attrs)

    @property
    def hardware(self) -> dict[str, OptionValue]:
        """The non-identity device facts as a new dict."""
        return dict(self.facts)

    def to_json(self) -> dict[str, str]:
        """A JSON-able dict: ``{"kind": ..., "string": <canonical>}``."""
        return {"kind": self.kind, "string": self.canonical}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Target:
        """Inverse of :meth:`to_json`; checks that ``kind`` agrees with ``string``."""
        if not isinstance(data, Mapping) or not isinstance(data.get("string"), str):
            raise ValueError(f"target JSON must be an object with a 'string' field, got {data!r}")
        target = cls.parse(data["string"])
        if "kind" in data and data["kind"] != target.kind:
            raise ValueError(
                f"target JSON kind {data['kind']!r} disagrees with string {data['string']!r}"
            )
        return target

    # -- typed accessors ----------------------------------------------------------------

    def _need(self, kind: str, what: str) -> None:
        if self.kind != kind:
            raise AttributeError(f"{what} is defined for {kind} targets, not {self.kind!r}")

    def _fact(self, name: str, default: OptionValue) -> OptionValue:
        return dict(self.facts).get(name, default)

    @property
    def isa(self) -> str:
        """CPU ISA name, one of :data:`CPU_ISAS`."""
        self._need("cpu", "isa")
        return str(self.options["isa"])

    @property
    def cores(self) -> int:
        """Number of CPU cores the program may use."""
        self._need("cpu", "cores")
        return int(self.options["cores"])

    def threads(self, available: int | None = None) -> int:
        """Threads a program for this cpu target should use where ``available`` cores
        (default: this host's) exist: the target's cores, capped by what is there."""
        have = host_cores() if available is None else available
        return max(1, min(self.cores, have))

    def check_cores(self, available: int | None = None) -> None:
        """Raise ``ValueError`` when this cpu target names more cores than ``available``
        (default: this host's); a no-op for other kinds."""
        if self.kind != "cpu":
            return
        have = host_cores() if available is None else available
        if self.cores > have:
            raise ValueError(f"target {self.canonical!r} needs {self.cores} cores but this "
                             f"machine has {have}; use -cores=<1..{have}>")

    @property
    def vector_bits(self) -> int:
        """SIMD register width in bits (explicit ``vector-bits`` or implied by the ISA)."""
        self._need("cpu", "vector_bits")
        return int(self.options.get("vector-bits", _ISA_VECTOR_BITS[self.isa]))

    def vector_lanes(self, dtype_bytes: int) -> int:
        """Elements of ``dtype_bytes`` bytes that fit in one vector register (at least 1)."""
        self._need("cpu", "vector_lanes")
        if isinstance(dtype_bytes, bool) or not isinstance(dtype_bytes, int) or dtype_bytes < 1:
            raise ValueError(f"dtype_bytes must be a positive int, got {dtype_bytes!r}")
        return max(1, self.vector_bits // 8 // dtype_bytes)

    @property
    def masked_vectors(self) -> bool:
        """Whether vector loads and stores can leave lanes out (AVX-512's mask registers):
        a loop's last lanes then take one masked vector, not several narrower ones."""
        self._need("cpu", "masked_vectors")
        return self.isa == "avx512"

    @property
    def l1d_bytes(self) -> int:
        """L1 data cache size per core in bytes (detected, else 32 KiB)."""
        self._need("cpu", "l1d_bytes")
        return int(self._fact("l1d_bytes", _DEFAULT_CACHE_BYTES["l1d_bytes"]))

    @property
    def l2_bytes(self) -> int:
        """L2 cache size in bytes (detected, else 1 MiB)."""
        self._need("cpu", "l2_bytes")
        return int(self._fact("l2_bytes", _DEFAULT_CACHE_BYTES["l2_bytes"]))

    @property
    def l3_bytes(self) -> int:
        """L3 cache size in bytes (detected, else 8 MiB)."""
        self._need("cpu", "l3_bytes")
        return int(self._fact("l3_bytes", _DEFAULT_CACHE_BYTES["l3_bytes"]))

    @property
    def model_name(self) -> str:
        """Device model name (provenance only; ``"unknown"`` when not detected)."""
        return str(self._fact("model_name", _UNKNOWN_MODEL))

    @property
    def arch(self) -> str:
        """CUDA architecture, e.g. ``sm_90``."""
        self._need("cuda", "arch")
        return str(self.options["arch"])

    @property
    def sm_version(self) -> int:
        """CUDA architecture as a number, e.g. 90 for ``sm_90``."""
        return int(self.arch[3:])

    def _need_gpu(self, what: str) -> None:
        if self.kind not in GPU_KINDS:
            raise AttributeError(f"{what} is defined for cuda and opencl targets, "
                                 f"not {self.kind!r}")

    @property
    def is_gpu(self) -> bool:
        """Whether programs for this target are grids of thread blocks (cuda, opencl)."""
        return self.kind in GPU_KINDS

    @property
    def max_threads_per_block(self) -> int:
        """Threads per block (work-group) limit (default 1024)."""
        self._need_gpu("max_threads_per_block")
        return int(self.options.get("max-threads-per-block", 1024))

    @property
    def shared_memory_bytes(self) -> int:
        """Shared (OpenCL: local) memory per block in bytes (default 49152)."""
        self._need_gpu("shared_memory_bytes")
        return int(self.options.get("shared-memory-bytes", 49152))

    @property
    def registers_per_thread(self) -> int:
        """CUDA registers per thread limit (default 255), checked with ``ptxas -v``."""
        self._need("cuda", "registers_per_thread")
        return int(self.options.get("registers-per-thread", 255))

    @property
    def warp_size(self) -> int:
        """Threads that run in lock step (32 on NVIDIA GPUs; 1 assumed for OpenCL)."""
        self._need_gpu("warp_size")
        return WARP_SIZE if self.kind == "cuda" else 1

    @property
    def device(self) -> str:
        """The OpenCL device name, e.g. ``pocl``."""
        self._need("opencl", "device")
        return str(self.options["device"])

    @property
    def config(self) -> str:
        """VTA configuration string ``BATCHxBLOCK_INxBLOCK_OUT``."""
        self._need("vta", "config")
        return str(self.options["config"])

    @property
    def batch(self) -> int:
        """VTA GEMM core batch size."""
        return int(self.config.split("x")[0])

    @property
    def block_in(self) -> int:
        """VTA GEMM core input block (reduction) size."""
        return int(self.config.split("x")[1])

    @property
    def block_out(self) -> int:
        """VTA GEMM core output block size."""
        return int(self.config.split("x")[2])

    # -- toolchain ----------------------------------------------------------------------

    def compiler_flags(self) -> tuple[str, ...]:
        """Code-generation flags that depend only on the target, never on the build host.

        cpu: gcc ``-march`` flags for the ISA (``()`` for generic); cuda: nvcc
        ``-arch=sm_XX``; vta: ``()`` (VTA programs run on the simulator/runtime).
        """
        if self.kind == "cpu":
            return _ISA_GCC_FLAGS[self.isa]
        if self.kind == "cuda":
            return (f"-arch={self.arch}",)
        return ()


# ---------------------------------------------------------------------------------------
# Host detection
# ---------------------------------------------------------------------------------------


def _host_family() -> str:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i386", "i686"):
        return "x86"
    if machine in ("aarch64", "arm64") or machine.startswith("armv8"):
        return "arm"
    return "other"


def _read_text(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def _cpuinfo_field(cpuinfo: str, name: str) -> str | None:
    """The value of the first ``name : value`` line of /proc/cpuinfo text."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return None


def _isa_from_flags(family: str, flags: Iterable[str]) -> str:
    """The best ISA of :data:`CPU_ISAS` a host of ``family`` with ``flags`` supports."""
    if family == "arm":
        return "neon"
    if family != "x86":
        return "generic"
    have = set(flags)
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= have:
        return "avx512"
    if {"avx2", "fma"} <= have:
        return "avx2"
    if "sse4_2" in have:
        return "sse4"
    return "generic"


_SIZE_RE = re.compile(r"(\d+)\s*([KMG]?)(?:i?B)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def _parse_cache_size(text: str) -> int | None:
    """``"48K"`` -> 49152, ``"1M"`` -> 1048576, ``"512"`` -> 512; None if unreadable."""
    m = _SIZE_RE.fullmatch(text.strip())
    if not m:
        return None
    size = int(m.group(1)) * _SIZE_UNITS[m.group(2).upper()]
    return size if size > 0 else None


def _read_cache_sizes(cache_dir: str | Path) -> dict[str, int]:
    """L1d/L2/L3 sizes from sysfs ``index*/{level,type,size}``, defaults where missing."""
    sizes: dict[str, int] = {}
    root = Path(cache_dir)
    try:
        entries = sorted(root.glob("index*"))
    except OSError:
        entries = []
    for entry in entries:
        level, ctype, size = (_read_text(entry / f) for f in ("level", "type", "size"))
        if level is None or ctype is None or size is None:
            continue
        nbytes = _parse_cache_size(size)
        ctype = ctype.strip()
        if nbytes is None or ctype == "Instruction":
            continue
        name = {"1": "l1d_bytes", "2": "l2_bytes", "3": "l3_bytes"}.get(level.strip())
        if name is not None and (ctype == "Data" or name != "l1d_bytes"):
            sizes.setdefault(name, nbytes)
    return {k: sizes.get(k, v) for k, v in _DEFAULT_CACHE_BYTES.items()}


def _host_cores() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_CORES))


def host_cores() -> int:
    """The cores this process may run on (its CPU affinity), at most ``MAX_CORES``."""
    return _host_cores()


@functools.lru_cache(maxsize=1)
def _detect_host_cpu() -> tuple[str, str, dict[str, int]]:
    """(isa, model name, cache sizes) of this machine, read once per process."""
    family = _host_family()
    cpuinfo = _read_text("/proc/cpuinfo") or ""
    flags = (_cpuinfo_field(cpuinfo, "flags") or "").split()
    isa = _isa_from_flags(family, flags)
    model = _cpuinfo_field(cpuinfo, "model name") or platform.processor() or _UNKNOWN_MODEL
    caches = _read_cache_sizes("/sys/devices/system/cpu/cpu0/cache")
    return isa, model, caches


def _apply_isa_override(detected: str, family: str, override: str | None) -> str:
    if override is None or override == "":
        return detected
    supported = _FAMILY_ISAS[family][: _FAMILY_ISAS[family].index(detected) + 1]
    if override not in supported:
        raise ValueError(
            f"{CPU_ISA_ENV}={override!r} is not an ISA this host can run; "
            f"accepted here: {', '.join(supported)} (all ISAs: {', '.join(CPU_ISAS)})"
        )
    return override


@functools.lru_cache(maxsize=8)
def _host_cpu_target(isa_override: str | None, cores: int) -> Target:
    isa, model, caches = _detect_host_cpu()
    isa = _apply_isa_override(isa, _host_family(), isa_override)
    facts: dict[str, OptionValue] = {"model_name": model, **caches}
    return Target("cpu", {"isa": isa, "cores": cores}, facts)


def host_cpu_target() -> Target:
    """The CPU this process runs on: ISA, usable cores, cache sizes, model name.

    Detection is cached per process; ``TENSORTUNE_CPU_ISA`` (read on every call) may
    lower the ISA to one the host supports, else ``ValueError`` (empty means unset).
    """
    return _host_cpu_target(os.environ.get(CPU_ISA_ENV), _host_cores())


@functools.lru_cache(maxsize=1)
def nvidia_gpus() -> tuple[tuple[str, str], ...]:
    """(compute capability like "9.0", GPU name) of each GPU ``nvidia-smi`` lists, in the
    CUDA driver's order; empty without ``nvidia-smi`` or a GPU."""
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    if proc.returncode != 0:
        return ()
    gpus = []
    for line in proc.stdout.splitlines():
        cap, _, name = line.partition(",")
        if cap.strip():
            gpus.append((cap.strip(), name.strip()))
    return tuple(gpus)


def cuda_arch(compute_capability: str) -> str:
    """``sm_90`` for ``9.0``; ``ValueError`` for anything else."""
    m = re.fullmatch(r"(\d+)\.(\d+)", compute_capability)
    if not m:
        raise ValueError(f"unreadable compute capability {compute_capability!r}")
    return f"sm_{m.group(1)}{m.group(2)}"


def host_cuda_target() -> Target:
    """The first GPU of this machine (via ``nvidia-smi``), else ``ValueError``."""
    gpus = nvidia_gpus()
    if not gpus:
        raise ValueError(
            "cuda target needs -arch=sm_<digits> (e.g. 'cuda -arch=sm_90'): "
            "no GPU detected with nvidia-smi"
        )
    cap, name = gpus[0]
    try:
        arch = cuda_arch(cap)
    except ValueError:
        raise ValueError(f"nvidia-smi reported an unreadable compute capability {cap!r}") \
            from None
    return Target("cuda", {"arch": arch}, {"model_name": name})


_PLATFORM_NAMES = {"portable computing language": "pocl", "nvidia cuda": "nvidia",
                   "intel(r) opencl": "intel", "amd accelerated parallel processing": "amd"}


def opencl_device_name(platform_name: str) -> str:
    """The target's short device name for an OpenCL platform name (``pocl`` for PoCL)."""
    known = _PLATFORM_NAMES.get(platform_name.strip().lower())
    if known:
        return known
    slug = re.sub(r"[^a-z0-9_]", "_", platform_name.strip().lower())[:32].strip("_")
    return slug if _DEVICE_RE.fullmatch(slug) else "opencl"


def host_opencl_target() -> Target:
    """The first OpenCL device of this machine (via pyopencl), else ``ValueError``."""
    try:
        import pyopencl as cl

        platform = cl.get_platforms()[0]
        device = platform.get_devices()[0]
    except Exception as err:  # no package, no ICD, no platform: all mean "none here"
        raise ValueError("opencl target needs -device=<name> (e.g. 'opencl -device=pocl'): "
                         f"no OpenCL device found ({type(err).__name__})") from None
    # The limits stay the portable defaults (a GPU's): PoCL on a CPU allows far more, but
    # the schedules it checks are meant for GPUs.
    return Target("opencl", {"device": opencl_device_name(platform.name)},
                  {"model_name": str(device.name)})
