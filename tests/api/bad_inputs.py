"""A bounded set of hostile requests for every operation of the OpenAPI schema: NaN,
Infinity, huge integers and NUL characters in every body field (JSON and JSON lines),
query parameter, path parameter and header. Used by the fuzz test (no 5xx, and 422s
naming the field) and by ``bench/api_bad_input.py``."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tests.db.helpers import record

from .conftest import TINY_JOB

#: JSON texts no body may carry: each replaces one field of a valid body in turn.
BAD_JSON = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "5000-digit integer": "1" * 5000,
    "2**64": str(2**64),
    "-2**64": str(-(2**64)),
    "1e400": "1e400",
    "NUL in a string": '"a\\u0000b"',
}
#: Query, path and header values: the same, as text.
BAD_TEXT = ["\x00", "a\x00b", "NaN", "Infinity", "-Infinity", "1" * 5000, str(2**64), "1e400"]
#: Valid values for the required query parameters, so that the bad one is what is judged.
VALID_QUERY = {"workload_key": "0" * 32, "target": "cpu"}
#: A valid body of each JSON operation (each field of it gets every bad value in turn).
VALID_BODIES: dict[str, Any] = {
    "POST /v1/jobs": TINY_JOB,
    "POST /v1/best:batch": {"workload_keys": ["0" * 32], "target": "cpu", "k": 2,
                            "fallback": "same_isa"},
    "POST /v1/tokens": {"role": "reader", "owner": "fuzz"},
    "POST /v1/records/import": record("fuzz", job_id="fuzz-job"),
}
_HOLE = "__tensortune_bad_value__"


@dataclass
class BadRequest:
    """One request to send, and where its bad value is (``field`` for a JSON body: the
    error's expected ``loc``; None where the value may be acceptable text)."""

    label: str
    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    field: list[str | int] | None = None


def _nodes(value: Any, where: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """The path of every value inside ``value`` (containers and leaves; not the root)."""
    pending = [(value, where)]
    while pending:
        node, loc = pending.pop()
        if loc:
            yield loc
        if isinstance(node, dict):
            pending.extend((item, (*loc, key)) for key, item in node.items())
        elif isinstance(node, list):
            pending.extend((item, (*loc, n)) for n, item in enumerate(node))


def _with(body: Any, loc: tuple[str | int, ...], raw: str) -> bytes:
    """``body`` as JSON text with the value at ``loc`` replaced by the JSON text ``raw``."""
    changed = copy.deepcopy(body)
    parent = changed
    for part in loc[:-1]:
        parent = parent[part]
    parent[loc[-1]] = _HOLE
    return json.dumps(changed).replace(json.dumps(_HOLE), raw, 1).encode()


def _body_requests(label: str, method: str, path: str, ndjson: bool) -> Iterator[BadRequest]:
    body = VALID_BODIES[label]
    headers = {"Content-Type": "application/x-ndjson" if ndjson else "application/json"}
    for loc in _nodes(body):
        for name, raw in BAD_JSON.items():
            yield BadRequest(f"{label} body {'.'.join(map(str, loc))}={name}", method, path,
                             headers=headers, content=_with(body, loc, raw) + b"\n" * ndjson,
                             field=None if ndjson else ["body", *loc])
    for name, raw in BAD_JSON.items():  # the whole body, and a field name with NUL
        yield BadRequest(f"{label} body={name}", method, path, headers=headers,
                         content=raw.encode(), field=None if ndjson else ["body"])
    nul_key = json.dumps({**body, "a\x00b": 1}).encode()
    yield BadRequest(f"{label} body with a NUL in a field name", method, path,
                     headers=headers, content=nul_key, field=None if ndjson else ["body"])


def bad_requests(openapi: dict[str, Any]) -> Iterator[BadRequest]:
    """Every bad request for every operation of ``openapi`` (the app's schema)."""
    for template, operations in openapi["paths"].items():
        for method, operation in operations.items():
            label = f"{method.upper()} {template}"
            parameters = operation.get("parameters", [])
            in_path = [p["name"] for p in parameters if p["in"] == "path"]
            path = template.format(**{name: "x" for name in in_path})
            required = {p["name"]: VALID_QUERY.get(p["name"], "x") for p in parameters
                        if p["in"] == "query" and p.get("required")}
            for name in in_path:
                for value in BAD_TEXT:
                    bad_path = template.format(**{other: "x" for other in in_path} | {
                        name: quote(value, safe="")})
                    yield BadRequest(f"{label} path {name}={value[:12]!r}", method.upper(),
                                     bad_path, params=required)
            for parameter in parameters:
                if parameter["in"] not in ("query", "header"):
                    continue
                for value in BAD_TEXT:
                    if parameter["in"] == "query":
                        yield BadRequest(f"{label} query {parameter['name']}={value[:12]!r}",
                                         method.upper(), path,
                                         params={**required, parameter["name"]: value})
                    elif "\x00" not in value:  # HTTP itself has no NUL in a header
                        yield BadRequest(f"{label} header {parameter['name']}={value[:12]!r}",
                                         method.upper(), path, params=required,
                                         headers={parameter["name"]: value})
            content = operation.get("requestBody", {}).get("content", {})
            if content:
                yield from _body_requests(label, method.upper(), path,
                                          "application/json" not in content)
