"""Tensor-expression definitions: what is accepted, and the errors for what is not."""

import numpy as np
import pytest

from schedule import TensorExprError, te

from .helpers import check


def test_wrong_number_of_indices_is_an_error():
    A = te.placeholder((4, 5), name="A")
    with pytest.raises(TensorExprError, match="2 dimension.*1 index"):
        te.compute((4,), lambda i: A[i], name="B")


def test_unknown_dtype_is_an_error():
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        te.placeholder((4,), "float64", name="A")


def test_compute_function_arity_must_match_shape():
    A = te.placeholder((4, 5), name="A")
    with pytest.raises(TensorExprError, match="2 index argument"):
        te.compute((4, 5), lambda i: A[i, 0], name="B")


def test_mismatched_reduce_axes_are_an_error():
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    k2 = te.reduce_axis((0, 5), name="k2")
    with pytest.raises(TensorExprError, match="variable 'k' is neither"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k2), name="B")


def test_reduction_inside_a_larger_expression_is_an_error():
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    with pytest.raises(TensorExprError, match="whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) * 2, name="B")


def test_reduce_axis_must_be_a_reduce_axis():
    A = te.placeholder((4, 5), name="A")
    with pytest.raises(TensorExprError, match="not a te.reduce_axis"):
        te.compute((4, 5), lambda i, j: te.sum(A[i, j], axis=j), name="B")


def test_bad_shapes_and_extents():
    with pytest.raises(TensorExprError, match="positive integer"):
        te.placeholder((0, 3), name="A")
    with pytest.raises(TensorExprError, match="start at 0"):
        te.reduce_axis((1, 4), name="k")


def test_python_truth_value_of_an_expression_is_refused():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="if_then_else"):
        te.compute((4,), lambda i: A[i] if A[i] > 0 else 0, name="B")


def test_type_errors_in_expressions():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="integer operands"):
        te.compute((4,), lambda i: te.floordiv(A[i], 2.0), name="B")
    with pytest.raises(TypeError, match="bool"):
        te.compute((4,), lambda i: te.if_then_else(A[i], 1.0, 0.0), name="B")
    with pytest.raises(TypeError, match="float argument"):
        te.compute((4,), lambda i: te.exp(i), name="B")


def test_max_min_take_two_values_or_a_reduction():
    A = te.placeholder((3, 7), name="A")
    k = te.reduce_axis((0, 7), name="k")
    M = te.compute((3,), lambda i: te.max(A[i, k], axis=k), name="M")
    s = te.create_schedule(M)
    check(s, [A, M], lambda a: a.max(axis=1))
    B = te.compute((3, 7), lambda i, j: te.min(te.max(A[i, j], -0.5), 0.5), name="B")
    check(te.create_schedule(B), [A, B], lambda a: np.clip(a, -0.5, 0.5))
    with pytest.raises(TensorExprError, match="either two values"):
        te.max(A[0, 0])


def test_commutative_reducer():
    A = te.placeholder((3, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, t), name="prod")
    P = te.compute((3,), lambda i: prod(A[i, k], axis=k), name="P")
    check(te.create_schedule(P), [A, P], lambda a: a.prod(axis=1), rtol=1e-4)


