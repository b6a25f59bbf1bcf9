"""A record the best query passes over says why in the records listing, and the best
endpoint answers with the program that was faster side by side."""

from __future__ import annotations

from db import Outranking, Record
from tests.db.helpers import TARGET, key, record

from .conftest import LocalApp


def test_the_records_page_and_the_best_endpoint_honour_an_outranking(local: LocalApp) -> None:
    fast_minute = Record.from_dict(record("mm", [1.0e-3], steps=[["split", "C", "i", 8]]))
    side_by_side_winner = Record.from_dict(record("mm", [1.2e-3], timestamp=2e9,
                                                  steps=[["split", "C", "i", 16]]))
    local.db.add_records([fast_minute, side_by_side_winner])
    local.db.outrank([Outranking(fast_minute.measurement_id,
                                 side_by_side_winner.measurement_id, 1.25, "job-7")])
    reader = local.headers("reader")
    page = local.http.get("/v1/records", params={"order": "cost"}, headers=reader).json()
    first, second = page["records"]
    assert first["id"] == fast_minute.measurement_id
    assert first["outranked"] == {"by": side_by_side_winner.measurement_id, "ratio": 1.25,
                                  "job_id": "job-7"}
    assert "outranked" not in second
    best = local.http.get("/v1/best", params={"workload_key": key("mm"), "target": TARGET},
                          headers=reader)
    assert best.status_code == 200, best.text
    assert [r["latency_s"] for r in best.json()["results"]] == [1.2e-3]
