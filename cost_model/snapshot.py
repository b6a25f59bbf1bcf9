"""The byte format of cost-model snapshots (what the database stores).

A snapshot is UTF-8 JSON: ``{"format": "tensortune-cost-model", "version": 1, "kind": ...,
"meta": {...}, "blobs": {name: base64}}``. Blobs hold XGBoost's own UBJSON model and raw
little-endian float32/float64 arrays; nothing is unpickled, so loading a snapshot from the
database never runs code.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

FORMAT = "tensortune-cost-model"
VERSION = 1


class SnapshotError(ValueError):
    """The bytes are not a cost-model snapshot this version can read, or not of this kind."""


def pack(kind: str, meta: dict[str, Any], blobs: dict[str, bytes] | None = None) -> bytes:
    doc = {"format": FORMAT, "version": VERSION, "kind": kind, "meta": meta,
           "blobs": {k: base64.b64encode(v).decode("ascii") for k, v in (blobs or {}).items()}}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


def unpack(data: bytes, kind: str | None = None) -> tuple[str, dict[str, Any], dict[str, bytes]]:
    """``(kind, meta, blobs)`` of a snapshot; ``kind`` given: it must match."""
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as err:
        raise SnapshotError(f"not a cost-model snapshot: {err}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SnapshotError("not a cost-model snapshot (no tensortune-cost-model header)")
    if doc.get("version") != VERSION:
        raise SnapshotError(f"cost-model snapshot version {doc.get('version')!r} is not "
                            f"supported (this version reads {VERSION})")
    found = doc.get("kind")
    if kind is not None and found != kind:
        raise SnapshotError(f"the snapshot holds a {found!r} cost model, not {kind!r}")
    meta, blobs = doc.get("meta"), doc.get("blobs")
    if not isinstance(meta, dict) or not isinstance(blobs, dict):
        raise SnapshotError("malformed cost-model snapshot (meta/blobs)")
    try:
        decoded = {str(k): base64.b64decode(v, validate=True) for k, v in blobs.items()}
    except (ValueError, TypeError) as err:
        raise SnapshotError(f"malformed cost-model snapshot blob: {err}") from None
    return str(found), meta, decoded


@contextmanager
def reading(kind: str) -> Iterator[None]:
    """Around the reading of a snapshot's meta and blobs: a missing key or a value of the
    wrong type or range raises :class:`SnapshotError` ("malformed ``kind`` snapshot")."""
    try:
        yield
    except (KeyError, TypeError, ValueError) as err:
        raise SnapshotError(f"malformed {kind} snapshot: {err}") from None


def array_to_bytes(a: np.ndarray, dtype: str = "<f4") -> bytes:
    return np.ascontiguousarray(a, dtype=dtype).tobytes()


def array_from_bytes(b: bytes, shape: tuple[int, ...] | list[int], dtype: str = "<f4"
                     ) -> np.ndarray:
    shape = tuple(int(s) for s in shape)
    a = np.frombuffer(b, dtype=dtype)
    if a.size != int(np.prod(shape)):
        raise SnapshotError(f"snapshot array of {a.size} values does not fit shape {shape}")
    return a.reshape(shape).copy()
