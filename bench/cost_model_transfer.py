"""Does one cost model trained on all of a model's tasks rank each task's programs better
than a model trained on that task alone?

    PYTHONPATH=. .venv/bin/python bench/cost_model_transfer.py --db sqlite:////tmp/r18.db
        [--known 0,16,32,64] [--target "cpu -isa=avx512 -cores=2"]

Replays the measurements of a tuning database (e.g. one ``bench/models_e2e.py --tune``
left). For each task, its records in the order they were measured are split: the first
``known`` are what its search had learnt at that point, the rest are what it went on to
measure (the held-out set). Two XGBoost models (the search's default) are trained:
**own** on the task's ``known`` records only, **shared** on those plus every record of the
other tasks (each task's labels normalised within the task, as the tuner's job-wide model
does). Both score the held-out programs; reported per ``known``, averaged over tasks:
pairwise ranking accuracy (pairs more than 10% apart), top-8 recall and a-peak@8 (the best
held-out program among the 8 best-scored, over the best held-out program). With
``known=0`` the own model has nothing to learn from and scores with the analytic rule.

Reconfirmations and disturbed figures are left out; failed programs count as throughput 0.
Features come from the stored steps re-lowered here; nothing is compiled or timed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_model import extract_features, make_cost_model
from cost_model.metrics import average_peak, pairwise_accuracy, top_k_recall
from db import Database
from schedule import Steps, Workload, lower, make_schedule

TOP = 8


def task_programs(db: Database, target: str | None) -> dict[str, tuple[list, list[float]]]:
    """Per workload key: the features and throughputs of its measured programs, in the
    order they were measured."""
    by_task: dict[str, tuple[list, list[float]]] = defaultdict(lambda: ([], []))
    workloads: dict[str, Workload] = {}
    for record in db.iter_records(**({"target": target} if target else {})):
        measure = record.measure if isinstance(record.measure, dict) else {}
        origin = measure.get("origin")
        if measure.get("disturbed") is True or (isinstance(origin, dict)
                                                and origin.get("reconfirm")):
            continue
        workload = workloads.setdefault(record.workload_key,
                                        Workload.from_json(record.workload))
        try:
            s, args = make_schedule(workload, Steps(record.steps))
            features = extract_features(lower(s, args, unroll=False))
        except ValueError:
            continue
        cost = record.median_cost
        feats, throughputs = by_task[record.workload_key]
        feats.append(features)
        throughputs.append(1.0 / cost if cost else 0.0)
    return dict(by_task)


def scores(train: list[tuple[list, list[float], str]], test: list) -> np.ndarray:
    model = make_cost_model("xgb")
    model.update([f for feats, _, _ in train for f in feats],
                 [t for _, throughputs, _ in train for t in throughputs],
                 [group for feats, _, group in train for _ in feats])
    return model.predict(test)


def evaluate(tasks: dict[str, tuple[list, list[float]]], known: int) -> dict[str, float]:
    rows: dict[str, list[float]] = defaultdict(list)
    for key, (feats, throughputs) in tasks.items():
        held_feats, held = feats[known:], np.asarray(throughputs[known:])
        if len(held) < 2 * TOP or held.max() <= 0:
            continue
        own = [(feats[:known], throughputs[:known], key)]
        others = [(f, t, k) for k, (f, t) in tasks.items() if k != key]
        for name, train in (("own", own), ("shared", own + others)):
            predicted = scores(train, held_feats)
            rows[f"{name} pairwise"].append(pairwise_accuracy(predicted, held, 1.1))
            rows[f"{name} top{TOP}"].append(top_k_recall(predicted, held, TOP))
            rows[f"{name} a-peak@{TOP}"].append(average_peak(predicted, held, TOP))
    return {name: statistics.fmean(v) for name, v in rows.items()} | {
        "tasks": len(rows.get("own pairwise", []))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="a tuning database (SQLAlchemy URL)")
    parser.add_argument("--known", default="0,16,32,64",
                        help="records of the task the models know, comma-separated")
    parser.add_argument("--target", help="only this target's records (default: all)")
    args = parser.parse_args()
    db = Database(args.db)
    tasks = task_programs(db, args.target)
    print(f"{len(tasks)} tasks, {sum(len(t) for _, t in tasks.values())} programs")
    header = ["known", "tasks"] + [f"{m} {w}" for m in ("pairwise", f"top{TOP}",
                                                         f"a-peak@{TOP}")
                                   for w in ("own", "shared")]
    print(" | ".join(header))
    for known in (int(k) for k in args.known.split(",")):
        result = evaluate(tasks, known)
        cells = [str(known), str(result["tasks"])] + [
            f"{result[f'{w} {m}']:.3f}" for m in ("pairwise", f"top{TOP}", f"a-peak@{TOP}")
            for w in ("own", "shared")]
        print(" | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
