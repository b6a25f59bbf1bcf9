"""Shared by the optimisation pass tests: run a pass (or several) on a function or module
under ``PassContext(opt_level=4, check_meaning=True)``, so every pass run is checked in the
interpreter on random inputs, and count the operator calls of the result."""

from __future__ import annotations

from collections import Counter

import numpy as np

import ir
from ir.transform import Pass, PassContext, Sequential


def module_of(x: ir.Function | ir.Module) -> ir.Module:
    return x if isinstance(x, ir.Module) else ir.Module({"main": x})


def run(passes: Pass | list[Pass], x: ir.Function | ir.Module) -> ir.Module:
    """``passes`` applied to ``x`` (a function becomes @main), meaning checked; the
    result must type-check too."""
    seq = Sequential(passes) if isinstance(passes, list) else passes
    with PassContext(opt_level=4, check_meaning=True):
        out = seq(module_of(x))
    ir.infer_type(out)
    return out


def op_counts(x: ir.Expr | ir.Module) -> Counter:
    """How many distinct call nodes of each operator ``x`` holds (a shared node once)."""
    counts: Counter = Counter()

    class Count(ir.ExprVisitor):
        def visit_call(self, e):
            if isinstance(e.op, ir.Op):
                counts[e.op.name] += 1
            super().visit_call(e)

    exprs = list(x.functions.values()) if isinstance(x, ir.Module) else [x]
    v = Count()
    for e in exprs:
        v.visit(e)
    return counts


def calls_of(out: ir.Module, name: str) -> list[ir.Call]:
    """The calls of operator ``name`` in ``out``'s @main, in visiting order."""
    found: list[ir.Call] = []

    class Find(ir.ExprVisitor):
        def visit_call(self, e):
            if isinstance(e.op, ir.Op) and e.op.name == name:
                found.append(e)
            super().visit_call(e)

    Find().visit(out["main"])
    return found


def rand(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0) -> ir.Constant:
    """A float32 constant of random values."""
    rng = np.random.default_rng(seed)
    return ir.const(rng.uniform(low, high, shape).astype("float32"))


def same_result(before: ir.Module, after: ir.Module, *args: np.ndarray) -> bool:
    a, b = ir.evaluate(before, *args), ir.evaluate(after, *args)
    return np.allclose(a, b, rtol=1e-4, atol=1e-5)


def assert_main(out: ir.Module, expected: ir.Function) -> None:
    """``out``'s @main is ``expected`` (type-inferred like the passes that infer types, so
    that filled-in return types and annotations do not count)."""
    if out["main"].ret_type is not None and expected.ret_type is None:
        expected = ir.infer_type(ir.Module({"main": expected}))["main"]
    ir.assert_structural_equal(out["main"], expected)
