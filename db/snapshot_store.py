"""Cost-model snapshots in the database: opaque bytes per (task, target), newest wins.
Reached as ``Database(url).snapshots``; what the bytes hold is the cost-model layer's
business (``cost_model.snapshot``: JSON, never a pickle).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from .engine import StoreBase
from .errors import DatabaseError
from .models import SnapshotRow
from .records import MAX_NAME_LEN, MAX_TARGET_LEN, json_object_text

_SNAPSHOTS = SnapshotRow.__table__


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A stored cost model: its bytes and a JSON object of metadata (format, version,
    training-set size... whatever the cost-model layer puts there)."""

    id: int
    task: str
    target: str
    data: bytes
    meta: dict[str, Any]
    created_at: float


def _snapshot(row: Any) -> Snapshot:
    columns = dict(row._mapping)
    data, meta = columns.pop("data"), columns.pop("meta_json")
    return Snapshot(data=bytes(data), meta=json.loads(meta), **columns)


class SnapshotStore(StoreBase):
    """The cost-model snapshots of a database: ``save`` one, look up the ``latest``."""

    def save(
        self, task: str, target: str, data: bytes, meta: Mapping[str, Any] | None = None
    ) -> int:
        """Store a snapshot of the cost model for (``task``, ``target``); return its id."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise DatabaseError(f"snapshot data must be bytes, got {type(data).__name__}")
        if not task or len(task) > MAX_NAME_LEN:
            raise DatabaseError(f"snapshot task must be 1..{MAX_NAME_LEN} characters")
        if not target or len(target) > MAX_TARGET_LEN:
            raise DatabaseError(f"snapshot target must be 1..{MAX_TARGET_LEN} characters")
        row = {"task": task, "target": target, "data": bytes(data),
               "meta_json": json_object_text("snapshot meta", meta or {}),
               "created_at": time.time()}
        with self.connector.write() as conn:
            return int(conn.execute(_SNAPSHOTS.insert().returning(SnapshotRow.id), row)
                       .scalar_one())

    def latest(self, task: str, target: str) -> Snapshot | None:
        """The newest snapshot for (``task``, ``target``), or None."""
        statement = (
            select(_SNAPSHOTS)
            .where(SnapshotRow.task == task, SnapshotRow.target == target)
            .order_by(SnapshotRow.id.desc())
            .limit(1)
        )
        with self.connector.read() as conn:
            row = conn.execute(statement).first()
        return None if row is None else _snapshot(row)