def test_reduction_with_where_condition():
    A = te.placeholder((6, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    L = te.compute((6,), lambda i: te.sum(A[i, k], axis=k, where=k <= i), name="L")
    check(te.create_schedule(L), [A, L], lambda a: np.tril(a).sum(axis=1))


def test_math_functions_and_casts():
    A = te.placeholder((5, 4), name="A")
    fns = {
        "exp": (te.exp, np.exp), "tanh": (te.tanh, np.tanh), "abs": (te.abs, np.abs),
        "floor": (te.floor, np.floor), "ceil": (te.ceil, np.ceil),
        "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    }
    for name, (fn, ref) in fns.items():
        B = te.compute((5, 4), lambda i, j, fn=fn: fn(A[i, j]), name=f"B_{name}")
        check(te.create_schedule(B), [A, B], ref)
    P = te.placeholder((5, 4), name="P")
    fns_pos = {
        "log": (te.log, np.log), "sqrt": (te.sqrt, np.sqrt),
        "rsqrt": (te.rsqrt, lambda x: 1 / np.sqrt(x)),
        "pow": (lambda x: te.pow(x, 1.5), lambda x: x ** 1.5),
    }
    for name, (fn, ref) in fns_pos.items():
        B = te.compute((5, 4), lambda i, j, fn=fn: fn(te.abs(P[i, j]) + 0.5), name=f"C_{name}")
        check(te.create_schedule(B), [P, B], lambda x, ref=ref: ref(np.abs(x) + 0.5))
    import math

    E = te.compute((5, 4), lambda i, j: te.erf(A[i, j]), name="E")
    check(te.create_schedule(E), [A, E], np.vectorize(math.erf))
    Q = te.compute((5, 4), lambda i, j: te.cast("int32", A[i, j] * 10.0), name="Q")
    check(te.create_schedule(Q), [A, Q], lambda a: (a * 10).astype("int32"))


def test_integer_floordiv_floormod_follow_python_semantics():
    X = te.placeholder((9,), "int32", name="X")
    D = te.compute((9,), lambda i: te.floordiv(X[i], 4) * 10 + te.floormod(X[i], 4), name="D")
    s = te.create_schedule(D)
    from .helpers import run

    x = np.arange(-4, 5, dtype="int32")
    out = run(s, [X, D], inputs=[x])[1]
    np.testing.assert_array_equal(out, (x // 4) * 10 + x % 4)


def test_all_any_and_bool_outputs():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: te.all(A[i] > -0.5, A[i] < 0.5), name="B")
    check(te.create_schedule(B), [A, B], lambda a: (a > -0.5) & (a < 0.5))
    C = te.compute((8,), lambda i: te.if_then_else(te.any(A[i] < -1.0, A[i] > 1.0), 1.0, 0.0),
                   name="C")
    check(te.create_schedule(C), [A, C], lambda a: ((a < -1) | (a > 1)).astype("float32"))


def test_small_integer_and_half_dtypes():
    A = te.placeholder((4, 6), "int8", name="A")
    B = te.placeholder((6, 3), "int8", name="B")
    k = te.reduce_axis((0, 6), name="k")
    C = te.compute((4, 3), lambda i, j: te.sum(
        te.cast("int32", A[i, k]) * te.cast("int32", B[k, j]), axis=k), name="C")
    check(te.create_schedule(C), [A, B, C],
          lambda a, b: a.astype("int32") @ b.astype("int32"))
    H = te.placeholder((7,), "float16", name="H")
    G = te.compute((7,), lambda i: H[i] * te.const(2.0, "float16") + te.exp(H[i]), name="G")
    check(te.create_schedule(G), [H, G], lambda h: h * np.float16(2) + np.exp(h),
          rtol=2e-2, atol=2e-2)
    U = te.placeholder((5,), "uint8", name="U")
    V = te.compute((5,), lambda i: te.cast("int64", U[i]) * 3, name="V")
    check(te.create_schedule(V), [U, V], lambda u: u.astype("int64") * 3)


def test_names_that_are_c_keywords_or_odd_are_fine():
    A = te.placeholder((3,), name="float")
    B = te.compute((3,), lambda int: A[int] + 1.0, name="for")
    C = te.compute((3,), lambda i: B[i] * 2.0, name="2nd.stage")
    check(te.create_schedule(C), [A, C], lambda a: (a + 1) * 2)


def test_a_remainder_of_a_remainder_by_a_multiple_is_one_remainder():
    """``(x % 32 + 8 * y) % 4`` is ``(x + 8 * y) % 4`` (32 is a multiple of 4), negative
    values included; ``% 3`` of ``x % 32`` is left as it is."""
    from schedule import arith
    from schedule.expr import Binary, Const, Var

    i = Var("i", "int32")
    inner = Binary("floormod", i * 3 + 1, Const(32, "int32"), "int32")
    assert "floormod(floormod" not in str(arith.simplify(
        Binary("floormod", inner + i * 8, Const(4, "int32"), "int32")))
    assert "floormod(floormod" in str(arith.simplify(
        Binary("floormod", inner, Const(3, "int32"), "int32")))
    X = te.placeholder((81,), "int32", name="X")
    D = te.compute((81,), lambda j: te.floormod(te.floormod(X[j], 32) + X[j] * 8, 4), name="D")
    from .helpers import run

    x = np.arange(-40, 41, dtype="int32")
    out = run(te.create_schedule(D), [X, D], inputs=[x])[1]
    np.testing.assert_array_equal(out, ((x % 32) + 8 * x) % 4)
