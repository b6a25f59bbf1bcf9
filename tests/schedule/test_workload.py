"""Workloads: plain data, stable keys, rebuilt tensors, references, clear errors."""

import json

import numpy as np
import pytest

from schedule import Workload, build, te

from .helpers import matmul


def test_operator_workload_round_trips_and_keys_are_stable():
    wl = Workload.op("matmul", M=16, N=8, K=4)
    assert wl.params["transpose_a"] is False  # defaults are filled in
    again = Workload.from_json(json.loads(json.dumps(wl.to_json())))
    assert again == wl and again.key == wl.key and len(wl.key) == 32
    assert wl.flops == 2 * 16 * 8 * 4
    assert Workload.op("matmul", M=16, N=8, K=5).key != wl.key
    # the same computation described as a DAG has the same key
    dag = Workload.from_tensors(wl.tensors()[-1], name="mm")
    assert dag.key == wl.key and dag.flops == wl.flops


def test_dag_workload_builds_and_checks_against_its_default_program():
    A, B, C = matmul(12, 10, 6)
    D = te.compute((12, 10), lambda i, j: te.max(C[i, j], 0.0), name="D")
    wl = Workload.from_tensors(D, name="matmul_relu")
    args = wl.tensors()
    assert [t.name for t in args] == ["A", "B", "D"]
    inputs = wl.random_inputs(seed=3)
    (expected,) = wl.reference(inputs)
    np.testing.assert_allclose(expected, np.maximum(inputs[0] @ inputs[1], 0), rtol=1e-5)
    s = te.create_schedule(args[-1])
    s[args[-1]].parallel(s[args[-1]].op.axis[0])
    out = np.zeros((12, 10), "float32")
    build(s, args)(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    assert wl.flops == 2 * 12 * 10 * 6 + 12 * 10


def test_operator_reference_and_random_inputs_are_deterministic():
    wl = Workload.op("softmax", M=3, N=7)
    a, b = wl.random_inputs(seed=1), wl.random_inputs(seed=1)
    np.testing.assert_array_equal(a[0], b[0])
    (ref,) = wl.reference(a)
    np.testing.assert_allclose(ref.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("doc, message", [
    ({"op": "matmull", "params": {}}, "matmull"),
    ({"op": "matmul", "params": {"M": -1, "N": 2, "K": 2}}, "'M'"),
    ({"op": "matmul", "params": {"M": 2, "N": 2}}, "'K'"),
    ({"op": "matmul", "params": {"M": 2, "N": 2, "K": 2, "Q": 1}}, "'Q'"),
    ({"op": "matmul", "params": [1, 2]}, "'params' must be an object"),
    ({"op": "matmul", "params": {}, "x": 1}, "unexpected field"),
    ({"dag": {"version": 1, "tensors": []}}, "tensors"),
    ({"nothing": 1}, "needs 'op'"),
    ([1, 2], "must be a JSON object"),
])
def test_bad_workloads_give_clear_errors(doc, message):
    with pytest.raises(ValueError, match=message):
        Workload.from_json(doc)


def test_numpy_baseline_computes_in_the_workloads_dtype_and_agrees_with_the_reference():
    wl = Workload.op("matmul", M=16, N=8, K=32)
    inputs = wl.random_inputs(0)
    (baseline,), (reference,) = wl.numpy_baseline(inputs), wl.reference(inputs)
    assert baseline.dtype == np.float32
    np.testing.assert_allclose(baseline, reference, rtol=1e-5, atol=1e-5)
    a, b = inputs
    assert np.array_equal(baseline, a @ b)  # exactly what numpy gives a float32 user
    dag = Workload.from_tensors(wl.tensors()[-1])
    assert dag.numpy_baseline(dag.random_inputs(0)) is None


def test_titles_name_the_operator_and_its_non_default_parameters() -> None:
    conv = Workload.op("conv2d_nchw", N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1)
    assert conv.title() == "conv2d_nchw N=1 C=64 H=56 W=56 K=64 R=3 S=3 padding=1,1"
    assert Workload.op("matmul", M=8, N=8, K=8).title() == "matmul M=8 N=8 K=8"
    assert (Workload.op("matmul", M=8, N=8, K=8, transpose_b=True, dtype="float16").title()
            == "matmul M=8 N=8 K=8 transpose_b=true dtype=float16")
    a = te.placeholder((4, 4), name="A")
    dag = Workload.from_tensors([te.compute((4, 4), lambda i, j: a[i, j] * 2, name="B")],
                                name="double")
    assert dag.title() == f"double (computation {dag.key[:8]})"
