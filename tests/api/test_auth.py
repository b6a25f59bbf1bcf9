"""Bearer tokens and roles: each role can do what it should and nothing more; /healthz and
the dashboard page need no token; tokens are stored hashed; auth off binds loopback only."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json

import pytest
from fastapi.testclient import TestClient

from api import ROLES as API_ROLES
from api import Settings, create_app
from db import Database
from schedule import Workload
from tuner import is_loopback
from tuner.cli import main as cli_main
from tuner.cli_service import ROLES as CLI_ROLES

from .conftest import TINY_JOB, LocalApp, make_local_app

_WORKLOAD = Workload.op("matmul", M=4, N=4, K=4)
RECORD_LINE = json.dumps({
    "version": 1, "workload_key": _WORKLOAD.key, "workload": _WORKLOAD.to_json(),
    "target": "cpu -isa=avx2 -cores=2", "steps": [], "costs": [0.001], "error_kind": "none",
    "timestamp": 1.0, "device_model": "d", "toolchain": "t"}) + "\n"

# (method, path, body or None, the weakest role allowed)
ENDPOINTS = [
    ("GET", "/v1/jobs", None, "reader"),
    ("GET", "/v1/records", None, "reader"),
    ("GET", "/v1/records/export", None, "reader"),
    ("GET", "/v1/ops", None, "reader"),
    ("GET", "/v1/ops/matmul", None, "reader"),
    ("GET", "/v1/workloads", None, "reader"),
    ("GET", "/metrics", None, "reader"),
    ("POST", "/v1/best:batch", {"workload_keys": ["k1"], "target": "cpu"}, "reader"),
    ("POST", "/v1/jobs", TINY_JOB, "submitter"),
    ("GET", "/v1/tokens", None, "admin"),
    ("POST", "/v1/tokens", {"role": "reader", "owner": "x"}, "admin"),
]


def _call(app: LocalApp, method: str, path: str, body: object, role: str | None):
    return app.http.request(method, path, json=body, headers=app.headers(role))


@pytest.mark.parametrize(("method", "path", "body", "weakest"), ENDPOINTS)
def test_each_role_can_do_what_it_should_and_nothing_more(
        local: LocalApp, method: str, path: str, body: object, weakest: str) -> None:
    for role in API_ROLES:
        response = _call(local, method, path, body, role)
        allowed = API_ROLES.index(role) >= API_ROLES.index(weakest)
        if allowed:
            assert response.status_code < 400, (role, path, response.text)
        else:
            assert response.status_code == 403, (role, path, response.text)
            assert f"needs the {weakest} role" in response.json()["detail"]
    response = _call(local, method, path, body, None)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


def test_record_import_is_for_admins_only(local: LocalApp) -> None:
    for role, status in (("reader", 403), ("submitter", 403), ("admin", 200)):
        response = local.http.post("/v1/records/import", content=RECORD_LINE,
                                   headers=local.headers(role))
        assert response.status_code == status, response.text
    assert local.db.count_records() == 1


def test_submitters_cancel_their_own_jobs_admins_any(local: LocalApp) -> None:
    def submit(role: str, seed: int) -> str:
        response = local.http.post("/v1/jobs", json={**TINY_JOB, "seed": seed},
                                   headers=local.headers(role))
        assert response.status_code == 202, response.text
        return response.json()["id"]

    own, admins = submit("submitter", 1), submit("admin", 2)
    other = local.http.delete(f"/v1/jobs/{admins}", headers=local.headers("submitter"))
    assert other.status_code == 403 and "another owner" in other.json()["detail"]
    mine = local.http.delete(f"/v1/jobs/{own}", headers=local.headers("submitter"))
    assert mine.status_code == 200 and mine.json()["status"] == "cancelled"
    assert local.http.delete(f"/v1/jobs/{admins}", headers=local.headers("reader")) \
        .status_code == 403
    anyone = local.http.delete(f"/v1/jobs/{admins}", headers=local.headers("admin"))
    assert anyone.status_code == 200 and anyone.json()["status"] == "cancelled"


def test_unknown_malformed_and_revoked_tokens_are_refused(local: LocalApp) -> None:
    for header in ("Bearer tt_not-a-token", "Basic dXNlcjpwdw==", "Bearer ", "tt_x"):
        response = local.http.get("/v1/jobs", headers={"Authorization": header})
        assert response.status_code == 401, header
    created = local.http.post("/v1/tokens", json={"role": "reader", "owner": "carol"},
                              headers=local.headers("admin"))
    assert created.status_code == 201
    token = created.json()["token"]
    assert local.http.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"}) \
        .status_code == 200
    revoked = local.http.delete(f"/v1/tokens/{created.json()['id']}",
                                headers=local.headers("admin"))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    response = local.http.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401 and "revoked" in response.json()["detail"]


def test_a_token_without_an_api_role_is_forbidden(local: LocalApp) -> None:
    secret, _ = local.db.tokens.create("dave", name="some label")
    response = local.http.get("/v1/jobs", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 403 and "no API role" in response.json()["detail"]


def test_tokens_are_stored_hashed(local: LocalApp) -> None:
    secret = local.tokens["admin"]
    with local.db.connector.read() as conn:
        rows = conn.exec_driver_sql("SELECT token_hash FROM api_tokens").all()
    stored = {row[0] for row in rows}
    assert hashlib.sha256(secret.encode()).hexdigest() in stored
    assert not any(secret in value for value in stored)
    listing = local.http.get("/v1/tokens", headers=local.headers("admin")).json()
    assert {t["role"] for t in listing} == set(API_ROLES)
    assert all("token" not in t for t in listing)


def test_health_and_dashboard_need_no_token(local: LocalApp) -> None:
    health = local.http.get("/healthz")
    assert health.status_code == 200 and health.json()["database"] == "ok"
    page = local.http.get("/")
    assert page.status_code == 200 and "<svg" not in page.text and "dashboard.js" in page.text
    assert local.http.get("/dashboard.js").status_code == 200


def test_auth_off_acts_as_local_admin_on_loopback_only(tmp_path) -> None:
    app = make_local_app(tmp_path, auth=False)
    with app.http:
        assert app.http.get("/v1/tokens").status_code == 200
        submitted = app.http.post("/v1/jobs", json=TINY_JOB)
        assert submitted.status_code == 202
        assert app.db.jobs.get(submitted.json()["id"]).owner == "local"
    with pytest.raises(ValueError, match="loopback"):
        create_app(Settings(db_url=f"sqlite:///{tmp_path / 'x.db'}", auth=False,
                            host="0.0.0.0", run_jobs=False))


def test_cli_and_api_agree_on_roles_and_loopback() -> None:
    assert CLI_ROLES == API_ROLES
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert is_loopback("127.3.2.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    assert not is_loopback("example.org")


def test_verified_tokens_are_cached_for_a_few_seconds(tmp_path) -> None:
    """A token revoked by another process (here: the database directly) keeps working for
    token_cache_s; with no cache it stops at once. Revoking through the API always does."""
    for ttl, status_after in ((60.0, 200), (0.0, 401)):
        app = make_local_app(tmp_path / str(ttl), token_cache_s=ttl)
        with app.http:
            secret, info = app.db.tokens.create("erin", name="reader")
            headers = {"Authorization": f"Bearer {secret}"}
            assert app.http.get("/v1/ops", headers=headers).status_code == 200
            app.db.tokens.revoke(info.id)
            assert app.http.get("/v1/ops", headers=headers).status_code == status_after


@pytest.mark.parametrize(("args", "env_auth"), [
    (["serve", "--no-auth", "--host", "0.0.0.0"], None),
    (["serve", "--host", "192.168.1.5"], "0"),
])
def test_serve_refuses_other_hosts_without_auth(args: list[str], env_auth: str | None,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    if env_auth is not None:
        monkeypatch.setenv("TENSORTUNE_AUTH", env_auth)
    assert cli_main(args) == 1
    assert "refusing to serve on" in capsys.readouterr().err


def test_token_create_prints_the_secret_once(tmp_path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'tokens.db'}"
    assert cli_main(["token", "create", "--role", "submitter", "--owner", "ci",
                     "--db", url]) == 0
    out, err = capsys.readouterr()
    secret = out.strip()
    assert secret.startswith("tt_") and "shown only once" in err
    info = Database(url).tokens.verify(secret)
    assert info is not None and info.owner == "ci" and info.name == "submitter"
    assert cli_main(["token", "create", "--role", "root", "--db", url]) == 2


def test_tokens_created_without_an_owner_never_share_jobs(tmp_path) -> None:
    """Each token is its own owner unless an admin grants a shared one: two submitter
    tokens made by the same person on the same machine cannot cancel each other's jobs."""
    url = f"sqlite:///{tmp_path / 'owners.db'}"
    secrets = []
    for _ in range(2):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert cli_main(["token", "create", "--role", "submitter", "--json",
                             "--db", url]) == 0
        secrets.append(json.loads(out.getvalue())["token"])
    app = create_app(Settings(db_url=url, run_jobs=False))
    with TestClient(app) as http:
        first, second = ({"Authorization": f"Bearer {s}"} for s in secrets)
        job = http.post("/v1/jobs", json=TINY_JOB, headers=first).json()["id"]
        refused = http.delete(f"/v1/jobs/{job}", headers=second)
        assert refused.status_code == 403 and "another owner" in refused.json()["detail"]
        assert http.delete(f"/v1/jobs/{job}", headers=first).status_code == 200
        shared = [http.post("/v1/tokens", json={"role": "submitter", "owner": "team"},
                            headers=first) for _ in range(2)]
        assert all(r.status_code == 403 for r in shared)  # granting is for admins
    a, b = (app.state.service.db.tokens.create("team", name="submitter")[0] for _ in range(2))
    with TestClient(app) as http:  # an admin granted one owner to both: they share jobs
        job = http.post("/v1/jobs", json={**TINY_JOB, "seed": 3},
                        headers={"Authorization": f"Bearer {a}"}).json()["id"]
        assert http.delete(f"/v1/jobs/{job}", headers={"Authorization": f"Bearer {b}"}) \
            .status_code == 200
