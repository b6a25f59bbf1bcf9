"""The record format without a database: validation, canonical JSON, measurement ids,
target families (db/records.py, db/FORMAT.md)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from db import IDENTITY_FIELDS, Record, RecordError, canonical_json, target_family
from tests.db.helpers import record


def test_from_dict_normalises_numbers_and_round_trips() -> None:
    data = record(costs=[1, 2, 3], timestamp=1_790_000_000)
    rec = Record.from_dict(data)
    assert rec.costs == [1.0, 2.0, 3.0] and isinstance(rec.timestamp, float)
    assert rec.median_cost == 2.0 and rec.ok
    again = Record.from_dict(json.loads(rec.to_json()))
    assert again == rec and again.measurement_id == rec.measurement_id
    assert rec.to_dict()["version"] == 1 and rec.to_dict()["id"] == rec.measurement_id


def test_measurement_id_is_stable_and_covers_identity_fields() -> None:
    base = Record.from_dict(record())
    # int vs float, key order and job id / version / workload JSON do not change identity
    same = Record.from_dict({**record(costs=[0.001]), "job_id": "other-job"})
    assert same.measurement_id == base.measurement_id
    reordered = dict(reversed(list(record().items())))
    assert Record.from_dict(reordered).measurement_id == base.measurement_id
    changes: dict[str, Any] = {
        "target": "cpu -isa=avx2 -cores=2",
        "device_model": "Intel Xeon",
        "toolchain": "clang 17",
        "host": "node-2",
        "flags": "-O2",
        "measure": {"number": 1},
        "steps": [["split", "C", "i", 16]],
        "costs": [0.002],
        "error_msg": "noisy neighbour",
        "build_s": 1.0,
        "run_s": 1.0,
        "timestamp": 1_790_000_001.0,
    }
    for name, value in changes.items():
        assert name in IDENTITY_FIELDS
        changed = Record.from_dict({**record(), name: value})
        assert changed.measurement_id != base.measurement_id, name
    # the id is exactly the documented hash (changing it would break dedupe of old exports)
    identity = {name: getattr(base, name) for name in IDENTITY_FIELDS}
    assert base.measurement_id == hashlib.sha256(canonical_json(identity).encode()).hexdigest()


def test_canonical_json_is_sorted_compact_and_rejects_nan() -> None:
    assert canonical_json({"b": 1, "a": [1.5, "é"]}) == '{"a":[1.5,"é"],"b":1}'
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"workload_key": "XYZ"}, "field 'workload_key': expected 32 lowercase hex"),
        ({"workload": [1]}, "field 'workload': expected a JSON object, got list"),
        ({"target": ""}, "field 'target': must not be empty"),
        ({"target": "x" * 600}, "field 'target': longer than 512"),
        ({"steps": "split"}, "field 'steps': expected a list of steps, got str"),
        ({"steps": [[1, 2]]}, "field 'steps': step 0 is not a list starting with a primitive"),
        ({"costs": "fast"}, "field 'costs': expected a list of numbers, got str"),
        ({"costs": [0.1, -1]}, "field 'costs[1]': expected a number >= 0"),
        ({"costs": [float("inf")]}, "field 'costs[0]': expected a finite number"),
        ({"costs": [True]}, "field 'costs[0]': expected a number, got bool"),
        ({"costs": []}, "field 'costs': must not be empty when error_kind is 'none'"),
        ({"error_kind": "boom"}, "field 'error_kind': 'boom' is not one of none,"),
        ({"error_kind": "compile_error"}, "field 'costs': must be empty when error_kind is"),
        ({"timestamp": "now"}, "field 'timestamp': expected a number, got str"),
        ({"timestamp": 0}, "field 'timestamp': expected seconds since the epoch"),
        ({"device_model": None}, "field 'device_model': expected a string, got null"),
        ({"measure": [1]}, "field 'measure': expected a JSON object"),
        ({"measure": {"x": float("nan")}}, "field 'measure': not representable as JSON"),
        ({"job_id": ""}, "field 'job_id': must not be empty"),
        ({"version": 2}, "format version 2 is newer than this tensortune reads (1)"),
        ({"version": 0}, "field 'version': expected 1..1"),
    ],
)
def test_bad_fields_are_named(change: dict[str, Any], message: str) -> None:
    with pytest.raises(RecordError) as info:
        Record.from_dict({**record(), **change})
    assert message in str(info.value)


def test_missing_field_and_non_object() -> None:
    data = record()
    del data["target"]
    with pytest.raises(RecordError, match="missing field 'target'"):
        Record.from_dict(data)
    with pytest.raises(RecordError, match="expected a JSON object, got list"):
        Record.from_dict([1, 2])  # type: ignore[arg-type]


def test_unknown_fields_are_ignored_and_defaults_apply() -> None:
    data = record()
    for name in ("flops", "error_msg", "build_s", "run_s", "host", "flags", "measure", "job_id",
                 "version"):
        del data[name]
    data["future_field"] = {"anything": 1}
    rec = Record.from_dict(data)
    assert rec.version == 1 and rec.measure == {} and rec.flops is None and rec.job_id is None


def test_integer_job_id_is_read_as_text() -> None:
    assert Record.from_dict(record(job_id=42)).job_id == "42"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target", "family"),
    [
        ("cpu -isa=avx512 -cores=2", "cpu -isa=avx512"),
        ("cpu -cores=16 -isa=avx512", "cpu -isa=avx512"),
        ("cuda -arch=sm_90 -max_threads=1024", "cuda -arch=sm_90"),
        ("vta -config=1x16x16", "vta -config=1x16x16"),
        ("cpu -cores=2", "cpu -cores=2"),
        ("opencl -device=x", "opencl -device=x"),
    ],
)
def test_target_family(target: str, family: str) -> None:
    assert target_family(target) == family
