"""API tokens in the database: create (the secret is returned once), verify, list, revoke.
Reached as ``Database(url).tokens``.

Only the SHA-256 of a token is stored. Tokens are 256-bit random strings, so a fast hash
is enough (no password-style stretching is needed to resist guessing), and lookups by
hash are an index probe.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update

from .engine import StoreBase
from .errors import DatabaseError, NotFoundError
from .models import ApiTokenRow
from .records import MAX_NAME_LEN

#: Every token starts with this, so a leaked one is recognisable (e.g. by secret scanners).
TOKEN_PREFIX = "tt_"
_TOKENS = ApiTokenRow.__table__


@dataclass(frozen=True, slots=True)
class ApiTokenInfo:
    """What is known about a token, without its secret."""

    id: str
    owner: str
    name: str
    created_at: float
    revoked_at: float | None

    @property
    def active(self) -> bool:
        """True unless the token was revoked."""
        return self.revoked_at is None


def hash_token(token: str) -> str:
    """The stored form of a token: SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def _info(row: Any) -> ApiTokenInfo:
    return ApiTokenInfo(**row._mapping)


_INFO_COLUMNS = (
    ApiTokenRow.id, ApiTokenRow.owner, ApiTokenRow.name, ApiTokenRow.created_at,
    ApiTokenRow.revoked_at,
)


class TokenStore(StoreBase):
    """The API tokens of a database: ``create``, ``verify``, ``list``, ``revoke``."""

    def create(self, owner: str | None = None, name: str = "") -> tuple[str, ApiTokenInfo]:
        """A new token: (the secret, shown only now; its stored info). Its owner (whose
        jobs it may cancel) is ``owner`` when one is granted (tokens given the same owner
        share their jobs), else the token itself (``token:<id>``)."""
        if owner is not None and (not isinstance(owner, str) or not owner.strip()
                                  or len(owner) > MAX_NAME_LEN):
            raise DatabaseError(f"token owner must be 1..{MAX_NAME_LEN} characters")
        if len(name) > MAX_NAME_LEN:
            raise DatabaseError(f"token name longer than {MAX_NAME_LEN} characters")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = uuid.uuid4().hex
        owner = owner if owner is not None else f"token:{token_id}"
        info = ApiTokenInfo(token_id, owner, name, time.time(), None)
        with self.connector.write() as conn:
            conn.execute(
                _TOKENS.insert(),
                {
                    "id": info.id, "token_hash": hash_token(secret), "owner": owner,
                    "name": name, "created_at": info.created_at, "revoked_at": None,
                },
            )
        return secret, info

    def verify(self, token: str) -> ApiTokenInfo | None:
        """The info of an active token, or None for an unknown or revoked one."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            return None
        with self.connector.read() as conn:
            row = conn.execute(
                select(*_INFO_COLUMNS).where(ApiTokenRow.token_hash == hash_token(token))
            ).first()
        if row is None or row.revoked_at is not None:
            return None
        return _info(row)

    def list(
        self, *, owner: str | None = None, include_revoked: bool = False
    ) -> list[ApiTokenInfo]:
        """Tokens (never their secrets or hashes), oldest first."""
        statement = select(*_INFO_COLUMNS).order_by(ApiTokenRow.created_at, ApiTokenRow.id)
        if owner is not None:
            statement = statement.where(ApiTokenRow.owner == owner)
        if not include_revoked:
            statement = statement.where(ApiTokenRow.revoked_at.is_(None))
        with self.connector.read() as conn:
            return [_info(row) for row in conn.execute(statement)]

    def revoke(self, token_id: str) -> ApiTokenInfo:
        """Revoke a token by id (revoking a revoked token changes nothing); raises
        :class:`~db.errors.NotFoundError` for an unknown id."""
        with self.connector.write() as conn:
            conn.execute(
                update(ApiTokenRow)
                .where(ApiTokenRow.id == token_id, ApiTokenRow.revoked_at.is_(None))
                .values(revoked_at=time.time())
            )
            row = conn.execute(select(*_INFO_COLUMNS).where(ApiTokenRow.id == token_id)).first()
        if row is None:
            raise NotFoundError(f"no API token {token_id!r}")
        return _info(row)
