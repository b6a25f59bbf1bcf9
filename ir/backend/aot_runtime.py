"""The AOT runtime: calls a model that ``ir.backend.aot.aot_compile`` turned into one shared
library, and saves or loads it as an artefact.

This file imports only numpy and the standard library — nothing else of tensortune — and
travels inside every exported artefact, so ``aot_runtime.load(path)`` runs a model where
neither tensortune nor a C compiler is installed.

The library's C interface (no Python needed to call it):

- ``int tt_num_inputs(void)``, ``int tt_num_outputs(void)``, ``int tt_num_params(void)``;
- ``int tt_set_params(void **params)``: the weights' addresses, in ``params`` order; the
  caller keeps the arrays alive and unchanged while the library runs;
- ``int tt_run(void **inputs, void **outputs)``: runs the whole model on C-contiguous
  inputs and writes the caller's output buffers; returns 0, -1 when the parameters were not
  set, or ``k + 1`` when call ``k`` could not allocate a buffer.

Intermediate buffers are static storage inside the library, so one loaded copy of the
library runs one call at a time: every ``AotModel`` loads a private copy (the same path
opened twice would be one shared handle) and serialises its calls.

An artefact is a directory: ``model.so``, ``model.c`` (its source), ``params.npz``,
``aot_runtime.py`` (this file) and ``model.json``: ``{"version": 1, "inputs": [{"name",
"shape", "dtype"}], "outputs": [...], "output_structure": how the outputs nest into tuples
(an output index, or a list of structures), "params": [{"name", "shape", "dtype"}],
"calls": [the fused function of each call, in order], "target", "storage_bytes"}``.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

AOT_VERSION = 1
ARTIFACT_FILES = ("model.json", "model.so", "model.c", "params.npz", "aot_runtime.py")
#: weights and outputs of a page or more start on a page boundary, the rest of the weights
#: on a multiple of ``ALIGNMENT`` (as ``schedule.buffers``, which this file cannot import): a
#: vector load across two cache lines costs two, and large buffers are laid out as the tuner
#: measured their kernels. Smaller outputs keep numpy's allocation, the cheaper per call.
ALIGNMENT = 64
PAGE = 4096


def buffer_alignment(nbytes: int) -> int:
    """Where a buffer of ``nbytes`` starts: a multiple of ``PAGE`` from a page's size on,
    else of ``ALIGNMENT`` (``schedule.buffers.buffer_alignment``)."""
    return PAGE if nbytes >= PAGE else ALIGNMENT


def _empty_at(shape: tuple[int, ...], dtype: np.dtype, align: int) -> np.ndarray:
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def _output_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize < PAGE:
        return np.empty(shape, dtype)
    return _empty_at(shape, dtype, PAGE)


def _private_library(library: Path) -> ctypes.CDLL:
    """Load a private copy of ``library`` (its static buffers and parameter pointers are
    this copy's alone); the copy is unlinked once loaded."""
    directory = tempfile.mkdtemp(prefix="tt-aot-")
    copy = Path(directory) / "model.so"
    try:
        shutil.copyfile(library, copy)
        return ctypes.CDLL(str(copy))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class AotModel:
    """An ahead-of-time compiled model: ``model(*inputs)`` or ``model(name=array, ...)``
    returns the outputs as numpy arrays (a tuple, nested as the model's result, when there
    are several) with one call into the library."""

    def __init__(self, library: str | os.PathLike, meta: dict[str, Any],
                 params: dict[str, np.ndarray], source: str = "",
                 tasks: Sequence[Any] = (), externals: Sequence[Any] = ()):
        if meta.get("version") != AOT_VERSION:
            raise ValueError(f"AOT model version {meta.get('version')!r} is not {AOT_VERSION}")
        self.library = Path(library)
        self.meta = meta
        self.source = source
        self.tasks = list(tasks)
        self.input_names: list[str] = [i["name"] for i in meta["inputs"]]
        self.output_names: list[str] = [o["name"] for o in meta["outputs"]]
        self._inputs = [(tuple(i["shape"]), np.dtype(i["dtype"])) for i in meta["inputs"]]
        self._outputs = [(tuple(o["shape"]), np.dtype(o["dtype"])) for o in meta["outputs"]]
        # the library keeps the weights' addresses: these arrays live as long as the model
        self._params = [_param(spec, params) for spec in meta["params"]]
        self._lib = _private_library(self.library)
        for what, expected in (("inputs", self._inputs), ("outputs", self._outputs),
                               ("params", self._params)):
            count = getattr(self._lib, f"tt_num_{what}")()
            if count != len(expected):
                raise ValueError(f"the library has {count} {what}, its description "
                                 f"{len(expected)}")
        self._run = self._lib.tt_run
        self._run.argtypes = [ctypes.POINTER(ctypes.c_void_p)] * 2
        self._run.restype = ctypes.c_int
        self._input_pointers = (ctypes.c_void_p * len(self._inputs))()
        self._output_pointers = (ctypes.c_void_p * len(self._outputs))()
        # the array whose address each input pointer holds: an array passed again (a
        # step's weights) keeps its address (held here, numpy cannot move its data)
        self._held: list[np.ndarray | None] = [None] * len(self._inputs)
        self._lock = threading.Lock()
        pointers = (ctypes.c_void_p * len(self._params))(*[p.ctypes.data for p in self._params])
        self._lib.tt_set_params.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self._lib.tt_set_params(pointers)
        specs = meta.get("externals", [])
        if len(externals) != len(specs):
            raise ValueError(f"the model calls {len(specs)} external functions "
                             f"({', '.join(e['symbol'] for e in specs)}); "
                             f"{len(externals)} given")
        self._external_errors: list[BaseException] = []
        self._externals = [_callback(module, spec, self._external_errors)
                           for module, spec in zip(externals, specs, strict=True)]
        # (kept alive: the library holds their addresses)
        self._lib.tt_set_external.argtypes = [ctypes.c_int, ctypes.c_void_p]
        for k, callback in enumerate(self._externals):
            self._lib.tt_set_external(k, ctypes.cast(callback, ctypes.c_void_p))

    def pointer_entry(self, argtype: Any = ctypes.c_void_p) -> Any:
        """The library's ``tt_call(input0, ..., output0, ...)`` (``int``, 0 on success) for
        callers that pass the buffers themselves (the VM), each as ``argtype``: no checks,
        and the library's static buffers make concurrent calls unsafe (hold ``lock``)."""
        entry = self._lib.tt_call
        entry.argtypes = [argtype] * (len(self._inputs) + len(self._outputs))
        entry.restype = ctypes.c_int
        return entry

    @property
    def lock(self) -> threading.Lock:
        """Held while the library runs (its intermediate buffers are static)."""
        return self._lock

    def _arrays(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Sequence[np.ndarray]:
        """The inputs by position, then by name, checked and made C-contiguous (``args``
        itself when it already is exactly that: the per-step call of a small model)."""
        if not kwargs and len(args) == len(self._inputs) and all(
                type(a) is np.ndarray and a.shape == shape and a.dtype == dtype
                and a.flags.c_contiguous
                for a, (shape, dtype) in zip(args, self._inputs, strict=True)):
            return args
        names = self.input_names
        if len(args) > len(names):
            raise TypeError(f"the model takes {len(names)} inputs ({', '.join(names)}), "
                            f"got {len(args)}")
        values = list(args)
        for name in names[len(values):]:
            if name not in kwargs:
                raise TypeError(f"missing input {name!r} (inputs: {', '.join(names)})")
            values.append(kwargs.pop(name))
        if kwargs:
            raise TypeError(f"unknown input(s) {sorted(kwargs)} (inputs: {', '.join(names)})")
        arrays = []
        for name, (shape, dtype), value in zip(names, self._inputs, values, strict=True):
            value = np.asarray(value)
            if value.shape != shape:
                raise ValueError(f"input {name!r} must have shape {list(shape)}, got "
                                 f"{list(value.shape)}")
            if value.dtype != dtype:
                if not np.can_cast(value.dtype, dtype, "same_kind"):
                    raise TypeError(f"input {name!r} must have dtype {dtype}, got "
                                    f"{value.dtype}")
                value = value.astype(dtype, order="C")
            elif not value.flags.c_contiguous:
                value = np.ascontiguousarray(value)
            arrays.append(value)
        return arrays

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        inputs = self._arrays(args, kwargs)
        outputs = [_output_empty(shape, dtype) for shape, dtype in self._outputs]
        with self._lock:
            held = self._held
            for i, a in enumerate(inputs):
                if a is not held[i]:
                    self._input_pointers[i] = _address(a)
                    held[i] = a
            for i, o in enumerate(outputs):
                self._output_pointers[i] = _address(o)
            code = self._run(self._input_pointers, self._output_pointers)
        if code < 0:
            raise RuntimeError("the library's parameters are not set")
        if code > 0 and self._external_errors:
            error = self._external_errors.pop()
            self._external_errors.clear()
            raise RuntimeError(f"external function {self.meta['calls'][code - 1]} failed: "
                               f"{error}") from error
        if code > 0:
            raise MemoryError(f"call {code - 1} ({self.meta['calls'][code - 1]}) could not "
                              "allocate a buffer")
        return _nest(self.meta["output_structure"], outputs)

    def export(self, path: str | os.PathLike) -> Path:
        """Write the artefact directory (see the module docstring); it loads with
        ``aot_runtime.load(path)`` where only numpy is installed."""
        if self.meta.get("externals"):
            raise ValueError("a model with external codegen regions does not export: its "
                             "codegens run them ("
                             f"{', '.join(e['symbol'] for e in self.meta['externals'])})")
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.library, path / "model.so")
        (path / "model.c").write_text(self.source)
        np.savez(path / "params.npz", **{s["name"]: p
                                          for s, p in zip(self.meta["params"], self._params,
                                                          strict=True)})
        shutil.copyfile(__file__, path / "aot_runtime.py")
        (path / "model.json").write_text(json.dumps(self.meta, indent=1))
        return path

    def __repr__(self) -> str:
        return (f"AotModel(inputs={self.input_names}, outputs={self.output_names}, "
                f"calls={len(self.meta['calls'])})")


_EXTERNAL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))


