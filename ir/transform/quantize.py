"""Post-training quantization to 8 bits in the three steps of the IR's papers.

1. ``annotate(module, config)``: after the inference simplifications (batch norms folded
   into the convolutions), a ``qnn.simulated_quantize`` is put on the inputs of every
   ``nn.conv2d`` and ``nn.dense`` (the data as an activation, the constant weight as a
   weight) and on both inputs of an ``add`` of two computed values (a residual
   connection); ``config.skip_conv_layers`` keeps those convolutions (counted in program
   order, the first by default) in float, ``config.skip_dense`` the dense layers.
2. ``calibrate(annotated, dataset, config)``: runs the annotated program on the
   calibration inputs and sets each activation's scale from what flowed into it — the
   largest magnitude (``"max"``), a percentile of the magnitudes (``"percentile"``), or
   the threshold that minimises the KL divergence between the distribution and its
   quantized histogram (``"kl_divergence"``); an activation never negative on the set
   (after a ReLU) is unsigned, 0..255, a signed one -127..127; weights' scales come from
   their largest
   magnitude, one scale per output channel (``per_channel``, the default) or one for the
   tensor, rounded to a power of two with ``weight_scale="power2"``. For an integer-only
   accelerator (``vta``: int8 x int8 products, requantization by shifts),
   ``signed_activations`` makes every activation int8 and ``power2_scales`` rounds every
   scale up to a power of two, so that each requantization is a rounding shift
   (``VTA_QCONFIG`` sets both, with one scale per tensor).
3. ``realize(calibrated)``: the simulation becomes integer arithmetic. Quantized inputs
   become int8 or uint8 (``qnn.quantize``, or constants folded for weights), ``conv2d``/``dense``
   accumulate in int32 with the product of their inputs' scales (per output channel with
   per-channel weights), a bias joins as an int32 constant of that scale, ReLU/ReLU6/max
   pooling stay in the integer domain, a residual ``add`` brings both sides to a common
   int32 scale, and an int32 value feeding another quantized layer is requantized
   (multiply by a fixed-point factor, shift, round, clip; ``qnn.requantize``,
   ``qnn.requantize_per_channel``). Values leaving the integer domain are
   ``qnn.dequantize``d.

``quantize(module, dataset, config)`` runs the three.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import op as ops
from ..expr import Call, Constant, Expr, Function, Op, Tuple, Var
from ..interpreter import evaluate
from ..module import Module
from ..op.qnn import along, bit_range, fixed_point, fixed_point_per_channel
from ..types import TensorType
from ..visitor import ExprMutator, dataflow_post_order
from .dead_code import DeadCodeElimination
from .fold_constant import FoldConstant
from .fold_scale_axis import FoldScaleAxis
from .infer_type import infer_type
from .pass_infra import PassContext, Sequential
from .simplify_inference import SimplifyInference

__all__ = ["VTA_QCONFIG", "QConfig", "annotate", "calibrate", "quantize", "realize"]

SQ = "qnn.simulated_quantize"
CALIBRATE_MODES = ("max", "percentile", "kl_divergence")


@dataclass(frozen=True)
class QConfig:
    """What to quantize and how (the defaults are TVM's)."""

    nbit_activation: int = 8
    nbit_weight: int = 8
    skip_conv_layers: tuple[int, ...] = (0,)
    skip_dense: bool = False
    calibrate_mode: str = "max"
    percentile: float = 99.99
    weight_scale: str = "max"
    per_channel: bool = True
    signed_activations: bool = False
    power2_scales: bool = False

    def __post_init__(self) -> None:
        if self.calibrate_mode not in CALIBRATE_MODES:
            raise ValueError(f"calibrate_mode must be one of {', '.join(CALIBRATE_MODES)}, got "
                             f"{self.calibrate_mode!r}")
        if self.weight_scale not in ("max", "power2"):
            raise ValueError(f"weight_scale must be 'max' or 'power2', got "
                             f"{self.weight_scale!r}")
        if self.nbit_activation != 8 or self.nbit_weight != 8:
            raise ValueError("only 8-bit quantization is realized (int8 with int32 "
                             "accumulation)")
        if self.power2_scales and self.per_channel:
            raise ValueError("power2_scales takes one scale per tensor (per_channel=False): "
                             "per-channel scales requantize with one multiplier per channel")


#: Quantization for the ``vta`` accelerator: int8 activations and weights, one
#: power-of-two scale per tensor (every requantization a rounding shift on its ALU).
VTA_QCONFIG = QConfig(per_channel=False, signed_activations=True, power2_scales=True)


def _power2(scale: float | np.ndarray) -> float | np.ndarray:
    """The smallest power of two at least ``scale``."""
    return 2.0 ** np.ceil(np.log2(scale))


# ------------------------------------------------------------------------------ annotate


def _simplified(module: Module) -> Module:
    passes = [_infer(), SimplifyInference(), FoldConstant(), FoldScaleAxis(), FoldConstant(),
              DeadCodeElimination(), _infer()]
    with PassContext(opt_level=3):
        return Sequential(passes, "QuantizePrepare")(module)


def _infer():
    from . import InferType

    return InferType()


def _sq(x: Expr, kind: str, config: QConfig) -> Call:
    nbit = config.nbit_weight if kind == "weight" else config.nbit_activation
    return ops.qnn.simulated_quantize(x, scale=0.0, nbit=nbit, signed=True, kind=kind,
                                      axis=0)


class _Annotator(ExprMutator):
    def __init__(self, config: QConfig):
        super().__init__()
        self.config = config
        self.convs = 0

    def visit_call(self, e: Call) -> Expr:
        call = super().visit_call(e)
        if not isinstance(call, Call) or not isinstance(call.op, Op):
            return call
        name = call.op.name
        if name == "nn.conv2d":
            index, self.convs = self.convs, self.convs + 1
            if index in self.config.skip_conv_layers or call.attrs.data_layout != "NCHW":
                return call
        elif name == "nn.dense":
            if self.config.skip_dense:
                return call
        elif name == "add":
            if any(isinstance(a, Constant) for a in call.args):
                return call
            return Call(call.op, [_sq(a, "activation", self.config) for a in call.args],
                        call.attrs, span=call.span)
        else:
            return call
        data, weight = call.args
        if not isinstance(weight, Constant):
            return call
        return Call(call.op, [_sq(data, "activation", self.config),
                              _sq(weight, "weight", self.config)], call.attrs, span=call.span)


def annotate(module: Module, config: QConfig | None = None) -> Module:
    """``module``'s ``@main``, simplified, with simulated quantization on the quantized
    layers' inputs (module docstring); uncalibrated (every scale 0: it computes in float)."""
    config = config or QConfig()
    module = _simplified(module)
    main = module["main"]
    out = module.copy()
    out.add("main", Function(main.params, _Annotator(config).visit(main.body), main.ret_type,
                             main.type_params, main.attrs), update=True)
    return infer_type(out)


# ----------------------------------------------------------------------------- calibrate


def _sq_calls(func: Function) -> list[Call]:
    return [e for e in dataflow_post_order(func.body)
            if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == SQ]


def _kl_threshold(magnitudes: np.ndarray, bins: int = 2048, levels: int = 128) -> float:
    """The clipping threshold whose ``levels``-level quantized histogram is closest (KL
    divergence) to the histogram of ``magnitudes``."""
    top = float(magnitudes.max())
    if top == 0:
        return 0.0
    hist, edges = np.histogram(magnitudes, bins=bins, range=(0, top))
    hist = hist.astype(np.float64)
    best, best_kl = top, np.inf
    for i in range(levels, bins + 1, max(1, (bins - levels) // 256)):
        p = hist[:i].copy()
        p[i - 1] += hist[i:].sum()  # the clipped tail piles onto the last bin
        nonzero = p > 0
        # merge into `levels` bins, spread each merged bin's mass over its non-empty bins
        chunks = np.array_split(np.arange(i), levels)
        q = np.zeros(i)
        for chunk in chunks:
            mass = hist[chunk].sum()
            used = nonzero[chunk]
            if used.any():
                q[chunk[used]] = mass / used.sum()
        ps, qs = p / p.sum(), q / max(q.sum(), 1e-30)
        mask = ps > 0
        kl = float(np.sum(ps[mask] * np.log(ps[mask] / np.maximum(qs[mask], 1e-30))))
        if kl < best_kl:
            best, best_kl = float(edges[i]), kl
    return best


def _activation_scale(samples: list[np.ndarray], config: QConfig) -> tuple[float, bool]:
    """The scale of an activation, and whether it is signed (it went below zero)."""
    values = np.concatenate([s.ravel() for s in samples]).astype(np.float64)
    signed = bool(values.min() < 0)
    magnitudes = np.abs(values)
    if config.calibrate_mode == "max":
        threshold = float(magnitudes.max())
    elif config.calibrate_mode == "percentile":
        threshold = float(np.percentile(magnitudes, config.percentile))
    else:
        threshold = _kl_threshold(magnitudes)
    signed = signed or config.signed_activations
    _, top = bit_range(config.nbit_activation, signed)
    scale = max(threshold, 1e-8) / top
    return (float(_power2(scale)) if config.power2_scales else scale), signed


def _weight_scale(w: np.ndarray, config: QConfig) -> float | tuple[float, ...]:
    """One scale (or one per output channel, axis 0) from the largest magnitudes."""
    _, top = bit_range(config.nbit_weight, True)
    magnitude = np.abs(w.astype(np.float64)).reshape(w.shape[0], -1).max(axis=1)
    largest = np.maximum(magnitude if config.per_channel else magnitude.max(keepdims=True),
                         1e-8)
    if config.weight_scale == "power2":
        largest = _power2(largest)
    scales = _power2(largest / top) if config.power2_scales else largest / top
    return tuple(float(v) for v in scales) if config.per_channel else float(scales[0])


class _SetScales(ExprMutator):
    def __init__(self, settings: dict[int, dict]):
        super().__init__()
        self.settings = settings

    def visit_call(self, e: Call) -> Expr:
        call = super().visit_call(e)
        setting = self.settings.get(id(e))
        if setting is None:
            return call
        return Call(call.op, call.args, call.attrs.replace(**setting), span=call.span)


def calibrate(annotated: Module, dataset: Iterable[Sequence[np.ndarray]],
              config: QConfig | None = None) -> Module:
    """``annotated`` with every simulated quantization's scale set from ``dataset`` (each
    item: ``@main``'s arguments; see the module docstring)."""
    config = config or QConfig()
    main = annotated["main"]
    calls = _sq_calls(main)
    activations = [c for c in calls if c.attrs.kind != "weight"]
    settings: dict[int, dict] = {}
    for c in calls:
        if c.attrs.kind == "weight":
            if not isinstance(c.args[0], Constant):
                raise ValueError("calibrate: a weight to quantize is not a constant")
            settings[id(c)] = {"scale": _weight_scale(c.args[0].data, config)}
    if activations:
        probe = annotated.copy()
        probe.add("main", Function(main.params, Tuple([c.args[0] for c in activations])),
                  update=True)
        samples: list[list[np.ndarray]] = [[] for _ in activations]
        count = 0
        for args in dataset:
            values = evaluate(probe, *args)
            for store, v in zip(samples, values, strict=True):
                store.append(np.asarray(v))
            count += 1
        if count == 0:
            raise ValueError("calibrate: the calibration dataset is empty")
        for c, seen in zip(activations, samples, strict=True):
            scale, signed = _activation_scale(seen, config)
            settings[id(c)] = {"scale": scale, "signed": signed}
    out = annotated.copy()
    out.add("main", Function(main.params, _SetScales(settings).visit(main.body), main.ret_type,
                             main.type_params, main.attrs), update=True)
    return infer_type(out)


# -------------------------------------------------------------------------------- realize


@dataclass(frozen=True, eq=False)
class _Value:
    """A realized value: its expression, and the scale of its integers (None: float; an
    array: one scale per index of ``axis``)."""

    expr: Expr
    scale: float | np.ndarray | None = None
    axis: int = 1

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    @property
    def per_channel(self) -> bool:
        return isinstance(self.scale, np.ndarray)


def _requantize(expr: Expr, factor: float, out_dtype: str) -> Expr:
    multiplier, shift = fixed_point(factor)
    return ops.qnn.requantize(expr, multiplier=multiplier, shift=shift, out_dtype=out_dtype)


class _Realizer:
    def __init__(self) -> None:
        self.values: dict[int, _Value] = {}

    def float_of(self, v: _Value, dtype: str) -> Expr:
        if not v.quantized:
            return v.expr
        v = self.per_tensor(v)
        out = ops.qnn.dequantize(v.expr, scale=v.scale)
        return out if dtype == "float32" else ops.cast(out, dtype=dtype)

    def bytes_of(self, v: _Value, scale: float, dtype: str) -> Expr:
        """``v`` as 8-bit integers (``dtype`` int8 or uint8) of ``scale``."""
        if not v.quantized:
            return ops.qnn.quantize(v.expr, scale=scale, out_dtype=dtype)
        if v.per_channel:
            return self.rescale(v, v.scale / scale, dtype)
        if v.scale == scale and _dtype_of(v.expr) == dtype:
            return v.expr
        return _requantize(v.expr, v.scale / scale, dtype)

    def rescale(self, v: _Value, factors: np.ndarray, out_dtype: str) -> Expr:
        multipliers, shift = fixed_point_per_channel(factors)
        return ops.qnn.requantize_per_channel(self.to_int32(v), Constant(multipliers),
                                              shift=shift, axis=v.axis, out_dtype=out_dtype)

    def per_tensor(self, v: _Value) -> _Value:
        """A per-channel value brought to one int32 scale (the largest: every factor is at
        most 1, so nothing overflows)."""
        if not v.per_channel:
            return v
        common = float(v.scale.max())
        return _Value(self.rescale(v, v.scale / common, "int32"), common)

    def run(self, func: Function) -> Function:
        for p in func.params:
            self.values[id(p)] = _Value(p)
        for e in dataflow_post_order(func.body):
            if id(e) not in self.values:
                self.values[id(e)] = self.realize(e)
        result = self.value_of(func.body)
        t = func.body.checked_type
        body = self.float_of(result, t.dtype) if isinstance(t, TensorType) else result.expr
        return Function(func.params, body, None, func.type_params, func.attrs)

    def realize(self, e: Expr) -> _Value:
        if not isinstance(e, Call):
            if isinstance(e, Tuple):
                return _Value(Tuple([self.plain(f) for f in e.fields]))
            if isinstance(e, Var | Constant):
                return _Value(e)
            return _Value(_rebuild(e, self.plain))
        if not isinstance(e.op, Op):
            return _Value(Call(e.op, [self.plain(a) for a in e.args], e.attrs, span=e.span))
        name = e.op.name
        args = [self.value_of(a) for a in e.args]
        if name == SQ:
            return self.simulated(e, args[0])
        if name in ("nn.conv2d", "nn.dense") and all(a.quantized for a in args):
            data = self.per_tensor(args[0])
            attrs = e.attrs.replace(out_dtype="int32")
            axis = 1 if name == "nn.conv2d" else len(e.checked_type.shape) - 1
            return _Value(Call(e.op, [data.expr, args[1].expr], attrs, span=e.span),
                          data.scale * args[1].scale, axis)
        if name == "nn.bias_add" and args[0].quantized and isinstance(e.args[1], Constant):
            v = args[0]
            if v.per_channel and e.attrs.axis % len(e.checked_type.shape) != v.axis:
                v = self.per_tensor(v)
            bias = np.round(e.args[1].data.astype(np.float64) / v.scale)
            return _Value(ops.nn.bias_add(self.to_int32(v), Constant(bias.astype("int32")),
                                          axis=e.attrs.axis), v.scale, v.axis)
        if name in ("nn.relu", "nn.max_pool2d") and args[0].quantized:
            v = args[0]
            return _Value(Call(e.op, [v.expr], e.attrs, span=e.span), v.scale, v.axis)
        if name == "clip" and args[0].quantized:
            args[0] = self.per_tensor(args[0])
            s = args[0].scale
            low = None if e.attrs.a_min is None else float(np.round(e.attrs.a_min / s))
            high = None if e.attrs.a_max is None else float(np.round(e.attrs.a_max / s))
            return _Value(ops.clip(args[0].expr, a_min=low, a_max=high), s)
        if name == "add" and all(a.quantized for a in args):
            args = [self.per_tensor(a) for a in args]
            scale = min(a.scale for a in args)
            sides = [self.to_int32(a) if a.scale == scale else
                     _requantize(self.to_int32(a), a.scale / scale, "int32") for a in args]
            return _Value(ops.add(*sides), scale)
        return _Value(Call(e.op, [self.plain(a) for a in e.args], e.attrs, span=e.span))

    def simulated(self, e: Call, source: _Value) -> _Value:
        if e.attrs.scale == 0:
            raise ValueError("realize: a simulated quantization is not calibrated (run "
                             "calibrate first)")
        if e.attrs.kind == "weight" and isinstance(e.args[0], Constant):
            w = e.args[0].data.astype(np.float64)
            scale = np.asarray(e.attrs.scale, np.float64)
            low, high = bit_range(e.attrs.nbit, True)
            q = np.clip(np.floor(w / (along(scale, w.ndim, 0) if scale.ndim else scale) + 0.5),
                        low, high)
            return _Value(Constant(q.astype("int8")), scale if scale.ndim else float(scale))
        dtype = "int8" if e.attrs.signed else "uint8"
        return _Value(self.bytes_of(source, e.attrs.scale, dtype), e.attrs.scale)

    def to_int32(self, v: _Value) -> Expr:
        return v.expr if _dtype_of(v.expr) == "int32" else ops.cast(v.expr, dtype="int32")

    def value_of(self, e: Expr) -> _Value:
        return self.values.get(id(e)) or _Value(e)

    def plain(self, e: Expr) -> Expr:
        """The float (unquantized) form of an input of a float operator."""
        v = self.value_of(e)
        t = e.checked_type_or_none
        return self.float_of(v, t.dtype if isinstance(t, TensorType) else "float32")


def _dtype_of(e: Expr) -> str | None:
    if isinstance(e, Constant):
        return e.dtype
    if isinstance(e, Call) and isinstance(e.op, Op):
        name = e.op.name
        if name in ("qnn.quantize", "qnn.requantize", "qnn.requantize_per_channel", "cast"):
            return e.attrs.out_dtype if name != "cast" else e.attrs.dtype
        if name in ("nn.conv2d", "nn.dense"):
            return e.attrs.out_dtype
        if name in ("add", "nn.bias_add", "nn.relu", "nn.max_pool2d", "clip"):
            return _dtype_of(e.args[0])
    return None


def _rebuild(e: Expr, plain) -> Expr:
    from ..expr import TupleGetItem

    if isinstance(e, TupleGetItem):
        return TupleGetItem(plain(e.tuple_value), e.index)
    return e


def realize(calibrated: Module) -> Module:
    """``calibrated`` with its simulated quantization turned into integer arithmetic
    (module docstring)."""
    main = calibrated["main"]
    out = calibrated.copy()
    out.add("main", _Realizer().run(main), update=True)
    with PassContext(opt_level=3):
        return Sequential([_infer(), FoldConstant(), DeadCodeElimination(), _infer()],
                          "QuantizeRealize")(out)


def quantize(module: Module, dataset: Iterable[Sequence[np.ndarray]],
             config: QConfig | None = None) -> Module:
    """Annotate, calibrate on ``dataset`` and realize ``module`` (module docstring)."""
    config = config or QConfig()
    return realize(calibrate(annotate(module, config), dataset, config))
