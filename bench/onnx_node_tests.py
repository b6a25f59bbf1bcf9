"""ONNX backend node tests per operator: for each ONNX operator the importer supports, run
every node test case of onnx's collection whose graph uses it (the ``_expanded`` function
bodies are counted apart) through ``ir.frontend.from_onnx`` and the IR interpreter, check
the outputs as ONNX's runner does (exact dtypes and shapes, values to the case's rtol/atol),
and print a table ``op: passed / total`` with the failing cases.

    .venv/bin/python bench/onnx_node_tests.py [--op Conv --op Gemm] [--verbose]
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
from tests.ir.frontend.onnx_backend import IRBackend  # noqa: E402


def _normalize(value: object) -> object:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return value


def run_case(case: object) -> str | None:
    """None when the case passes, else the first line of what went wrong."""
    try:
        rep = IRBackend.prepare(case.model, "CPU")
        for inputs, expected in case.data_sets:
            outputs = rep.run([_normalize(x) for x in inputs])
            Runner.assert_similar_outputs([_normalize(x) for x in expected], list(outputs),
                                          rtol=case.rtol, atol=case.atol)
    except Exception as exc:  # each failure is reported, not raised
        text = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", action="append", help="only these ONNX ops (repeatable)")
    parser.add_argument("--verbose", action="store_true", help="print each failure's reason")
    args = parser.parse_args()
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
    print("| op | passed / total |")
    print("|---|---|")
    failures = {}
    for op in sorted(by_op):
        results = [(c.name, run_case(c)) for c in by_op[op]]
        failures[op] = [(n, why) for n, why in results if why is not None]
        passed_all += len(results) - len(failures[op])
        total_all += len(results)
        print(f"| {op} | {len(results) - len(failures[op])} / {len(results)} |")
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
    print(f"total: {passed_all} / {total_all} passed "
          f"({time.perf_counter() - start:.1f} s, numpy {np.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
