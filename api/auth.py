"""Bearer-token authentication and roles.

Roles are ordered: ``reader`` (queries) < ``submitter`` (also submits jobs and cancels its
own) < ``admin`` (also imports records, manages tokens, cancels any job). Tokens live in
the database, hashed (``Database.tokens``, a ``db.TokenStore``); a token's role is stored
as its ``name``. With auth off (local use only) every request acts as the admin ``local``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass

from db import ApiTokenInfo, Database

ROLES: tuple[str, ...] = ("reader", "submitter", "admin")
LOCAL_OWNER = "local"


class AuthError(Exception):
    """A request without a valid token (401) or with too small a role (403)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Principal:
    """Who makes a request: the token's owner and role (``token_id`` None with auth off)."""

    owner: str
    role: str
    token_id: str | None = None

    def has(self, role: str) -> bool:
        """Whether this principal's role includes ``role``."""
        return ROLES.index(self.role) >= ROLES.index(role)


def check_role(role: str) -> str:
    """``role`` if it is a known role; ValueError naming the roles otherwise."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
    return role


def create_token(db: Database, role: str, owner: str | None = None
                 ) -> tuple[str, ApiTokenInfo]:
    """A new token with ``role``: (the secret, shown only once; its info). Its owner is
    ``owner`` when an admin grants a shared one, else the token itself."""
    return db.tokens.create(owner, name=check_role(role))


def authenticate(db: Database, authorization: str | None) -> Principal:
    """The principal of an ``Authorization: Bearer <token>`` header; AuthError (401)."""
    if not authorization:
        raise AuthError(401, "missing bearer token (Authorization: Bearer <token>)")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError(401, "the Authorization header must be 'Bearer <token>'")
    info = db.tokens.verify(token.strip())
    if info is None:
        raise AuthError(401, "unknown or revoked token")
    if info.name not in ROLES:
        raise AuthError(403, f"token {info.id} has no API role (its name is {info.name!r})")
    return Principal(info.owner, info.name, info.id)


class TokenCache:
    """:func:`authenticate` with its answers kept for ``ttl_s`` seconds (keyed by the
    token's hash), so that a busy client costs no database probe per request. A token
    revoked through this server stops working at once (``forget``); one revoked elsewhere
    (the CLI, another server) within ``ttl_s``."""

    def __init__(self, db: Database, ttl_s: float, max_entries: int = 10_000) -> None:
        self.db = db
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, Principal]] = {}

    def authenticate(self, authorization: str | None) -> Principal:
        key = hashlib.sha256((authorization or "").encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        principal = authenticate(self.db, authorization)  # AuthError answers are not kept
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[key] = (now, principal)
        return principal

    def forget(self, token_id: str) -> None:
        """Drop the cached answers for the token ``token_id`` (it was revoked)."""
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items()
                             if v[1].token_id != token_id}


def require(principal: Principal, role: str) -> None:
    """AuthError (403) unless ``principal`` has ``role``."""
    if not principal.has(role):
        raise AuthError(403, f"this needs the {role} role; the token's role is {principal.role}")
