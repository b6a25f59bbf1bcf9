"""The dashboard page at ``/``: static HTML and JavaScript shipped in ``api/static`` (no
external resources). The page itself needs no token; its API calls do."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from ..strict import StrictRoute

STATIC = Path(__file__).resolve().parent.parent / "static"

router = APIRouter(route_class=StrictRoute, include_in_schema=False)


@router.get("/")
def page() -> FileResponse:
    return FileResponse(STATIC / "dashboard.html", media_type="text/html")


@router.get("/dashboard.js")
def script() -> FileResponse:
    return FileResponse(STATIC / "dashboard.js", media_type="text/javascript")
