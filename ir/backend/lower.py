"""From a fused (``Primitive``) function to a tuning task: one tensor-expression DAG.

``lower_primitive(func)`` composes the lowerings of the function's operators (each
``OpDef.lowering`` builds tensor expressions through the op library) over placeholders
``p0, p1, ...`` that stand for the function's parameters, and wraps the result as a DAG
``Workload`` (``schedule.Workload.from_tensors``). Compute stages get unique names derived
from the operators (``T_add``, ``T_add_1``...), so the workload's key — the hash of its
canonical text — depends only on the computation: equal fused functions anywhere, in any
model, share one key and so one set of tuning records.

A function that cannot be lowered (an operator without a lowering, or a case its lowering
refuses, a tuple-typed parameter) gives a ``LoweredFunction`` with ``workload`` None and
the reason; it then runs on the operators' numpy computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..expr import Call, Expr, Function, Op, Tuple, TupleGetItem, Var
from ..op.lowering import LoweringError
from ..types import TensorType, TupleType, Type
from ..visitor import dataflow_post_order

__all__ = ["LoweredFunction", "lower_primitive", "operator_names", "workload_name"]


@dataclass
class LoweredFunction:
    """A primitive function and its workload (None when it has no lowering)."""

    function: Function
    workload: Any | None
    reason: str = ""
    #: for each input tensor of the workload (``workload.tensors()`` order), the index of
    #: the function parameter it stands for
    param_order: list[int] = field(default_factory=list)
    #: the function's output types (one, or the fields of a tuple result)
    out_types: list[TensorType] = field(default_factory=list)
    name: str = "fused"


def _out_types(t: Type) -> list[TensorType] | None:
    if isinstance(t, TensorType):
        return [t]
    if isinstance(t, TupleType) and all(isinstance(f, TensorType) for f in t.fields):
        return list(t.fields)  # type: ignore[arg-type]
    return None


def _static(t: TensorType) -> bool:
    return all(isinstance(d, int) for d in t.shape)


def workload_name(func: Function) -> str:
    """``fused_<op>_<op>...`` from the (first six) operators in the function."""
    short = "_".join(n.rsplit(".", 1)[-1] for n in operator_names(func)[:6])
    return f"fused_{short}" if short else "fused"


def operator_names(func: Function) -> list[str]:
    """The operators called in a primitive function, in evaluation order."""
    return [e.op.name for e in dataflow_post_order(func.body)
            if isinstance(e, Call) and isinstance(e.op, Op)]


def lower_primitive(func: Function) -> LoweredFunction:
    """The workload of a type-checked primitive function (see the module docstring)."""
    from schedule import Workload, post_order, te

    name = workload_name(func)
    outs = _out_types(func.body.checked_type)
    if outs is None or not all(_static(t) for t in outs):
        return LoweredFunction(func, None, "the result is not tensors of static shape",
                               name=name)
    values: dict[int, Any] = {}
    for p in func.params:
        t = p.checked_type
        if not isinstance(t, TensorType) or not _static(t):
            return LoweredFunction(func, None, f"parameter %{p.name_hint} has type {t}",
                                   out_types=outs, name=name)
    try:
        for i, p in enumerate(func.params):  # a dtype or a 0-size shape te has no form of
            values[id(p)] = te.placeholder(tuple(p.checked_type.shape), p.checked_type.dtype,
                                           name=f"p{i}")
        result = _lower_body(func.body, values)
    except LoweringError as exc:
        return LoweredFunction(func, None, str(exc), out_types=outs, name=name)
    except (TypeError, ValueError, NotImplementedError) as exc:  # the op library refused
        return LoweredFunction(func, None, f"{type(exc).__name__}: {exc}", out_types=outs,
                               name=name)
    tensors = list(result) if isinstance(result, list | tuple) else [result]
    used: dict[str, int] = {}
    for op in post_order(tensors):
        if isinstance(op, te.ComputeOp):
            n = used.get(op.name, 0)
            used[op.name] = n + 1
            if n:
                op.name = f"{op.name}_{n}"
    if len({id(t.op) for t in tensors}) != len(tensors) or any(
            not isinstance(t.op, te.ComputeOp) for t in tensors):
        return LoweredFunction(func, None, "an output is an input or repeated",
                               out_types=outs, name=name)
    workload = Workload.from_tensors(tensors, name=name)
    order = [int(t.name[1:]) for t in workload.tensors()[:-workload.num_outputs]]
    return LoweredFunction(func, workload, "", order, outs, name)


def _lower_body(body: Expr, values: dict[int, Any]) -> Any:
    """The tensor(s) of ``body`` over the parameters' placeholders (``values``)."""
    def value(e: Expr) -> Any:
        if id(e) in values:
            return values[id(e)]
        if isinstance(e, Var):
            raise LoweringError(f"free variable %{e.name_hint} in a primitive function")
        raise LoweringError(f"{type(e).__name__} inside a primitive function")

    for e in dataflow_post_order(body):
        if isinstance(e, Call) and isinstance(e.op, Op):
            opdef = e.op.opdef
            if opdef.lowering is None:
                raise LoweringError(f"{opdef.name} has no lowering")
            out = opdef.lowering([value(a) for a in e.args], e.attrs, e.checked_type)
            values[id(e)] = list(out) if isinstance(out, tuple) else out
        elif isinstance(e, Tuple):
            values[id(e)] = [value(f) for f in e.fields]
        elif isinstance(e, TupleGetItem):
            values[id(e)] = value(e.tuple_value)[e.index]
        else:
            raise LoweringError(f"a call of {type(e.op).__name__} inside a primitive function")
    return value(body)
