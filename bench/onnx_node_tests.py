"""ONNX backend node tests per operator: for each ONNX operator the importer supports, run
every node test case of onnx's collection whose graph uses it (the ``_expanded`` function
bodies are counted apart) through ``ir.frontend.from_onnx`` and the IR interpreter (or,
with ``--executor graph``, built for the graph executor with compiled kernels), check the
outputs as ONNX's runner does (exact dtypes and shapes, values to the case's rtol/atol),
and print a table ``op: passed / total`` with the failing cases. For the graph executor a
second count says how many passing cases ran every fused group as a compiled kernel (the
others ran a group without a lowering on numpy inside the compiled model).

    .venv/bin/python bench/onnx_node_tests.py [--op Conv --op Gemm] [--executor graph]
        [--verbose]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx.backend.test.loader import load_model_tests  # noqa: E402
from onnx.backend.test.runner import Runner  # noqa: E402

from ir.frontend import supported_ops  # noqa: E402
from tests.ir.frontend.onnx_backend import EXECUTORS, GraphBackend, IRBackend  # noqa: E402


def _normalize(value: object) -> object:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return value


def run_case(case: object, backend: type[IRBackend]) -> tuple[str | None, bool]:
    """(None when the case passes, else the first line of what went wrong; whether every
    run compiled all its fused groups)."""
    all_compiled = True
    try:
        rep = backend.prepare(case.model, "CPU")
        for inputs, expected in case.data_sets:
            outputs = rep.run([_normalize(x) for x in inputs])
            all_compiled = all_compiled and rep.last.all_compiled
            Runner.assert_similar_outputs([_normalize(x) for x in expected], list(outputs),
                                          rtol=case.rtol, atol=case.atol)
    except Exception as exc:  # each failure is reported, not raised
        text = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {text[0] if text else ''}"[:160], False
    return None, all_compiled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", action="append", help="only these ONNX ops (repeatable)")
    parser.add_argument("--verbose", action="store_true", help="print each failure's reason")
    parser.add_argument("--executor", choices=EXECUTORS, default="interpreter")
    args = parser.parse_args()
    graph = args.executor == "graph"
    backend = GraphBackend if graph else IRBackend
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    ops = args.op or supported_ops()
    # an ``_expanded`` case is the function body of the op its unexpanded twin tests
    op_types = {c.name: {n.op_type for n in c.model.graph.node} for c in cases}
    by_op: dict[str, list] = defaultdict(list)
    for case in cases:
        base, expanded, _ = case.name.partition("_expanded")
        used = op_types.get(base, set()) if expanded else op_types[case.name]
        for op in ops:
            if op in used:
                by_op[op + (" (expanded)" if expanded else "")].append(case)
    passed_all = total_all = 0
    print(f"onnx {onnx.__version__}, opset {onnx.defs.onnx_opset_version()}; "
          f"{len(cases)} node test cases in the collection")
    print()
    print(f"executor: {args.executor}")
    print()
    print("| op | passed / total |" + (" all kernels compiled |" if graph else ""))
    print("|---|---|" + ("---|" if graph else ""))
    failures = {}
    compiled_all = 0
    for op in sorted(by_op):
        results = [(c.name, *run_case(c, backend)) for c in by_op[op]]
        failures[op] = [(n, why) for n, why, _ in results if why is not None]
        compiled = sum(all_compiled for _, _, all_compiled in results)
        passed_all += len(results) - len(failures[op])
        compiled_all += compiled
        total_all += len(results)
        print(f"| {op} | {len(results) - len(failures[op])} / {len(results)} |" +
              (f" {compiled} |" if graph else ""))
    print()
    print("Failing cases:")
    print()
    for op, failed in failures.items():
        if not failed:
            continue
        names = [n.removeprefix("test_") for n, _ in failed]
        if len(names) > 8 and not args.verbose:
            names = [*names[:6], f"... ({len(names) - 6} more; --verbose lists them)"]
        print(f"- {op}: " + ", ".join(names))
        if args.verbose:
            for name, why in failed:
                print(f"    {name}: {why}")
    print()
    if graph:
        print(f"{compiled_all} of the passing cases ran every fused group compiled")
    print(f"total: {passed_all} / {total_all} passed "
          f"({time.perf_counter() - start:.1f} s, numpy {np.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
