"""Regression tests of issue 12's findings 4-7 and 11: huge integers in record imports,
NaN/Infinity/huge numbers in JSON bodies, NUL characters (on PostgreSQL too) and streams
that must fail before their first byte, what /healthz tells whom, strict numbers."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api import Settings, create_app
from db import Database, DatabaseUnavailableError
from tests.db.backends import BACKENDS, fresh_url
from tests.db.helpers import record
from tuner import JobSpec, SpecError

from .bad_inputs import bad_requests
from .conftest import ROLES, TINY_JOB, LocalApp, cli

HUGE = "1" * 5000  # over Python's 4300-digit limit of int(str)
JSON = {"Content-Type": "application/json"}
NDJSON = {"Content-Type": "application/x-ndjson"}


def _import(local: LocalApp, body: str, skip: bool) -> Any:
    return local.http.post(f"/v1/records/import?skip_bad_lines={str(skip).lower()}",
                           content=body.encode(), headers={**local.headers("admin"), **NDJSON})


# --- finding 4: huge integers in record imports --------------------------------------------


def test_an_integer_of_5000_digits_in_an_import_is_a_bad_line(local: LocalApp) -> None:
    good = json.dumps(record("good"))
    huge = json.dumps(record("huge")).replace('"build_s": 0.25', f'"build_s": {HUGE}')
    nul = json.dumps(record("nul", job_id="a\x00b"))
    body = f"{good}\n{huge}\n{nul}\n"
    rejected = _import(local, body, skip=False)
    assert rejected.status_code == 422, rejected.text
    bad = rejected.json()["report"]["bad_lines"]
    assert [b["line"] for b in bad] == [2, 3]
    assert "4300 digits" in bad[0]["message"] and "NUL" in bad[1]["message"]
    assert local.db.count_records() == 0
    skipped = _import(local, body, skip=True)
    assert skipped.status_code == 200, skipped.text
    assert skipped.json()["added"] == 1 and len(skipped.json()["bad_lines"]) == 2


def test_the_cli_reports_a_huge_integer_in_one_line(tmp_path: Path) -> None:
    source = tmp_path / "huge.jsonl"
    source.write_text(json.dumps(record("huge")).replace('"run_s": 0.05', f'"run_s": {HUGE}')
                      + "\n" + json.dumps(record("good")) + "\n")
    env = {**os.environ, "TENSORTUNE_HOME": str(tmp_path)}
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    done = cli("records", "import", str(source), "--db", url, env=env)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("tensortune: error:") and "line 1: not valid JSON" in line
    assert "4300 digits" in line and "Traceback" not in done.stderr
    done = cli("records", "import", str(source), "--db", url, "--skip-bad-lines", env=env)
    assert done.returncode == 0 and "imported 1 new record(s)" in done.stdout
    assert "Traceback" not in done.stderr


# --- finding 5: NaN, Infinity and huge numbers in JSON bodies -------------------------------


def _job_text(**raw: str) -> str:
    """TINY_JOB as JSON text with the given top-level fields as raw JSON text."""
    job = copy.deepcopy(TINY_JOB)
    for name in raw:
        job[name] = f"@{name}@"
    text = json.dumps(job)
    for name, value in raw.items():
        text = text.replace(f'"@{name}@"', value)
    return text


@pytest.mark.parametrize(("role", "path", "body", "loc", "message"), [
    ("reader", "/v1/best:batch", '{"workload_keys":[NaN],"target":"cpu"}',
     ["body", "workload_keys", 0], "NaN is not a valid JSON number"),
    ("reader", "/v1/best:batch", '{"workload_keys":["k"],"target":"cpu","k":-Infinity}',
     ["body", "k"], "-Infinity is not a valid JSON number"),
    ("reader", "/v1/best:batch", f'{{"workload_keys":["k"],"target":"cpu","k":{HUGE}}}',
     ["body", "k"], "integer out of range"),
    ("submitter", "/v1/jobs", _job_text(trials="Infinity"), ["body", "trials"],
     "Infinity is not a valid JSON number"),
    ("submitter", "/v1/jobs", _job_text(trials=HUGE), ["body", "trials"],
     "integer out of range"),
    ("submitter", "/v1/jobs", _job_text(seed=str(2**64)), ["body", "seed"],
     "integer out of range"),
    ("submitter", "/v1/jobs", _job_text(time_budget_s="1e400"), ["body", "time_budget_s"],
     "not a finite 64-bit float"),
    ("submitter", "/v1/jobs", _job_text(measure='{"repeat": NaN}'),
     ["body", "measure", "repeat"], "NaN"),
    ("submitter", "/v1/jobs", _job_text(measure='{"noise_tolerance": 1e400}'),
     ["body", "measure", "noise_tolerance"], "not a finite 64-bit float"),
    ("admin", "/v1/tokens", '{"role": "reader", "owner": "a\\u0000b"}', ["body", "owner"],
     "NUL character"),
])
def test_nan_infinity_and_huge_numbers_get_422_naming_the_field(
        local: LocalApp, role: str, path: str, body: str, loc: list[Any], message: str
) -> None:
    response = local.http.post(path, content=body.encode(),
                               headers={**local.headers(role), **JSON})
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == loc and message in error["msg"]
    assert "input" not in error and len(response.content) < 1000


def test_validation_errors_never_echo_the_input(local: LocalApp) -> None:
    """A wrong type's input (here 100 kB of text) is named, not sent back."""
    body = json.dumps({**TINY_JOB, "trials": "x" * 100_000})
    response = local.http.post("/v1/jobs", content=body.encode(),
                               headers={**local.headers("submitter"), **JSON})
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {"type": "int_type", "loc": ["body", "trials"], "msg": "Input should be a valid integer"}]


