"""The operator library: TVM-topi-like tensor-expression operators, their numpy references
(``ops.reference``), and the registry of workload operators (``get_op``, ``list_ops``).

    from schedule import te, ops
    A = te.placeholder((64, 32), "float32", name="A")
    W = te.placeholder((16, 32), "float32", name="W")
    Y = ops.dense(A, W, activation="relu")

    spec = ops.get_op("conv2d_nchw")
    params = spec.normalize({"N": 1, "C": 3, "H": 32, "W": 32, "K": 8, "R": 3, "S": 3})
    args = spec.build(params)                 # [data, kernel, conv]
    inputs = spec.random_inputs(params, seed=0)
    expected = spec.reference(inputs, params)
"""

from . import reference, tags
from .conv import (
    conv2d_nchw,
    conv2d_nchw4c_int8,
    conv2d_nchwc,
    conv2d_nhwc,
    conv2d_transpose_nchw,
    depthwise_conv2d_nchw,
    depthwise_conv2d_nchwc,
)
from .elemwise import (
    CHAIN_OPS,
    CLIP_RANGE,
    add,
    bias_add,
    clip,
    divide,
    elementwise_chain,
    gelu,
    multiply,
    relu,
    requantize,
    sigmoid,
    subtract,
    tanh,
)
from .layout import Layout, layout_transform
from .linalg import batch_matmul, dense, dense_packed, matmul
from .nn import layer_norm, log_softmax, softmax
from .pool import avg_pool2d, global_avg_pool2d, max_pool2d
from .reduce import argmax, argmin, reduce_max, reduce_min, reduce_prod, reduce_sum
from .registry import UnknownOpError, get_op, list_ops
from .spec import MAX_DIM, MAX_ELEMENTS, MAX_WINDOW, Arg, OpSpec, Param, ParamError
from .tags import has_tag
from .transform import concatenate, pad, reshape, transpose
from .winograd import winograd_input_nchwc, winograd_output_nchwc

sub = subtract
mul = multiply
div = divide

__all__ = [
    "CHAIN_OPS",
    "CLIP_RANGE",
    "MAX_DIM",
    "MAX_ELEMENTS",
    "MAX_WINDOW",
    "Arg",
    "Layout",
    "OpSpec",
    "Param",
    "ParamError",
    "UnknownOpError",
    "add",
    "argmax",
    "argmin",
    "avg_pool2d",
    "batch_matmul",
    "bias_add",
    "clip",
    "concatenate",
    "conv2d_nchw",
    "conv2d_nchw4c_int8",
    "conv2d_nchwc",
    "conv2d_nhwc",
    "conv2d_transpose_nchw",
    "dense",
    "dense_packed",
    "depthwise_conv2d_nchw",
    "depthwise_conv2d_nchwc",
    "div",
    "divide",
    "elementwise_chain",
    "gelu",
    "get_op",
    "global_avg_pool2d",
    "has_tag",
    "layer_norm",
    "layout_transform",
    "list_ops",
    "log_softmax",
    "matmul",
    "max_pool2d",
    "mul",
    "multiply",
    "pad",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
    "reference",
    "relu",
    "requantize",
    "reshape",
    "sigmoid",
    "softmax",
    "sub",
    "subtract",
    "tags",
    "tanh",
    "transpose",
    "winograd_input_nchwc",
    "winograd_output_nchwc",
]
