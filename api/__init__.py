"""API layer: the FastAPI service for jobs, records, best-schedule queries and the dashboard.

    from api import Settings, create_app
    app = create_app(Settings(db_url="sqlite:///tuning.db"))   # serve with uvicorn

The top layer: may import every other layer, through their top-level packages only.
"""

from .app import create_app
from .auth import ROLES, create_token
from .settings import Settings, is_loopback

__all__ = ["ROLES", "Settings", "create_app", "create_token", "is_loopback"]
