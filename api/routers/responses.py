"""The error responses routes declare in the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from ..schemas import ErrorBody


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error status codes (plus 401 and 403 always)."""
    return {code: {"model": ErrorBody} for code in sorted({401, 403, *codes})}
