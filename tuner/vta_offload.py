"""The ``vta`` external codegen: a quantized model's layers offloaded to the accelerator
(``Compiler="vta"`` regions of ``ir.transform.partition_for``), the rest on the host cpu.

A *layer* is what the accelerator computes whole, matched as a pattern (``claims``):
``nn.conv2d`` (NCHW / OIHW) or ``nn.dense`` of int8 data and int8 constant weights into
int32, then optionally ``nn.bias_add`` of an int32 constant, optionally ``nn.relu``, then
``qnn.requantize`` to int8 by a power of two at most 1, each value used only by the next
(``ir.transform.quantize.VTA_QCONFIG`` quantizes models so). A convolution the accelerator
cannot compute (groups, dilation, uneven stride or padding: ``schedule.vta.VtaUnsupported``)
stays on the host.

Each layer becomes a ``conv2d_nchw`` / ``dense`` workload (int8, bias, relu,
``requant_shift``). Its requantization is a floor shift, ``qnn.requantize``'s rounds half
up: adding ``2**(shift-1)`` to the bias makes them the same (the ReLU commutes with the
rounded shift), so the accelerator computes exactly the IR's integers. Its schedule is the
best record for the vta target in the database (``use_vta(db=...)``), else (or when that
record no longer compiles: a warning) the template's default; its program is generated
once, with the weights and bias packed into the core's layout. A call packs the data, runs
each layer's program on the simulator (``workers.VtaSimulator``: bit-exact, its time
cycle-approximate, so figures are labelled simulated) and unpacks the result; ``stats``
counts the simulated cycles.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import ir
from schedule import ScheduleError, Target, Workload, vta
from workers import VtaSimulator

__all__ = ["VtaCodegen", "VtaRegion", "use_vta"]

#: ``workload -> steps | None``: the tuned schedule of a layer, if any
Schedules = Callable[[Workload], Any]


def _is(e: Any, name: str) -> bool:
    return isinstance(e, ir.Call) and isinstance(e.op, ir.Op) and e.op.name == name


def _dtype(e: ir.Expr) -> str:
    return e.checked_type.dtype


def _shift(requantize: ir.Call) -> int | None:
    """``s`` when the requantization multiplies by ``2**-s`` (0 <= s <= 30) into int8."""
    a = requantize.attrs
    m = int(a.multiplier)
    if a.out_dtype != "int8" or m <= 0 or m & (m - 1):
        return None
    s = int(a.shift) - (m.bit_length() - 1)
    return s if 0 <= s <= 30 else None


@dataclass
class _Layer:
    """A matched layer: its calls (outermost first), the product's data input, weights,
    bias (None: none) and the accelerator's workload."""

    calls: list[ir.Call]
    data: ir.Expr
    weight: np.ndarray
    bias: np.ndarray | None
    workload: Workload


def _product_workload(product: ir.Call, bias: bool, relu: bool, shift: int) -> Workload | None:
    data, weight = product.args
    if not isinstance(weight, ir.Constant) or _dtype(data) != "int8" or \
            _dtype(weight) != "int8" or product.attrs.out_dtype != "int32":
        return None
    common = {"bias": bias, "activation": "relu" if relu else "none", "dtype": "int8",
              "requant_shift": shift}
    if _is(product, "nn.dense"):
        (m, k), (n, _) = data.checked_type.shape, weight.checked_type.shape
        return Workload.op("dense", M=m, N=n, K=k, **common)
    a = product.attrs
    if a.data_layout != "NCHW" or a.kernel_layout != "OIHW" or a.out_layout not in ("", "NCHW"):
        return None
    top, left, bottom, right = ir.op.relations.padding2d("nn.conv2d", a.padding)
    if (top, left) != (bottom, right):
        return None
    (n, c, h, w), (k, _, r, s) = data.checked_type.shape, weight.checked_type.shape
    return Workload.op("conv2d_nchw", N=n, C=c, H=h, W=w, K=k, R=r, S=s,
                       stride=list(ir.op.relations.pair("nn.conv2d", a.strides, "strides")),
                       padding=[top, left], groups=a.groups,
                       dilation=list(ir.op.relations.pair("nn.conv2d", a.dilation, "dilation")),
                       **common)


def _match(root: ir.Call, users: Counter[int], config: vta.VtaConfig) -> _Layer | None:
    """The layer ending in requantization ``root``, if the accelerator computes it."""
    shift = _shift(root)
    if shift is None:
        return None
    calls, e = [root], root.args[0]
    relu = _is(e, "nn.relu")
    if relu:
        calls.append(e)
        e = e.args[0]
    bias = None
    if _is(e, "nn.bias_add") and isinstance(e.args[1], ir.Constant) and \
            _dtype(e.args[1]) == "int32" and e.attrs.axis % len(e.checked_type.shape) == 1:
        calls.append(e)
        bias = e.args[1].data.astype(np.int64)
        e = e.args[0]
    if not (_is(e, "nn.conv2d") or _is(e, "nn.dense")):
        return None
    calls.append(e)
    if any(users[id(c)] != 1 for c in calls[1:]):
        return None  # an intermediate value is needed elsewhere
    if shift:  # round half up, as qnn.requantize does
        bias = (0 if bias is None else bias) + (1 << (shift - 1))
    workload = _product_workload(e, bias is not None, relu, shift)
    if workload is None:
        return None
    try:
        vta.VtaCompute(workload, config)
    except vta.VtaUnsupported:
        return None
    weight = e.args[1].data
    if bias is not None:
        bias = np.broadcast_to(bias, weight.shape[:1])
        if (np.abs(bias) >= 2 ** 31).any():
            return None
        bias = bias.astype(np.int32)
    return _Layer(calls, e.args[0], weight, bias, workload)


