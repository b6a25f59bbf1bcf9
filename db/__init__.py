"""Database layer: SQLAlchemy models, the Database API, log import/export and migrations.

Imports nothing of ours; records cross this boundary as JSON-able dicts and dataclasses.
"""
