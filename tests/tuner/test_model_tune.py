"""Tuning a whole model: ``tune_model`` / ``tensortune tune-model`` tune the tasks that
``compile`` looks up, the job carries the model's estimated latency (weighted sum of the
tasks' best) after each batch, ``model_best`` / ``tensortune model-best`` answer from the
database, and ``import_model_tasks`` reads an upload's tasks in the sandbox."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("onnx")
import tuner
from db import Database
from tuner import JobSpec, ModelImportError, SpecError, import_model_tasks
from tuner.spec import MODEL_MEASURE, TUNING_MEASURE

from ..onnx_models import external_data_model, save_small_cnn, small_cnn

FAST = {"batch_size": 2, "reconfirm": 1, "cost_model": "random"}


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True,
                          text=True, timeout=600, check=check)


def test_tune_model_tunes_what_compile_uses(tmp_path):
    model = save_small_cnn(tmp_path / "cnn.onnx")
    db = Database(f"sqlite:///{tmp_path / 't.db'}")
    result = tuner.tune_model(model, "cpu", trials=10, db=db, **FAST)
    assert result.status == "succeeded"
    expected = {t["key"]: t["weight"] for t in tuner.model_tasks(model)}
    assert {t.key: t.weight for t in result.tasks} == expected
    assert all(t.trials >= 2 for t in result.tasks)  # every task got its first batch
    assert result.estimated_latency_s == pytest.approx(
        sum(t.weight * t.best_cost for t in result.tasks))

    job = db.jobs.get(result.job_id)
    spec = JobSpec.from_json(job.spec)
    assert spec.model is not None and spec.model.name == "cnn.onnx"
    # a model's kernels are timed as they run in it: caches flushed, one call per repeat
    assert spec.measure == MODEL_MEASURE and MODEL_MEASURE.flush_bytes >= 32 << 20
    measured = db.query_records(workload_key=result.tasks[0].key)
    assert measured and all(r.measure["flush_bytes"] == MODEL_MEASURE.flush_bytes
                            for r in measured)
    curve = job.progress["estimate_curve"]
    assert curve and curve[0][0] >= 2 * len(expected)  # only once every task has a program
    estimates = [e for _, e in curve]
    assert estimates == sorted(estimates, reverse=True)  # bests only improve in the loop

    best = tuner.model_best(db, result.job_id)
    assert not best["missing"] and {t["workload_key"] for t in best["tasks"]} == set(expected)
    assert best["estimated_latency_s"] == pytest.approx(
        sum(t["weight"] * t["best_latency_s"] for t in best["tasks"]))
    compiled = tuner.compile(model, "cpu", db)  # every task now has a record
    assert all(t.tuned for t in compiled.tasks if t.key) and compiled.tuned_share() == 1.0


def test_model_best_refuses_a_single_workload_job(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 't.db'}")
    job = tuner.submit_job(db, {"workloads": [{"op": "matmul", "params": {
        "M": 8, "N": 8, "K": 8}}], "target": "cpu", "trials": 4})
    with pytest.raises(SpecError, match="not a model"):
        tuner.model_best(db, job.id)


def test_cli_tune_model_and_model_best(tmp_path):
    model = save_small_cnn(tmp_path / "cnn.onnx")
    db = f"sqlite:///{tmp_path / 't.db'}"
    out = json.loads(cli("tune-model", model, "--trials", "10", "--batch-size", "2",
                         "--reconfirm", "0", "--cost-model", "random", "--db", db,
                         "--json").stdout)
    assert out["status"] == "succeeded" and len(out["tasks"]) == 5
    spec = JobSpec.from_json(Database(db).jobs.get(out["job_id"]).spec)
    assert spec.measure == MODEL_MEASURE  # timed cold, as for tune_model
    assert out["estimated_latency_s"] == pytest.approx(
        sum(t["weight"] * t["best_latency_s"] for t in out["tasks"]))
    text = cli("model-best", out["job_id"], "--db", db).stdout
    assert "cnn.onnx" in text and "estimated latency in the tuned kernels" in text
    best = json.loads(cli("model-best", out["job_id"], "--db", db, "--json").stdout)
    assert best["model"]["name"] == "cnn.onnx" and not best["missing"]
    missing = cli("tune-model", str(tmp_path / "none.onnx"), "--db", db, check=False)
    assert missing.returncode != 0 and "cannot read the model" in missing.stderr
    (tmp_path / "broken.onnx").write_bytes(b"\x08\x07garbage")
    broken = cli("tune-model", str(tmp_path / "broken.onnx"), "--db", db, check=False)
    assert broken.returncode != 0 and "the model cannot be imported" in broken.stderr
    assert "Traceback" not in broken.stderr
    unknown = cli("model-best", "nope", "--db", db, check=False)
    assert unknown.returncode != 0 and "Traceback" not in unknown.stderr


def test_cli_tune_model_never_parses_the_model_in_its_own_process(tmp_path, monkeypatch,
                                                                   capsys):
    import ir
    from tuner.cli import main

    def refuse(*args, **kwargs):
        raise AssertionError("the model was parsed in the tuning process")

    monkeypatch.setattr(ir, "from_onnx", refuse)
    model = save_small_cnn(tmp_path / "cnn.onnx")
    assert main(["tune-model", model, "--trials", "5", "--batch-size", "1", "--reconfirm", "0",
                 "--cost-model", "random", "--baselines", "none", "--quiet", "--json",
                 "--db", f"sqlite:///{tmp_path / 't.db'}"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "succeeded" and len(out["tasks"]) == 5


def test_import_model_tasks_in_the_sandbox():
    found = import_model_tasks(small_cnn().SerializeToString(), "dir/../cnn.onnx", "cpu")
    assert found.info.name == "cnn.onnx" and len(found.info.sha256) == 64
    in_process = {t["key"]: t["weight"] for t in tuner.model_tasks(small_cnn())}
    assert {t.workload.key: t.weight for t in found.tasks} == in_process


def test_import_refuses_broken_models_and_external_data():
    with pytest.raises(ModelImportError, match="not a valid ONNX model"):
        import_model_tasks(b"\x08\x07garbage", "broken.onnx")
    # the weight names a file: the import must refuse it, never open it
    model = external_data_model("/etc/passwd").SerializeToString()
    with pytest.raises(ModelImportError, match="stored outside the model"):
        import_model_tasks(model, "external.onnx")


def test_an_import_that_runs_too_long_is_killed():
    with pytest.raises(ModelImportError, match="did not finish within"):
        import_model_tasks(small_cnn().SerializeToString(), "cnn.onnx", timeout=0.001)


def test_model_jobs_time_cold_unless_told_otherwise():
    """A model job's spec from options (an upload) times with the caches flushed when it
    names no measure settings; given ones are kept; a single-workload job is unchanged."""
    found = import_model_tasks(small_cnn().SerializeToString(), "cnn.onnx")
    tasks, info = found.tasks, found.info.to_json()
    spec = JobSpec.from_options(tasks, {"target": "cpu", "trials": 4, "model": info})
    assert spec.measure == MODEL_MEASURE
    given = JobSpec.from_options(tasks, {"target": "cpu", "trials": 4, "model": info,
                                         "measure": {"repeat": 5}})
    assert given.measure.repeat == 5 and given.measure.flush_bytes == 0
    single = JobSpec.from_options(tasks[:1], {"target": "cpu", "trials": 4})
    assert single.measure.flush_bytes == 0
    assert TUNING_MEASURE.flush_bytes == 0


def test_model_info_is_validated():
    spec = {"workloads": [{"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}],
            "target": "cpu", "trials": 4}
    for bad in ({"name": "m"}, {"name": "", "sha256": "0" * 64},
                {"name": "m", "sha256": "xyz"}, "model"):
        with pytest.raises(SpecError, match="model"):
            JobSpec.from_json({**spec, "model": bad})
    good = JobSpec.from_json({**spec, "model": {"name": "m.onnx", "sha256": "a" * 64}})
    assert JobSpec.from_json(good.to_json()) == good


def test_a_budget_too_small_for_every_task_is_warned_about():
    from tuner.model_tune import budget_warning

    found = tuner.model_job_tasks(small_cnn())
    small = JobSpec(found.tasks, "cpu", 9, batch_size=2, model=found.info)
    assert "each of the 5 tasks" in budget_warning(small)
    assert budget_warning(JobSpec(found.tasks, "cpu", 10, batch_size=2, model=found.info)) is None