def _callback(module: Any, spec: dict[str, Any], errors: list[BaseException]) -> Any:
    """A C function pointer running ``module`` (an external region) on the buffers the
    library passes: inputs then outputs, viewed as numpy arrays; the result copied into
    the outputs. Returns 0, or 1 when the module failed (its exception kept in
    ``errors``; the model's call then fails)."""
    shapes = [(tuple(shape), np.dtype(dtype)) for shape, dtype in spec["args"]]
    n_in = spec["inputs"]

    def view(address: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        buffer = (ctypes.c_char * max(size, 1)).from_address(address)
        return np.frombuffer(buffer, dtype, count=int(np.prod(shape, dtype=np.int64))
                             ).reshape(shape)

    def run(args: Any) -> int:
        try:
            arrays = [view(args[i], s, d) for i, (s, d) in enumerate(shapes)]
            result = module(*arrays[:n_in])
            results = result if isinstance(result, tuple) else (result,)
            for out, value in zip(arrays[n_in:], results, strict=True):
                out[...] = value
            return 0
        except Exception as exc:  # it cannot cross C: kept, and the call fails
            errors.append(exc)
            return 1

    return _EXTERNAL(run)


def _address(a: np.ndarray) -> int:
    """The address of a C-contiguous array's data: through the buffer protocol when the
    array is writable and not empty (a few times faster than ``a.ctypes.data``)."""
    if a.flags.writeable and a.nbytes:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return a.ctypes.data


def _nest(structure: Any, outputs: list[np.ndarray]) -> Any:
    """The outputs nested as the model's result (an output index, or a list of them)."""
    if isinstance(structure, list):
        return tuple(_nest(s, outputs) for s in structure)
    return outputs[structure]


def _param(spec: dict[str, Any], params: dict[str, np.ndarray]) -> np.ndarray:
    if spec["name"] not in params:
        raise ValueError(f"parameter {spec['name']} is missing")
    # (np.require, not ascontiguousarray: that makes a 0-d array 1-d)
    value = np.require(params[spec["name"]], np.dtype(spec["dtype"]), "C")
    if value.shape != tuple(spec["shape"]):
        raise ValueError(f"parameter {spec['name']} has shape {list(value.shape)}, the model "
                         f"says {spec['shape']}")
    align = buffer_alignment(value.nbytes)
    if value.ctypes.data % align:
        value, misaligned = _empty_at(value.shape, value.dtype, align), value
        value[...] = misaligned
    return value


def load(path: str | os.PathLike) -> AotModel:
    """Load an exported artefact directory (see ``AotModel.export``)."""
    path = Path(path)
    missing = [f for f in ARTIFACT_FILES if not (path / f).is_file()]
    if missing:
        raise ValueError(f"{path} is not an AOT artefact (missing {', '.join(missing)})")
    meta = json.loads((path / "model.json").read_text())
    with np.load(path / "params.npz", allow_pickle=False) as npz:
        params = {k: npz[k] for k in npz.files}
    return AotModel(path / "model.so", meta, params, (path / "model.c").read_text())


__all__: Sequence[str] = ["AOT_VERSION", "AotModel", "load"]
