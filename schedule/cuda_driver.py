"""The CUDA driver API through ctypes: the few calls that load a cubin, move arrays, launch
kernels and time them with events.

Nothing but the driver library (``libcuda.so.1``, installed with the NVIDIA driver) is
needed: no toolkit, no Python package. On a machine without one every entry point raises
:class:`CudaUnavailable` saying why, so callers can skip or report it. A failing call raises
:class:`CudaError` with the driver's name for the error; ``sticky`` says whether the
context is now unusable (an illegal address, a launch failure: the process must make a new
one, in practice a new process).

The driver is not fork-safe: use it only in a process that will not fork afterwards (the
sandbox child that runs GPU candidates).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

_c_ptr = ctypes.c_void_p
_c_dptr = ctypes.c_uint64  # CUdeviceptr

# CUresult codes after which the context is corrupt (the CUDA docs: "the process must be
# terminated and relaunched").
_STICKY = frozenset({
    214,  # ECC uncorrectable
    700,  # illegal address
    702,  # launch timeout
    709,  # context is destroyed
    710,  # assert
    714,  # hardware stack error
    715,  # illegal instruction
    716,  # misaligned address
    717,  # invalid address space
    718,  # invalid pc
    719,  # launch failed
    999,  # unknown
})
_NO_DEVICE = 100

# CUdevice_attribute values.
_ATTRIBUTES = {
    "max_threads_per_block": 1,
    "shared_memory_per_block": 8,
    "registers_per_block": 12,
    "warp_size": 10,
    "multiprocessors": 16,
    "l2_bytes": 38,
    "major": 75,
    "minor": 76,
}


class CudaUnavailable(RuntimeError):
    """No CUDA driver or no CUDA device on this machine."""


class CudaError(RuntimeError):
    """A driver call failed; ``code`` is its CUresult."""

    def __init__(self, call: str, code: int, name: str, text: str):
        super().__init__(f"{call} failed: {name} ({text})")
        self.code = code
        self.name = name

    @property
    def sticky(self) -> bool:
        """Whether the context is unusable after this error (a new process is needed)."""
        return self.code in _STICKY


@dataclass(frozen=True)
class DeviceInfo:
    """What the driver says of one device."""

    ordinal: int
    name: str
    arch: str  # sm_XY
    max_threads_per_block: int
    shared_memory_per_block: int
    registers_per_block: int
    warp_size: int
    multiprocessors: int
    l2_bytes: int


class Driver:
    """The loaded driver library, initialised. Use :func:`driver`."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as err:
            raise CudaUnavailable(f"no CUDA driver on this machine (libcuda.so.1: {err})") \
                from None
        code = self.lib.cuInit(0)
        if code == _NO_DEVICE:
            raise CudaUnavailable("the CUDA driver found no device (CUDA_ERROR_NO_DEVICE)")
        if code != 0:
            name, text = self._error_text(code)
            raise CudaUnavailable(f"cuInit failed: {name} ({text})")

    def _error_text(self, code: int) -> tuple[str, str]:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.lib.cuGetErrorName(code, ctypes.byref(name))
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        return (name.value or b"CUDA_ERROR_%d" % code).decode(), (text.value or b"").decode()

    def call(self, fn: str, *args: object) -> None:
        """Call driver function ``fn``; :class:`CudaError` unless it returns success."""
        code = getattr(self.lib, fn)(*args)
        if code != 0:
            raise CudaError(fn, code, *self._error_text(code))

    def device_count(self) -> int:
        count = ctypes.c_int()
        self.call("cuDeviceGetCount", ctypes.byref(count))
        return count.value

    def device_info(self, ordinal: int) -> DeviceInfo:
        dev = self._device(ordinal)
        values = {}
        for key, attribute in _ATTRIBUTES.items():
            value = ctypes.c_int()
            self.call("cuDeviceGetAttribute", ctypes.byref(value), attribute, dev)
            values[key] = value.value
        name = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", name, 256, dev)
        major, minor = values.pop("major"), values.pop("minor")
        return DeviceInfo(ordinal, name.value.decode(errors="replace"), f"sm_{major}{minor}",
                          **values)

    def _device(self, ordinal: int) -> ctypes.c_int:
        dev = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(dev), ordinal)
        return dev

    def context(self, ordinal: int) -> Context:
        """The device's primary context, made current on this thread."""
        return Context(self, ordinal)


@functools.cache
def driver() -> Driver:
    """The initialised driver (once per process); :class:`CudaUnavailable` without one."""
    return Driver()


