"""Target families and cost statistics on records, device/family/job indexes, API tokens
and cost-model snapshots.

Existing records are backfilled: ``target_family`` from the target string, ``mean_cost``
and ``min_cost`` from ``costs_json``. No row is removed or rewritten otherwise.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import json
import math

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
OK = sa.text("median_cost IS NOT NULL")
BATCH = 5000

# Frozen copy of db.records.target_family as of this revision (a migration must not change
# behaviour when the live code does).
_FAMILY_OPTIONS = {"cpu": ("isa", "mcpu", "march"), "cuda": ("arch",), "vta": ("config",)}


def _family(target: str) -> str:
    tokens = target.split()
    if not tokens:
        return target
    kind, options = tokens[0], {}
    for token in tokens[1:]:
        name, sep, value = token.lstrip("-").partition("=")
        if token.startswith("-") and sep:
            options.setdefault(name, value)
    for name in _FAMILY_OPTIONS.get(kind, ()):
        if name in options:
            return f"{kind} -{name}={options[name]}"
    return target


def _backfill() -> None:
    records = sa.table(
        "records",
        sa.column("id", sa.Integer),
        sa.column("target", sa.String),
        sa.column("costs_json", sa.Text),
        sa.column("target_family", sa.String),
        sa.column("mean_cost", sa.Double),
        sa.column("min_cost", sa.Double),
    )
    update = (
        sa.update(records)
        .where(records.c.id == sa.bindparam("_id"))
        .values(
            target_family=sa.bindparam("_family"),
            mean_cost=sa.bindparam("_mean"),
            min_cost=sa.bindparam("_min"),
        )
    )
    conn = op.get_bind()
    last = -1
    while True:
        rows = conn.execute(
            sa.select(records.c.id, records.c.target, records.c.costs_json)
            .where(records.c.id > last)
            .order_by(records.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        params = []
        for row in rows:
            costs = json.loads(row.costs_json)
            params.append(
                {
                    "_id": row.id,
                    "_family": _family(row.target),
                    "_mean": math.fsum(costs) / len(costs) if costs else None,
                    "_min": min(costs) if costs else None,
                }
            )
        conn.execute(update, params)
        last = rows[-1].id


def upgrade() -> None:
    # server_default lets SQLite add a NOT NULL column in place; the backfill sets it.
    op.add_column(
        "records",
        sa.Column("target_family", sa.String(512), nullable=False, server_default=""),
    )
    op.add_column("records", sa.Column("mean_cost", sa.Double(), nullable=True))
    op.add_column("records", sa.Column("min_cost", sa.Double(), nullable=True))
    _backfill()
    op.create_index(
        "ix_records_best_device",
        "records",
        ["workload_key", "target", "device_model", "median_cost", "id"],
        sqlite_where=OK,
        postgresql_where=OK,
    )
    op.create_index(
        "ix_records_best_family",
        "records",
        ["workload_key", "target_family", "median_cost", "id"],
        sqlite_where=OK,
        postgresql_where=OK,
    )
    op.create_index("ix_records_job_id", "records", ["job_id"])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("revoked_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
    )
    op.create_index("ix_api_tokens_owner", "api_tokens", ["owner"])
    op.create_table(
        "cost_model_snapshots",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("task", sa.String(255), nullable=False),
        sa.Column("target", sa.String(512), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("meta_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_cost_model_snapshots"),
    )
    op.create_index(
        "ix_cost_model_snapshots_task_target", "cost_model_snapshots", ["task", "target", "id"]
    )


def downgrade() -> None:
    op.drop_table("cost_model_snapshots")
    op.drop_table("api_tokens")
    op.drop_index("ix_records_job_id", table_name="records")
    op.drop_index("ix_records_best_family", table_name="records")
    op.drop_index("ix_records_best_device", table_name="records")
    with op.batch_alter_table("records") as batch:
        batch.drop_column("min_cost")
        batch.drop_column("mean_cost")
        batch.drop_column("target_family")
