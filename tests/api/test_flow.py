"""The whole flow against a real ``tensortune serve`` on loopback: submit a tiny job, stream
its events, the job finishes, the best query's steps build a correct kernel, records export
and import round trip, and a restarted server resumes the jobs a killed one left."""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
import time

import numpy as np
import pytest

from db import Database
from schedule import Workload, kernel_source, make_schedule
from tuner import build_best, is_stale, submit_job
from tuner.client import ApiError
from tuner.runner import HEARTBEAT_STALE_S

from .conftest import TINY_JOB, Server, start_server, stop_server


def test_job_runs_to_the_end_with_one_event_per_batch(finished_job: dict) -> None:
    created, events, job = finished_job["created"], finished_job["events"], finished_job["job"]
    assert created["status"] == "queued" and created["url"] == f"/v1/jobs/{created['id']}"
    kinds = [e["type"] for e in events]
    assert kinds == ["batch", "batch", "done"]  # 8 trials in batches of 4, then the end
    assert [e["trials"] for e in events[:2]] == [4, 8]
    assert events[-1]["status"] == "succeeded"
    assert job["status"] == "succeeded" and job["trials"] == 8
    [task] = job["tasks"]
    assert task["workload_key"] == Workload.op("matmul", M=32, N=32, K=32).key
    assert task["trials"] == 8 and task["best_latency_s"] > 0 and task["best_gflops"] > 0
    assert [point[0] for point in task["curve"]][:2] == [4, 8]
    assert job["spec"]["trials"] == 8 and job["spec"]["baselines"] == ["numpy", "peak"]
    # measured on the server's device before tuning: numpy's time, and the peak's bound
    assert task["baselines"]["numpy"]["latency_s"] > task["baselines"]["peak"]["latency_s"] > 0


def test_every_trial_is_listed_with_its_latency_or_error(server: Server,
                                                        finished_job: dict) -> None:
    job_id = finished_job["created"]["id"]
    with server.client("reader") as api:
        trials = api.trials(job_id)
    [task] = trials["tasks"]
    [job_task] = finished_job["job"]["tasks"]
    assert task["title"] == job_task["title"] == "matmul M=32 N=32 K=32"
    measured = [t for t in task["trials"] if not t["reconfirm"]]
    assert [t["n"] for t in measured] == list(range(1, 9))
    assert all((t["latency_s"] is None) == (t["error_kind"] != "none") for t in measured)
    again = [t for t in task["trials"] if t["reconfirm"]]
    assert len(again) == 1 and again[0]["n"] == 8  # the final re-measurement of the best
    valid = [t["latency_s"] for t in task["trials"] if t["latency_s"] is not None]
    assert job_task["best_latency_s"] in valid
    with server.client("reader") as api, pytest.raises(ApiError, match="404"):
        api.trials("no-such-job")


def test_best_query_steps_build_a_correct_kernel(server: Server, finished_job: dict,
                                                 tmp_path) -> None:
    workload = Workload.op("matmul", M=32, N=32, K=32)
    target = finished_job["job"]["target"]
    with server.client("reader") as api:
        answer = api.best(workload.key, "cpu")
        assert answer["target"] == target and answer["match"] == "exact"
        best = answer["results"][0]
        assert best["latency_s"] > 0 and best["gflops"] > 0 and best["steps"]
        batch = api.best_batch([workload.key, "0" * 32], "cpu")
        assert batch["results"][workload.key]["results"][0]["steps"] == best["steps"]
        assert batch["missing"] == ["0" * 32]
        with pytest.raises(ApiError) as missing:
            api.best("0" * 32, "cpu")
        assert missing.value.status == 404 and "no error-free record" in missing.value.detail
        # the best program as people read it, lowered by the server in a sandbox
        program = api.best_program(workload.key, "cpu")
        with pytest.raises(ApiError) as missing:
            api.best_program("0" * 32, "cpu")
        assert missing.value.status == 404
        with pytest.raises(ApiError) as bad_target:
            api.best_program(workload.key, "tpu -x=1")
        assert bad_target.value.status == 422 and "target" in bad_target.value.detail
        exported = api.export(job_id=finished_job["created"]["id"])
    s, args = make_schedule(workload, best["steps"])
    expected = kernel_source(s, args, target)
    assert program["steps"] == best["steps"] and program["target"] == target
    assert program["loop_ir"] == str(expected.func) and program["source"] == expected.source
    # the compiler's side: the records in its own database, build_best compiles the best
    (tmp_path / "best.jsonl").write_text(exported)
    local = Database(f"sqlite:///{tmp_path / 'compiler.db'}")
    local.import_jsonl(tmp_path / "best.jsonl")
    module = build_best(workload, target, db=local)
    inputs = workload.random_inputs(seed=3)
    out = np.zeros((32, 32), dtype=np.float32)
    module(*inputs, out)
    np.testing.assert_allclose(out, inputs[0] @ inputs[1], rtol=1e-4, atol=1e-4)
    steps = local.best(workload.key, target).records[0].steps
    assert steps == best["steps"]


