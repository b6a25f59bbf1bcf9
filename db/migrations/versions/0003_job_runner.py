"""The runner of a job: which process holds it, for the atomic claim of a job and for
progress writes that only its current runner may make.

Existing jobs get no runner (NULL): a queued job is claimed as before; a running one left
by an older version is taken over once its heartbeat is stale.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("runner", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("runner")