def cuda_missing() -> str:
    """Why CUDA programs cannot run here ("" when a device is usable)."""
    try:
        if driver().device_count() < 1:
            return "the CUDA driver reports no device"
    except (CudaUnavailable, CudaError) as err:
        return str(err)
    return ""


def round_trip(ordinal: int, nbytes: int = 4096) -> bool:
    """Whether device ``ordinal`` takes a context, an allocation, a fill and a copy back
    (the check of a device after a program faulted on it)."""
    ctx = driver().context(ordinal)
    try:
        buf = ctx.alloc(nbytes)
        ctx.memset(buf, 0x5A, nbytes)
        host = (ctypes.c_ubyte * nbytes)()
        ctx.to_host(ctypes.addressof(host), buf, nbytes)
        ctx.synchronize()
    finally:
        ctx.close()
    return all(b == 0x5A for b in host)


class Context:
    """A device's primary context, current on the calling thread; allocations, modules,
    launches and events on it. Everything it allocates is freed by :meth:`close`."""

    def __init__(self, drv: Driver, ordinal: int):
        self.drv = drv
        self.ordinal = ordinal
        self._dev = drv._device(ordinal)
        self._ctx = _c_ptr()
        drv.call("cuDevicePrimaryCtxRetain", ctypes.byref(self._ctx), self._dev)
        drv.call("cuCtxSetCurrent", self._ctx)
        self._allocations: list[int] = []
        self._modules: list[_c_ptr] = []
        self._events: list[_c_ptr] = []

    def alloc(self, nbytes: int) -> int:
        ptr = _c_dptr()
        self.drv.call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(max(1, nbytes)))
        self._allocations.append(ptr.value)
        return ptr.value

    def to_device(self, dst: int, src: ctypes.c_void_p | int, nbytes: int) -> None:
        if nbytes:
            self.drv.call("cuMemcpyHtoD_v2", _c_dptr(dst), _c_ptr(src), ctypes.c_size_t(nbytes))

    def to_host(self, dst: ctypes.c_void_p | int, src: int, nbytes: int) -> None:
        if nbytes:
            self.drv.call("cuMemcpyDtoH_v2", _c_ptr(dst), _c_dptr(src), ctypes.c_size_t(nbytes))

    def memset(self, dst: int, value: int, nbytes: int) -> None:
        self.drv.call("cuMemsetD8_v2", _c_dptr(dst), ctypes.c_ubyte(value),
                      ctypes.c_size_t(nbytes))

    def load_module(self, image: bytes) -> _c_ptr:
        module = _c_ptr()
        self.drv.call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(image))
        self._modules.append(module)
        return module

    def function(self, module: _c_ptr, name: str) -> _c_ptr:
        fn = _c_ptr()
        self.drv.call("cuModuleGetFunction", ctypes.byref(fn), module, name.encode())
        return fn

    def launch(self, fn: _c_ptr, grid: tuple[int, int, int], block: tuple[int, int, int],
               pointers: list[int]) -> None:
        """Launch ``fn`` on the default stream with device pointers as its parameters."""
        values = [_c_dptr(p) for p in pointers]
        params = (_c_ptr * max(1, len(values)))(*[ctypes.cast(ctypes.byref(v), _c_ptr)
                                                  for v in values])
        self.drv.call("cuLaunchKernel", fn, *(ctypes.c_uint(g) for g in grid),
                      *(ctypes.c_uint(b) for b in block), ctypes.c_uint(0), _c_ptr(),
                      params, _c_ptr())

    def synchronize(self) -> None:
        self.drv.call("cuCtxSynchronize")

    def event(self) -> _c_ptr:
        ev = _c_ptr()
        self.drv.call("cuEventCreate", ctypes.byref(ev), ctypes.c_uint(0))
        self._events.append(ev)
        return ev

    def record(self, ev: _c_ptr) -> None:
        self.drv.call("cuEventRecord", ev, _c_ptr())

    def elapsed_seconds(self, start: _c_ptr, end: _c_ptr) -> float:
        self.drv.call("cuEventSynchronize", end)
        ms = ctypes.c_float()
        self.drv.call("cuEventElapsedTime", ctypes.byref(ms), start, end)
        return ms.value * 1e-3

    def close(self) -> None:
        """Free what this context allocated and release it (errors ignored: after a sticky
        error nothing can be freed, and the process is about to end)."""
        for ptr in self._allocations:
            self.drv.lib.cuMemFree_v2(_c_dptr(ptr))
        for module in self._modules:
            self.drv.lib.cuModuleUnload(module)
        for ev in self._events:
            self.drv.lib.cuEventDestroy_v2(ev)
        self._allocations, self._modules, self._events = [], [], []
        self.drv.lib.cuDevicePrimaryCtxRelease_v2(self._dev)
