"""Use cases of partner API tokens: mint, list, revoke, and authenticate a request."""
from __future__ import annotations

import logging
import uuid

from core.errors import Forbidden, Invalid, NotFound, Unauthorized
from core.partner.identity import LAST_USED_RESOLUTION, TOKEN_PREFIX, TOKEN_SCOPES, Caller, Token, hash_token, looks_like_token, new_token_secret
from core.partner.partners import is_uuid

log = logging.getLogger("slipway.tokens")
UNAUTHORIZED_MESSAGE = "missing, malformed, unknown or revoked token"


def create_token(uow, clock, *, partner_id: str, label: str, scope: str, created_by: str | None) -> tuple[Token, str]:
    """Mint a token for ``partner_id``; returns the record and the secret, shown only now."""
    label = (label or "").strip()
    if not label:
        raise Invalid("label must not be empty", fields={"label": "must not be empty"})
    if scope not in TOKEN_SCOPES:
        raise Invalid("scope must be read or write", fields={"scope": "must be read or write"})
    secret = new_token_secret()
    token = Token(
        id=str(uuid.uuid4()),
        partner_id=partner_id,
        label=label,
        token_prefix=secret[len(TOKEN_PREFIX):len(TOKEN_PREFIX) + 8],
        token_hash=hash_token(secret),
        scope=scope,
        created_by=created_by,
        created_at=clock.now(),
    )
    with uow:
        if uow.partners.get(partner_id) is None:
            raise NotFound(f"partner {partner_id} not found")
        uow.tokens.add(token)
        uow.commit()
    return token, secret


def list_tokens(uow, caller: Caller) -> list[Token]:
    """The caller's own tokens, active and revoked, newest first."""
    with uow:
        return uow.tokens.list_for_partner(caller.partner.id)


def revoke_token(uow, clock, caller: Caller, token_id: str) -> None:
    """Revoke one of the caller's own tokens; revoking a revoked token is a no-op."""
    with uow:
        token = uow.tokens.get(token_id) if is_uuid(token_id) else None
        if token is None or token.partner_id != caller.partner.id:
            raise NotFound(f"token {token_id} not found")
        if not token.revoked:
            uow.tokens.revoke(token.id, clock.now())
            uow.commit()


def list_partner_tokens(uow, partner_id: str) -> list[Token]:
    """The operator's view: a partner's tokens, active and revoked, newest first."""
    with uow:
        if not is_uuid(partner_id) or uow.partners.get(partner_id) is None:
            raise NotFound(f"partner {partner_id} not found")
        return uow.tokens.list_for_partner(partner_id)


def revoke_any_token(uow, clock, token_id: str) -> Token:
    """The operator revokes any partner's token; revoking a revoked token is a no-op."""
    with uow:
        token = uow.tokens.get(token_id) if is_uuid(token_id) else None
        if token is None:
            raise NotFound(f"token {token_id} not found")
        if not token.revoked:
            uow.tokens.revoke(token.id, clock.now())
            uow.commit()
            token = uow.tokens.get(token_id)
        return token


def authenticate(uow, clock, secret: str | None) -> Caller:
    """Resolve a bearer secret to its caller, or raise ``Unauthorized``: ``identify``,
    then ``refresh_last_used``.

    Revocation is read from the database on every call, so a revoked token fails on its
    very next request. ``lastUsedAt`` is written at most once a minute per token.
    """
    return refresh_last_used(uow, clock, identify(uow, secret))


def identify(uow, secret: str | None) -> Caller:
    """The caller a bearer secret stands for, or ``Unauthorized``: one indexed read, no
    write (a revoked or unknown token is refused)."""
    if not secret or not looks_like_token(secret):
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    with uow:
        found = uow.tokens.by_hash_with_partner(hash_token(secret))
    if found is None:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    token, partner = found
    if token.revoked:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    return Caller(partner=partner, token=token)


def refresh_last_used(uow, clock, caller: Caller) -> Caller:
    """Write the token's ``lastUsedAt`` when it is a minute old (or unset); the caller,
    with the time written. Never fails: ``lastUsedAt`` is advisory."""
    token, now = caller.token, clock.now()
    if not token.needs_last_used_refresh(now):
        return caller
    # A transaction of its own that starts by writing, so concurrent first uses of a
    # token queue for the write lock instead of failing; the update is conditional,
    # so only one of them writes.
    try:
        with uow:
            uow.tokens.touch(token.id, now, older_than=now - LAST_USED_RESOLUTION)
            uow.commit()
        return Caller(partner=caller.partner, token=token.used_at(now))
    except Exception:  # lastUsedAt is advisory: a busy database must not fail the request
        log.warning("could not refresh lastUsedAt of token %s", token.id, exc_info=True)
        return caller


def require_scope(caller: Caller, needed: str) -> None:
    if not caller.token.allows(needed):
        raise Forbidden(f"this call needs a token with {needed} scope")
