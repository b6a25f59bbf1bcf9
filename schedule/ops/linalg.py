"""Matrix products: matmul, dense (TVM layout, weight ``(N, K)``) and batch_matmul."""

from __future__ import annotations

from .. import te
from ..tensor import Tensor
from . import tags
from ._util import check_ndim, same_dtype, to
from .elemwise import bias_activation

ACTIVATIONS = ("none", "relu", "gelu")


def matmul(A: Tensor, B: Tensor, transpose_a: bool = False, transpose_b: bool = False,
           out_dtype: str | None = None, name: str = "T_matmul") -> Tensor:
    """``C = op(A) @ op(B)`` where op transposes when asked; accumulates in ``out_dtype``
    (default: the input dtype)."""
    check_ndim(A, 2, "matmul", "A")
    check_ndim(B, 2, "matmul", "B")
    dtype = out_dtype or same_dtype("matmul", A, B)
    M, K = (A.shape[1], A.shape[0]) if transpose_a else A.shape
    K2, N = (B.shape[1], B.shape[0]) if transpose_b else B.shape
    if K != K2:
        raise ValueError(f"matmul: reduction sizes differ: A gives K={K}, B gives K={K2}")
    k = te.reduce_axis((0, K), name="k")

    def body(i: te.Var, j: te.Var) -> te.Expr:
        a = A[k, i] if transpose_a else A[i, k]
        b = B[j, k] if transpose_b else B[k, j]
        return te.sum(to(dtype, a) * to(dtype, b), axis=k)

    return te.compute((M, N), body, name=name, tag=tags.make(tags.REDUCTION, "matmul"))


def dense(X: Tensor, W: Tensor, bias: Tensor | None = None, activation: str = "none",
          out_dtype: str | None = None) -> Tensor:
    """``activation(X @ W.T + bias)`` with ``X: (M, K)``, ``W: (N, K)``, ``bias: (N,)``.

    Stages: ``T_dense`` (the reduction), then ``T_bias_add`` and ``T_relu`` / ``T_gelu``.
    """
    check_ndim(X, 2, "dense", "X")
    check_ndim(W, 2, "dense", "W")
    if activation not in ACTIVATIONS:
        raise ValueError(f"dense: activation must be one of {ACTIVATIONS}, got {activation!r}")
    dtype = out_dtype or same_dtype("dense", X, W)
    (M, K), (N, K2) = X.shape, W.shape
    if K != K2:
        raise ValueError(f"dense: X has K={K} but W has K={K2}")
    k = te.reduce_axis((0, K), name="k")
    out = te.compute((M, N), lambda i, j: te.sum(to(dtype, X[i, k]) * to(dtype, W[j, k]), axis=k),
                     name="T_dense", tag=tags.make(tags.REDUCTION, "dense"))
    return bias_activation(out, bias, activation, axis=1)


def dense_packed(X: Tensor, W: Tensor, out_dtype: str | None = None,
                 name: str = "T_dense") -> Tensor:
    """``X @ W`` with ``X: (M, K)`` and the constant weight packed in column panels,
    ``W: (N/b, K, b)`` (``W[j // b, k, j % b]`` is the unpacked ``(K, N)`` weight's
    ``[k, j]``): a tile of ``b`` output columns reads its weights as one contiguous stream
    down the reduction, which the hardware prefetchers follow (rows of the unpacked weight
    are ``N`` elements apart). Output ``(M, N)``."""
    check_ndim(X, 2, "dense_packed", "X")
    check_ndim(W, 3, "dense_packed", "W")
    dtype = out_dtype or same_dtype("dense_packed", X, W)
    (M, K), (panels, K2, block) = X.shape, W.shape
    if K != K2:
        raise ValueError(f"dense_packed: X has K={K} but W {list(W.shape)} has K={K2}")
    k = te.reduce_axis((0, K), name="k")
    return te.compute(
        (M, panels * block),
        lambda i, j: te.sum(to(dtype, X[i, k]) * to(dtype, W[j // block, k, j % block]), axis=k),
        name=name, tag=tags.make(tags.REDUCTION, "dense_packed"))


def dense_blocked_int8(X: Tensor, W: Tensor) -> Tensor:
    """An 8-bit dense layer in the blocked layouts of a 4-byte dot-product instruction
    (x86's ``vpdpbusd``): ``X (M, K)`` uint8 and ``W (N/16, K/4, 16, 4)`` int8 (16 output
    features by 4 inputs per block) give the int32 ``(M, N/16, 16)``, i.e. ``X @ W.T``
    with its features in blocks of 16. The innermost loops, 16 outputs by 4 reduction
    steps, are one such instruction."""
    op = "dense_blocked_int8"
    check_ndim(X, 2, op, "X")
    check_ndim(W, 4, op, "W")
    (M, K), (No, Ko, lanes, four) = X.shape, W.shape
    if (lanes, four, Ko * 4) != (16, 4, K):
        raise ValueError(f"{op}: W {list(W.shape)} is not the blocked (N/16, K/4, 16, 4) "
                         f"of X's K={K}")
    if (X.dtype, W.dtype) != ("uint8", "int8"):
        raise ValueError(f"{op}: X must be uint8 and W int8, got {X.dtype} and {W.dtype}")
    ko = te.reduce_axis((0, Ko), name="ko")
    ki = te.reduce_axis((0, 4), name="ki")
    return te.compute((M, No, 16), lambda i, no, ni: te.sum(
        to("int32", X[i, ko * 4 + ki]) * to("int32", W[no, ko, ni, ki]), axis=[ko, ki]),
        name="T_dense", tag=tags.make(tags.REDUCTION, op))


def batch_matmul(A: Tensor, B: Tensor, transpose_b: bool = False, out_dtype: str | None = None,
                 name: str = "T_batch_matmul") -> Tensor:
    """``C[b] = A[b] @ B[b]`` with ``A: (Bt, M, K)`` and ``B: (Bt, K, N)`` or, with
    ``transpose_b``, ``B: (Bt, N, K)``."""
    check_ndim(A, 3, "batch_matmul", "A")
    check_ndim(B, 3, "batch_matmul", "B")
    dtype = out_dtype or same_dtype("batch_matmul", A, B)
    batch, M, K = A.shape
    batch2, K2, N = (B.shape[0], B.shape[2], B.shape[1]) if transpose_b else B.shape
    if batch != batch2 or K != K2:
        raise ValueError(f"batch_matmul: shapes {list(A.shape)} and {list(B.shape)} do not match"
                         f"{' (transpose_b)' if transpose_b else ''}")
    k = te.reduce_axis((0, K), name="k")

    def body(b: te.Var, i: te.Var, j: te.Var) -> te.Expr:
        rhs = B[b, j, k] if transpose_b else B[b, k, j]
        return te.sum(to(dtype, A[b, i, k]) * to(dtype, rhs), axis=k)

    return te.compute((batch, M, N), body, name=name,
                      tag=tags.make(tags.REDUCTION, "batch_matmul"))
