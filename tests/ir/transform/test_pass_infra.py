"""The pass infrastructure: opt levels, disabled and required passes, Sequential, the
trace, and the meaning check catching a pass that changes what @main computes."""

from __future__ import annotations

import pytest

import ir
from ir.transform import (
    InferType,
    PassContext,
    PassMeaningError,
    Sequential,
    function_pass,
    module_pass,
)


def _module() -> ir.Module:
    x = ir.var("x", shape=(2, 3))
    return ir.infer_type(ir.Module({"main": ir.Function([x], ir.op.exp(ir.op.add(x, x)))}))


@function_pass("SwapExpForTanh", opt_level=2)
def swap_exp(func, module, ctx):
    class Swap(ir.ExprMutator):
        def visit_call(self, call):
            call = super().visit_call(call)
            if isinstance(call.op, ir.Op) and call.op.name == "exp":
                return ir.op.tanh(*call.args)
            return call
    return Swap().visit(func)


@module_pass("Identity", opt_level=1)
def identity(module, ctx):
    return module


def test_opt_level_disabled_and_required():
    m = _module()
    with PassContext(opt_level=1) as ctx:
        assert swap_exp(m) is m and identity(m) is m
        assert ctx.trace == ["Identity"]
    with PassContext(opt_level=1, required_pass=["SwapExpForTanh"]):
        assert swap_exp(m) != m
    with PassContext(opt_level=3, disabled_pass=["SwapExpForTanh"]):
        assert swap_exp(m) is m


def test_sequential_runs_in_order_and_traces():
    with PassContext(opt_level=3) as ctx:
        out = Sequential([InferType(), identity, swap_exp, InferType()])(_module())
    assert ctx.trace == ["InferType", "Identity", "SwapExpForTanh", "InferType"]
    assert "tanh" in ir.astext(out) and "exp" not in ir.astext(out)


def test_meaning_check_catches_a_wrong_pass_and_passes_a_right_one():
    with PassContext(opt_level=3, check_meaning=True):
        identity(_module())
        with pytest.raises(PassMeaningError, match="SwapExpForTanh"):
            swap_exp(_module())


def test_bad_arguments():
    with pytest.raises(ValueError, match="opt_level"):
        PassContext(opt_level=9)
    with pytest.raises(TypeError, match="takes a Module"):
        identity(ir.var("x"))
