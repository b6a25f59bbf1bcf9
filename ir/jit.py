"""The JIT behind ``ir.evaluate(..., mode="compiled")``: operator calls run through kernels
compiled from the op library's default schedule.

For a call of an operator whose ``OpDef`` has a ``lowering``, the JIT makes one
``te.placeholder`` per input (a tuple input, as ``concatenate``'s, becomes a list of them)
with the call's concrete shapes and dtypes, applies the lowering (its ``out_type`` is the
operator's type relation applied to those concrete input types, so it is always static),
schedules the result with ``te.create_schedule`` (the default schedule: no tuning) and
compiles it with ``schedule.build`` (C through gcc; the schedule layer also caches the
shared library on disk by content hash). The loaded kernel is kept in memory, keyed by
(operator, attributes, input shapes and dtypes), so each distinct call compiles once per
process; later calls are cache hits. Outputs are allocated with numpy from the output type
(which the lowered tensors' shapes and dtypes must agree with); a lowering that returns
several tensors (a tuple-typed output) gives a tuple of arrays.

A call falls back to the operator's numpy ``compute`` — silently, but counted — when the
operator has no lowering, when its lowering raises ``LoweringError`` for these attributes,
or when the schedule layer cannot express or compile the case (an input dtype it lacks,
such as float64; a zero-sized shape; a compiler failure). The outcome is remembered, so a
call that falls back is not retried. ``fallback_reasons()`` says why each case fell back.

Counters (process-wide, thread-safe), ``stats()``:

- ``compiled``: kernels built (in-memory cache misses that produced a kernel);
- ``cache_hits``: calls run by a kernel already in the in-memory cache;
- ``fallbacks``: calls run by the numpy compute instead (every such call counts).

So a call is counted exactly once: as ``compiled`` (its first time), ``cache_hits`` or
``fallbacks``. ``reset_stats()`` zeroes them; ``clear_cache()`` also forgets the kernels.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from .attrs import Attrs
from .op.lowering import LoweringError
from .op_registry import OpDef
from .types import TensorType, TupleType, Type

__all__ = ["FALLBACK", "JIT", "clear_cache", "default_jit", "fallback_reasons", "reset_stats",
           "stats"]


class _Fallback:
    """The answer of ``JIT.run`` when the call must run on the numpy compute."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "FALLBACK"


FALLBACK = _Fallback()


class _Kernel:
    """A compiled operator call: the loaded module and the outputs it writes."""

    __slots__ = ("is_tuple", "module", "outputs")

    def __init__(self, module: Any, outputs: list[tuple[tuple[int, ...], np.dtype]],
                 is_tuple: bool):
        self.module, self.outputs, self.is_tuple = module, outputs, is_tuple

    def __call__(self, flat_inputs: list[np.ndarray]) -> object:
        outs = [np.empty(shape, dtype) for shape, dtype in self.outputs]
        self.module(*flat_inputs, *outs)
        return tuple(outs) if self.is_tuple else outs[0]


class _NoKernel:
    """A call remembered as falling back, with the reason."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


def _signature(args: Sequence[object]) -> tuple | None:
    """The shapes and dtypes of the inputs (a tuple input: of each field), hashable; None
    when an input is neither an array nor a tuple of arrays."""
    sig = []
    for a in args:
        if isinstance(a, np.ndarray):
            sig.append(("tensor", tuple(a.shape), a.dtype.str))
        elif type(a) is tuple and all(isinstance(f, np.ndarray | np.generic) for f in a):
            sig.append(("tuple", tuple((np.shape(f), np.asarray(f).dtype.str) for f in a)))
        else:
            return None
    return tuple(sig)


def _flatten(args: Sequence[object]) -> list[np.ndarray]:
    flat: list[np.ndarray] = []
    for a in args:
        for x in (a if type(a) is tuple else (a,)):
            x = np.asarray(x)  # (not ascontiguousarray: it makes a 0-d array 1-d)
            flat.append(x if x.flags.c_contiguous else x.copy(order="C"))
    return flat


def _tensor_type(shape: tuple[int, ...], dtype_str: str) -> TensorType:
    return TensorType(shape, np.dtype(dtype_str).name)


class JIT:
    """An in-memory cache of compiled operator calls, with its counters."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._kernels: dict[tuple, _Kernel | _NoKernel] = {}
        self._stats = {"compiled": 0, "cache_hits": 0, "fallbacks": 0}

    # ------------------------------------------------------------------ public

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._stats)

    def reset_stats(self) -> None:
        with self._lock:
            for key in self._stats:
                self._stats[key] = 0

    def clear_cache(self) -> None:
        with self._lock:
            self._kernels.clear()
            for key in self._stats:
                self._stats[key] = 0

    def fallback_reasons(self) -> dict[tuple, str]:
        """(operator name, input signature) -> why calls of it run on numpy."""
        with self._lock:
            return {(key[0], key[3]): v.reason for key, v in self._kernels.items()
                    if isinstance(v, _NoKernel)}

    def run(self, opdef: OpDef, args: Sequence[object], attrs: Attrs) -> object:
        """The value of the call through its kernel, or ``FALLBACK`` (counted) when it must
        run on the numpy compute."""
        if opdef.lowering is None:
            return self._count_fallback()
        sig = _signature(args)
        if sig is None:
            return self._count_fallback()
        key = (opdef.name, opdef, attrs, sig)
        with self._lock:
            entry = self._kernels.get(key)
            if entry is None:
                entry = _compile(opdef, attrs, sig)
                self._kernels[key] = entry
                if isinstance(entry, _Kernel):
                    self._stats["compiled"] += 1
            elif isinstance(entry, _Kernel):
                self._stats["cache_hits"] += 1
            if isinstance(entry, _NoKernel):
                self._stats["fallbacks"] += 1
                return FALLBACK
        return entry(_flatten(args))

    def _count_fallback(self) -> _Fallback:
        with self._lock:
            self._stats["fallbacks"] += 1
        return FALLBACK


