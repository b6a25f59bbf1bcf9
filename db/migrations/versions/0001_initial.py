"""Initial schema: workloads, records (with the best-query index) and jobs.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
OK = sa.text("median_cost IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "workloads",
        sa.Column("key", sa.String(32), nullable=False),
        sa.Column("workload_json", sa.Text(), nullable=False),
        sa.Column("flops", sa.Double(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_workloads"),
    )
    op.create_table(
        "records",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("measurement_id", sa.String(64), nullable=False),
        sa.Column("workload_key", sa.String(32), nullable=False),
        sa.Column("target", sa.String(512), nullable=False),
        sa.Column("device_model", sa.String(255), nullable=False),
        sa.Column("toolchain", sa.String(255), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("flags", sa.Text(), nullable=False),
        sa.Column("measure_json", sa.Text(), nullable=False),
        sa.Column("steps_json", sa.Text(), nullable=False),
        sa.Column("costs_json", sa.Text(), nullable=False),
        sa.Column("error_kind", sa.String(32), nullable=False),
        sa.Column("error_msg", sa.Text(), nullable=False),
        sa.Column("median_cost", sa.Double(), nullable=True),
        sa.Column("build_s", sa.Double(), nullable=False),
        sa.Column("run_s", sa.Double(), nullable=False),
        sa.Column("timestamp", sa.Double(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_records"),
        sa.UniqueConstraint("measurement_id", name="uq_records_measurement_id"),
        sa.ForeignKeyConstraint(
            ["workload_key"], ["workloads.key"], name="fk_records_workload_key_workloads"
        ),
    )
    op.create_index(
        "ix_records_best",
        "records",
        ["workload_key", "target", "median_cost", "id"],
        sqlite_where=OK,
        postgresql_where=OK,
    )
    op.create_index(
        "ix_records_workload_target_time", "records", ["workload_key", "target", "timestamp"]
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("spec_json", sa.Text(), nullable=False),
        sa.Column("progress_json", sa.Text(), nullable=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
    )
    op.create_index("ix_jobs_owner", "jobs", ["owner"])
    op.create_index("ix_jobs_status_created_at", "jobs", ["status", "created_at"])


def downgrade() -> None:
    op.drop_table("jobs")
    op.drop_table("records")
    op.drop_table("workloads")
