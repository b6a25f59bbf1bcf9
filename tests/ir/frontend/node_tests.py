"""Which of ONNX's backend test cases run on our backends (helpers, not tests): the
included patterns, the excluded cases of supported operators with their reasons, and
``backend_test_classes(backend, module)``, the pytest-visible test classes of
``onnx.backend.test.BackendTest`` for one backend, with only the included cases.

``onnx.backend.test.BackendTest`` builds its cases in memory (the node tests from onnx's
case generators, the others from the data files in the package); an excluded case of a
supported operator shows as skipped, with the reason in ``EXCLUDE``.
"""

from __future__ import annotations

import re
import unittest
import warnings

import onnx.backend.test
from onnx.backend.base import Backend

INCLUDE = [
    # elementwise math and activations
    r"^test_(abs|neg|reciprocal|sqrt|exp|log|erf|floor|ceil|sign|sigmoid|tanh|relu|not)_",
    r"^test_(leakyrelu|prelu|elu|selu|softplus|hardsigmoid|hardswish|gelu)_",
    r"^test_(add|sub|mul|div|pow|sum|mean|max|min|clip|where)_",
    r"^test_(and|or|xor|equal|less|greater)",
    r"^test_cast_(FLOAT|FLOAT16|DOUBLE)_to_(FLOAT|FLOAT16|DOUBLE)_cpu$",
    r"^test_castlike_(FLOAT|FLOAT16|DOUBLE)_to_(FLOAT|FLOAT16|DOUBLE)(_expanded)?_cpu$",
    # reductions
    r"^test_reduce_(mean|sum|max|min|prod)_(do_not|keepdims|default|negative|empty|bool)",
    r"^test_reduce_(l1|l2|log_sum|log_sum_exp)_.*_expanded",
    r"^test_arg(max|min)_",
    # shapes and constants
    r"^test_(reshape|flatten|transpose|squeeze|unsqueeze|concat|slice|expand)_",
    r"^test_split_(equal|variable|zero|1d|2d)",
    r"^test_gather_(0|1|2d_indices|negative_indices)_",
    r"^test_(shape|size|range|tile|identity|constant|constantofshape)_",
    r"^test_(constant|edge|reflect|wrap)_pad",
    r"^test_(training_)?dropout",
    # neural-network operators
    r"^test_(basic_)?conv_", r"^test_convtranspose", r"^test_gemm_", r"^test_matmul_",
    r"^test_(maxpool|averagepool|globalaveragepool|globalmaxpool)_",
    r"^test_batchnorm_", r"^test_layer_normalization_", r"^test_instancenorm_",
    r"^test_(softmax|logsoftmax)_(example|large_number|axis|negative_axis|default_axis)",
    # function bodies of other operators, expanded into supported ones
    r"^test_(celu|mish|mvn|swish|softsign|shrink|thresholdedrelu)_.*expanded",
    r"^test_(depthtospace|spacetodepth|rms_normalization|group_normalization)_.*expanded",
    r"^test_(rotary_embedding|flexattention|causal_conv_with_state)_.*expanded",
    # the small models converted from PyTorch modules (opset 6) and operators
    r"^test_[A-Z][A-Za-z0-9]*(_|$)", r"^test_operator_",
    r"^test_(single_relu_model|expand_shape_model)",
]

EXCLUDE = {
    # 3-d convolution and pooling: the IR has 1-d (as 2-d) and 2-d windows only
    r"^test_(maxpool|averagepool|convtranspose)_3d": "3-d windows",
    r"^test_(Conv3d|AvgPool3d|MaxPool3d)": "3-d windows",
    r"^test_maxpool_with_argmax": "MaxPool's Indices output",
    # training-time behaviour: the importer is for inference
    r"^test_batchnorm_.*training_mode": "BatchNormalization in training mode",
    r"^test_training_dropout(_default|_mask|_cpu)": "random dropout (training_mode=True)",
    # dtypes and types the IR has no counterpart for
    r"^test_equal_string": "string tensors",
    r"^test_identity_(sequence|opt)": "sequence and optional values",
    r"bfloat16": "bfloat16",
    r"^test_causal_conv_with_state_silu_fp16": "float16 rounding beyond the tolerance",
    r"^test_range_.*_expanded": "Range's function body is a Loop",
}



def backend_test_classes(backend: type[Backend], module: str) -> dict[str, type]:
    """The test classes of ONNX's backend tests on ``backend``, for the test module
    ``module``, keeping only the included cases (the others would be thousands of skipped
    tests)."""
    with warnings.catch_warnings():  # onnx's case generators warn about their own overflows
        warnings.simplefilter("ignore")
        backend_test = onnx.backend.test.BackendTest(backend, module)
    for pattern in INCLUDE:
        backend_test.include(pattern)
    for pattern in EXCLUDE:
        backend_test.exclude(pattern)
    patterns = [re.compile(p) for p in INCLUDE]
    out = {}
    for class_name, case in backend_test.test_cases.items():
        tests = {name: fn for name, fn in vars(case).items()
                 if name.endswith("_cpu") and any(p.search(name) for p in patterns)}
        if tests:
            out[class_name] = type(class_name, (unittest.TestCase,),
                                   {"__module__": module, **tests})
    return out
