"""Computations round-trip through declarative JSON; bad documents give clear errors."""

import json

import numpy as np
import pytest

from schedule import build, canonical_text, ops, te, workload_key
from schedule.serialize import from_json, to_json

from .helpers import matmul
from .test_random_schedules import conv2d, softmax


@pytest.mark.parametrize("make", [
    lambda: list(matmul(7, 5, 3)),
    conv2d,
    softmax,
    lambda: ops.get_op("layer_norm").build({"M": 3, "N": 8}),
    lambda: ops.get_op("max_pool2d").build(
        ops.get_op("max_pool2d").normalize({"N": 1, "C": 2, "H": 6, "W": 6, "R": 3, "S": 3,
                                            "padding": 1})),
])
def test_round_trip_keeps_the_computation(make):
    args = make()
    doc = json.loads(json.dumps(to_json(args[-1])))
    (out,) = from_json(doc)
    assert canonical_text(out) == canonical_text(args[-1])
    assert workload_key(out) == workload_key(args[-1])
    assert to_json(out) == doc


def test_rebuilt_computation_compiles_to_the_same_results():
    A, B, C = matmul(9, 6, 4)
    (C2,) = from_json(to_json(C))
    A2, B2 = C2.op.input_tensors[0], C2.op.input_tensors[1]
    s = te.create_schedule(C2)
    s[C2].split(s[C2].op.axis[0], factor=4)
    mod = build(s, [A2, B2, C2])
    a, b = np.random.rand(9, 4).astype("float32"), np.random.rand(4, 6).astype("float32")
    c = np.zeros((9, 6), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_infinite_constants_survive_json():
    A = te.placeholder((3, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    M = te.compute((3,), lambda i: te.max(A[i, k], axis=k), name="M")
    text = json.dumps(to_json(M))
    assert "Infinity" not in text
    assert canonical_text(from_json(json.loads(text))[0]) == canonical_text(M)


def _doc():
    return to_json(matmul(4, 4, 4)[2])


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(version=99), "unsupported version"),
    (lambda d: d["tensors"][0].update(dtype="float64"), "unknown dtype"),
    (lambda d: d["tensors"][0].update(shape=[0, 4]), "positive integers"),
    (lambda d: d["tensors"][2].update(body=["load", "A", ["var", "i"]], reduce_axis=[]),
     "1 index"),
    (lambda d: d["tensors"][2].update(body=["eval", "__import__('os')"], reduce_axis=[]),
     "unknown expression kind 'eval'"),
    (lambda d: d["tensors"][2]["body"][2].__setitem__(0, "explode"), "unknown expression kind"),
    (lambda d: d["tensors"][2]["body"][2][1].__setitem__(1, "Z"), "unknown tensor"),
    (lambda d: d["tensors"][2]["body"].__setitem__(3, ["q"]), "exactly the declared"),
    (lambda d: d.update(outputs=["nope"]), "unknown outputs"),
    (lambda d: d["tensors"].append(dict(d["tensors"][0])), "defined twice"),
    (lambda d: d.update(tensors="x"), "'tensors' must be a list"),
])
def test_bad_documents_are_rejected_clearly(mutate, message):
    doc = _doc()
    mutate(doc)
    with pytest.raises(ValueError, match=message):
        from_json(doc)


def test_deeply_nested_expressions_are_rejected():
    doc = _doc()
    body = ["var", "i"]
    for _ in range(500):
        body = ["+", body, ["const", "int32", 1]]
    doc["tensors"][2] = {"name": "C", "op": "compute", "shape": [4], "axis": ["i"],
                         "body": ["cast", "float32", body]}
    with pytest.raises(ValueError, match="deeper than"):
        from_json(doc)
