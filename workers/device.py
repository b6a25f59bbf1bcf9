"""The device plugin interface and the registry of device kinds.

A device plugin says which targets it serves, how to build a candidate for it (anywhere:
a build needs no device), how to run and time a built candidate on the device (isolated
in a child process), and whether the device is alive. A kind registers itself with
:func:`register_device`; the pools find it by the target's kind (``cpu``, ``cuda``,
``vta``) and, in a Ray cluster, by the Ray resource its nodes advertise (``cpu-measure``,
``GPU``, ``fpga``). Nothing else in the workers layer names a kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from schedule import Target

from .measure import ErrorKind, MeasureInput, MeasureResult, MeasureSettings


@dataclass
class BuildResult:
    """A built candidate, or why it could not be built. ``library`` is the compiled
    artefact as bytes and ``signature`` what the device needs to call it
    (``KernelSignature.to_json()`` for the CPU); ``compiler`` and ``flags`` go into the
    result's provenance."""

    error_kind: ErrorKind = ErrorKind.NONE
    error_msg: str = ""
    build_s: float = 0.0
    library: bytes = b""
    signature: dict[str, Any] = field(default_factory=dict)
    compiler: str = ""
    flags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.error_kind = ErrorKind(self.error_kind)

    @property
    def ok(self) -> bool:
        return self.error_kind is ErrorKind.NONE

    def metadata(self) -> dict[str, Any]:
        """Everything but the library bytes, as JSON."""
        return {"error_kind": self.error_kind.value, "error_msg": self.error_msg,
                "build_s": self.build_s, "signature": self.signature,
                "compiler": self.compiler, "flags": list(self.flags)}

    @classmethod
    def from_metadata(cls, doc: dict[str, Any], library: bytes = b"") -> BuildResult:
        return cls(ErrorKind(doc["error_kind"]), str(doc["error_msg"]), float(doc["build_s"]),
                   library, dict(doc["signature"]), str(doc["compiler"]), list(doc["flags"]))


class Device(ABC):
    """One device that times candidates (a CPU, a GPU, an FPGA board), owned by a runner
    process. ``kind`` is the target kind it serves; ``resource`` the Ray resource a node
    advertises per device of this kind. ``node`` labels the Ray node (empty locally).
    ``baselines``: the measure inputs with a ``library`` (``workers.baselines``) it can
    time; others are refused before anything runs."""

    kind: ClassVar[str]
    resource: ClassVar[str]
    baselines: ClassVar[tuple[str, ...]] = ()

    def __init__(self, node: str = ""):
        self.node = node

    @classmethod
    @abstractmethod
    def count_here(cls) -> int:
        """How many devices of this kind this machine has (what ``tensortune worker``
        advertises)."""

    @classmethod
    def for_slot(cls, node: str, slot: int) -> Device:
        """The device numbered ``slot`` (of ``count_here()``) on a node, as a Ray actor makes
        it; by default every slot is alike. (A board proxy takes the slot-th board.)"""
        return cls(node=node)

    @classmethod
    @abstractmethod
    def build(cls, inp: MeasureInput, compile_timeout: float) -> BuildResult:
        """Build one candidate (its input parsed; in a builder process, on any node).
        Candidate faults come back as a ``BuildResult`` with their error kind, never as an
        exception."""

    @property
    @abstractmethod
    def id(self) -> str:
        """A name of this device that is unique in a cluster, e.g. ``cpu@host``."""

    @abstractmethod
    def serves(self, target: Target) -> bool:
        """Whether candidates built for ``target`` can run on this device."""

    @abstractmethod
    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        """Time one built candidate (its input parsed) on this device, isolated from this
        process (a crash or a hang of the candidate is a result, not an exception). One at
        a time."""

    @abstractmethod
    def is_alive(self) -> bool:
        """Whether the device can take work now."""

    @abstractmethod
    def close(self) -> None:
        """Release the device's processes and files."""


_DEVICE_TYPES: dict[str, type[Device]] = {}


def register_device(cls: type[Device]) -> type[Device]:
    """Register a device kind (usable as a class decorator)."""
    _DEVICE_TYPES[cls.kind] = cls
    return cls


def unregister_device(kind: str) -> None:
    """Remove the device kind ``kind`` (no error if it is not registered)."""
    _DEVICE_TYPES.pop(kind, None)


def device_type(kind: str) -> type[Device]:
    """The registered device class for a target kind, else ``ValueError``."""
    try:
        return _DEVICE_TYPES[kind]
    except KeyError:
        known = ", ".join(sorted(_DEVICE_TYPES)) or "none"
        raise ValueError(f"no measurement device for target kind {kind!r} "
                         f"(device kinds available: {known})") from None


def device_kinds() -> list[str]:
    return sorted(_DEVICE_TYPES)
