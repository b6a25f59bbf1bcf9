"""The registered workload operators of DESIGN.md's table, and the blocked int8 dense
and convolution of CPU dot-product instructions, as ``OpSpec`` objects.

Every op takes ``dtype`` (default float32; int8, its only choice, for the blocked
``dense_blocked_int8`` and ``conv2d_nchw4c_int8``). Integer matrix products and convolutions
accumulate and return int32 for int8 inputs (a dense bias then is int32 too).
``avg_pool2d`` leaves padding out of the count (``count_include_pad=False``). In
``elementwise``, binary ops (add, sub, mul, div) each take one more input of the same
shape, and ``clip`` clips to [-1, 1].
FLOPs: a multiply-add counts 2; every other element-wise operation, comparison or
exponential counts 1 per element.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import reference as ref
from .conv import (
    CONV_LAYOUTS,
    conv2d_nchw,
    conv2d_nchw4c_int8,
    conv2d_nhwc,
    depthwise_conv2d_nchw,
)
from .elemwise import CHAIN_OPS, bias_activation, elementwise_chain, requantize
from .linalg import ACTIVATIONS, batch_matmul, dense, dense_blocked_int8, matmul
from .nn import layer_norm, log_softmax, softmax
from .pool import avg_pool2d, max_pool2d
from .spec import MAX_DIM, MAX_WINDOW, Arg, OpSpec, Param, fail

P = dict[str, Any]

LINALG_DTYPES = ("float32", "float16", "int8", "int32")
FLOAT_DTYPES = ("float32", "float16")
ELEMWISE_DTYPES = ("float32", "float16", "int32")


def _acc(dtype: str) -> str:
    """Accumulation / output dtype of products: int32 for 8-bit integers."""
    return "int32" if dtype in ("int8", "uint8") else dtype


def _dim(name: str, description: str) -> Param:
    return Param(name, "int", minimum=1, maximum=MAX_DIM, dim=True, description=description)


def _flag(name: str, description: str) -> Param:
    return Param(name, "bool", default=False, description=description)


def _dtype(choices: tuple[str, ...]) -> Param:
    return Param("dtype", "str", default="float32", choices=choices,
                 description="element type of the inputs")


def _ival(dtype: str, low: float, high: float) -> tuple[float, float]:
    return (low, high) if dtype.startswith("float") else (-8, 8)


REQUANT_SHIFT = Param(
    "requant_shift", "int", default=-1, minimum=-1, maximum=30,
    description="int8 only: when 0 or more, the int32 result is requantized to int8 as "
                "clip(y >> shift, -128, 127) (a quantized network's layer); -1 keeps int32")


def _requantizes(p: P) -> bool:
    return p["requant_shift"] >= 0


def _result_arg(name: str, shape: tuple[int, ...], p: P) -> Arg:
    """The output of a product: int32 for int8 inputs, or int8 once requantized."""
    if _requantizes(p):
        return Arg("T_requant", shape, "int8")
    return Arg(name, shape, _acc(p["dtype"]))


def _requantized(out: Any, p: P) -> Any:
    return requantize(out, p["requant_shift"]) if _requantizes(p) else out


def _requantized_reference(out: Any, p: P) -> Any:
    return ref.requantize(out, p["requant_shift"]) if _requantizes(p) else out


def _check_requant(p: P) -> None:
    if _requantizes(p) and p["dtype"] != "int8":
        fail("requant_shift", f"requantization needs int8 inputs, got {p['dtype']}")


# ---------------------------------------------------------------------------- matmul family


def _matmul_args(p: P) -> list[Arg]:
    M, N, K, dt = p["M"], p["N"], p["K"], p["dtype"]
    a = (K, M) if p["transpose_a"] else (M, K)
    b = (N, K) if p["transpose_b"] else (K, N)
    lo, hi = _ival(dt, -1, 1)
    return [Arg("A", a, dt, lo, hi), Arg("B", b, dt, lo, hi),
            _result_arg("T_matmul", (M, N), p)]


MATMUL = OpSpec(
    name="matmul",
    description="C[M, N] = A[M, K] @ B[K, N] (either side optionally transposed)",
    params=(_dim("M", "rows of the output"), _dim("N", "columns of the output"),
            _dim("K", "reduction length"), _flag("transpose_a", "A is stored as (K, M)"),
            _flag("transpose_b", "B is stored as (N, K)"), _dtype(LINALG_DTYPES),
            REQUANT_SHIFT),
    args_fn=_matmul_args,
    build_fn=lambda t, p: _requantized(matmul(t[0], t[1], p["transpose_a"], p["transpose_b"],
                                              out_dtype=_acc(p["dtype"])), p),
    reference_fn=lambda a, p: _requantized_reference(ref.matmul(
        a[0], a[1], p["transpose_a"], p["transpose_b"], out_dtype=_acc(p["dtype"])), p),
    flops_fn=lambda p: p["M"] * p["N"] * (2 * p["K"] + 3 * _requantizes(p)),
    check_fn=_check_requant,
)


def _epilogue_out(p: P, product: str) -> str:
    """The output's name after a layer's bias and activation (``product`` without them)."""
    if p["activation"] != "none":
        return f"T_{p['activation']}"
    return "T_bias_add" if p["bias"] else product


def _check_activation(p: P) -> None:
    if p["activation"] == "gelu" and not p["dtype"].startswith("float"):
        fail("activation", f"gelu needs a float dtype, got {p['dtype']}")


def _epilogue_params(bias_default: bool) -> tuple[Param, ...]:
    return (Param("bias", "bool", default=bias_default,
                  description="add a bias vector (int32 for int8 inputs)"),
            Param("activation", "str", default="none", choices=ACTIVATIONS,
                  description="activation after the bias"))


def _dense_args(p: P) -> list[Arg]:
    M, N, K, dt = p["M"], p["N"], p["K"], p["dtype"]
    lo, hi = _ival(dt, -1, 1)
    args = [Arg("X", (M, K), dt, lo, hi), Arg("W", (N, K), dt, lo, hi)]
    if p["bias"]:
        args.append(Arg("bias", (N,), _acc(dt), lo, hi))
    return [*args, _result_arg(_epilogue_out(p, "T_dense"), (M, N), p)]


def _dense_check(p: P) -> None:
    _check_activation(p)
    _check_requant(p)


DENSE = OpSpec(
    name="dense",
    description="Y[M, N] = activation(X[M, K] @ W[N, K]^T + bias[N]) (TVM dense layout)",
    params=(_dim("M", "rows (batch)"), _dim("N", "output features"),
            _dim("K", "input features"), *_epilogue_params(bias_default=True),
            _dtype(LINALG_DTYPES), REQUANT_SHIFT),
    args_fn=_dense_args,
    build_fn=lambda t, p: _requantized(dense(t[0], t[1], t[2] if p["bias"] else None,
                                             p["activation"], out_dtype=_acc(p["dtype"])), p),
    reference_fn=lambda a, p: _requantized_reference(ref.dense(
        a[0], a[1], a[2] if p["bias"] else None, p["activation"], out_dtype=_acc(p["dtype"])),
        p),
    flops_fn=lambda p: p["M"] * p["N"] * (2 * p["K"] + int(p["bias"])
                                          + int(p["activation"] != "none")
                                          + 3 * int(_requantizes(p))),
    check_fn=_dense_check,
)


def _bmm_args(p: P) -> list[Arg]:
    B, M, N, K, dt = p["B"], p["M"], p["N"], p["K"], p["dtype"]
    lo, hi = _ival(dt, -1, 1)
    b = (B, N, K) if p["transpose_b"] else (B, K, N)
    return [Arg("A", (B, M, K), dt, lo, hi), Arg("B", b, dt, lo, hi),
            Arg("T_batch_matmul", (B, M, N), _acc(dt))]


BATCH_MATMUL = OpSpec(
    name="batch_matmul",
    description="C[B, M, N] = A[B, M, K] @ B[B, K, N] (B optionally stored as (B, N, K))",
    params=(_dim("B", "batch size"), _dim("M", "rows of each output"),
            _dim("N", "columns of each output"), _dim("K", "reduction length"),
            _flag("transpose_b", "B is stored as (B, N, K)"), _dtype(LINALG_DTYPES)),
    args_fn=_bmm_args,
    build_fn=lambda t, p: batch_matmul(t[0], t[1], p["transpose_b"], out_dtype=_acc(p["dtype"])),
    reference_fn=lambda a, p: ref.batch_matmul(a[0], a[1], p["transpose_b"],
                                               out_dtype=_acc(p["dtype"])),
    flops_fn=lambda p: 2 * p["B"] * p["M"] * p["N"] * p["K"],
)


# ---------------------------------------------------------------------------- convolutions


def _window_params(dilation: bool = True) -> tuple[Param, ...]:
    params = [Param("stride", "int_or_pair", default=1, minimum=1, maximum=MAX_WINDOW,
                    description="stride, an int or [h, w]"),
              Param("padding", "int_or_pair", default=0, minimum=0, maximum=MAX_WINDOW,
                    description="zero padding on each side, an int or [h, w]")]
    if dilation:
        params.append(Param("dilation", "int_or_pair", default=1, minimum=1,
                            maximum=MAX_WINDOW, description="kernel dilation, an int or [h, w]"))
    return tuple(params)


def _out_hw(p: P) -> tuple[int, int]:
    (sh, sw), (ph, pw) = p["stride"], p["padding"]
    dh, dw = p.get("dilation", [1, 1])
    oh = (p["H"] + 2 * ph - (p["R"] - 1) * dh - 1) // sh + 1
    ow = (p["W"] + 2 * pw - (p["S"] - 1) * dw - 1) // sw + 1
    return oh, ow


def _check_window(p: P) -> None:
    oh, ow = _out_hw(p)
    for name, size, axis, out in (("R", "H", 0, oh), ("S", "W", 1, ow)):
        if out < 1:
            span = (p[name] - 1) * p.get("dilation", [1, 1])[axis] + 1
            fail(name, f"the window of {span} (dilated) does not fit the input {size}="
                       f"{p[size]} padded by {p['padding'][axis]} on each side; the output "
                       f"would be empty")


def _check_conv(p: P) -> None:
    if p["C"] % p["groups"] or p["K"] % p["groups"]:
        fail("groups", f"C={p['C']} and K={p['K']} must both be divisible by "
                       f"groups={p['groups']}")
    _check_window(p)
    _check_activation(p)
    _check_requant(p)


def _conv_params() -> tuple[Param, ...]:
    return (_dim("N", "batch"), _dim("C", "input channels"), _dim("H", "input height"),
            _dim("W", "input width"), _dim("K", "output channels"),
            _dim("R", "kernel height"), _dim("S", "kernel width"), *_window_params(),
            Param("groups", "int", default=1, minimum=1, maximum=MAX_DIM,
                  description="channel groups (C and K divisible by it)"),
            *_epilogue_params(bias_default=False), _dtype(LINALG_DTYPES), REQUANT_SHIFT)


def _conv_flops(p: P) -> int:
    oh, ow = _out_hw(p)
    outputs = p["N"] * p["K"] * oh * ow
    return outputs * (2 * (p["C"] // p["groups"]) * p["R"] * p["S"] + int(p["bias"])
                      + int(p["activation"] != "none") + 3 * _requantizes(p))


def _conv_kwargs(p: P) -> dict[str, Any]:
    return {"stride": p["stride"], "padding": p["padding"], "dilation": p["dilation"],
            "out_dtype": _acc(p["dtype"])}


def _conv_spec(op: str, description: str, build: Callable[..., Any],
               reference: Callable[..., Any]) -> OpSpec:
    """The spec of a 2-d convolution whose tensors have the layouts ``CONV_LAYOUTS[op]``."""
    data_layout, kernel_layout, out_layout = CONV_LAYOUTS[op]

    def args(p: P) -> list[Arg]:
        dt, (oh, ow) = p["dtype"], _out_hw(p)
        lo, hi = _ival(dt, -1, 1)
        dims = {"N": p["N"], "C": p["C"], "H": p["H"], "W": p["W"]}
        taps = {"K": p["K"], "C": p["C"] // p["groups"], "R": p["R"], "S": p["S"]}
        out = {"N": p["N"], "K": p["K"], "H": oh, "W": ow}
        bias = [Arg("bias", (p["K"],), _acc(dt), lo, hi)] if p["bias"] else []
        return [Arg("data", tuple(dims[d] for d in data_layout), dt, lo, hi),
                Arg("kernel", tuple(taps[d] for d in kernel_layout), dt, lo, hi), *bias,
                _result_arg(_epilogue_out(p, "conv"), tuple(out[d] for d in out_layout), p)]

    channel = out_layout.index("K")

    def build_fn(t: list, p: P) -> Any:
        conv = build(t[0], t[1], groups=p["groups"], **_conv_kwargs(p))
        bias = t[2] if p["bias"] else None
        return _requantized(bias_activation(conv, bias, p["activation"], channel), p)

    def reference_fn(a: list, p: P) -> Any:
        conv = reference(a[0], a[1], groups=p["groups"], **_conv_kwargs(p))
        bias = a[2] if p["bias"] else None
        out = ref.bias_activation(conv, bias, p["activation"], channel).astype(conv.dtype)
        return _requantized_reference(out, p)

    return OpSpec(
        name=op,
        description=f"{description}; then optionally a bias along K and an activation",
        params=_conv_params(),
        args_fn=args,
        build_fn=build_fn,
        reference_fn=reference_fn,
        flops_fn=_conv_flops,
        check_fn=_check_conv,
    )


CONV2D_NCHW = _conv_spec(
    "conv2d_nchw",
    "2-d convolution, data NCHW, kernel OIHW (K, C/groups, R, S), output NKHW",
    conv2d_nchw, ref.conv2d_nchw)

CONV2D_NHWC = _conv_spec(
    "conv2d_nhwc",
    "2-d convolution, data NHWC, kernel HWIO (R, S, C/groups, K), output NHWK",
    conv2d_nhwc, ref.conv2d_nhwc)


INT8_ONLY = Param("dtype", "str", default="int8", choices=("int8",),
                  description="8-bit products (uint8 data, int8 weights) into int32")


def _check_blocks(p: P, inputs: str, outputs: str) -> None:
    """The blocked int8 ops' sizes: ``inputs`` in blocks of 4, ``outputs`` of 16."""
    if p[inputs] % 4:
        fail(inputs, f"{inputs}={p[inputs]} must be a multiple of 4 (the input block; pad "
                     "with zeros)")
    if p[outputs] % 16:
        fail(outputs, f"{outputs}={p[outputs]} must be a multiple of 16 (the output block)")


