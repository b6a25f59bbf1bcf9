"""API tokens (admin): create (the secret is returned once), list, revoke."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from db import ApiTokenInfo
from tuner import SpecError

from ..auth import Principal, create_token
from ..deps import admin, get_state
from ..schemas import TokenCreated, TokenInfo, TokenRequest
from ..strict import StrictRoute
from .responses import errors

router = APIRouter(route_class=StrictRoute, prefix="/v1/tokens", tags=["tokens"])


def _info(info: ApiTokenInfo) -> dict[str, Any]:
    return {"id": info.id, "role": info.name, "owner": info.owner,
            "created_at": info.created_at, "revoked_at": info.revoked_at}


@router.post("", status_code=201, response_model=TokenCreated, responses=errors(400, 413, 422))
def create(body: TokenRequest, request: Request, _: Principal = admin) -> dict[str, Any]:
    """A new token with a role; its secret is in this response only."""
    try:
        secret, info = create_token(get_state(request).db, body.role, body.owner)
    except ValueError as err:
        raise SpecError(f"role: {err}") from None
    return {"token": secret, "id": info.id, "role": info.name, "owner": info.owner}


@router.get("", response_model=list[TokenInfo], responses=errors())
def list_tokens(request: Request, _: Principal = admin) -> list[dict[str, Any]]:
    """Active tokens (never their secrets)."""
    return [_info(info) for info in get_state(request).db.tokens.list()]


@router.delete("/{token_id}", response_model=TokenInfo, responses=errors(404))
def revoke(token_id: str, request: Request, _: Principal = admin) -> dict[str, Any]:
    """Revoke a token; it stops working at once."""
    state = get_state(request)
    info = state.db.tokens.revoke(token_id)
    state.tokens.forget(token_id)
    return _info(info)
