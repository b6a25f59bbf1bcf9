"""``tensortune tune / best / ops / jobs`` end to end with the embedded default (SQLite and
a local pool), including a job killed with SIGKILL mid-round and resumed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from db import Database
from schedule import Workload, build, te
from tuner.cli import main

MATMUL = ["--op", "matmul", "-p", "M=32", "-p", "N=32", "-p", "K=32"]
CONV = ["--op", "conv2d_nchw", "-p", "N=1", "-p", "C=4", "-p", "H=8", "-p", "W=8", "-p", "K=8",
        "-p", "R=3", "-p", "S=3", "-p", "padding=1"]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def _tune(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["tune", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("workload, op", [(MATMUL, "matmul"), (CONV, "conv2d_nchw")])
def test_tune_prints_a_summary_and_best_gives_a_correct_program(
        workload, op, url, capsys: pytest.CaptureFixture[str]):
    summary = _tune([*workload, "--trials", "6", "--batch-size", "3", "--reconfirm", "1",
                     "--db", url], capsys)
    assert summary["status"] == "succeeded" and summary["trials"] == 6
    assert summary["best_latency_s"] > 0 and summary["best_gflops"] > 0
    assert summary["numpy_latency_s"] > 0 and summary["errors"] == {}
    assert summary["target"].startswith("cpu -isa=")
    assert main(["best", *workload, "--db", url, "--json", "--source"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert best["workload_key"] == summary["workload_key"]
    assert "void" in best["source"]
    workload_obj = Workload.from_json({"op": op, "params": summary["tasks"][0]["workload"][
        "params"]})
    tensors = workload_obj.tensors()
    s = te.create_schedule(tensors[-1:])
    s.replay(best["steps"])
    inputs = workload_obj.random_inputs(1)
    (expected,) = workload_obj.reference(inputs)
    out = np.zeros_like(expected)
    build(s, tensors)(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_text_output_compares_with_numpy(url, capsys: pytest.CaptureFixture[str]):
    assert main(["tune", *MATMUL, "--trials", "2", "--batch-size", "2", "--reconfirm", "0",
                 "--quiet", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "x numpy" in out and "GFLOP/s" in out and "succeeded, 2 trials" in out
    assert re.search(r"numpy [0-9.]+ ms \(same device\): tuned is [0-9.]+x numpy", out)
    assert re.search(r"[0-9]+% of the target's float32 multiply-add peak "
                     r"\(measured: [0-9]+ GFLOP/s\)", out)


def test_a_peak_the_kernel_beat_is_reported_as_disturbed_not_as_a_fraction():
    """A peak measured on a busy core can come out below the kernel's own rate; the summary
    then says so instead of printing a fraction of peak above 100%."""
    from tuner.cli_tune import _baseline_lines
    task = {"best_latency_s": 1e-3, "flops": 2e8,
            "baselines": {"peak": {"latency_s": 2e-3}, "numpy": {"latency_s": 3e-3}}}
    lines = "\n".join(_baseline_lines(task))
    assert "no fraction of peak is given" in lines and "measured 100 GFLOP/s" in lines
    assert "%" not in lines and "tuned is 3.00x numpy" in lines
    task["baselines"]["peak"]["latency_s"] = 0.5e-3
    assert "50% of the target's float32 multiply-add peak (measured: 400 GFLOP/s)" in \
        "\n".join(_baseline_lines(task))


@pytest.mark.parametrize("argv, message", [
    (["tune", "--op", "matmull"], "unknown operator 'matmull'"),
    (["tune", "--op", "matmul", "-p", "M=4", "-p", "N=4"], "'K': missing"),
    (["tune", "--op", "matmul", "-p", "M=0", "-p", "N=4", "-p", "K=4"], "at least 1"),
    (["tune", *MATMUL, "--target", "gpu"], "unknown target kind 'gpu'"),
    (["tune", *MATMUL, "--db", "postgresql://nobody@127.0.0.1:9/none"], "cannot connect"),
    (["best", *MATMUL], "no tuning record"),
    (["jobs", "show", "nope"], "no job 'nope'"),
    (["jobs", "cancel", "nope"], "no job 'nope'"),
])
def test_bad_input_is_one_line_and_a_nonzero_exit(argv, message, url,
                                                   capsys: pytest.CaptureFixture[str]):
    if "--db" not in argv:
        argv = [*argv, "--db", url]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_unknown_baseline_is_a_usage_error(capsys: pytest.CaptureFixture[str]):
    assert main(["tune", *MATMUL, "--baselines", "numpy,mkl"]) == 2
    err = capsys.readouterr().err
    assert "unknown baseline(s) mkl" in err and "Traceback" not in err


def test_ops_lists_every_operator_with_its_parameters(capsys: pytest.CaptureFixture[str]):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert "conv2d_nchw" in out and "transpose_a=false" in out
    assert main(["ops", "--json"]) == 0
    schemas = json.loads(capsys.readouterr().out)
    assert schemas["matmul"]["required"] == ["M", "N", "K"]


def test_a_killed_job_resumes_without_losing_or_repeating_a_trial(url, tmp_path: Path,
                                                                  capsys):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner", "tune", *MATMUL, "--trials", "16", "--batch-size", "4",
         "--reconfirm", "0", "--quiet", "--json", "--db", url],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    database = Database(url)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            jobs = database.jobs.list()
            if jobs and database.count_records(job_id=jobs[0].id) >= 6:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the job ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        job = database.jobs.list()[0]
        assert job.status == "running"  # it never got to say otherwise
        before = {r.measurement_id for r in database.iter_records(job_id=job.id)}
        assert 6 <= len(before) < 16
        # Its heartbeat is fresh, but its process on this machine is gone: no --force needed.
        assert main(["jobs", "resume", job.id, "--json", "--db", url]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["status"] == "succeeded" and summary["trials"] == 16
        records = list(database.iter_records(job_id=job.id))
        assert before <= {r.measurement_id for r in records}  # nothing lost
        steps = [r.canonical("steps") for r in records]
        assert len(steps) == 16 and len(set(steps)) == 16  # none measured twice
        assert main(["jobs", "show", job.id, "--db", url]) == 0
        assert "succeeded" in capsys.readouterr().out
        assert main(["jobs", "list", "--db", url, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["id"] == job.id
    finally:
        if proc.poll() is None:
            proc.kill()
        database.close()


@pytest.mark.ray
def test_tune_measures_on_ray_when_asked(url, monkeypatch, capsys: pytest.CaptureFixture[str]):
    pytest.importorskip("ray")
    monkeypatch.delenv("TENSORTUNE_RAY_ADDRESS", raising=False)
    summary = _tune([*MATMUL, "--trials", "4", "--batch-size", "4", "--reconfirm", "0",
                     "--baselines", "none", "--ray-address", "local", "--db", url], capsys)
    assert summary["status"] == "succeeded" and summary["trials"] == 4
    database = Database(url)
    records = database.query_records(job_id=summary["job_id"])
    database.close()
    assert len(records) == 4 and all(r.ok for r in records)
    assert all(r.measure.get("node") for r in records)  # timed by a Ray device actor
