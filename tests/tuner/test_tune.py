"""tune() end to end on this machine: records committed, best reported and reconfirmed,
warm start from earlier jobs (never from another target), cancel, resume, task states,
the scheduler sharing a budget, apply_best / build_best."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from db import Database, JobStateError
from schedule import Workload
from tuner import (
    JobSpec,
    SpecError,
    UntunedWarning,
    apply_best,
    build_best,
    cancel_job,
    resume_job,
    run_job,
    submit_job,
    tune,
)
from tuner.records import measurement_record
from workers import ErrorKind, MeasureInput, MeasureResult, MeasureSettings, Provenance

FAST = MeasureSettings(repeat=2, min_repeat_ms=5)
SMALL = Workload.op("matmul", M=32, N=32, K=32)


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(f"sqlite:///{tmp_path / 'tune.db'}")
    yield database
    database.close()


def _job_steps(db: Database, job_id: str) -> list[str]:
    return [r.canonical("steps") for r in db.iter_records(job_id=job_id)
            if not r.measure.get("origin", {}).get("reconfirm")]


def _check_correct(module, workload: Workload) -> None:
    inputs = workload.random_inputs(3)
    (expected,) = workload.reference(inputs)
    out = np.zeros_like(expected)
    module(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_tune_measures_commits_and_reports_the_confirmed_best(db: Database):
    events = []
    result = tune(SMALL, "cpu", trials=8, db=db, batch_size=4, reconfirm=2, measure=FAST,
                  on_event=events.append)
    assert result.status == "succeeded" and result.trials == 8
    task = result.task(SMALL)
    assert task.state == "done" and task.confirmed and task.trials == 8
    best = result.best(SMALL)
    assert best is not None and best.latency_s > 0 and best.gflops == pytest.approx(
        SMALL.flops / best.latency_s / 1e9)
    steps = _job_steps(db, result.job_id)
    assert len(steps) == 8 and len(set(steps)) == 8  # every trial stored, none twice
    assert db.count_records(job_id=result.job_id) == 8 + 2  # plus the reconfirmations
    assert [e["type"] for e in events] == ["batch", "batch", "done"]
    assert events[0]["trials"] == 4 and events[-1]["status"] == "succeeded"
    job = db.get_job(result.job_id)
    assert job.status == "succeeded" and job.progress["tasks"][0]["trials"] == 8
    assert len(job.progress["tasks"][0]["curve"]) >= 2
    _check_correct(build_best(SMALL, "cpu", db), SMALL)
    assert apply_best(SMALL, "cpu", db) == db.best(SMALL.key, result.target).records[0].steps


def test_warm_start_never_remeasures_and_ignores_other_targets(db: Database):
    first = tune(SMALL, "cpu", trials=6, db=db, batch_size=6, reconfirm=0, measure=FAST)
    fake = dataclasses.replace(
        db.best(SMALL.key, first.target).records[0], target="cpu -isa=avx2 -cores=2",
        costs=[1e-12], job_id="other-target")
    db.add_records([fake])
    second = tune(SMALL, "cpu", trials=6, db=db, batch_size=6, reconfirm=0, measure=FAST,
                  seed=1)
    assert not set(_job_steps(db, first.job_id)) & set(_job_steps(db, second.job_id))
    best = second.best(SMALL)
    assert best.latency_s > 1e-9  # the other target's record never counts
    assert best.latency_s <= first.best(SMALL).latency_s  # the earlier best is known


def test_a_task_without_a_valid_candidate_has_an_explicit_state(db: Database):
    hopeless = dataclasses.replace(FAST, run_timeout=1e-6)
    result = tune(SMALL, "cpu", trials=4, db=db, batch_size=4, measure=hopeless)
    task = result.task(SMALL)
    assert task.state == "no_valid_candidate" and result.best(SMALL) is None
    assert result.errors() == {"run_timeout": 4}
    assert db.get_job(result.job_id).progress["tasks"][0]["errors"] == {"run_timeout": 4}


def test_two_workloads_share_the_budget_and_the_heavier_gets_more(db: Database):
    light, heavy = Workload.op("matmul", M=8, N=8, K=8), Workload.op("matmul", M=96, N=96,
                                                                     K=96)
    result = tune([light, heavy, light], "cpu", trials=20, db=db, batch_size=4, reconfirm=0,
                  measure=FAST)
    assert len(result.tasks) == 2  # identical workloads are one task, weights added
    assert result.task(light).weight == 2.0
    assert result.trials == 20
    assert result.task(heavy).trials > result.task(light).trials


def test_cancel_stops_at_the_batch_boundary_and_resume_goes_on(db: Database):
    job = submit_job(db, JobSpec.from_json({
        "workloads": [{"op": "matmul", "params": {"M": 32, "N": 32, "K": 32}}],
        "target": "cpu", "trials": 12, "batch_size": 4, "reconfirm": 0,
        "measure": {"repeat": 2, "min_repeat_ms": 5}}))

    def cancel_after_first_batch(event):
        if event["type"] == "batch":
            cancel_job(db, job.id)

    result = run_job(db, job.id, on_event=cancel_after_first_batch)
    assert result.status == "cancelled" and result.trials == 4
    assert db.get_job(job.id).status == "cancelled"
    with pytest.raises(JobStateError):
        run_job(db, job.id)  # only a queued job runs
    resumed = resume_job(db, job.id)
    assert resumed.status == "succeeded" and resumed.trials == 12
    steps = _job_steps(db, job.id)
    assert len(steps) == 12 and len(set(steps)) == 12


def test_a_running_job_that_still_reports_is_not_resumed_without_force(db: Database):
    job = submit_job(db, {"workloads": [{"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}],
                          "target": "cpu", "trials": 2})
    db.update_job(job.id, status="running", progress={"heartbeat": time.time()})
    with pytest.raises(JobStateError, match="--force"):
        resume_job(db, job.id)


def test_apply_best_without_records_warns_and_gives_a_correct_default(db: Database):
    wl = Workload.op("softmax", M=4, N=32)
    with pytest.warns(UntunedWarning, match="no tuning record"):
        module = build_best(wl, "cpu", db)
    _check_correct(module, wl)


@pytest.mark.parametrize("doc, message", [
    ({"workloads": [], "target": "cpu", "trials": 4}, "at least one workload"),
    ({"workloads": [{"op": "matmull"}], "target": "cpu", "trials": 4}, "unknown operator"),
    ({"workloads": [{"op": "matmul", "params": {"M": 4}}], "target": "cpu", "trials": 4},
     "missing"),
    ({"workloads": [{"op": "matmul", "params": {"M": 4, "N": 4, "K": 4}}], "target": "tpu",
      "trials": 4}, "target"),
    ({"workloads": [{"op": "matmul", "params": {"M": 4, "N": 4, "K": 4}}], "target": "cpu",
      "trials": 0}, "trials"),
    ({"workloads": [{"op": "matmul", "params": {"M": 4, "N": 4, "K": 4}}], "target": "cpu",
      "trials": 4, "policy": "annealing"}, "policy"),
    ({"workloads": [{"op": "matmul", "params": {"M": 4, "N": 4, "K": 4}}], "target": "cpu",
      "trials": 4, "shell": "rm -rf /"}, "unexpected field"),
    ({"workloads": [{"workload": {"op": "matmul", "params": {"M": 4, "N": 4, "K": 4}},
                     "weight": -1}], "target": "cpu", "trials": 4}, "weight"),
])
def test_bad_specifications_name_the_problem(doc, message):
    with pytest.raises(SpecError, match=message):
        JobSpec.from_json(doc)


def test_a_spec_round_trips_through_json():
    spec = JobSpec.from_json({"workloads": [{"op": "matmul", "params": {"M": 4, "N": 4,
                                                                         "K": 4}}],
                              "target": "cpu", "trials": 5, "early_stop": 3})
    again = JobSpec.from_json(spec.to_json())
    assert again == spec and Counter(t.workload.key for t in again.tasks) == {
        Workload.op("matmul", M=4, N=4, K=4).key: 1}


def test_time_budget_and_early_stop_end_a_job_before_its_trial_budget(db: Database):
    timed = tune(SMALL, "cpu", trials=40, db=db, batch_size=4, reconfirm=0, measure=FAST,
                 time_budget_s=0.001)
    assert timed.status == "succeeded" and timed.trials == 4  # the first batch, then stop
    patient = tune(Workload.op("matmul", M=16, N=16, K=16), "cpu", trials=200, db=db,
                   batch_size=2, reconfirm=0, measure=FAST, early_stop=3)
    task = patient.tasks[0]
    assert patient.trials < 200 and task.since_improvement >= 3


def test_a_result_the_pool_made_up_for_a_lost_device_is_a_valid_record():
    wl = Workload.op("matmul", M=8, N=8, K=8)
    lost = MeasureResult([], ErrorKind.DEVICE_LOST, "no live cpu device serves 'cpu'",
                         provenance=Provenance(target="cpu"))
    record = measurement_record(MeasureInput(wl.to_json(), "cpu", []), lost,
                                workload_key=wl.key, flops=wl.flops, job_id=None, origin=None)
    assert record.error_kind == "device_lost" and time.time() - record.timestamp < 60
