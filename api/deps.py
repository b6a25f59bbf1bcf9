"""FastAPI dependencies: the service state and the authenticated principal with a role."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from .auth import LOCAL_OWNER, Principal, require
from .state import ServiceState

_bearer = HTTPBearer(auto_error=False, description="an API token: tensortune token create")


def get_state(request: Request) -> ServiceState:
    return request.app.state.service


async def _principal(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    state = get_state(request)
    if not state.settings.auth:
        return Principal(LOCAL_OWNER, "admin")
    header = f"{credentials.scheme} {credentials.credentials}" if credentials else None
    return state.tokens.authenticate(header)  # a short database probe on a cache miss


def role(name: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency giving the request's principal, who must have role ``name``."""

    async def dependency(principal: Annotated[Principal, Depends(_principal)]) -> Principal:
        require(principal, name)
        return principal

    dependency.__name__ = f"require_{name}"
    return dependency


reader = Depends(role("reader"))
submitter = Depends(role("submitter"))
admin = Depends(role("admin"))
