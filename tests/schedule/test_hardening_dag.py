"""Issue 12, findings 1-3: workload DAGs from users cannot read out of bounds, and every
DAG the decoder accepts can be keyed, counted, printed, re-encoded and lowered without
exhausting Python's recursion limit; what it refuses, it refuses with a clear ValueError."""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from schedule import Workload, te
from schedule.dag import canonical_text, post_order, workload_key
from schedule.ops import transform
from schedule.schedule import create_schedule
from schedule.serialize import (
    MAX_COMPUTES,
    MAX_DEPTH,
    MAX_INLINED_DEPTH,
    MAX_TENSORS,
    from_json,
    to_json,
)
from schedule.workload import count_flops
from tests.schedule.test_ops import REGISTRY_CASES

build_module = importlib.import_module("schedule.build")  # the package's 'build' is a function

SUM = {"name": "sum", "combine": ["+", ["var", "x"], ["var", "y"]],
       "identity": ["const", "float32", 0.0]}


def _stack_depth() -> int:
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


@contextmanager
def _recursion_limit(headroom: int) -> Iterator[None]:
    """Only ``headroom`` frames left above the current stack."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + headroom)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _with_frames(n: int, fn: Callable[[], Any]) -> Any:
    """Call ``fn`` with ``n`` more frames on the stack (a server's or worker's own frames)."""
    return fn() if n <= 0 else _with_frames(n - 1, fn)


def _views(w: Workload) -> None:
    """Everything the API and the tuner derive from a workload."""
    assert len(w.key) == 32
    assert w.flops >= 0
    assert w.canonical_text.startswith("placeholder")
    assert repr(w) and w.describe()
    again = Workload.from_json(json.loads(json.dumps(w.to_json())))
    assert again.key == w.key
    assert Workload.from_tensors(w.tensors()[-w.num_outputs:]).key == w.key


def _lower_and_generate(w: Workload, monkeypatch: pytest.MonkeyPatch,
                        inline: bool = False) -> None:
    """Lower and generate C (the C compiler itself is stubbed out: it is not what recurses,
    and compiling hundreds of stages takes a while)."""
    monkeypatch.setattr(build_module, "compile_source",
                        lambda source, flags, timeout=None: ("stub.so", 0.0))
    args = w.tensors()
    s = create_schedule(args[-w.num_outputs:])
    if inline:
        outputs = {t.name for t in args[-w.num_outputs:]}
        for stage in s.stages:
            if not stage.is_placeholder and stage.op.name not in outputs:
                stage.compute_inline()
    artifact = build_module.compile_schedule(s, args, "cpu -isa=generic -cores=1")
    assert artifact.source


def _placeholder(name: str = "A", shape: list[int] | None = None,
                 dtype: str = "float32") -> dict[str, Any]:
    return {"name": name, "op": "placeholder", "shape": shape or [16], "dtype": dtype}


def _elementwise_chain(n: int) -> dict[str, Any]:
    """A placeholder and ``n`` elementwise computes, each reading the one before."""
    tensors = [_placeholder()]
    prev = "A"
    for k in range(n):
        tensors.append({"name": f"T{k}", "op": "compute", "shape": [16], "axis": ["i"],
                        "body": ["+", ["load", prev, ["var", "i"]], ["const", "float32", 1.0]],
                        "tag": ""})
        prev = f"T{k}"
    return {"version": 1, "tensors": tensors, "outputs": [prev]}


def _largest_dag() -> dict[str, Any]:
    """MAX_TENSORS tensors, MAX_COMPUTES of them computes in one chain (reductions, which
    no schedule inlines), the rest placeholders that the chain reads."""
    n_inputs = MAX_TENSORS - MAX_COMPUTES
    tensors = [_placeholder(f"P{k}", [4]) for k in range(n_inputs)]
    prev, p = "P0", 1
    for k in range(MAX_COMPUTES):
        source: list[Any] = ["load", prev, ["+", ["var", "i"], ["var", "r"]]]
        for _ in range(3):
            if p < n_inputs:
                source = ["+", source, ["load", f"P{p}", ["var", "i"]]]
                p += 1
        tensors.append({"name": f"T{k}", "op": "compute", "shape": [4], "axis": ["i"],
                        "reduce_axis": [["r", 1]],
                        "body": ["reduce", SUM, source, ["r"], None], "tag": ""})
        prev = f"T{k}"
    assert p == n_inputs and len(tensors) == MAX_TENSORS
    return {"version": 1, "tensors": tensors, "outputs": [prev]}


def _deep_expression(levels: int) -> dict[str, Any]:
    """One compute whose body nests ``levels`` JSON levels deep."""
    index: list[Any] = ["var", "i"]
    for _ in range(levels - 1):  # each '+' adds one level above the load
        index = ["+", index, ["const", "int32", 0]]
    return {"version": 1, "tensors": [
        _placeholder(),
        {"name": "B", "op": "compute", "shape": [16], "axis": ["i"],
         "body": ["load", "A", index], "tag": ""}], "outputs": ["B"]}


def _python_chain(n: int) -> te.Tensor:
    t = te.placeholder((16,), name="A")
    for k in range(n - 1):
        t = te.compute((16,), lambda i, t=t: t[i] + 1.0, name=f"T{k}")
    return t


# ---------------------------------------------------------------------------- finding 3


def test_views_of_a_1000_tensor_chain_need_no_recursion() -> None:
    out = _python_chain(1000)
    with _recursion_limit(60):  # far less than the chain is long
        ops = post_order([out])
        key = workload_key(out)
        text = canonical_text(out)
        flops = count_flops([out])
        doc = to_json(out)
    assert len(ops) == 1000 and ops[0].name == "A" and ops[-1] is out.op
    assert len(key) == 32 and text.count("\n") == 1000 and flops == 999 * 16
    assert len(doc["tensors"]) == 1000


def test_a_1000_tensor_elementwise_chain_is_refused_clearly() -> None:
    # it is within MAX_TENSORS, but a schedule may inline the chain into one expression
    # 1000 levels deep, which lowering cannot handle: refused, never a RecursionError
    with pytest.raises(ValueError, match="nests .* levels|compute tensors"):
        Workload.from_tensors(_python_chain(1000))
    with pytest.raises(ValueError, match="nests .* levels|compute tensors"):
        Workload.from_json({"dag": _elementwise_chain(999)})


def test_the_largest_accepted_dag_has_every_view_and_lowers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _largest_dag()
    w = Workload.from_json({"dag": doc})
    _with_frames(300, lambda: _views(w))
    _with_frames(100, lambda: _lower_and_generate(w, monkeypatch))
    with _recursion_limit(60):
        assert len(Workload.from_json({"dag": doc}).key) == 32
    too_many = json.loads(json.dumps(doc))
    too_many["tensors"].append(too_many["tensors"][-1] | {"name": "extra"})
    with pytest.raises(ValueError, match=f"1 to {MAX_TENSORS}"):
        from_json(too_many)


def test_more_computes_than_the_limit_are_refused() -> None:
    tensors = [_placeholder()]
    for k in range(MAX_COMPUTES + 1):
        tensors.append({"name": f"T{k}", "op": "compute", "shape": [16], "axis": ["i"],
                        "body": ["load", "A", ["var", "i"]], "tag": ""})
    doc = {"version": 1, "tensors": tensors, "outputs": ["T0"]}
    with pytest.raises(ValueError, match=f"more than {MAX_COMPUTES} compute tensors"):
        from_json(doc)


def _longest_accepted_chain() -> int:
    with pytest.raises(ValueError, match="nests") as info:
        from_json(_elementwise_chain(MAX_INLINED_DEPTH + 10))
    first_refused = int(re.search(r"tensor 'T(\d+)'", str(info.value)).group(1))
    from_json(_elementwise_chain(first_refused))  # T0 .. T(first_refused - 1)
    return first_refused


def test_the_longest_accepted_elementwise_chain_lowers_fully_inlined(
        monkeypatch: pytest.MonkeyPatch) -> None:
    n = _longest_accepted_chain()
    assert MAX_INLINED_DEPTH - 5 <= n <= MAX_INLINED_DEPTH
    w = Workload.from_json({"dag": _elementwise_chain(n)})
    _with_frames(300, lambda: _views(w))
    _with_frames(100, lambda: _lower_and_generate(w, monkeypatch, inline=True))


def test_expressions_at_the_depth_limit_have_every_view_and_lower(
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = Workload.from_json({"dag": _deep_expression(MAX_DEPTH)})
    _with_frames(300, lambda: _views(w))
    _with_frames(100, lambda: _lower_and_generate(w, monkeypatch))
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH}"):
        from_json(_deep_expression(MAX_DEPTH + 2))


def test_post_order_keeps_the_depth_first_order() -> None:
    a = te.placeholder((4,), name="a")
    b = te.placeholder((4,), name="b")
    c = te.compute((4,), lambda i: a[i] + b[i], name="c")
    d = te.compute((4,), lambda i: b[i] * c[i], name="d")
    e = te.compute((4,), lambda i: d[i] - a[i], name="e")
    assert [op.name for op in post_order([e])] == ["b", "a", "c", "d", "e"]
    assert [op.name for op in post_order([c, e])] == ["a", "b", "c", "d", "e"]


# ---------------------------------------------------------------------------- findings 1-2


def _one_load(index: Any, a_shape: int = 16, out_shape: int = 16) -> dict[str, Any]:
    return {"version": 1, "tensors": [
        _placeholder("A", [a_shape]),
        {"name": "B", "op": "compute", "shape": [out_shape], "axis": ["i"],
         "body": index, "tag": ""}], "outputs": ["B"]}


def _i() -> list[Any]:
    return ["var", "i"]


def _c(v: int) -> list[Any]:
    return ["const", "int32", v]


def test_the_reported_far_read_is_refused_naming_tensor_dimension_and_range() -> None:
    doc = _one_load(["load", "A", ["*", _i(), _c(200000000)]])
    with pytest.raises(ValueError) as info:
        Workload.from_json({"dag": doc})
    message = str(info.value)
    assert "A" in message and "index 0" in message and "dimension 0" in message
    assert "[0, 3000000000]" in message and "16 element" in message


def test_a_small_overrun_is_refused() -> None:
    with pytest.raises(ValueError, match=r"reads A out of bounds: index 0 \(i \+ 64\) "
                                         r"ranges over \[64, 79\]"):
        from_json(_one_load(["load", "A", ["+", _i(), _c(64)]]))
    with pytest.raises(ValueError, match=r"ranges over \[-1, 14\]"):
        from_json(_one_load(["load", "A", ["-", _i(), _c(1)]]))


def test_a_python_built_overrun_is_refused_too() -> None:
    a = te.placeholder((16,), name="A")
    b = te.compute((16,), lambda i: a[i + 64], name="B")
    with pytest.raises(ValueError, match="out of bounds"):
        Workload.from_tensors(b)


@pytest.mark.parametrize(("index", "why"), [
    (["cast", "int32", ["load", "A", _i()]], "depends on data"),
    (["cast", "int32", ["load", "N", _i()]], "out of bounds"),  # int32 data: any value
    (["floordiv", ["*", _i(), _c(1 << 30)], _c(1 << 30)], "overflow"),
    (["floordiv", _i(), ["-", _i(), _i()]], "depends on data|range is unknown"),  # / 0
    (["floormod", _i(), _c(0)], "depends on data|range is unknown"),
])
def test_unbounded_indices_are_refused(index: Any, why: str) -> None:
    doc = _one_load(["load", "A", index])
    doc["tensors"].insert(1, _placeholder("N", [16], "int32"))
    with pytest.raises(ValueError, match=why):
        from_json(doc)


def test_constants_must_fit_their_dtype() -> None:
    with pytest.raises(ValueError, match="does not fit int32"):
        from_json(_one_load(["load", "A", _c(1 << 40)]))


@pytest.mark.parametrize("index", [
    ["-", _c(15), _i()],
    ["floormod", ["*", _i(), _c(7)], _c(16)],
    ["floordiv", ["*", _i(), _c(3)], _c(3)],
    ["min", ["max", ["-", _i(), _c(5)], _c(0)], _c(15)],
    ["select", ["<", _i(), _c(8)], _i(), ["-", _i(), _c(8)]],
    ["cast", "int32", ["load", "U", _i()]],  # a gather by uint8 data from 256 entries
])
def test_bounded_indices_are_accepted(index: Any) -> None:
    doc = _one_load(["load", "A", index], a_shape=256 if index[0] == "cast" else 16)
    doc["tensors"].insert(1, _placeholder("U", [16], "uint8"))
    from_json(doc)


def test_guards_narrow_the_ranges_of_what_they_guard() -> None:
    zero = ["const", "float32", 0.0]
    shifted = ["load", "A", ["-", _i(), _c(2)]]
    guarded = ["select", ["and", [">=", _i(), _c(2)], ["<", _i(), _c(18)]], shifted, zero]
    from_json(_one_load(guarded, out_shape=20))
    # the guard may be written the other way round, negated, or on the index itself
    flipped = ["select", ["or", ["<", _i(), _c(2)], [">=", _i(), _c(18)]], zero, shifted]
    from_json(_one_load(flipped, out_shape=20))
    negated = ["select", ["not", ["or", [">", _c(2), _i()], ["<=", _c(18), _i()]]],
               shifted, zero]
    from_json(_one_load(negated, out_shape=20))
    on_index = ["select", ["and", [">=", ["-", _i(), _c(2)], _c(0)],
                           ["<", ["-", _i(), _c(2)], _c(16)]], shifted, zero]
    from_json(_one_load(on_index, out_shape=20))
    # half a guard is not enough
    half = ["select", [">=", _i(), _c(2)], shifted, zero]
    with pytest.raises(ValueError, match=r"ranges over \[0, 17\]"):
        from_json(_one_load(half, out_shape=20))
    # the guard protects its own side only
    wrong_side = ["select", ["and", [">=", _i(), _c(2)], ["<", _i(), _c(18)]], zero, shifted]
    with pytest.raises(ValueError, match="out of bounds"):
        from_json(_one_load(wrong_side, out_shape=20))


def test_a_guard_on_a_sum_of_axes_protects_a_padded_window() -> None:
    # B[o] = sum over r of (o + r >= 1 && o + r < 17 ? A[o + r - 1] : 0): padding 1, window 3
    window = ["+", ["var", "o"], ["var", "r"]]
    guard = ["and", [">=", window, _c(1)], ["<", window, _c(17)]]
    source = ["select", guard, ["load", "A", ["-", window, _c(1)]], ["const", "float32", 0.0]]
    doc = {"version": 1, "tensors": [
        _placeholder("A", [16]),
        {"name": "B", "op": "compute", "shape": [16], "axis": ["o"], "reduce_axis": [["r", 3]],
         "body": ["reduce", SUM, source, ["r"], None], "tag": ""}], "outputs": ["B"]}
    from_json(doc)
    # the same with the guard as the reduction's where-condition
    doc["tensors"][1]["body"] = ["reduce", SUM, ["load", "A", ["-", window, _c(1)]], ["r"],
                                 guard]
    from_json(doc)
    doc["tensors"][1]["body"] = ["reduce", SUM, ["load", "A", ["-", window, _c(1)]], ["r"],
                                 None]
    with pytest.raises(ValueError, match=r"ranges over \[-1, 16\]"):
        from_json(doc)


def test_a_reducer_combine_cannot_read_out_of_bounds() -> None:
    reducer = dict(SUM, combine=["+", ["var", "x"], ["load", "A", _c(99)]])
    doc = {"version": 1, "tensors": [
        _placeholder("A", [16]),
        {"name": "B", "op": "compute", "shape": [1], "axis": ["i"], "reduce_axis": [["r", 16]],
         "body": ["reduce", reducer, ["load", "A", ["var", "r"]], ["r"], None], "tag": ""}],
        "outputs": ["B"]}
    with pytest.raises(ValueError, match="reducer combine: reads A out of bounds"):
        from_json(doc)


def test_shapes_are_bounded() -> None:
    doc = _one_load(["load", "A", _i()])
    doc["tensors"][0]["shape"] = [1 << 40]
    with pytest.raises(ValueError, match="too large"):
        from_json(doc)
    doc = _one_load(["load", "A", _i()])
    doc["tensors"][1]["reduce_axis"] = [["r", 1 << 40]]
    with pytest.raises(ValueError, match="reduce_axis"):
        from_json(doc)


@pytest.mark.parametrize("case", REGISTRY_CASES,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(REGISTRY_CASES)])
def test_every_registered_op_round_trips_through_the_checked_decoder(
        case: tuple[str, dict[str, Any]]) -> None:
    name, params = case
    w = Workload.op(name, **params)
    dag = Workload.from_tensors(w.tensors()[-w.num_outputs:])
    assert dag.key == w.key


def test_layout_ops_round_trip_through_the_checked_decoder() -> None:
    a = te.placeholder((4, 6), name="A")
    b = te.placeholder((3, 6), name="B")
    for out in (transform.pad(a, [1, 2], [3, 0]), transform.reshape(a, [3, 8]),
                transform.reshape(a, [24]), transform.concatenate([a, b, a], 0),
                transform.concatenate([a, a], 1), transform.transpose(a)):
        assert Workload.from_tensors(out).key == workload_key(out)