def _check_blocked_int8(p: P) -> None:
    _check_blocks(p, "C", "K")
    _check_window({**p, "dilation": [1, 1]})


def _blocked_int8_args(p: P) -> list[Arg]:
    oh, ow = _out_hw(p)
    return [Arg("data", (p["N"], p["C"] // 4, p["H"], p["W"], 4), "uint8", 0, 15),
            Arg("kernel", (p["K"] // 16, p["C"] // 4, p["R"], p["S"], 16, 4), "int8", -8, 8),
            Arg("conv", (p["N"], p["K"] // 16, oh, ow, 16), "int32")]


CONV2D_NCHW4C_INT8 = OpSpec(
    name="conv2d_nchw4c_int8",
    description="8-bit 2-d convolution in blocked layouts for int8 dot-product instructions: "
                "data NCHW4c uint8 (N, C/4, H, W, 4), kernel OIHW16o4i int8 "
                "(K/16, C/4, R, S, 16, 4), int32 output NCHW16c (N, K/16, OH, OW, 16)",
    params=(_dim("N", "batch"), _dim("C", "input channels (a multiple of 4)"),
            _dim("H", "input height"), _dim("W", "input width"),
            _dim("K", "output channels (a multiple of 16)"), _dim("R", "kernel height"),
            _dim("S", "kernel width"), *_window_params(dilation=False),
            INT8_ONLY),
    args_fn=_blocked_int8_args,
    build_fn=lambda t, p: conv2d_nchw4c_int8(t[0], t[1], p["stride"], p["padding"]),
    reference_fn=lambda a, p: ref.conv2d_nchw4c_int8(a[0], a[1], p["stride"], p["padding"]),
    flops_fn=lambda p: 2 * p["N"] * p["K"] * math.prod(_out_hw(p)) * p["C"] * p["R"] * p["S"],
    check_fn=_check_blocked_int8,
)


DENSE_BLOCKED_INT8 = OpSpec(
    name="dense_blocked_int8",
    description="8-bit dense layer in blocked layouts for int8 dot-product instructions: "
                "X (M, K) uint8, W (N/16, K/4, 16, 4) int8, int32 output (M, N/16, 16) "
                "= X @ W.T with its features in blocks of 16",
    params=(_dim("M", "rows"), _dim("N", "output features (a multiple of 16)"),
            _dim("K", "input features (a multiple of 4)"), INT8_ONLY),
    args_fn=lambda p: [Arg("X", (p["M"], p["K"]), "uint8", 0, 15),
                       Arg("W", (p["N"] // 16, p["K"] // 4, 16, 4), "int8", -8, 8),
                       Arg("T_dense", (p["M"], p["N"] // 16, 16), "int32")],
    build_fn=lambda t, p: dense_blocked_int8(t[0], t[1]),
    reference_fn=lambda a, p: ref.dense_blocked_int8(a[0], a[1]),
    flops_fn=lambda p: 2 * p["M"] * p["N"] * p["K"],
    check_fn=lambda p: _check_blocks(p, "K", "N"),
)


def _dw_args(p: P) -> list[Arg]:
    dt, (oh, ow) = p["dtype"], _out_hw(p)
    lo, hi = _ival(dt, -1, 1)
    return [Arg("data", (p["N"], p["C"], p["H"], p["W"]), dt, lo, hi),
            Arg("kernel", (p["C"], 1, p["R"], p["S"]), dt, lo, hi),
            Arg("depthwise_conv", (p["N"], p["C"], oh, ow), _acc(dt))]


DEPTHWISE_CONV2D_NCHW = OpSpec(
    name="depthwise_conv2d_nchw",
    description="depthwise 2-d convolution, data NCHW, kernel (C, 1, R, S), output NCHW",
    params=(_dim("N", "batch"), _dim("C", "channels"), _dim("H", "input height"),
            _dim("W", "input width"), _dim("R", "kernel height"), _dim("S", "kernel width"),
            *_window_params(), _dtype(LINALG_DTYPES)),
    args_fn=_dw_args,
    build_fn=lambda t, p: depthwise_conv2d_nchw(t[0], t[1], **_conv_kwargs(p)),
    reference_fn=lambda a, p: ref.depthwise_conv2d_nchw(a[0], a[1], **_conv_kwargs(p)),
    flops_fn=lambda p: 2 * p["N"] * p["C"] * math.prod(_out_hw(p)) * p["R"] * p["S"],
    check_fn=_check_window,
)


# ---------------------------------------------------------------------------- pooling


def _check_pool(p: P) -> None:
    (ph, pw) = p["padding"]
    if ph >= p["R"] or pw >= p["S"]:
        fail("padding", f"{p['padding']} must be smaller than the window {p['R']}x{p['S']}")
    _check_window(p)


def _pool_args(out: str) -> Any:
    def args(p: P) -> list[Arg]:
        oh, ow = _out_hw(p)
        dt = p["dtype"]
        return [Arg("data", (p["N"], p["C"], p["H"], p["W"]), dt, *_ival(dt, -1, 1)),
                Arg(out, (p["N"], p["C"], oh, ow), dt)]

    return args


def _pool_params(dtypes: tuple[str, ...]) -> tuple[Param, ...]:
    return (_dim("N", "batch"), _dim("C", "channels"), _dim("H", "input height"),
            _dim("W", "input width"), _dim("R", "window height"), _dim("S", "window width"),
            *_window_params(dilation=False), _dtype(dtypes))


def _pool_flops(extra: int) -> Any:
    return lambda p: p["N"] * p["C"] * math.prod(_out_hw(p)) * (p["R"] * p["S"] + extra)


MAX_POOL2D = OpSpec(
    name="max_pool2d",
    description="2-d max pooling over NCHW data with an R x S window",
    params=_pool_params(LINALG_DTYPES),
    args_fn=_pool_args("pool_max"),
    build_fn=lambda t, p: max_pool2d(t[0], (p["R"], p["S"]), p["stride"], p["padding"]),
    reference_fn=lambda a, p: ref.max_pool2d(a[0], (p["R"], p["S"]), p["stride"],
                                             p["padding"]),
    flops_fn=_pool_flops(0),
    check_fn=_check_pool,
)

AVG_POOL2D = OpSpec(
    name="avg_pool2d",
    description="2-d average pooling over NCHW data with an R x S window; padding is not "
                "counted (count_include_pad=False)",
    params=_pool_params(FLOAT_DTYPES),
    args_fn=_pool_args("pool_avg"),
    build_fn=lambda t, p: avg_pool2d(t[0], (p["R"], p["S"]), p["stride"], p["padding"]),
    reference_fn=lambda a, p: ref.avg_pool2d(a[0], (p["R"], p["S"]), p["stride"],
                                             p["padding"]),
    flops_fn=_pool_flops(1),
    check_fn=_check_pool,
)


# ---------------------------------------------------------------------------- normalisation


def _rows_args(out: str, low: float, high: float, affine: bool = False) -> Any:
    def args(p: P) -> list[Arg]:
        M, N, dt = p["M"], p["N"], p["dtype"]
        extra = [Arg("gamma", (N,), dt, 0.5, 1.5), Arg("beta", (N,), dt, -0.5, 0.5)]
        return [Arg("data", (M, N), dt, low, high), *(extra if affine else []),
                Arg(out, (M, N), dt)]

    return args


def _rows_params() -> tuple[Param, ...]:
    return (_dim("M", "rows"), _dim("N", "row length (the normalised axis)"),
            _dtype(FLOAT_DTYPES))


SOFTMAX = OpSpec(
    name="softmax",
    description="softmax over the last axis of an M x N matrix (max-subtracted)",
    params=_rows_params(),
    args_fn=_rows_args("T_softmax_norm", -5.0, 5.0),
    build_fn=lambda t, p: softmax(t[0]),
    reference_fn=lambda a, p: ref.softmax(a[0]),
    flops_fn=lambda p: 5 * p["M"] * p["N"],
)

LOG_SOFTMAX = OpSpec(
    name="log_softmax",
    description="log-softmax over the last axis of an M x N matrix (max-subtracted)",
    params=_rows_params(),
    args_fn=_rows_args("T_log_softmax", -5.0, 5.0),
    build_fn=lambda t, p: log_softmax(t[0]),
    reference_fn=lambda a, p: ref.log_softmax(a[0]),
    flops_fn=lambda p: 6 * p["M"] * p["N"] + p["M"],
)

LAYER_NORM = OpSpec(
    name="layer_norm",
    description="layer normalisation over the last axis of an M x N matrix, with gamma and "
                "beta of length N and eps=1e-5",
    params=_rows_params(),
    args_fn=_rows_args("T_layer_norm", -2.0, 2.0, affine=True),
    build_fn=lambda t, p: layer_norm(t[0], t[1], t[2]),
    reference_fn=lambda a, p: ref.layer_norm(a[0], a[1], a[2]),
    flops_fn=lambda p: 8 * p["M"] * p["N"],
)


# ---------------------------------------------------------------------------- element-wise


def _check_elementwise(p: P) -> None:
    if not p["dtype"].startswith("float"):
        bad = [op for op in p["ops"] if not CHAIN_OPS[op][2]]
        if bad:
            fail("ops", f"{', '.join(bad)} need a float dtype, got {p['dtype']}")


def _elementwise_args(p: P) -> list[Arg]:
    shape, dt = tuple(p["shape"]), p["dtype"]
    lo, hi = (-2.0, 2.0) if dt.startswith("float") else (-2, 2)
    args = [Arg("x", shape, dt, lo, hi)]
    for op in p["ops"]:
        if CHAIN_OPS[op][0] == 2:
            low, high = (0.5, 2.0) if op == "div" else (lo, hi)
            args.append(Arg(f"y{len(args)}", shape, dt, low, high))
    return [*args, Arg(f"T_{p['ops'][-1]}", shape, dt)]


ELEMENTWISE = OpSpec(
    name="elementwise",
    description="a chain of element-wise ops on one input x; each binary op (add, sub, mul, "
                "div) takes one more input of the same shape; clip clips to [-1, 1]",
    params=(Param("shape", "int_list", minimum=1, maximum=MAX_DIM, max_items=6, dim=True,
                  description="shape of every tensor"),
            Param("ops", "str_list", choices=tuple(CHAIN_OPS), max_items=16,
                  description="the ops, applied in order"),
            _dtype(ELEMWISE_DTYPES)),
    args_fn=_elementwise_args,
    build_fn=lambda t, p: elementwise_chain(t[0], p["ops"], t[1:]),
    reference_fn=lambda a, p: ref.elementwise_chain(a[0], p["ops"], a[1:]),
    flops_fn=lambda p: math.prod(p["shape"]) * len(p["ops"]),
    check_fn=_check_elementwise,
)

ALL: tuple[OpSpec, ...] = (
    MATMUL, DENSE, DENSE_BLOCKED_INT8, BATCH_MATMUL, CONV2D_NCHW, CONV2D_NHWC, CONV2D_NCHW4C_INT8,
    DEPTHWISE_CONV2D_NCHW, MAX_POOL2D,
    AVG_POOL2D, SOFTMAX, LOG_SOFTMAX, LAYER_NORM, ELEMENTWISE,
)
