"""Tuning on ``vta``: the sketch policy's vta rules (template space bounded by the buffers,
default first, cost model) through ``tune()`` and ``tensortune tune --target vta``, improving
on the untuned default schedule; the summary reports simulated cycles and utilisation; a
workload the accelerator cannot compute is refused before the job starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from db import Database
from schedule import Steps, Workload, vta
from search import SearchTask, make_policy, template_space
from tuner import SpecError, tune
from tuner.cli import main

DENSE = Workload.op("dense", M=16, N=128, K=256, dtype="int8", bias=False, requant_shift=8)
DENSE_ARGS = ["--op", "dense", "-p", "M=16", "-p", "N=128", "-p", "K=256", "-p", "dtype=int8",
              "-p", "bias=false", "-p", "requant_shift=8"]


def test_the_template_space_fits_the_buffers() -> None:
    config = vta.VtaConfig()
    space = template_space(vta.GemmShape(1, 64, 64), config)
    assert vta.Template() in space and vta.Template(1, 64, 64) not in space  # 4096 > 1024
    for t in space:
        assert t.vthreads * t.tile_n * t.tile_k <= config.wgt_depth
        assert 64 % t.tile_n == 0 and 64 % t.tile_k == 0


def test_the_policy_proposes_the_default_first_and_never_twice() -> None:
    policy = make_policy(SearchTask(DENSE, "vta"), seed=1)
    first = policy.propose(8)
    compute = vta.VtaCompute(DENSE, vta.VtaConfig())
    assert first[0].steps == compute.template_steps(compute.default_template())
    second = policy.propose(8)
    keys = [c.key for c in first + second]
    assert len(set(keys)) == 16
    policy.notify(first, [1e-3 * (i + 1) for i in range(8)])
    fresh = make_policy(SearchTask(DENSE, "vta"), seed=1)
    from search import PastMeasurement

    fresh.warm_start([PastMeasurement(c.steps.to_json(), 1e-3) for c in first])
    assert not {c.key for c in fresh.propose(8)} & {c.key for c in first}


def test_tuning_on_vta_improves_on_the_default_schedule(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'vta.db'}")
    result = tune(DENSE, "vta", trials=24, db=db, batch_size=8)
    assert result.status == "succeeded" and result.trials == 24
    [task] = result.tasks
    compute = vta.VtaCompute(DENSE, vta.VtaConfig())
    default = compute.template_steps(compute.default_template())
    records = db.query_records(job_id=result.job_id)
    [default_record] = [r for r in records if Steps.of(r.steps) == default]
    assert default_record.ok and task.best_cost < default_record.median_cost / 5
    assert task.best_facts["cycles"] == round(task.best_cost * 100e6)
    assert 0 < task.best_facts["mac_utilization"] <= 1
    assert all(r.measure.get("simulated") for r in records)
    db.close()


def test_the_cli_tunes_on_vta_and_reports_simulated_cycles(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["tune", *DENSE_ARGS, "--target", "vta", "--trials", "8", "--db", url]) == 0
    text = capsys.readouterr().out
    assert "simulated:" in text and "cycles at 100 MHz, GEMM core" in text
    assert main(["tune", *DENSE_ARGS, "--target", "vta", "--trials", "4", "--db", url,
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "succeeded" and summary["tasks"][0]["best_facts"]["cycles"] > 0


def test_a_workload_vta_cannot_compute_is_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"workloads\[0\]: vta computes dense"):
        tune(Workload.op("dense", M=16, N=64, K=64), "vta", trials=2,
             db=f"sqlite:///{tmp_path / 'x.db'}")


def test_the_cli_tunes_a_resnet_style_int8_conv_on_vta_beyond_its_default(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--op", "conv2d_nchw", "-p", "N=1", "-p", "C=32", "-p", "H=14", "-p", "W=14",
            "-p", "K=32", "-p", "R=3", "-p", "S=3", "-p", "padding=1", "-p", "dtype=int8",
            "-p", "requant_shift=8", "--target", "vta", "--db",
            f"sqlite:///{tmp_path / 'conv.db'}"]
    assert main(["tune", *args, "--trials", "12", "--batch-size", "6", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    db = Database(f"sqlite:///{tmp_path / 'conv.db'}")
    workload = Workload.from_json(summary["tasks"][0]["workload"])
    compute = vta.VtaCompute(workload, vta.VtaConfig())
    default = compute.template_steps(compute.default_template())
    [first] = [r for r in db.query_records(job_id=summary["job_id"])
               if Steps.of(r.steps) == default]
    assert summary["best_latency_s"] < first.median_cost
    assert summary["tasks"][0]["best_facts"]["mac_utilization"] > first.measure[
        "mac_utilization"]
    db.close()
