"""Cost-model snapshots in the database: opaque bytes per (task, target), newest wins.
A mixin of :class:`db.Database`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from .engine import Store
from .errors import DatabaseError
from .models import CostModelSnapshot as SnapshotRow
from .records import MAX_NAME_LEN, MAX_TARGET_LEN, canonical_json

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


class SnapshotStore(Store):
    """Cost-model snapshot operations of :class:`db.Database`."""

    def save_snapshot(
        self, task: str, target: str, data: bytes, meta: Mapping[str, Any] | None = None
    ) -> int:
        """Store a snapshot of the cost model for (``task``, ``target``); return its id."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise DatabaseError(f"snapshot data must be bytes, got {type(data).__name__}")
        if not task or len(task) > MAX_NAME_LEN:
            raise DatabaseError(f"snapshot task must be 1..{MAX_NAME_LEN} characters")
        if not target or len(target) > MAX_TARGET_LEN:
            raise DatabaseError(f"snapshot target must be 1..{MAX_TARGET_LEN} characters")
        try:
            meta_json = canonical_json(dict(meta or {}))
        except (TypeError, ValueError) as exc:
            raise DatabaseError(f"snapshot meta is not representable as JSON ({exc})") from None
        row = {"task": task, "target": target, "data": bytes(data), "meta_json": meta_json,
               "created_at": time.time()}
        with self._write() as conn:
            return int(conn.execute(_SNAPSHOTS.insert().returning(SnapshotRow.id), row)
                       .scalar_one())

    def latest_snapshot(self, task: str, target: str) -> Snapshot | None:
        """The newest snapshot for (``task``, ``target``), or None."""
        statement = (
            select(_SNAPSHOTS)
            .where(SnapshotRow.task == task, SnapshotRow.target == target)
            .order_by(SnapshotRow.id.desc())
            .limit(1)
        )
        with self._read() as conn:
            row = conn.execute(statement).first()
        if row is None:
            return None
        return Snapshot(
            id=row.id, task=row.task, target=row.target, data=bytes(row.data),
            meta=json.loads(row.meta_json), created_at=row.created_at,
        )
