"""Model uploads: ``POST /v1/jobs`` with multipart/form-data (an ONNX file and the job
options) imports the model in the sandbox and tunes its tasks as one job;
``GET /v1/models/{job}/best`` gives each task's best and the estimated end-to-end latency.
Bad uploads get clear 4xx answers and create nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("onnx")

from tuner.client import ApiError

from ..onnx_models import external_data_model, small_cnn
from .conftest import MODEL_OPTIONS, LocalApp, Server, make_local_app

OPTIONS = MODEL_OPTIONS
CNN = small_cnn().SerializeToString()


def upload(app: LocalApp, data: bytes = CNN, options: dict | None = None, *,
           role: str | None = "submitter", name: str = "cnn.onnx", spec: str | None = None):
    spec = json.dumps(OPTIONS if options is None else options) if spec is None else spec
    return app.http.post("/v1/jobs", headers=app.headers(role),
                         files={"model": (name, data, "application/octet-stream")},
                         data={"spec": spec})


def test_upload_makes_one_job_of_the_models_tasks(local: LocalApp) -> None:
    created = upload(local)
    assert created.status_code == 202, created.text
    job = local.http.get(created.json()["url"], headers=local.headers("reader")).json()
    assert job["model"]["name"] == "cnn.onnx" and job["status"] == "queued"
    assert [t["workload"]["name"] for t in job["tasks"]] == [
        "fused_layout_transform", "fused_conv2d_nchwc_add_relu", "fused_global_avg_pool2d",
        "fused_layout_transform_reshape", "fused_dense_bias_add"]
    assert job["estimated_latency_s"] is None and job["estimate_curve"] == []
    again = upload(local)
    assert again.status_code == 200 and again.json()["duplicate"]
    assert again.json()["id"] == created.json()["id"]
    best = local.http.get(f"/v1/models/{job['id']}/best", headers=local.headers("reader"))
    assert best.status_code == 200
    assert best.json()["estimated_latency_s"] is None and len(best.json()["missing"]) == 5


def test_an_upload_is_hashed_and_copied_in_chunks_never_read_whole(
        local: LocalApp, monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.datastructures import UploadFile

    def whole(self, size: int = -1) -> bytes:
        raise AssertionError("the whole upload was read into memory")

    monkeypatch.setattr(UploadFile, "read", whole)
    created = upload(local)
    assert created.status_code == 202, created.text
    job = local.http.get(created.json()["url"], headers=local.headers("reader")).json()
    assert job["model"]["sha256"] == hashlib.sha256(CNN).hexdigest() and len(job["tasks"]) == 5


@pytest.mark.parametrize(("data", "options", "spec", "status", "message"), [
    (b"\x08\x07garbage", None, None, 422, "not a valid ONNX model"),
    (external_data_model("/etc/passwd").SerializeToString(), None, None, 422,
     "stored outside the model"),
    (b"", None, None, 422, "empty"),
    (CNN, {"target": "cpu"}, None, 422, "trials"),
    (CNN, {**OPTIONS, "workloads": []}, None, 422, "workloads"),
    (CNN, {**OPTIONS, "trials": True}, None, 422, "trials"),
    (CNN, {**OPTIONS, "target": "tpu"}, None, 422, "target"),
    (CNN, {**OPTIONS, "trials": 10**9}, None, 422, "limit"),
    (CNN, None, "{not json", 422, "JSON decode error"),
    (CNN, None, '{"target": "cpu", "trials": NaN}', 422, "finite"),
])
def test_bad_uploads_are_refused_and_create_nothing(local: LocalApp, data, options, spec,
                                                     status, message) -> None:
    answer = upload(local, data, options, spec=spec)
    assert answer.status_code == status and message in answer.text, answer.text
    assert local.db.jobs.list(limit=None) == []


def test_upload_without_the_parts(local: LocalApp) -> None:
    no_spec = local.http.post("/v1/jobs", headers=local.headers("submitter"),
                              files={"model": ("m.onnx", CNN)})
    assert no_spec.status_code == 422 and no_spec.json()["detail"][0]["loc"] == ["body", "spec"]
    no_file = local.http.post("/v1/jobs", headers=local.headers("submitter"),
                              files={"other": ("m.onnx", CNN)},
                              data={"spec": json.dumps(OPTIONS)})
    assert no_file.status_code == 422 and "model" in no_file.text


def test_roles_size_limit_busy_and_timeout(tmp_path: Path) -> None:
    app = make_local_app(tmp_path, max_model_bytes=len(CNN) - 1, max_model_imports=1,
                         model_import_timeout_s=0.001)
    small = b"\x08\x07" + b"x" * 100
    with app.http:
        assert upload(app, small, role=None).status_code == 401
        assert upload(app, small, role="reader").status_code == 403
        too_big = upload(app)
        assert too_big.status_code == 413 and "over the limit" in too_big.text
        timed_out = upload(app, small)
        assert timed_out.status_code == 422 and "did not finish within" in timed_out.text
        slots = app.http.app.state.service.model_imports
        slots.acquire()
        try:
            busy = upload(app, small, {**OPTIONS, "seed": 1})
            assert busy.status_code == 429 and busy.headers["Retry-After"]
        finally:
            slots.release()
        assert app.db.jobs.list(limit=None) == []


def test_model_best_of_other_jobs(local: LocalApp) -> None:
    job = local.http.post("/v1/jobs", headers=local.headers("submitter"), json={
        "workloads": [{"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}],
        "target": "cpu", "trials": 4}).json()
    answer = local.http.get(f"/v1/models/{job['id']}/best", headers=local.headers("reader"))
    assert answer.status_code == 422 and "not a model" in answer.text
    assert local.http.get("/v1/models/nope/best",
                          headers=local.headers("reader")).status_code == 404


def test_a_model_job_runs_on_the_server(server: Server, finished_model_job: dict) -> None:
    events, job, best = (finished_model_job[k] for k in ("events", "job", "best"))
    assert events[-1]["type"] == "done" and events[-1]["status"] == "succeeded"
    assert all("estimated_latency_s" in e for e in events if e["type"] == "batch")
    assert job["estimate_curve"] and job["estimated_latency_s"] is not None
    assert not best["missing"] and best["model"]["name"] == "cnn.onnx"
    assert best["estimated_latency_s"] == pytest.approx(
        sum(t["weight"] * t["best_latency_s"] for t in best["tasks"]))
    # the job's own estimate is built from its own bests: never better than the database's
    assert best["estimated_latency_s"] <= job["estimated_latency_s"] * (1 + 1e-9)
    with server.client("submitter") as api, pytest.raises(ApiError) as refused:
        api.submit_model(b"\x08\x07garbage", OPTIONS)
    assert refused.value.status == 422 and "not a valid ONNX model" in str(refused.value)
