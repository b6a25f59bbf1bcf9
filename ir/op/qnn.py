"""Quantization operators (``ir.op.qnn``), the vocabulary of ``ir.transform.quantize``:

- ``qnn.simulated_quantize(x, scale, nbit, signed, kind, axis)``: ``x`` rounded to the
  integer grid of ``scale`` and clipped to ``nbit`` bits, in floating point (what the
  quantized program will compute, simulated); ``scale`` 0 (not calibrated yet) passes ``x``
  through; a tuple of scales is one per index of ``axis`` (per-channel weights).
- ``qnn.quantize(x, scale, out_dtype)``: ``clip(round(x / scale))`` as integers.
- ``qnn.dequantize(x, scale)``: ``x * scale`` as float32.
- ``qnn.requantize(x, multiplier, shift, out_dtype)``: integer rescaling by the fixed-point
  factor ``multiplier / 2**shift``: ``(x * multiplier + 2**(shift-1)) >> shift`` in 64-bit
  arithmetic (rounding half up), clipped to ``out_dtype``;
  ``qnn.requantize_per_channel(x, multipliers, shift, axis, out_dtype)`` the same with one
  multiplier per index of ``axis`` (an int64 tensor) and one shift.

Rounding is half up everywhere (``floor(v + 0.5)``), in the numpy computes and the
lowerings alike, so compiled and interpreted programs agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..attrs import Attrs
from ..errors import IRTypeError
from ..op_registry import OpDef, OpPattern, register_op
from ..types import TensorType, Type
from . import relations as rel
from ._make import namespace_getattr, namespace_ops

#: the op library's tags of these computations (fusion and the sketch rules read them)
_ELEMWISE, _BROADCAST = "injective,elemwise", "injective,broadcast"

INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
              "int32": (-2 ** 31, 2 ** 31 - 1)}


def bit_range(nbit: int, signed: bool) -> tuple[int, int]:
    """The integers ``nbit`` bits hold (symmetric when signed: -127..127 for 8 bits)."""
    top = 2 ** (nbit - 1) - 1 if signed else 2 ** nbit - 1
    return (-top if signed else 0), top


def _round_half_up(v: np.ndarray) -> np.ndarray:
    return np.floor(v + 0.5)


def _int_dtype(op: str, dtype: str) -> tuple[int, int]:
    if dtype not in INT_RANGES:
        raise IRTypeError(f"{op}: out_dtype must be one of {', '.join(INT_RANGES)}, got "
                          f"{dtype!r}")
    return INT_RANGES[dtype]


# ------------------------------------------------------------------ simulated_quantize


def _sq_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "qnn.simulated_quantize"
    t = rel.expect_tensor(op, types[0])
    rel.expect_float(op, t)
    scales = _scales(attrs)
    if not 2 <= attrs.nbit <= 32 or np.any(scales < 0):
        raise IRTypeError(f"{op}: nbit must be in [2, 32] and scale >= 0, got "
                          f"{attrs.nbit} and {attrs.scale}")
    if scales.size > 1:
        axis = rel.normalize_axis(op, attrs.axis, t.ndim, t.shape)
        if t.shape[axis] != scales.size:
            raise IRTypeError(f"{op}: {scales.size} scales for axis {axis} of length "
                              f"{t.shape[axis]}")
    if attrs.kind not in ("activation", "weight", "input"):
        raise IRTypeError(f"{op}: kind must be 'activation', 'weight' or 'input', got "
                          f"{attrs.kind!r}")
    return t


def _scales(attrs: Attrs) -> np.ndarray:
    return np.asarray(attrs.scale, np.float64).reshape(-1)


def along(values: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """Per-index ``values`` shaped to broadcast along ``axis`` of a rank-``ndim`` array."""
    shape = [1] * ndim
    shape[axis % ndim] = -1
    return np.asarray(values).reshape(shape)


def _simulated_quantize(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    scales = _scales(attrs)
    if not np.any(scales):
        return x.copy()
    scale = along(scales, x.ndim, attrs.axis) if scales.size > 1 else scales[0]
    low, high = bit_range(attrs.nbit, attrs.signed)
    q = np.clip(_round_half_up(x.astype(np.float64) / scale), low, high)
    return (q * scale).astype(x.dtype)


def _lower_sq(inputs: Sequence, attrs: Attrs, out_type: Type):
    from schedule import te

    from .lowering import LoweringError

    x = inputs[0]
    if _scales(attrs).size > 1:
        raise LoweringError("qnn.simulated_quantize: per-channel scales run on numpy")
    if attrs.scale == 0:
        return te.compute(x.shape, lambda *i: x[i], name="T_simulated_quantize", tag=_ELEMWISE)
    low, high = bit_range(attrs.nbit, attrs.signed)
    inv, scale = te.const(1.0 / attrs.scale, x.dtype), te.const(attrs.scale, x.dtype)
    half = te.const(0.5, x.dtype)

    def body(*i):
        q = te.floor(x[i] * inv + half)
        return te.min(te.max(q, te.const(float(low), x.dtype)),
                      te.const(float(high), x.dtype)) * scale

    return te.compute(x.shape, body, name="T_simulated_quantize", tag=_ELEMWISE)


register_op(OpDef(
    name="qnn.simulated_quantize", num_inputs=1,
    attrs_schema={"scale": ((float, tuple), 0.0), "nbit": (int, 8), "signed": (bool, True),
                  "kind": (str, "activation"), "axis": (int, 0)},
    type_relation=_sq_relation, pattern=OpPattern.ELEMWISE, compute=_simulated_quantize,
    lowering=_lower_sq,
    doc="x rounded to the grid of ``scale`` and clipped to ``nbit`` bits, in floating point "
        "(scale 0: not calibrated, x itself; a tuple: one scale per index of ``axis``)."))

# ----------------------------------------------------------------- quantize, dequantize


def _quantize_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "qnn.quantize"
    t = rel.expect_tensor(op, types[0])
    rel.expect_float(op, t)
    _int_dtype(op, attrs.out_dtype)
    if attrs.scale <= 0:
        raise IRTypeError(f"{op}: scale must be > 0, got {attrs.scale}")
    return TensorType(t.shape, attrs.out_dtype)


def _quantize(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    low, high = INT_RANGES[attrs.out_dtype]
    q = _round_half_up(np.asarray(args[0], np.float64) / attrs.scale)
    return np.clip(q, low, high).astype(attrs.out_dtype)


def _lower_quantize(inputs: Sequence, attrs: Attrs, out_type: Type):
    from schedule import te

    x = inputs[0]
    low, high = INT_RANGES[attrs.out_dtype]
    inv, half = te.const(1.0 / attrs.scale, x.dtype), te.const(0.5, x.dtype)

    def body(*i):
        q = te.floor(x[i] * inv + half)
        q = te.min(te.max(q, te.const(float(low), x.dtype)), te.const(float(high), x.dtype))
        return te.cast(attrs.out_dtype, q)

    return te.compute(x.shape, body, name="T_quantize", tag=_ELEMWISE)


register_op(OpDef(
    name="qnn.quantize", num_inputs=1,
    attrs_schema={"scale": (float, 1.0), "out_dtype": (str, "int8")},
    type_relation=_quantize_relation, pattern=OpPattern.ELEMWISE, compute=_quantize,
    lowering=_lower_quantize,
    doc="clip(round(x / scale)) as ``out_dtype`` integers (round half up)."))


def _dequantize_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "qnn.dequantize"
    t = rel.expect_tensor(op, types[0])
    rel.expect_dtype_kind(op, t, "iu", "input")
    return TensorType(t.shape, "float32")


def _lower_dequantize(inputs: Sequence, attrs: Attrs, out_type: Type):
    from schedule import te

    x = inputs[0]
    scale = te.const(attrs.scale, "float32")
    return te.compute(x.shape, lambda *i: te.cast("float32", x[i]) * scale,
                      name="T_dequantize", tag=_ELEMWISE)


register_op(OpDef(
    name="qnn.dequantize", num_inputs=1, attrs_schema={"scale": (float, 1.0)},
    type_relation=_dequantize_relation, pattern=OpPattern.ELEMWISE,
    compute=lambda args, attrs: (np.asarray(args[0]).astype(np.float64)
                                 * attrs.scale).astype("float32"),
    lowering=_lower_dequantize, doc="Integers times ``scale``, as float32."))

# -------------------------------------------------------------------------- requantize


def fixed_point(factor: float, bits: int = 31) -> tuple[int, int]:
    """``(multiplier, shift)`` with ``multiplier / 2**shift`` the closest to ``factor``
    that keeps ``multiplier`` below ``2**bits`` (``factor`` > 0)."""
    if not factor > 0:
        raise ValueError(f"a requantization factor must be > 0, got {factor}")
    mantissa, exponent = np.frexp(factor)  # factor = mantissa * 2**exponent, 0.5 <= m < 1
    shift = bits - int(exponent)
    multiplier = round(float(mantissa) * 2 ** bits)
    if multiplier == 2 ** bits:  # the mantissa rounded up to 1
        multiplier //= 2
        shift -= 1
    while shift < 1:  # a factor of 2**30 or more: give up precision for a positive shift
        multiplier //= 2
        shift += 1
    return multiplier, shift


def _requantize_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "qnn.requantize"
    t = rel.expect_tensor(op, types[0])
    rel.expect_dtype_kind(op, t, "iu", "input")
    _int_dtype(op, attrs.out_dtype)
    if not (0 < attrs.multiplier < 2 ** 31 and 0 < attrs.shift < 63):
        raise IRTypeError(f"{op}: multiplier must be in (0, 2**31) and shift in (0, 63), got "
                          f"{attrs.multiplier} and {attrs.shift}")
    return TensorType(t.shape, attrs.out_dtype)


def _requantize(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    low, high = INT_RANGES[attrs.out_dtype]
    x = np.asarray(args[0]).astype(np.int64)
    q = (x * attrs.multiplier + (1 << (attrs.shift - 1))) >> attrs.shift
    return np.clip(q, low, high).astype(attrs.out_dtype)


def _rescaled(value, multiplier, shift: int, out_dtype: str):
    """The te expression of ``clip((value * multiplier + 2**(shift-1)) >> shift)`` in
    ``out_dtype`` (``value`` any integer expression, ``multiplier`` an int64 one)."""
    from schedule import te

    low, high = INT_RANGES[out_dtype]
    bias = te.const(1 << (shift - 1), "int64")
    q = te.floordiv(te.cast("int64", value) * multiplier + bias, te.const(1 << shift, "int64"))
    q = te.min(te.max(q, te.const(low, "int64")), te.const(high, "int64"))
    return te.cast(out_dtype, q)


def _lower_requantize(inputs: Sequence, attrs: Attrs, out_type: Type):
    from schedule import te

    x = inputs[0]
    mult = te.const(attrs.multiplier, "int64")
    return te.compute(x.shape, lambda *i: _rescaled(x[i], mult, attrs.shift, attrs.out_dtype),
                      name="T_requantize", tag=_ELEMWISE)


register_op(OpDef(
    name="qnn.requantize", num_inputs=1,
    attrs_schema={"multiplier": (int, 1 << 30), "shift": (int, 30),
                  "out_dtype": (str, "int8")},
    type_relation=_requantize_relation, pattern=OpPattern.ELEMWISE, compute=_requantize,
    lowering=_lower_requantize,
    doc="Integers times ``multiplier / 2**shift`` (64-bit, round half up), clipped to "
        "``out_dtype``."))



def fixed_point_per_channel(factors: np.ndarray, bits: int = 31) -> tuple[np.ndarray, int]:
    """``(multipliers, shift)``: ``multipliers / 2**shift`` close to each of ``factors``
    (all > 0), with one shift for all, the largest multiplier below ``2**bits``."""
    factors = np.asarray(factors, np.float64)
    _, shift = fixed_point(float(factors.max()), bits)
    multipliers = np.maximum(np.round(factors * 2.0 ** shift), 1).astype(np.int64)
    return multipliers, shift


def _requantize_pc_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    op = "qnn.requantize_per_channel"
    t = rel.expect_tensor(op, types[0])
    rel.expect_dtype_kind(op, t, "iu", "input")
    _int_dtype(op, attrs.out_dtype)
    axis = rel.normalize_axis(op, attrs.axis, t.ndim, t.shape)
    m = rel.expect_tensor(op, types[1], "multipliers")
    if m.dtype != "int64" or tuple(m.shape) != (t.shape[axis],):
        raise IRTypeError(f"{op}: multipliers must be int64 of shape ({t.shape[axis]},), got {m}")
    if not 0 < attrs.shift < 63:
        raise IRTypeError(f"{op}: shift must be in (0, 63), got {attrs.shift}")
    return TensorType(t.shape, attrs.out_dtype)


def _requantize_pc(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    low, high = INT_RANGES[attrs.out_dtype]
    x = np.asarray(args[0]).astype(np.int64)
    mult = along(np.asarray(args[1], np.int64), x.ndim, attrs.axis)
    q = (x * mult + (1 << (attrs.shift - 1))) >> attrs.shift
    return np.clip(q, low, high).astype(attrs.out_dtype)


def _lower_requantize_pc(inputs: Sequence, attrs: Attrs, out_type: Type):
    from schedule import te

    x, mult = inputs
    axis = attrs.axis % len(x.shape)
    return te.compute(x.shape, lambda *i: _rescaled(x[i], mult[i[axis]], attrs.shift,
                                                    attrs.out_dtype),
                      name="T_requantize", tag=_BROADCAST)


register_op(OpDef(
    name="qnn.requantize_per_channel", num_inputs=2,
    attrs_schema={"shift": (int, 30), "axis": (int, 1), "out_dtype": (str, "int8")},
    type_relation=_requantize_pc_relation, pattern=OpPattern.BROADCAST, compute=_requantize_pc,
    lowering=_lower_requantize_pc,
    doc="qnn.requantize with one multiplier per index of ``axis`` (an int64 tensor) and one "
        "``shift``."))

__getattr__ = namespace_getattr("qnn")


def __dir__() -> list[str]:
    return namespace_ops("qnn")