# --- finding 6: NUL characters; streams validate before their first byte --------------------


@pytest.fixture(params=BACKENDS)
def backend_app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalApp]:
    """An in-process app on SQLite, then on PostgreSQL (which refuses NUL in text)."""
    with fresh_url(request.param, tmp_path) as url:
        app = create_app(Settings(db_url=url, run_jobs=False))
        db: Database = app.state.service.db
        tokens = {role: db.tokens.create(f"{role}-user", name=role)[0] for role in ROLES}
        local = LocalApp(TestClient(app, raise_server_exceptions=False), db, tokens)
        with local.http:
            yield local
        db.close()


@pytest.mark.parametrize("path", [
    "/v1/records/export?job_id=%00",
    "/v1/records/export?workload_key=a%00b",
    "/v1/records?target=%00",
    "/v1/workloads?workload_key=%00",
    "/v1/best?workload_key=%00&target=cpu",
    "/v1/jobs?owner=%00",
    "/v1/jobs/%00",
    "/v1/jobs/%00/events",
    "/v1/ops/%00",
])
def test_nul_in_a_query_gets_422_naming_it(backend_app: LocalApp, path: str) -> None:
    response = backend_app.http.get(path, headers=backend_app.headers("reader"))
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert "NUL character" in error["msg"] and error["loc"][0] in ("query", "path")


def test_nul_in_body_strings_gets_422_naming_the_field(backend_app: LocalApp) -> None:
    job = copy.deepcopy(TINY_JOB)
    job["workloads"][0]["params"]["dtype"] = "float\x0032"
    response = backend_app.http.post("/v1/jobs", json=job,
                                     headers=backend_app.headers("submitter"))
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "workloads", 0, "params", "dtype"]
    assert backend_app.db.jobs.list(limit=None) == []


def test_no_bad_input_gets_a_5xx(backend_app: LocalApp) -> None:
    """The fuzz test's NaN/Infinity/huge/NUL requests, on both databases."""
    openapi = backend_app.http.get("/openapi.json").json()
    statuses = []
    for bad in bad_requests(openapi):
        response = backend_app.http.request(
            bad.method, bad.path, params=bad.params, content=bad.content,
            headers={**backend_app.headers("admin"), **bad.headers})
        statuses.append((response.status_code, bad.label))
    assert len(statuses) > 500
    assert [s for s in statuses if s[0] >= 500] == []


