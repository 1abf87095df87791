"""Partners and their API tokens: the entities and the rules of the partner tree."""
from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

PARTNER_TYPES = ("root", "reseller")
TOKEN_SCOPES = ("read", "write")
TOKEN_PREFIX = "pcp_"
#: ``lastUsedAt`` is refreshed at most this often, so reads stay reads.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class Partner:
    id: str
    name: str
    type: str
    parent_id: str | None
    created_at: datetime


@dataclass(frozen=True)
class Token:
    id: str
    partner_id: str
    label: str
    token_prefix: str
    token_hash: str
    scope: str
    created_by: str | None
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def allows(self, needed_scope: str) -> bool:
        return self.scope == "write" or needed_scope == "read"

    def used_at(self, now: datetime) -> "Token":
        return replace(self, last_used_at=now)

    def needs_last_used_refresh(self, now: datetime) -> bool:
        return self.last_used_at is None or now - self.last_used_at >= LAST_USED_RESOLUTION


@dataclass(frozen=True)
class Caller:
    """Who is calling the partner API: the partner, and the token it presented."""

    partner: Partner
    token: Token
    subtree: frozenset[str] = field(default_factory=frozenset)


def new_token_secret() -> str:
    """``pcp_`` followed by 43 URL-safe characters (32 random bytes)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


_TOKEN_SHAPE = re.compile(r"pcp_[A-Za-z0-9_-]{32,512}")


def looks_like_token(value: str) -> bool:
    """Cheap shape check before any lookup: ``pcp_`` plus 32 to 512 URL-safe chars."""
    return _TOKEN_SHAPE.fullmatch(value) is not None
