"""Cost-model speed: feature extraction per program and training / prediction time.

    python bench/cost_model_features.py [--programs 300] [--size 256] [--json]

Samples GEMM schedules of the cost-model tests' family (tiling, loop orders, cache stages,
vectorize / unroll / parallel), lowers each in both forms (``unroll=False``, what the search
featurizes, and the full form code generation uses), times ``extract_features`` on every
program, and trains each model on synthetic labels (the analytic estimate times noise: only
the time matters here) with the search's batch pattern, 64 programs per ``update``.
Also times the default schedules of a few other operators. Nothing is compiled.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_model import analytic_scores, extract_features, make_cost_model
from schedule import Workload, lower, te
from tests.cost_model.gemm_family import build_schedule, sample_config

OTHER_OPS = {
    "conv2d_nchw": dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1),
    "softmax": dict(M=128, N=1024),
    "layer_norm": dict(M=128, N=768),
}


def _time(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run(programs: int, size: int) -> dict:
    rng = random.Random(0)
    funcs, full_funcs = [], []
    lower_s = full_lower_s = 0.0
    for _ in range(programs):
        s, args = build_schedule(sample_config(rng, size), size)
        start = time.perf_counter()
        funcs.append(lower(s, args, unroll=False))
        middle = time.perf_counter()
        full_funcs.append(lower(s, args))
        lower_s += (middle - start) / programs
        full_lower_s += (time.perf_counter() - middle) / programs
    per_program = [_time(lambda f=f: extract_features(f)) for f in funcs]
    per_full = [_time(lambda f=f: extract_features(f)) for f in full_funcs]
    feats = [extract_features(f) for f in funcs]
    rows = [f.shape[0] for f in feats]
    report: dict = {
        "programs": programs,
        "gemm_size": size,
        "lower_ms_per_program": {"analysis_form": 1e3 * lower_s, "full": 1e3 * full_lower_s},
        "features_ms_per_program": {"median": 1e3 * float(np.median(per_program)),
                                    "p90": 1e3 * float(np.percentile(per_program, 90)),
                                    "max": 1e3 * float(np.max(per_program)),
                                    "full_form_median": 1e3 * float(np.median(per_full))},
        "rows_per_program": float(np.mean(rows)),
        "other_ops_features_ms": {},
        "models": {},
    }
    for op, params in OTHER_OPS.items():
        args = Workload.op(op, **params).tensors()
        func = lower(te.create_schedule(args[-1]), args, unroll=False)
        report["other_ops_features_ms"][op] = 1e3 * _time(lambda f=func: extract_features(f))
    noise = np.random.default_rng(0).uniform(0.8, 1.25, len(feats))
    thr = np.exp2(analytic_scores(feats, cores=1)) * noise
    for name in ("xgb", "sklearn", "analytic", "random"):
        model = make_cost_model(name)
        updates = []
        for start_i in range(0, len(feats), 64):
            batch = slice(start_i, start_i + 64)
            t0 = time.perf_counter()
            model.update(feats[batch], thr[batch], group="gemm")
            updates.append(time.perf_counter() - t0)
        predict = _time(lambda m=model: m.predict(feats))
        report["models"][name] = {
            "update_s_per_batch_of_64": [round(u, 3) for u in updates],
            "predict_ms_per_program": 1e3 * predict / len(feats),
            "snapshot_bytes": len(model.save()),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=300)
    parser.add_argument("--size", type=int, default=256, help="GEMM M = N = K")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    opts = parser.parse_args()
    report = run(opts.programs, opts.size)
    if opts.json:
        print(json.dumps(report, indent=2))
        return
    f = report["features_ms_per_program"]
    lw = report["lower_ms_per_program"]
    print(f"GEMM {opts.size}: {opts.programs} programs, {report['rows_per_program']:.1f} rows "
          f"each; lower(unroll=False) {lw['analysis_form']:.1f} ms/program, full "
          f"{lw['full']:.1f} ms")
    print(f"extract_features: median {f['median']:.2f} ms, p90 {f['p90']:.2f} ms, "
          f"max {f['max']:.2f} ms per program (full form: median {f['full_form_median']:.2f} ms)")
    for op, ms in report["other_ops_features_ms"].items():
        print(f"extract_features {op} (default schedule): {ms:.2f} ms")
    for name, m in report["models"].items():
        updates = ", ".join(f"{u:.2f}" for u in m["update_s_per_batch_of_64"])
        print(f"{name:9s} update per batch of 64 (s): {updates}; predict "
              f"{m['predict_ms_per_program']:.3f} ms/program; snapshot {m['snapshot_bytes']} B")


if __name__ == "__main__":
    main()
