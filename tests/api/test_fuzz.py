"""Fuzzing of the OpenAPI schema with schemathesis (valid and invalid requests generated
from the schema by hypothesis, sent in-process): no 5xx, every status code documented,
every response body, header and content type as documented. Jobs the fuzzer submits stay
queued (the app has no job threads). Then what schemathesis does not generate: NaN,
Infinity, huge integers and NUL characters in every field (``bad_inputs.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, example, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import checks
from schemathesis.generation import GenerationMode

from .bad_inputs import bad_requests
from .conftest import TINY_JOB, LocalApp, make_local_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]
EXAMPLES = 20


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_ctx: object, value: object) -> bytes:
    """Record imports are JSON lines: the generated body is sent as it is (as text)."""
    return value if isinstance(value, bytes) else str(value).encode()


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> LocalApp:
    return make_local_app(Path(tmp_path_factory.mktemp("fuzz")))


@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: m.value)
def test_no_server_errors_and_responses_match_the_schema(fuzzed: LocalApp,
                                                         mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzzed.http.app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    failures: list[str] = []
    without_inputs: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @_with_a_valid_job(operation, mode)
        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        def fuzz(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=fuzzed.headers("admin"), checks=CHECKS)

        try:
            fuzz()
        except Unsatisfiable:  # nothing to make invalid: an operation without parameters
            assert mode is GenerationMode.NEGATIVE
            without_inputs.append(operation.label)
        except Exception as failure:  # collect every operation's failure, report them all
            failures.append(f"{operation.label}: {failure}")
    assert not failures, "\n\n".join(failures)
    assert len(without_inputs) < len(operations) / 2


def test_fuzzing_reached_past_validation(fuzzed: LocalApp) -> None:
    """Not every request was rejected: job bodies sent by the fuzzing harness made jobs (the
    random ones rarely pass validation, so a valid one is always among them)."""
    assert fuzzed.db.jobs.list(limit=None), "no job body passed validation"


def test_nan_infinity_huge_integers_and_nul_anywhere_get_4xx(fuzzed: LocalApp) -> None:
    """Every operation, every field: no 5xx, JSON error bodies; a bad JSON body value gets
    a 422 whose error names exactly its field (JSON lines: a bad line, nothing imported)."""
    openapi = fuzzed.http.get("/openapi.json").json()
    failures: list[str] = []
    sent = 0
    for bad in bad_requests(openapi):
        response = fuzzed.http.request(bad.method, bad.path, params=bad.params,
                                       headers={**fuzzed.headers("admin"), **bad.headers},
                                       content=bad.content)
        sent += 1
        if response.status_code >= 500:
            failures.append(f"{bad.label}: {response.status_code} {response.text[:200]}")
            continue
        if response.headers.get("content-type", "").startswith("application/json"):
            detail = response.json().get("detail") if response.status_code >= 400 else None
        else:
            detail = None
        if bad.content is not None and bad.label.startswith("POST /v1/records/import"):
            # Records may hold integers over 64 bits (JSON has no limit): only the rest
            # must be bad lines.
            if "2**64" not in bad.label and (response.status_code != 422
                                             or "report" not in response.json()):
                failures.append(f"{bad.label}: {response.status_code} {response.text[:200]}")
        elif bad.field is not None and not (
                response.status_code == 422 and isinstance(detail, list)
                and any(error["loc"] == bad.field for error in detail)):
            failures.append(f"{bad.label}: {response.status_code} {response.text[:200]}")
    assert sent > 500
    assert not failures, f"{len(failures)} of {sent}:\n" + "\n".join(failures[:40])


def _with_a_valid_job(operation: Any, mode: GenerationMode) -> Callable[[Any], Any]:
    """Add a valid job submission to the generated cases of ``POST /v1/jobs``."""
    if mode is GenerationMode.POSITIVE and operation.label == "POST /v1/jobs":
        return example(case=operation.Case(body=TINY_JOB, media_type="application/json"))
    return lambda fuzz: fuzz
