"""Alembic migrations of the tensortune database schema.

The scripts ship inside the package; :meth:`db.Database.upgrade` (and ``tensortune db
upgrade``) runs them programmatically, no ``alembic.ini`` needed. To write a new revision,
change ``db/models.py`` and add a script to ``versions/`` whose ``down_revision`` is the
current head; the test suite checks that models and migrations agree on both backends.
"""