def test_records_export_import_round_trip(server: Server, finished_job: dict) -> None:
    job_id = finished_job["created"]["id"]
    with server.client("admin") as api:
        text = api.export(job_id=job_id)
        lines = text.splitlines()
        page = api.records(job_id=job_id, limit=1000)
        assert len(lines) == page["total"] == len(page["records"]) >= 8
        again = api.import_records(text)
        assert again["records"] == len(lines) and again["added"] == 0
        assert again["already_present"] == len(lines)
        # one measurement from another host is a new record
        other = json.loads(lines[0])
        other["host"] = "another-host"
        report = api.import_records([json.dumps(other)])
        assert report["added"] == 1
        assert api.records(job_id=job_id, limit=1)["total"] == len(lines) + 1
        with pytest.raises(ApiError) as bad:
            api.import_records(text + "{not json\n")
        assert bad.value.status == 422 and f"line {len(lines) + 1}" in bad.value.detail
        summary = [w for w in api.workloads() if w["workload_key"] == other["workload_key"]]
        assert summary and summary[0]["records"] >= len(lines) + 1


def test_ops_list_the_registry_with_parameter_schemas(server: Server) -> None:
    with server.client("reader") as api:
        ops = {op["name"]: op for op in api.ops()}
    assert {"matmul", "conv2d_nchw", "softmax"} <= set(ops)
    schema = ops["matmul"]["params_schema"]
    assert schema["properties"]["M"]["minimum"] == 1 and schema["type"] == "object"


def test_metrics_count_jobs_trials_and_requests(server: Server, finished_job: dict) -> None:
    with server.client("reader") as api:
        text = api._request("GET", "/metrics").text
    assert 'tensortune_jobs{status="succeeded"}' in text
    measured = [line for line in text.splitlines()
                if line.startswith("tensortune_trials_measured ")]
    assert measured and float(measured[0].split()[1]) >= 8
    assert 'route="/v1/jobs/{job_id}/events"' in text
    assert "tensortune_batches_measured_total" in text


def _tuned_steps(db: Database, job_id: str) -> list[str]:
    records = db.query_records(job_id=job_id, limit=None)
    return [json.dumps(r.steps) for r in records
            if not r.measure.get("origin", {}).get("reconfirm")]


def test_a_server_killed_mid_job_is_restarted_and_goes_on_at_once(tmp_path) -> None:
    """kill -9 of the server while its job runs: the job's heartbeat is still fresh, but its
    process on this machine is gone, so the next server takes it up without waiting for the
    heartbeat to age; it finishes with every trial measured exactly once."""
    home = tmp_path / "killed"
    server = start_server(home)
    db = Database(server.db_url)
    try:
        with server.client("submitter") as api:
            job_id = api.submit({**TINY_JOB, "trials": 40, "seed": 2})["id"]
            deadline = time.monotonic() + 120
            while api.job(job_id)["trials"] < 4 and time.monotonic() < deadline:
                time.sleep(0.1)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)
        job = db.jobs.get(job_id)
        assert job.status == "running" and 4 <= len(_tuned_steps(db, job_id)) < 40
        assert time.time() - job.progress["heartbeat"] < HEARTBEAT_STALE_S
        assert is_stale(job)  # by its dead process, not by the age of its heartbeat
        before = set(_tuned_steps(db, job_id))
        server = start_server(home)
        with server.client("reader") as api:
            finished = api.wait(job_id, timeout=300)
        assert finished["status"] == "succeeded" and finished["trials"] == 40
        steps = _tuned_steps(db, job_id)
        assert before <= set(steps) and len(steps) == len(set(steps)) == 40
    finally:
        stop_server(server)
        db.close()