def _layers(body: ir.Expr, config: vta.VtaConfig) -> list[_Layer]:
    """Every layer of dataflow graph ``body``, in dataflow order."""
    nodes = ir.dataflow_post_order(body)
    users = Counter(id(a) for e in nodes for a in ir.dataflow_inputs(e))
    found = (_match(e, users, config) for e in nodes if _is(e, "qnn.requantize"))
    return [layer for layer in found if layer is not None]


@dataclass
class _Compiled:
    layer: _Layer
    compute: vta.VtaCompute
    program: vta.VtaProgram
    packed: list[np.ndarray]  # the weight and bias in the core's layout


class VtaRegion(ir.ExternalModule):
    """A partitioned function's layers compiled for the accelerator (module docstring)."""

    def __init__(self, func: ir.Function, symbol: str, config: vta.VtaConfig,
                 schedules: Schedules | None):
        self.func, self.symbol, self.config = func, symbol, config
        layers = _layers(func.body, config)
        inside = {id(c) for layer in layers for c in layer.calls}
        for e in ir.dataflow_post_order(func.body):
            if isinstance(e, ir.Call) and id(e) not in inside:
                name = e.op.name if isinstance(e.op, ir.Op) else type(e.op).__name__
                raise ValueError(f"vta: region {symbol} holds {name}, which is not part of a "
                                 "layer the accelerator computes (conv2d / dense, bias, relu, "
                                 "requantize by a power of two)")
        self.layers = [self._compile(layer, schedules) for layer in layers]
        self.stats = {"calls": 0, "cycles": 0}

    def _compile(self, layer: _Layer, schedules: Schedules | None) -> _Compiled:
        compute = vta.VtaCompute(layer.workload, self.config)
        default = compute.template_steps(compute.default_template())
        steps = schedules(layer.workload) if schedules is not None else None
        try:
            _, program = vta.compile_workload(layer.workload, steps or default, self.config)
        except ScheduleError as err:  # a stale or foreign record: the layer still runs
            warnings.warn(f"vta: the tuned schedule of {layer.workload} does not compile "
                          f"({err}); using the default", stacklevel=2)
            _, program = vta.compile_workload(layer.workload, default, self.config)
        packed = [compute.packings[1].pack(layer.weight)]
        if layer.bias is not None:
            packed.append(compute.packings[2].pack(layer.bias))
        return _Compiled(layer, compute, program, packed)

    def describe(self) -> str:
        return json.dumps({"symbol": self.symbol, "config": self.config.name, "layers": [
            {"op": c.layer.workload.op_name, "params": c.layer.workload.params,
             "instructions": len(c.program.instructions), "uops": len(c.program.uops)}
            for c in self.layers]})

    def __call__(self, *args: Any) -> Any:
        values: dict[int, Any] = {id(p): np.asarray(a) for p, a in zip(
            self.func.params, args, strict=True)}

        def value(e: ir.Expr) -> Any:
            if isinstance(e, ir.Constant):
                return e.data
            if isinstance(e, ir.Tuple):
                return tuple(value(f) for f in e.fields)
            return values[id(e)]

        simulator = VtaSimulator(self.config)
        for c in self.layers:
            data = c.compute.packings[0].pack(value(c.layer.data))
            dram = c.program.dram_image([data, *c.packed], self.config)
            result = simulator.run(c.program.instructions, dram)
            out = c.compute.unpack_output(c.program.output(result.dram, self.config))
            values[id(c.layer.calls[0])] = out
            self.stats["cycles"] += result.cycles
        self.stats["calls"] += 1
        return value(self.func.body)


class VtaCodegen(ir.ExternalCodegen):
    """The ``vta`` codegen for accelerator ``target`` on board ``preset`` (its clock and bus),
    with tuned layer schedules from ``schedules`` when given."""

    name = "vta"

    def __init__(self, target: Target | str = "vta", preset: str = "pynq",
                 schedules: Schedules | None = None):
        self.target = Target.parse(target)
        self.config = vta.VtaConfig.for_target(self.target, preset)
        self.schedules = schedules

    def claims(self, body: ir.Expr) -> set[int]:
        return {id(c) for layer in _layers(body, self.config) for c in layer.calls}

    def compile(self, func: ir.Function, symbol: str) -> VtaRegion:
        return VtaRegion(func, symbol, self.config, self.schedules)

    def layer_workloads(self, module: ir.Module) -> list[Workload]:
        """The workloads of the layers of ``module``'s ``@main`` that would run on the
        accelerator, one per distinct workload (what to tune on the vta target)."""
        module = ir.infer_type(ir.to_graph_normal_form(module))
        found = {layer.workload.key: layer.workload
                 for layer in _layers(module["main"].body, self.config)}
        return list(found.values())


def use_vta(target: Target | str = "vta", preset: str = "pynq", db: Any = None) -> VtaCodegen:
    """Register (or replace) the ``vta`` codegen: layers for ``target`` on board ``preset``,
    each with its best record in database ``db`` (a ``db.Database`` or URL) when there is
    one."""
    from .model_compile import best_schedules

    target = Target.parse(target)
    schedules = best_schedules(db, target) if db is not None else None
    return ir.register_codegen(VtaCodegen(target, preset, schedules), override=True)


use_vta()
