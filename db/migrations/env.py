"""Alembic environment: runs the migrations on the connection :meth:`db.Database.upgrade`
hands over in ``config.attributes["connection"]``, inside the transaction the caller opened
(so an upgrade is all-or-nothing). Offline (``--sql``) mode is not supported.
"""

from __future__ import annotations

from alembic import context

from db.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "tensortune migrations run through db.Database(url).upgrade() or "
        "`tensortune db upgrade`, which provide the connection"
    )

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    # SQLite cannot ALTER most things in place: batch mode copies the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
