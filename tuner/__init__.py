"""Tuner layer: jobs, the task scheduler, the tuning loop, applying best schedules, and the
``tensortune`` CLI.

May import ``ir``, ``search``, ``cost_model``, ``workers``, ``db`` and ``schedule``
(their top-level packages only).
"""

from importlib import metadata

try:
    __version__ = metadata.version("tensortune")
except metadata.PackageNotFoundError:  # a source tree that was never pip-installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
