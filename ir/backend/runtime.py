"""The graph runtime: runs a compiled static model from its graph (plain JSON), its
parameters (numpy arrays) and one shared library of kernels.

This file imports only numpy and the standard library — nothing else of tensortune — so
an exported model carries a copy of it and runs where only numpy is installed (no tuner,
no database, no C compiler): ``runtime.load("model.tt")`` then ``model(x=...)``.

The graph (``version`` 1):

- ``entries``: every tensor value, ``{"shape", "dtype", "kind", ...}`` with ``kind``
  ``input`` (``index`` into the inputs), ``param`` (``name`` in the parameters) or ``temp``
  (``storage``: the index of the storage buffer it lives in, shared with other temporaries
  whose lifetimes do not overlap: the memory plan);
- ``storages``: the size in bytes of each storage buffer;
- ``nodes``: the kernel calls in order, ``{"kernel": entry symbol, "args": [entry ids]}``
  (inputs then outputs, the kernel's argument order), or ``{"python": id, "inputs",
  "outputs"}`` for a fused function that runs on numpy (in the process that built the
  model only; such a model does not export); each may have a ``name`` (the fused
  function's, e.g. ``fused_conv2d_bias_add_relu``), which ``profile`` reports;
- ``inputs`` / ``input_names``, ``outputs`` (entry ids) and ``output_structure`` (how the
  output entries nest into tuples: an entry index, or a list of structures).

Buffers are allocated once, when the model is loaded; a call copies the inputs in, runs
the kernels on fixed pointers, and copies the outputs out.
"""

from __future__ import annotations

import ctypes
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

GRAPH_VERSION = 1
ARTIFACT_FILES = ("graph.json", "params.npz", "kernels.so", "runtime.py")
#: where every buffer a kernel reads or writes starts (as ``schedule.buffers``, which this
#: file cannot import): a vector load across two cache lines costs two, and a buffer of a
#: page or more starts on a page boundary, laid out as the tuner measured its kernels
ALIGNMENT = 64
PAGE = 4096


def _alignment(nbytes: int) -> int:
    return PAGE if nbytes >= PAGE else ALIGNMENT


def aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array starting at a multiple of ``ALIGNMENT``, or of
    ``PAGE`` from a page's size on."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    align = _alignment(nbytes)
    raw = np.empty(nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


class GraphRuntime:
    """A loaded static model: ``model(*inputs)`` or ``model(name=array, ...)``."""

    def __init__(self, graph: dict[str, Any], params: dict[str, np.ndarray],
                 library: str | os.PathLike | None,
                 python_kernels: dict[int, Callable[..., Any]] | None = None):
        if graph.get("version") != GRAPH_VERSION:
            raise ValueError(f"graph version {graph.get('version')!r} is not "
                             f"{GRAPH_VERSION}")
        self.graph = graph
        self.input_names: list[str] = list(graph["input_names"])
        self._lib = ctypes.CDLL(str(library)) if library is not None else None
        self._storages = [aligned_empty((max(int(n), 1),), np.uint8) for n in graph["storages"]]
        self.entries: list[np.ndarray] = [self._allocate(e, params) for e in graph["entries"]]
        self._inputs = [self.entries[i] for i in graph["inputs"]]
        self._steps: list[Callable[[], None]] = [
            self._step(node, python_kernels or {}) for node in graph["nodes"]]

    def _allocate(self, entry: dict[str, Any], params: dict[str, np.ndarray]) -> np.ndarray:
        dtype, shape = np.dtype(entry["dtype"]), tuple(entry["shape"])
        if entry["kind"] == "param":
            # (np.require, not ascontiguousarray: that makes a 0-d array 1-d)
            value = np.require(params[entry["name"]], dtype=dtype, requirements="C")
            if value.shape != shape:
                raise ValueError(f"parameter {entry['name']} has shape {value.shape}, the "
                                 f"graph says {shape}")
            if value.ctypes.data % _alignment(value.nbytes):
                value, misaligned = aligned_empty(shape, dtype), value
                value[...] = misaligned
            return value
        if entry["kind"] == "input":
            return aligned_empty(shape, dtype)
        count = int(np.prod(shape, dtype=np.int64))
        storage = self._storages[entry["storage"]]
        return storage[:count * dtype.itemsize].view(dtype).reshape(shape)

    def _step(self, node: dict[str, Any], python_kernels: dict[int, Callable]) -> Callable:
        if "kernel" in node:
            if self._lib is None:
                raise ValueError("the graph calls kernels but no library was given")
            fn = getattr(self._lib, node["kernel"])
            fn.restype = ctypes.c_int32
            pointers = [ctypes.c_void_p(self.entries[i].ctypes.data) for i in node["args"]]
            fn.argtypes = [ctypes.c_void_p] * len(pointers)
            name = node["kernel"]

            def run() -> None:
                if fn(*pointers) != 0:
                    raise MemoryError(f"kernel {name} could not allocate a buffer")
            return run
        kernel = python_kernels.get(node["python"])
        if kernel is None:
            raise ValueError(f"node {node['python']} runs on numpy in the process that built "
                             "the model only (it has no compiled kernel)")
        ins = [self.entries[i] for i in node["inputs"]]
        outs = [self.entries[i] for i in node["outputs"]]

        def run_python() -> None:
            result = kernel(*ins)
            values = result if isinstance(result, tuple) else (result,)
            for out, value in zip(outs, values, strict=True):
                out[...] = value
        return run_python

    # ------------------------------------------------------------------ running

    def set_inputs(self, *args: np.ndarray, **kwargs: np.ndarray) -> None:
        values = list(args)
        if len(values) > len(self._inputs):
            raise TypeError(f"the model takes {len(self._inputs)} inputs "
                            f"({', '.join(self.input_names)}), got {len(values)}")
        for name in self.input_names[len(values):]:
            if name not in kwargs:
                raise TypeError(f"missing input {name!r} (inputs: "
                                f"{', '.join(self.input_names)})")
            values.append(kwargs.pop(name))
        if kwargs:
            raise TypeError(f"unknown input(s) {sorted(kwargs)} (inputs: "
                            f"{', '.join(self.input_names)})")
        for name, buffer, value in zip(self.input_names, self._inputs, values, strict=True):
            value = np.asarray(value)
            if value.shape != buffer.shape:
                raise ValueError(f"input {name!r} must have shape {list(buffer.shape)}, got "
                                 f"{list(value.shape)}")
            if value.dtype != buffer.dtype and not np.can_cast(value.dtype, buffer.dtype,
                                                               "same_kind"):
                raise TypeError(f"input {name!r} must have dtype {buffer.dtype}, got "
                                f"{value.dtype}")
            buffer[...] = value

    def run(self) -> None:
        """Run every node on the inputs last set."""
        for step in self._steps:
            step()

    def profile(self, repeat: int = 10) -> list[tuple[str, float]]:
        """Per node, in order: its name and its median time in seconds over ``repeat`` runs
        on the inputs last set (the nodes timed one by one, after one warm-up run)."""
        self.run()
        names = [node.get("name") or node.get("kernel") or f"python_{node.get('python')}"
                 for node in self.graph["nodes"]]
        times: list[list[float]] = [[] for _ in self._steps]
        for _ in range(max(1, repeat)):
            for n, step in enumerate(self._steps):
                start = time.perf_counter()
                step()
                times[n].append(time.perf_counter() - start)
        return [(name, float(np.median(t))) for name, t in zip(names, times, strict=True)]

    def outputs(self) -> Any:
        """Copies of the outputs, nested as the model's result."""
        def build(structure: Any) -> Any:
            if isinstance(structure, list):
                return tuple(build(s) for s in structure)
            return self.entries[self.graph["outputs"][structure]].copy()
        return build(self.graph["output_structure"])

    def __call__(self, *args: np.ndarray, **kwargs: np.ndarray) -> Any:
        self.set_inputs(*args, **kwargs)
        self.run()
        return self.outputs()


def save_artifact(path: str | os.PathLike, graph: dict[str, Any],
                  params: dict[str, np.ndarray], library: str | os.PathLike) -> Path:
    """Write a model artefact: one zip file holding the graph, the parameters, the kernel
    library and this runtime's source."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("graph.json", json.dumps(graph))
        with z.open("params.npz", "w") as f:
            np.savez(f, **params)
        z.write(library, "kernels.so")
        z.write(__file__, "runtime.py")
    os.replace(tmp, path)
    return path


def load(path: str | os.PathLike) -> GraphRuntime:
    """Load an exported model (see ``save_artifact``). The kernel library is extracted to
    a private temporary directory (a shared library must be a file to be loaded)."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise ValueError(f"{path} is not a model artefact (not a zip file)") from None
    with archive as z:
        names = set(z.namelist())
        missing = [n for n in ARTIFACT_FILES if n not in names]
        if missing:
            raise ValueError(f"{path} is not a model artefact (missing {', '.join(missing)})")
        graph = json.loads(z.read("graph.json"))
        with z.open("params.npz") as f:
            npz = np.load(f, allow_pickle=False)
            params = {k: npz[k] for k in npz.files}
        directory = tempfile.mkdtemp(prefix="tt-model-")
        library = Path(directory) / "kernels.so"
        library.write_bytes(z.read("kernels.so"))
    return GraphRuntime(graph, params, library)


__all__: Sequence[str] = ["GraphRuntime", "load", "save_artifact"]
