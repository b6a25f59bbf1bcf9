"""Baselines: what a tuned program is compared with, measured on the device that times the
candidates, in the same sandbox discipline, with the target's core count.

A baseline is a measure input with ``library`` set instead of a schedule:
- ``numpy``: the operator as a numpy user computes it (its reference in the workload's own
  dtype), BLAS limited to the target's cores;
- ``torch``: the operator through ``torch`` (float32 operators that have a ``torch``
  counterpart), ``torch.set_num_threads(cores)``; its outputs are checked like a kernel's;
- ``peak``: not a program but a bound: the time the workload's FLOPs take at the target's
  measured multiply-add peak (independent multiply-add chains in the target's vector width
  on ``cores`` threads), so that a best program reads as a fraction of the hardware.

Library code runs in a fresh sandbox that is ended after each baseline: a BLAS or OpenMP
runtime left spinning would slow the kernels timed after it.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from schedule import Target, Workload

#: The baselines a job can ask for (``JobSpec.baselines``).
BASELINES = ("numpy", "torch", "peak")

_CHAINS_WIDE, _CHAINS = 16, 12  # independent chains: 32 vector registers, else 16
_PEAK_ENTRY = "tt_fma_peak"


class BaselineUnavailable(Exception):
    """This baseline has no counterpart of the workload (a computation DAG for numpy, an
    operator torch lacks, a dtype it does not cover, torch not installed)."""


def peak_source(target: Target) -> str:
    """C source of ``double tt_fma_peak(int threads, long iters)``: GFLOP/s of ``iters``
    rounds of independent ``acc = acc * b + c`` chains in the target's vector width on
    ``threads`` OpenMP threads (the compiler contracts each into one fused multiply-add
    where the ISA has it; two operations either way)."""
    width = max(4, target.vector_bits // 8)
    chains = _CHAINS_WIDE if target.vector_bits >= 512 else _CHAINS
    return f"""
#include <omp.h>
typedef float vec __attribute__((vector_size({width})));
#define LANES {width // 4}
#define CHAINS {chains}
volatile float tt_peak_sink;
double {_PEAK_ENTRY}(int threads, long iters) {{
  double start = omp_get_wtime();
  float sink = 0;
  #pragma omp parallel num_threads(threads) reduction(+:sink)
  {{
    vec acc[CHAINS];
    vec b = (vec){{0}} + 1.0000001f, c = (vec){{0}} + 1e-9f;
    for (int i = 0; i < CHAINS; i++) acc[i] = (vec){{0}} + (float)(i + omp_get_thread_num());
    for (long it = 0; it < iters; it++) {{
      #pragma GCC unroll {chains}
      for (int i = 0; i < CHAINS; i++) acc[i] = acc[i] * b + c;
    }}
    for (int i = 0; i < CHAINS; i++)
      for (int l = 0; l < LANES; l++) sink += acc[i][l];
  }}
  tt_peak_sink = sink;
  double seconds = omp_get_wtime() - start;
  return 2.0 * iters * CHAINS * LANES * threads / seconds / 1e9;
}}
"""


def _numpy(workload: Workload, inputs: list[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    if workload.numpy_baseline(inputs) is None:
        raise BaselineUnavailable("numpy has no counterpart of a computation (DAG) workload")
    return lambda: workload.numpy_baseline(inputs)  # type: ignore[return-value]


def _torch_call(torch: Any, op: str, p: dict[str, Any]) -> Callable[..., Any] | None:
    """The workload's operator through torch, or None where torch has no counterpart."""
    functional = torch.nn.functional
    activations = {"none": lambda y: y, "relu": torch.relu, "gelu": functional.gelu}
    if op == "matmul":
        return lambda a, b: torch.matmul(a.T if p["transpose_a"] else a,
                                         b.T if p["transpose_b"] else b)
    if op == "batch_matmul":
        return lambda a, b: torch.bmm(a, b.transpose(1, 2) if p["transpose_b"] else b)
    if op == "dense":
        act = activations[p["activation"]]
        return lambda x, w, *bias: act(functional.linear(x, w, *bias))
    if op in ("conv2d_nchw", "depthwise_conv2d_nchw"):
        groups = p.get("groups", 1) if op == "conv2d_nchw" else p["C"]
        return lambda x, w: functional.conv2d(x, w, stride=p["stride"], padding=p["padding"],
                                              dilation=p["dilation"], groups=groups)
    if op in ("max_pool2d", "avg_pool2d"):
        pool = functional.max_pool2d if op == "max_pool2d" else functional.avg_pool2d
        return lambda x: pool(x, (p["R"], p["S"]), p["stride"], p["padding"])
    if op in ("softmax", "log_softmax"):
        fn = functional.softmax if op == "softmax" else functional.log_softmax
        return lambda x: fn(x, dim=-1)
    if op == "layer_norm":
        return lambda x, g, b: functional.layer_norm(x, (p["N"],), g, b, eps=1e-5)
    return None


def _torch(workload: Workload, inputs: list[np.ndarray],
           cores: int) -> Callable[[], list[np.ndarray]]:
    try:
        import torch
    except ImportError:
        raise BaselineUnavailable("torch is not installed on this worker") from None
    call = _torch_call(torch, workload.op_name or "", workload.params)
    if call is None:
        raise BaselineUnavailable(f"no torch counterpart of {workload.op_name or 'a DAG'}")
    if workload.params.get("dtype") != "float32":
        raise BaselineUnavailable("the torch baseline covers float32 operators")
    torch.set_num_threads(cores)
    tensors = [torch.from_numpy(x) for x in inputs]

    def run() -> list[np.ndarray]:
        with torch.inference_mode():
            return [call(*tensors).numpy()]
    return run


def _repeat_times(fn: Callable[[], Any], job: dict[str, Any]) -> list[float]:
    """TVM's time evaluator in Python: ``repeat`` timings (seconds per call) of ``number``
    calls, ``number`` doubled until a timing lasts ``min_repeat_ms``."""
    number, costs = job["number"], []
    while len(costs) < job["repeat"]:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed * 1e3 < job["min_repeat_ms"] and not costs:
            number *= 2
            continue
        costs.append(elapsed / number)
    return costs


def time_library(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: time ``library``'s version of the workload on ``cores`` threads; with
    ``check`` also return its outputs."""
    from threadpoolctl import threadpool_limits

    workload = Workload.from_json(job["workload"])
    inputs = workload.random_inputs(job["seed"])
    with threadpool_limits(job["cores"]):
        try:
            fn = _numpy(workload, inputs) if job["library"] == "numpy" \
                else _torch(workload, inputs, job["cores"])
        except BaselineUnavailable as err:
            return {"unavailable": str(err)}, []
        started()
        outputs = [np.ascontiguousarray(out) for out in fn()]  # also the warm-up
        costs = _repeat_times(fn, job)
    return {"costs": costs}, [o.tobytes() for o in outputs] if job["check"] else []


def time_peak(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: the best GFLOP/s of ``repeat`` runs of the peak library's chains, each
    run made to last at least ``min_repeat_ms``."""
    fma_peak = getattr(ctypes.CDLL(job["path"]), _PEAK_ENTRY)
    fma_peak.restype, fma_peak.argtypes = ctypes.c_double, [ctypes.c_int, ctypes.c_long]
    started()
    iters, threads = 1 << 16, job["cores"]
    while True:
        start = time.perf_counter()
        fma_peak(threads, iters)
        if (time.perf_counter() - start) * 1e3 >= max(job["min_repeat_ms"], 20):
            break
        iters *= 2
    return {"gflops": [fma_peak(threads, iters) for _ in range(job["repeat"])]}, []
