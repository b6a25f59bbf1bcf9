"""Records the best query passes over: programs timed slower than another program of the
same workload and target when both were measured in the same moment (the end-of-job
comparison of a tune's leaders). A new table; no record is changed.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outranked",
        sa.Column("measurement_id", sa.String(64), nullable=False),
        sa.Column("by_measurement_id", sa.String(64), nullable=False),
        sa.Column("ratio", sa.Double(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["measurement_id"], ["records.measurement_id"],
                                name="fk_outranked_measurement_id_records"),
        sa.ForeignKeyConstraint(["by_measurement_id"], ["records.measurement_id"],
                                name="fk_outranked_by_measurement_id_records"),
        sa.PrimaryKeyConstraint("measurement_id", name="pk_outranked"),
    )


def downgrade() -> None:
    op.drop_table("outranked")