def _compile(opdef: OpDef, attrs: Attrs, sig: tuple) -> _Kernel | _NoKernel:
    """Lower, schedule (default) and build one call; a ``_NoKernel`` when it cannot."""
    from schedule import build, te

    in_types: list[Type] = []
    try:
        for s in sig:
            if s[0] == "tuple":
                in_types.append(TupleType(tuple(_tensor_type(*f) for f in s[1])))
            else:
                in_types.append(_tensor_type(s[1], s[2]))
    except Exception as exc:  # a dtype the IR does not name
        return _NoKernel(f"input types: {exc}")
    try:
        out_type = opdef.infer_type(in_types, attrs)
    except Exception as exc:  # the numpy compute will report the error
        return _NoKernel(f"type relation failed: {exc}")
    if isinstance(out_type, TensorType):
        out_types, is_tuple = [out_type], False
    elif isinstance(out_type, TupleType) and all(isinstance(f, TensorType)
                                                 for f in out_type.fields):
        out_types, is_tuple = list(out_type.fields), True
    else:
        return _NoKernel(f"output type {out_type} is not tensors")
    try:
        inputs: list[Any] = []
        flat: list[Any] = []
        for i, t in enumerate(in_types):
            if isinstance(t, TupleType):
                fields = [te.placeholder(f.shape, f.dtype, name=f"in{i}_{j}")
                          for j, f in enumerate(t.fields)]
                inputs.append(fields)
                flat.extend(fields)
            else:
                ph = te.placeholder(t.shape, t.dtype, name=f"in{i}")
                inputs.append(ph)
                flat.append(ph)
        lowered = opdef.lowering(inputs, attrs, out_type)
    except LoweringError as exc:
        return _NoKernel(f"LoweringError: {exc}")
    except Exception as exc:  # a dtype or shape the schedule layer lacks
        return _NoKernel(f"lowering failed: {type(exc).__name__}: {exc}")
    outs = list(lowered) if isinstance(lowered, tuple | list) else [lowered]
    if len(outs) != len(out_types) or (isinstance(lowered, tuple | list) != is_tuple):
        return _NoKernel(f"the lowering returned {len(outs)} tensors for output type "
                         f"{out_type}")
    specs = []
    for t, ty in zip(outs, out_types, strict=True):
        shape, dtype = tuple(int(d) for d in t.shape), np.dtype(t.dtype)
        if shape != tuple(ty.shape) or dtype != np.dtype(ty.dtype):
            return _NoKernel(f"the lowering's output {t.dtype}{list(shape)} disagrees with "
                             f"the output type {ty}")
        specs.append((shape, dtype))
    try:
        s = te.create_schedule(outs)
        module = build(s, [*flat, *outs], name=_kernel_name(opdef.name))
    except Exception as exc:
        return _NoKernel(f"build failed: {type(exc).__name__}: {exc}")
    return _Kernel(module, specs, is_tuple)


def _kernel_name(op_name: str) -> str:
    return "op_" + "".join(c if c.isalnum() else "_" for c in op_name)


_DEFAULT = JIT()


def default_jit() -> JIT:
    """The process-wide JIT that ``evaluate(..., mode="compiled")`` uses."""
    return _DEFAULT


def stats() -> dict[str, int]:
    """``{"compiled": n, "cache_hits": n, "fallbacks": n}`` of the process-wide JIT."""
    return _DEFAULT.stats()


def reset_stats() -> None:
    """Zero the counters (the compiled kernels stay cached)."""
    _DEFAULT.reset_stats()


def clear_cache() -> None:
    """Forget the compiled kernels (and zero the counters)."""
    _DEFAULT.clear_cache()


def fallback_reasons() -> dict[tuple, str]:
    """(operator name, input shapes and dtypes) -> why those calls run on numpy."""
    return _DEFAULT.fallback_reasons()
