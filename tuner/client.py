"""A Python client of the tensortune REST API (httpx):

    from tuner.client import Client
    with Client("http://127.0.0.1:8000", token="tt_...") as api:
        job = api.submit({"workloads": [{"op": "matmul", "params": {"M": 64, "N": 64,
                          "K": 64}}], "target": "cpu", "trials": 32})
        for event in api.events(job["id"]):          # one per measured batch, then "done"
            print(event["type"], event["trials"])
        best = api.best(workload_key, "cpu")         # steps, latency_s, gflops, ...

Errors from the server raise :class:`ApiError` with its status code and message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx


class ApiError(Exception):
    """The server answered with an error status; ``status`` and ``detail`` say which."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


class Client:
    """The API at ``base_url`` with a bearer ``token`` (None when the server runs without
    authentication)."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                  timeout=timeout, transport=transport)

    # ------------------------------------------------------------------ plumbing
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise ApiError(response.status_code, detail)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    @staticmethod
    def _params(**values: Any) -> dict[str, Any]:
        return {k: v for k, v in values.items() if v is not None}

    # ------------------------------------------------------------------ jobs
    def submit(self, spec: Mapping[str, Any], *, idempotency_key: str | None = None
               ) -> dict[str, Any]:
        """Submit a job (the body of ``POST /v1/jobs``): ``{"id", "url", "status", ...}``."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._json("POST", "/v1/jobs", json=dict(spec), headers=headers)

    def submit_model(self, model: str | Path | bytes, options: Mapping[str, Any], *,
                     filename: str | None = None, idempotency_key: str | None = None
                     ) -> dict[str, Any]:
        """Upload an ONNX model (a path or its bytes) to tune its tasks as one job;
        ``options``: ``target``, ``trials`` and other job options (no workloads)."""
        if isinstance(model, bytes):
            data, name = model, filename or "model.onnx"
        else:
            data, name = Path(model).read_bytes(), filename or Path(model).name
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._json("POST", "/v1/jobs", headers=headers,
                          files={"model": (name, data, "application/octet-stream")},
                          data={"spec": json.dumps(dict(options))})

    def model_best(self, job_id: str) -> dict[str, Any]:
        """A model job's per-task best records and estimated end-to-end latency."""
        return self._json("GET", f"/v1/models/{job_id}/best")

    def job(self, job_id: str) -> dict[str, Any]:
        """Status, spec and per workload progress, best so far and curve."""
        return self._json("GET", f"/v1/jobs/{job_id}")

    def trials(self, job_id: str) -> dict[str, Any]:
        """Every measured trial of a job, per workload (latency or error kind)."""
        return self._json("GET", f"/v1/jobs/{job_id}/trials")

    def jobs(self, *, status: str | None = None, owner: str | None = None, limit: int = 50,
             offset: int = 0) -> list[dict[str, Any]]:
        params = self._params(status=status, owner=owner, limit=limit, offset=offset)
        return self._json("GET", "/v1/jobs", params=params)["jobs"]

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel a job; a running one stops after its current batch."""
        return self._json("DELETE", f"/v1/jobs/{job_id}")

    def events(self, job_id: str, *, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """The job's server-sent events as dicts (``type`` "batch" per measured batch, then
        "done"), until the stream ends."""
        with self._http.stream("GET", f"/v1/jobs/{job_id}/events",
                               timeout=httpx.Timeout(timeout, connect=10.0)) as response:
            if response.status_code >= 400:
                response.read()
                raise ApiError(response.status_code, response.json().get("detail"))
            data: list[str] = []
            for line in response.iter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    yield json.loads("\n".join(data))
                    data = []

    def wait(self, job_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Follow the job's events to its end; return the final job."""
        for _ in self.events(job_id, timeout=timeout):
            pass
        return self.job(job_id)

    # ------------------------------------------------------------------ best schedules
    def best(self, workload_key: str, target: str, *, k: int = 1,
             fallback: str | None = None) -> dict[str, Any]:
        """The k best schedules (steps, latency_s, gflops, measured_at ...); ApiError 404
        when nothing is known."""
        params = self._params(workload_key=workload_key, target=target, k=k, fallback=fallback)
        return self._json("GET", "/v1/best", params=params)

    def best_program(self, workload_key: str, target: str) -> dict[str, Any]:
        """The best program as text: its steps, loop IR and generated source (made in
        the server's sandbox); ApiError 404 when nothing is known."""
        return self._json("GET", "/v1/best/program",
                          params=self._params(workload_key=workload_key, target=target))

    def best_batch(self, workload_keys: Sequence[str], target: str, *, k: int = 1,
                   fallback: str | None = None) -> dict[str, Any]:
        """Best schedules of many workloads: ``{"results": {key: ...}, "missing": [...]}``."""
        body = self._params(workload_keys=list(workload_keys), target=target, k=k,
                            fallback=fallback)
        return self._json("POST", "/v1/best:batch", json=body)

    # ------------------------------------------------------------------ records
    def records(self, **filters: Any) -> dict[str, Any]:
        """One page of records: filters workload_key, target, job_id, error_kind, ok,
        order, limit, offset. ``{"total", "records": [...]}``."""
        return self._json("GET", "/v1/records", params=self._params(**filters))

    def export(self, dest: str | Path | None = None, **filters: Any) -> str | int:
        """Records as JSON lines: the text, or written to ``dest`` (then the line count)."""
        text = self._request("GET", "/v1/records/export", params=self._params(**filters)).text
        if dest is None:
            return text
        Path(dest).write_text(text, encoding="utf-8")
        return text.count("\n")

    def import_records(self, lines: str | bytes | Path | Iterable[str], *,
                       skip_bad_lines: bool = False) -> dict[str, Any]:
        """Import JSON-lines records (text, bytes, a file path or lines); the import
        report. Needs the admin role."""
        if isinstance(lines, Path):
            body = lines.read_bytes()
        elif isinstance(lines, str | bytes):
            body = lines.encode() if isinstance(lines, str) else lines
        else:
            body = "".join(line if line.endswith("\n") else line + "\n"
                           for line in lines).encode()
        return self._json("POST", "/v1/records/import", content=body,
                          params={"skip_bad_lines": skip_bad_lines},
                          headers={"Content-Type": "application/x-ndjson"})

    # ------------------------------------------------------------------ catalog
    def ops(self) -> list[dict[str, Any]]:
        """Registered operators with the JSON schemas of their parameters."""
        return self._json("GET", "/v1/ops")

    def workloads(self, **filters: Any) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/workloads", params=self._params(**filters))

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/healthz")

    # ------------------------------------------------------------------ life cycle
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
