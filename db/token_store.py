"""API tokens in the database: create (the secret is returned once), verify, list, revoke.
A mixin of :class:`db.Database`.

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

from .engine import Store
from .errors import DatabaseError, NotFoundError
from .models import ApiToken as TokenRow
from .records import MAX_NAME_LEN

#: Every token starts with this, so a leaked one is recognisable (e.g. by secret scanners).
TOKEN_PREFIX = "tt_"
_TOKENS = TokenRow.__table__


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
    return ApiTokenInfo(
        id=row.id, owner=row.owner, name=row.name, created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


_INFO_COLUMNS = (TokenRow.id, TokenRow.owner, TokenRow.name, TokenRow.created_at,
                 TokenRow.revoked_at)


class TokenStore(Store):
    """API-token operations of :class:`db.Database`."""

    def create_token(self, owner: str, name: str = "") -> tuple[str, ApiTokenInfo]:
        """A new token for ``owner``: (the secret, shown only now; its stored info)."""
        if not isinstance(owner, str) or not owner.strip() or len(owner) > MAX_NAME_LEN:
            raise DatabaseError(f"token owner must be 1..{MAX_NAME_LEN} characters")
        if len(name) > MAX_NAME_LEN:
            raise DatabaseError(f"token name longer than {MAX_NAME_LEN} characters")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        info = ApiTokenInfo(uuid.uuid4().hex, owner, name, time.time(), None)
        with self._write() as conn:
            conn.execute(
                _TOKENS.insert(),
                {
                    "id": info.id, "token_hash": hash_token(secret), "owner": owner,
                    "name": name, "created_at": info.created_at, "revoked_at": None,
                },
            )
        return secret, info

    def verify_token(self, token: str) -> ApiTokenInfo | None:
        """The info of an active token, or None for an unknown or revoked one."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            return None
        with self._read() as conn:
            row = conn.execute(
                select(*_INFO_COLUMNS).where(TokenRow.token_hash == hash_token(token))
            ).first()
        if row is None or row.revoked_at is not None:
            return None
        return _info(row)

    def list_tokens(
        self, *, owner: str | None = None, include_revoked: bool = False
    ) -> list[ApiTokenInfo]:
        """Tokens (never their secrets or hashes), oldest first."""
        statement = select(*_INFO_COLUMNS).order_by(TokenRow.created_at, TokenRow.id)
        if owner is not None:
            statement = statement.where(TokenRow.owner == owner)
        if not include_revoked:
            statement = statement.where(TokenRow.revoked_at.is_(None))
        with self._read() as conn:
            return [_info(row) for row in conn.execute(statement)]

    def revoke_token(self, token_id: str) -> ApiTokenInfo:
        """Revoke a token by id (revoking a revoked token changes nothing); raises
        :class:`~db.errors.NotFoundError` for an unknown id."""
        with self._write() as conn:
            conn.execute(
                update(TokenRow)
                .where(TokenRow.id == token_id, TokenRow.revoked_at.is_(None))
                .values(revoked_at=time.time())
            )
            row = conn.execute(select(*_INFO_COLUMNS).where(TokenRow.id == token_id)).first()
        if row is None:
            raise NotFoundError(f"no API token {token_id!r}")
        return _info(row)
