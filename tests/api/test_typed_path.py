"""One trial, one typed path: from ``POST /v1/jobs`` to its stored records, the server
process parses the job's workload and target once; from there they travel as objects."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api import Settings, create_app
from schedule import Target, Workload

from .conftest import TINY_JOB


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the parses of workload JSON and target strings in this process."""
    counts: Counter[str] = Counter()
    parse_target = Target.parse.__func__
    parse_workload = Workload.from_json.__func__

    def counting_parse(cls: type[Target], spec: Target | str) -> Target:
        if isinstance(spec, str):  # a Target given as itself is no parse
            counts["target"] += 1
        return parse_target(cls, spec)

    def counting_from_json(cls: type[Workload], doc: object) -> Workload:
        counts["workload"] += 1
        return parse_workload(cls, doc)

    monkeypatch.setattr(Target, "parse", classmethod(counting_parse))
    monkeypatch.setattr(Workload, "from_json", classmethod(counting_from_json))
    return counts


def test_a_trial_parses_its_workload_and_target_once_in_the_server(
        tmp_path: Path, parses: Counter[str]) -> None:
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path / 'api.db'}", run_jobs=True))
    db = app.state.service.db
    token, _ = db.tokens.create("submitter-user", name="submitter")
    with TestClient(app) as http:
        parses.clear()  # what starting the app parsed is not the trial's
        response = http.post("/v1/jobs", json=TINY_JOB,
                             headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        deadline = time.monotonic() + 300
        while db.jobs.get(job_id).status in ("queued", "running"):
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.2)
    assert db.jobs.get(job_id).status == "succeeded"
    records = db.query_records(job_id=job_id)
    assert len(records) == TINY_JOB["trials"] + TINY_JOB["reconfirm"]
    assert all(r.ok for r in records)
    assert parses == {"workload": 1, "target": 1}