def test_restarted_server_resumes_queued_and_stale_jobs(tmp_path) -> None:
    """Jobs a stopped server left queued, or running with an old heartbeat (killed), are
    taken up by the next server and finish; nothing is measured twice."""
    home = tmp_path / "restart"
    home.mkdir()
    db = Database(f"sqlite:///{home / 'tuning.db'}")
    queued = submit_job(db, TINY_JOB, owner="someone")
    stale = submit_job(db, {**TINY_JOB, "seed": 1}, owner="someone")
    db.jobs.update(stale.id, status="running", progress={"heartbeat": 1.0})
    with sqlite3.connect(home / "tuning.db") as conn:  # as if its server died long ago
        conn.execute("UPDATE jobs SET updated_at = 1.0 WHERE id = ?", (stale.id,))
    server = start_server(home)
    try:
        with server.client("reader") as api:
            for job_id in (queued.id, stale.id):
                job = api.wait(job_id, timeout=300)
                assert job["status"] == "succeeded", job
                assert job["trials"] == 8
    finally:
        stop_server(server)
    for job_id in (queued.id, stale.id):
        steps = _tuned_steps(db, job_id)
        assert len(steps) == len(set(steps)) == 8


def test_events_relay_a_job_run_by_another_process(server: Server) -> None:
    """A job that another process runs (here: this test, through the database) is followed
    through its stored progress: a batch event per new heartbeat, then done."""
    db = Database(server.db_url)
    job = submit_job(db, {**TINY_JOB, "seed": 7}, owner="elsewhere")
    # the server takes up queued jobs only at start and its own submissions; this one is
    # "running" in another process with a fresh heartbeat, so the server leaves it alone
    db.jobs.update(job.id, status="running", progress={"trials": 0, "heartbeat": time.time()})
    events: list[dict] = []

    def follow() -> None:
        with server.client("reader") as api:
            events.extend(api.events(job.id, timeout=60))

    thread = threading.Thread(target=follow)
    thread.start()
    time.sleep(1.0)
    db.jobs.update(job.id, progress={"trials": 4, "heartbeat": time.time()})
    time.sleep(1.0)
    db.jobs.update(job.id, status="succeeded", progress={"trials": 8, "heartbeat": time.time()})
    thread.join(30)
    assert not thread.is_alive()
    assert [e["type"] for e in events][-1] == "done" and events[-1]["status"] == "succeeded"
    assert [e["trials"] for e in events if e["type"] == "batch"][-1] == 4


@pytest.mark.ray
def test_a_server_on_ray_measures_its_jobs_there(tmp_path) -> None:
    pytest.importorskip("ray")
    server = start_server(tmp_path / "ray", {"TENSORTUNE_RAY_ADDRESS": "local"})
    try:
        with server.client("submitter") as api:
            job = api.wait(api.submit(TINY_JOB)["id"], timeout=300)
    finally:
        stop_server(server)
    assert job["status"] == "succeeded" and job["trials"] == 8
    db = Database(server.db_url)
    records = db.query_records(job_id=job["id"], limit=None)
    db.close()
    assert records and all(r.ok and r.measure.get("node") for r in records)


def test_a_vta_job_reports_simulated_figures_and_its_program_listing(server: Server) -> None:
    spec = {"workloads": [{"op": "dense", "params": {
        "M": 16, "N": 64, "K": 64, "dtype": "int8", "bias": False, "requant_shift": 6}}],
        "target": "vta", "trials": 4, "batch_size": 4, "reconfirm": 0, "baselines": [],
        "measure": {"repeat": 1}}
    with server.client("submitter") as api:
        created = api.submit(spec)
        list(api.events(created["id"], timeout=300))
        job = api.job(created["id"])
        [task] = job["tasks"]
        assert job["status"] == "succeeded" and task["best_latency_s"] > 0
        facts = task["best_facts"]
        assert facts["cycles"] == round(task["best_latency_s"] * facts["clock_mhz"] * 1e6)
        assert 0 < facts["mac_utilization"] <= 1
        program = api.best_program(task["workload_key"], "vta")
        assert program["source"].startswith("vta program:") and "GEMM" in program["source"]
        assert "tensorized" in program["loop_ir"]
