"""Workloads: what is tuned — a registered operator with parameters, or a computation given
as declarative JSON (e.g. a fused subgraph extracted from a model).

A workload is plain data (``to_json`` / ``from_json``), rebuilds its tensors in any process
(``tensors()``), and is identified by ``key``, the hash of its computation's canonical text,
so the same computation has the same key however it was described.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import numpy as np

from . import dtype as dt
from .buffers import placed
from .dag import canonical_text, post_order, workload_key
from .expr import Binary, Call, Compare, Expr, Load, Logic, Select
from .ops import get_op
from .serialize import from_json as dag_from_json
from .serialize import to_json as dag_to_json
from .tensor import ComputeOp, PlaceholderOp, Reduce, Tensor


class Workload:
    """An operator workload (``Workload.op("matmul", M=64, N=64, K=64)``) or a computation
    workload (``Workload.from_tensors([C], name="fused_conv_relu")``)."""

    def __init__(self, *, op_name: str | None = None, params: Mapping[str, Any] | None = None,
                 dag: dict[str, Any] | None = None, name: str | None = None):
        if (op_name is None) == (dag is None):
            raise ValueError("a workload is either an operator with parameters or a DAG")
        self.op_name = op_name
        if op_name is not None:
            spec = get_op(op_name)
            self.params: dict[str, Any] = spec.normalize(dict(params or {}))
            self.dag: dict[str, Any] | None = None
            self.name = op_name
        else:
            self.params = {}
            self.dag = dag
            dag_from_json(dag)  # validate now, with a clear error, rather than on first use
            self.name = name or "dag"

    # ------------------------------------------------------------------ constructors
    @classmethod
    def op(cls, name: str, **params: Any) -> Workload:
        return cls(op_name=name, params=params)

    @classmethod
    def from_tensors(cls, outputs: Tensor | list[Tensor], name: str = "dag") -> Workload:
        return cls(dag=dag_to_json(outputs), name=name)

    @classmethod
    def from_json(cls, doc: Any) -> Workload:
        """From ``{"op": name, "params": {...}}`` or ``{"dag": {...}, "name": ...}``."""
        if not isinstance(doc, Mapping):
            raise ValueError("a workload must be a JSON object")
        if "op" in doc:
            extra = set(doc) - {"op", "params"}
            if extra:
                raise ValueError(f"workload: unexpected field(s) {sorted(extra)}")
            params = doc.get("params", {})
            if not isinstance(params, Mapping):
                raise ValueError("workload: 'params' must be an object")
            return cls(op_name=str(doc["op"]), params=params)
        if "dag" in doc:
            return cls(dag=doc["dag"], name=str(doc.get("name", "dag")))
        raise ValueError("a workload needs 'op' (with 'params') or 'dag'")

    def to_json(self) -> dict[str, Any]:
        if self.op_name is not None:
            return {"op": self.op_name, "params": dict(self.params)}
        return {"dag": self.dag, "name": self.name}

    # ------------------------------------------------------------------ the computation
    def tensors(self) -> list[Tensor]:
        """The argument tensors ``[inputs..., outputs...]`` (the order of ``build``): fresh
        for an operator; for a DAG, parsed and checked once and then shared (operations are
        immutable: a schedule gives its stages new operations, it never changes one), which
        matters to a search that instantiates thousands of candidates of a large fused
        computation."""
        if self.op_name is not None:
            return get_op(self.op_name).build(self.params)
        parsed = self.__dict__.get("_dag_tensors")
        if parsed is None:
            outputs = dag_from_json(self.dag)
            parsed = self.__dict__["_dag_tensors"] = [*_placeholders(outputs), *outputs]
        return list(parsed)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as data: the parsed tensors are rebuilt where they are needed."""
        return {k: v for k, v in self.__dict__.items() if k != "_dag_tensors"}

    @property
    def num_outputs(self) -> int:
        return 1 if self.dag is None else len(self.dag["outputs"])

    @cached_property
    def key(self) -> str:
        return workload_key(self.tensors()[-self.num_outputs:])

    @cached_property
    def canonical_text(self) -> str:
        return canonical_text(self.tensors()[-self.num_outputs:])

    @cached_property
    def flops(self) -> float:
        if self.op_name is not None:
            return float(get_op(self.op_name).flops(self.params))
        return count_flops(self.tensors()[-self.num_outputs:])

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Deterministic inputs for measuring and checking this workload, each in a buffer
        of its own laid out alike in every process (``buffers.placed``)."""
        if self.op_name is not None:
            return [placed(a) for a in get_op(self.op_name).random_inputs(self.params, seed)]
        rng = np.random.default_rng(seed)
        out = []
        for t in self.tensors()[:-self.num_outputs]:
            if dt.is_float(t.dtype):
                out.append(rng.uniform(-1, 1, t.shape).astype(t.dtype))
            elif t.dtype == "bool":
                out.append(rng.random(t.shape) < 0.5)
            else:
                out.append(rng.integers(-8, 8, t.shape).astype(dt.numpy_dtype(t.dtype)))
        return [placed(a) for a in out]

    def numpy_baseline(self, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        """The op computed by numpy in the workload's own dtype, as a numpy user would (the
        speed baseline); None for a DAG workload, which has no numpy counterpart."""
        if self.op_name is None:
            return None
        from .ops.reference import native_precision

        with native_precision():
            return [np.asarray(get_op(self.op_name).reference(inputs, self.params))]

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The expected outputs: the op's numpy reference, or for a DAG the result of its
        default (unscheduled) program."""
        if self.op_name is not None:
            return [np.asarray(get_op(self.op_name).reference(inputs, self.params))]
        from .build import build
        from .schedule import create_schedule

        args = self.tensors()
        outputs = args[-self.num_outputs:]
        mod = build(create_schedule(outputs), args)
        results = [np.zeros(t.shape, dtype=dt.numpy_dtype(t.dtype)) for t in outputs]
        mod(*inputs, *results)
        return results

    # ------------------------------------------------------------------ identity
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workload) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        if self.op_name is not None:
            params = ", ".join(f"{k}={v}" for k, v in self.params.items())
            return f"Workload.op({self.op_name!r}, {params})"
        return f"Workload(dag {self.name!r}, key={self.key})"

    def describe(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    def title(self) -> str:
        """A short readable name: the operator and the parameters that differ from its
        defaults (``conv2d_nchw N=1 C=64 H=56 W=56 K=64 R=3 S=3 padding=1``); a DAG's
        name."""
        if self.op_name is None:
            return f"{self.name} (computation {self.key[:8]})"
        spec = get_op(self.op_name)
        shown = []
        for param in spec.params:
            value = self.params[param.name]
            if param.required or value != param.canonical(param.default):
                text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
                shown.append(f"{param.name}={text.lower() if isinstance(value, bool) else text}")
        return " ".join([self.op_name, *shown])


def _placeholders(outputs: list[Tensor]) -> list[Tensor]:
    return [op.output for op in post_order(outputs) if isinstance(op, PlaceholderOp)]


def count_flops(outputs: list[Tensor]) -> float:
    """Arithmetic operations of a computation: per compute, the points of its iteration
    space times the arithmetic nodes of its body outside load indices (a reduction's
    combine counts one) and, of a select, its costlier side only (one side is computed)."""
    total = 0.0
    for op in post_order(outputs):
        if not isinstance(op, ComputeOp):
            continue
        body = op.body
        points = math.prod(op.shape)
        per_point = 0
        if isinstance(body, Reduce):
            points *= math.prod(a.extent for a in body.axis)
            per_point = 1
            body = body.source
        total += points * (per_point + _arithmetic(body))
    return total


def _arithmetic(e: Expr) -> int:
    """The arithmetic nodes of ``e``, not counting the index arithmetic of loads (a strided
    window's ``oh * 2 + ry``) and, of a select, the condition and the cheaper side."""
    if isinstance(e, Load):
        return 0
    if isinstance(e, Select):
        return max(_arithmetic(e.true_value), _arithmetic(e.false_value))
    own = (isinstance(e, Binary) and not isinstance(e, Compare | Logic)) or isinstance(e, Call)
    return int(own) + sum(_arithmetic(c) for c in e.children())