def test_export_runs_its_query_before_the_first_byte(local: LocalApp,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing query is a status (503), not a 200 whose body breaks off."""
    local.db.add_records([record("one"), record("two")])
    exported = local.http.get("/v1/records/export", headers=local.headers("reader"))
    assert exported.status_code == 200 and len(exported.text.splitlines()) == 2

    def down(**_: Any) -> Iterator[Any]:
        raise DatabaseUnavailableError("the database is down")
        yield  # a generator, as the real one is

    monkeypatch.setattr(local.db, "iter_records", down)
    response = local.http.get("/v1/records/export", headers=local.headers("reader"))
    assert response.status_code == 503 and "down" in response.json()["detail"]


# --- finding 7: /healthz tells only admins why the database is down -------------------------


SECRET = "cannot connect to the database postgresql://tt_user:***@db.internal:5432/tuning"


def test_healthz_says_only_down_without_an_admin_token(local: LocalApp,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def down(**_: Any) -> int:
        raise DatabaseUnavailableError(SECRET)

    monkeypatch.setattr(local.db, "count_records", down)
    for headers in ({}, local.headers("reader"), local.headers("submitter"),
                    {"Authorization": "Bearer tt_not_a_token"}):
        response = local.http.get("/healthz", headers=headers)
        assert response.status_code == 503
        assert response.json() == {"status": "degraded", "database": "down",
                                   "jobs_active": None}
    response = local.http.get("/healthz", headers=local.headers("admin"))
    assert response.status_code == 503
    assert response.json() == {"status": "degraded", "database": SECRET, "jobs_active": 0}


def test_healthz_of_an_unreachable_database_hides_its_address(tmp_path: Path) -> None:
    url = "postgresql://tt_user:secret@127.0.0.1:1/tuning"
    with TestClient(create_app(Settings(db_url=url, run_jobs=False))) as http:
        response = http.get("/healthz")
        assert response.status_code == 503 and response.json()["database"] == "down"
        assert "127.0.0.1" not in response.text and "tt_user" not in response.text
    with TestClient(create_app(Settings(db_url=url, run_jobs=False, auth=False))) as http:
        detail = http.get("/healthz").json()["database"]  # auth off: the local admin
        assert "127.0.0.1" in detail and "secret" not in detail


# --- finding 11: numbers are numbers ---------------------------------------------------------


def _weighted(weight: Any) -> dict[str, Any]:
    return {**TINY_JOB, "workloads": [{"workload": TINY_JOB["workloads"][0],
                                       "weight": weight}]}


@pytest.mark.parametrize(("body", "message"), [
    ({**TINY_JOB, "trials": True}, "'loc': ['body', 'trials']"),
    ({**TINY_JOB, "trials": "2"}, "'loc': ['body', 'trials']"),
    ({**TINY_JOB, "trials": 2.0}, "'loc': ['body', 'trials']"),
    ({**TINY_JOB, "batch_size": False}, "'loc': ['body', 'batch_size']"),
    ({**TINY_JOB, "time_budget_s": True}, "'loc': ['body', 'time_budget_s']"),
    ({**TINY_JOB, "time_budget_s": "60"}, "'loc': ['body', 'time_budget_s']"),
    ({**TINY_JOB, "seed": 1.0}, "'loc': ['body', 'seed']"),
    (_weighted(True), "workloads[0].weight must be a positive number"),
    (_weighted("2"), "workloads[0].weight must be a positive number"),
])
def test_bools_strings_and_floats_are_not_integers(local: LocalApp, body: dict,
                                                   message: str) -> None:
    response = local.http.post("/v1/jobs", json=body, headers=local.headers("submitter"))
    assert response.status_code == 422, response.text
    assert message in str(response.json()["detail"])


@pytest.mark.parametrize("k", [True, "2", 2.0])
def test_best_batch_k_is_a_strict_integer(local: LocalApp, k: Any) -> None:
    response = local.http.post("/v1/best:batch", json={"workload_keys": ["k"], "target": "cpu",
                                                       "k": k}, headers=local.headers("reader"))
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "k"]


def test_floats_take_integers(local: LocalApp) -> None:
    response = local.http.post("/v1/jobs", json={**_weighted(2), "time_budget_s": 60},
                               headers=local.headers("submitter"))
    assert response.status_code == 202, response.text
    spec = local.db.jobs.get(response.json()["id"]).spec
    assert spec["time_budget_s"] == 60 and spec["workloads"][0]["weight"] == 2


def test_job_spec_weight_is_not_a_bool() -> None:
    with pytest.raises(SpecError, match=r"workloads\[0\].weight"):
        JobSpec.from_json(_weighted(True))
    assert JobSpec.from_json(_weighted(0.5)).tasks[0].weight == 0.5
