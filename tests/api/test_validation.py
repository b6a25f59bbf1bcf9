"""Bad input gets a clear 4xx naming the problem, never a 500; limits on trials, body size
and submission rate; repeated submissions return the existing job."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from .conftest import TINY_JOB, LocalApp, make_local_app


def _job(**changes: Any) -> dict[str, Any]:
    job = copy.deepcopy(TINY_JOB)
    job.update(changes)
    return job


def _params(**params: Any) -> dict[str, Any]:
    return _job(workloads=[{"op": "matmul", "params": params}])


@pytest.mark.parametrize(("body", "message"), [
    (_job(workloads=[{"op": "nope", "params": {}}]), "unknown operator 'nope'"),
    (_params(M=32, N=32), "'K'"),
    (_params(M=32, N=32, K=32, Z=1), "parameter 'Z': unknown parameter"),
    (_params(M=-4, N=32, K=32), "parameter 'M': value must be at least 1"),
    (_params(M=10**9, N=32, K=32), "parameter 'M': value must be at most"),
    (_params(M="many", N=32, K=32), "parameter 'M'"),
    (_job(target="gpu"), "target: unknown target kind 'gpu'"),
    (_job(target="vta"), "workloads[0]: vta computes matmul with dtype=int8 and requant_shift"),
    (_job(baselines=["numpy", "bogus"]), "baselines: a list of distinct names"),
    (_job(trials=0), "trials must be an integer"),
    (_job(trials=10**6), "over this server's limit"),
    (_job(batch_size=-1), "batch_size"),
    (_job(scheduler="fastest"), "scheduler: unknown 'fastest'"),
    (_job(measure={"run_timeout": 10**6}), "measure.run_timeout: at most"),
    (_job(measure={"bogus": 1}), "measure"),
    (_job(measure={"remeasure": 10**9}), "remeasure must be an integer in 0..5"),
    (_job(measure={"noise_tolerance": 0}), "noise_tolerance must be a number >= 1"),
    (_job(workloads=[]), "workloads: at least one workload"),
    (_job(workloads=["matmul"]), "'loc': ['body', 'workloads', 0]"),
])
def test_bad_job_specs_get_422_naming_the_field(local: LocalApp, body: dict,
                                                message: str) -> None:
    response = local.http.post("/v1/jobs", json=body, headers=local.headers("submitter"))
    assert response.status_code == 422, response.text
    assert message in str(response.json()["detail"])


@pytest.mark.parametrize(("content", "message"), [
    (b"{not json", "JSON decode error"),
    (b"[]", "Input should be a valid dictionary"),
    (b'{"workloads": [], "target": "cpu"}', "trials"),
    (b'{"workloads": [], "target": "cpu", "trials": 8, "evil": "__import__(\\"os\\")"}',
     "Extra inputs are not permitted"),
])
def test_malformed_bodies_get_422(local: LocalApp, content: bytes, message: str) -> None:
    response = local.http.post("/v1/jobs", content=content, headers={
        **local.headers("submitter"), "Content-Type": "application/json"})
    assert response.status_code == 422
    assert message in str(response.json()["detail"])


def test_oversized_bodies_get_413(tmp_path: Path) -> None:
    app = make_local_app(tmp_path, max_body_bytes=2048, max_import_bytes=4096)
    with app.http:
        big = _job(workloads=[{"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}] * 200)
        response = app.http.post("/v1/jobs", json=big, headers=app.headers("submitter"))
        assert response.status_code == 413 and "2048 bytes" in response.json()["detail"]
        chunks = (b"x" * 1024 for _ in range(8))  # no Content-Length: counted as it arrives
        response = app.http.post("/v1/records/import", content=chunks,
                                 headers=app.headers("admin"))
        assert response.status_code == 413 and "4096 bytes" in response.json()["detail"]


def test_malformed_import_files_are_rejected_whole(local: LocalApp) -> None:
    body = b'{"version": 1}\n\xff\xfe\n[1, 2]\n'
    response = local.http.post("/v1/records/import", content=body,
                               headers=local.headers("admin"))
    assert response.status_code == 422
    report = response.json()["report"]
    assert [bad["line"] for bad in report["bad_lines"]] == [1, 2, 3]
    assert "not UTF-8" in report["bad_lines"][1]["message"]
    assert local.db.count_records() == 0


@pytest.mark.parametrize(("path", "message"), [
    ("/v1/best?workload_key=abc&target=quantum", "target:"),
    ("/v1/best?workload_key=abc&target=cpu&fallback=anything", "fallback: unknown"),
    ("/v1/best?workload_key=abc&target=cpu&k=0", "greater than or equal to 1"),
    ("/v1/records?error_kind=oops", "Input should be"),
    ("/v1/records?limit=100000", "less than or equal to 1000"),
    ("/v1/jobs?status=sleeping", "status: unknown 'sleeping'"),
])
def test_bad_queries_get_422(local: LocalApp, path: str, message: str) -> None:
    response = local.http.get(path, headers=local.headers("reader"))
    assert response.status_code == 422, response.text
    assert message in str(response.json()["detail"])


def test_unknown_things_get_404(local: LocalApp) -> None:
    for path in ("/v1/jobs/nope", "/v1/jobs/nope/events", "/v1/ops/nope",
                 "/v1/best?workload_key=abc&target=cpu"):
        response = local.http.get(path, headers=local.headers("reader"))
        assert response.status_code == 404, path
        assert response.json()["detail"]


def test_cancelling_a_finished_job_is_a_conflict(local: LocalApp) -> None:
    job_id = local.http.post("/v1/jobs", json=TINY_JOB,
                             headers=local.headers("admin")).json()["id"]
    local.db.jobs.update(job_id, status="running")
    local.db.jobs.update(job_id, status="succeeded")
    response = local.http.delete(f"/v1/jobs/{job_id}", headers=local.headers("admin"))
    assert response.status_code == 409 and "succeeded" in response.json()["detail"]


def test_repeated_submissions_return_the_existing_job(local: LocalApp) -> None:
    headers = local.headers("submitter")
    first = local.http.post("/v1/jobs", json=TINY_JOB, headers=headers)
    again = local.http.post("/v1/jobs", json=TINY_JOB, headers=headers)
    assert first.status_code == 202 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"] and again.json()["duplicate"]
    # another token's identical spec is a job of its own
    other = local.http.post("/v1/jobs", json=TINY_JOB, headers=local.headers("admin"))
    assert other.status_code == 202 and other.json()["id"] != first.json()["id"]
    # the same Idempotency-Key with another spec: still the first job
    keyed = {**headers, "Idempotency-Key": "build-42"}
    one = local.http.post("/v1/jobs", json=_job(seed=5), headers=keyed)
    two = local.http.post("/v1/jobs", json=_job(seed=6), headers=keyed)
    assert one.status_code == 202 and two.status_code == 200
    assert two.json()["id"] == one.json()["id"]
    assert len(local.db.jobs.list(limit=None)) == 3


def test_submissions_are_rate_limited_per_token(tmp_path: Path) -> None:
    app = make_local_app(tmp_path, submit_rate_per_minute=3, dedupe_window_s=0)
    with app.http:
        statuses = [app.http.post("/v1/jobs", json=_job(seed=n),
                                  headers=app.headers("submitter")).status_code
                    for n in range(4)]
        assert statuses == [202, 202, 202, 429]
        limited = app.http.post("/v1/jobs", json=_job(seed=9), headers=app.headers("submitter"))
        assert int(limited.headers["retry-after"]) > 0
        assert "at most 3 job submissions a minute" in limited.json()["detail"]
        # another token has its own budget
        assert app.http.post("/v1/jobs", json=_job(seed=10),
                             headers=app.headers("admin")).status_code == 202


def test_jobs_show_pending_tasks_and_curves_without_a_valid_program(local: LocalApp) -> None:
    job_id = local.http.post("/v1/jobs", json=TINY_JOB,
                             headers=local.headers("admin")).json()["id"]
    [pending] = local.http.get(f"/v1/jobs/{job_id}", headers=local.headers("reader")) \
        .json()["tasks"]
    assert pending["state"] == "pending" and pending["trials"] == 0
    assert len(pending["workload_key"]) == 32 and pending["flops"] == 2 * 32 ** 3
    task = {**pending, "state": "tuning", "trials": 4, "curve": [[4, None]],
            "errors": {"compile_error": 4}}
    local.db.jobs.update(job_id, status="running", progress={"trials": 4, "tasks": [task]})
    shown = local.http.get(f"/v1/jobs/{job_id}", headers=local.headers("reader"))
    assert shown.status_code == 200
    assert shown.json()["tasks"][0]["curve"] == [[4, None]]
    listed = local.http.get("/v1/jobs", headers=local.headers("reader")).json()["jobs"]
    assert listed[0]["trials"] == 4 and listed[0]["tasks"][0]["curve"] == []
