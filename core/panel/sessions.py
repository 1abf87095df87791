"""Panel users and browser sessions: who may log in through the identity provider, with
which role, and the sessions a login creates.

A browser may also sign in with an API key (``open_key_session``): a key session acts
as that key (its role, customer, denied permissions and rate limit), ends at the earlier
of ``SLIPWAY_SESSION_TTL`` and the key's expiry, and dies with the key. Its cookie's
secret starts with ``k.`` so one lookup finds it.

A login is two steps. ``begin_login`` stores a pending login (state, nonce, PKCE
verifier, where to go afterwards) under the SHA-256 of its state; ``finish_login`` takes
it back exactly once. After the identity provider vouched for an email address,
``open_session`` makes a session for the panel user of that email (or refuses with
``Forbidden``: logging in does not create users; the operator does). A session's secret
(the cookie's value) is never stored, only its SHA-256, which is also the session's id.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, replace
from typing import Any
from datetime import datetime, timedelta

from core.errors import Forbidden, Invalid, NotFound, Unauthorized
from core.panel.access import ROLES, Principal, authenticate_key, permissions_of

LOGIN_TTL = timedelta(minutes=10)  # from GET /api/auth/login to the callback
EXPIRED_KEPT = timedelta(days=1)  # ended sessions are purged this long after they end
SESSION_UNAUTHORIZED = "missing, unknown, expired or revoked session"
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_NEXT_MAX = 2000
SESSION_RPM = 120  # docs/decisions.md: authenticated requests, 120/min per key or session


@dataclass(frozen=True)
class PanelUser:
    email: str  # lower-case; the identity provider's verified email claim
    role: str
    created_at: datetime
    updated_at: datetime
    customer_id: str | None = None


@dataclass(frozen=True)
class PanelSession:
    id: str  # SHA-256 (hex) of the cookie's secret
    email: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None


@dataclass(frozen=True)
class PendingLogin:
    state_hash: str
    nonce: str
    code_verifier: str
    next_path: str
    expires_at: datetime


@dataclass(frozen=True)
class SessionPrincipal(Principal):
    """A caller authenticated by a browser session: the user's role's permissions (a
    session has no denied permissions). ``key`` is None."""

    # a PanelSession and its PanelUser (a KeySessionPrincipal's: a KeySession, no user);
    # defaults only because Principal's last field has one
    session: Any = None
    user: Any = None

    @property
    def customer_id(self) -> str | None:
        return self.user.customer_id if self.user.role == "customer" else None

    @property
    def bucket_id(self) -> str:
        return "session:" + self.session.id

    @property
    def rate_limit_rpm(self) -> int:
        return SESSION_RPM

    def require(self, permission: str) -> None:
        if permission not in self.permissions:
            raise Forbidden(f"this session's role ({self.user.role}) lacks the {permission} permission")


@dataclass(frozen=True)
class KeySession:
    """A browser session opened with an API key (``POST /api/auth/key``)."""

    id: str  # SHA-256 (hex) of the cookie's secret
    key_id: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None


@dataclass(frozen=True)
class KeySessionPrincipal(SessionPrincipal):
    """A caller authenticated by a key session: it acts as its key (``key`` is set,
    ``user`` is None), and, being a cookie, falls under the CSRF rule."""

    @property
    def customer_id(self) -> str | None:
        return self.key.customer_id if self.key.role == "customer" else None

    @property
    def bucket_id(self) -> str:
        return self.key.id  # the key's own budget: signing in does not add to it

    @property
    def rate_limit_rpm(self) -> int:
        return self.key.rate_limit_rpm

    def require(self, permission: str) -> None:
        Principal.require(self, permission)


KEY_SESSION_PREFIX = "k."


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def normalise_email(email: str) -> str:
    return (email or "").strip().lower()


# --- panel users (operator data) ------------------------------------------------------------

def set_user(uow, clock, *, email: str, role: str, customer_id: str | None = None) -> PanelUser:
    """Create or change the panel user of ``email``; its sessions follow the new role at once."""
    email = normalise_email(email)
    problems = {}
    if not _EMAIL.fullmatch(email):
        problems["email"] = "must be an email address"
    if role not in ROLES:
        problems["role"] = "must be one of " + ", ".join(ROLES)
    if role == "customer" and not customer_id:
        problems["customerId"] = "is required for role customer"
    if role != "customer" and customer_id is not None:  # an empty id is given too, not absent
        problems["customerId"] = "is only for role customer"
    if problems:
        raise Invalid("invalid panel user: " + "; ".join(f"{k} {v}" for k, v in problems.items()), fields=problems)
    now = clock.now()
    with uow:
        if customer_id and uow.panel_customers.get(customer_id) is None:
            raise NotFound(f"customer {customer_id} not found")
        existing = uow.panel_users.get(email)
        if existing is None:
            user = PanelUser(email=email, role=role, customer_id=customer_id, created_at=now, updated_at=now)
            uow.panel_users.add(user)
        else:
            user = replace(existing, role=role, customer_id=customer_id, updated_at=now)
            uow.panel_users.update(user)
        uow.commit()
    return user


def remove_user(uow, email: str) -> PanelUser:
    """The email may no longer log in; its sessions end with it. Unknown: ``NotFound``."""
    email = normalise_email(email)
    with uow:
        user = uow.panel_users.get(email)
        if user is None:
            raise NotFound(f"panel user {email} not found")
        uow.panel_users.remove(email)
        uow.commit()
    return user


def list_users(uow) -> list[PanelUser]:
    with uow:
        return uow.panel_users.all()


# --- the login ------------------------------------------------------------------------------

def safe_next(path: str | None) -> str | None:
    """``next`` must be a path on this host: ``/...``, not ``//host`` or ``/\\host``, printable
    ASCII, at most 2000 characters. Returns None when it is not."""
    if path is None:
        return None
    if (not path.startswith("/") or path.startswith("//") or path.startswith("/\\") or len(path) > _NEXT_MAX
            or any(not 0x21 <= ord(ch) <= 0x7E for ch in path)):
        return None
    return path


def begin_login(uow, clock, *, next_path: str) -> tuple[str, str, str]:
    """Store a pending login; returns its ``state``, ``nonce`` and PKCE ``code_verifier``."""
    state, nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48)
    now = clock.now()
    with uow:
        uow.panel_logins.purge(now)
        uow.panel_logins.add(PendingLogin(state_hash=_hash(state), nonce=nonce, code_verifier=verifier,
                                          next_path=next_path, expires_at=now + LOGIN_TTL))
        uow.commit()
    return state, nonce, verifier


def finish_login(uow, clock, state: str) -> PendingLogin:
    """Take the pending login of ``state`` back, once; ``Invalid`` when unknown or expired."""
    with uow:
        pending = uow.panel_logins.take(_hash(state or ""))
        uow.commit()  # taken even when expired: a state is never good twice
    if pending is None or pending.expires_at <= clock.now():
        raise Invalid("unknown, used or expired login state: start again at /api/auth/login")
    return pending


def open_session(uow, clock, *, email: str, ttl_seconds: int) -> tuple[PanelSession, PanelUser, str]:
    """A new session for the panel user of ``email``; returns it, the user and the secret
    for the cookie. ``Forbidden`` when the email is not a panel user (no session is made)."""
    email = normalise_email(email)
    now = clock.now()
    secret = secrets.token_urlsafe(32)
    with uow:
        user = uow.panel_users.get(email)
        if user is None:
            raise Forbidden(f"{email or 'this account'} is not a panel user: ask the operator "
                            "(slipway user set --email ...)")
        session = PanelSession(id=_hash(secret), email=email, created_at=now,
                               expires_at=now + timedelta(seconds=ttl_seconds))
        uow.panel_sessions.purge(now - EXPIRED_KEPT)
        uow.panel_sessions.add(session)
        uow.commit()
    return session, user, secret


def open_key_session(uow, clock, *, raw_key: str | None, ttl_seconds: int) -> tuple[KeySession, Principal, str]:
    """A new session that acts as the API key ``raw_key``; returns it, the key's principal
    and the secret for the cookie. ``Unauthorized`` for a malformed, unknown, revoked or
    expired key (no session is made). It expires at the earlier of ``ttl_seconds`` from
    now and the key's own expiry."""
    principal = authenticate_key(uow, clock, raw_key)
    now = clock.now()
    expires_at = now + timedelta(seconds=ttl_seconds)
    if principal.key.expires_at is not None:
        expires_at = min(expires_at, principal.key.expires_at)
    secret = KEY_SESSION_PREFIX + secrets.token_urlsafe(32)
    session = KeySession(id=_hash(secret), key_id=principal.key.id, created_at=now, expires_at=expires_at)
    with uow:
        uow.panel_key_sessions.purge(now - EXPIRED_KEPT)
        uow.panel_key_sessions.add(session)
        uow.commit()
    return session, principal, secret


def _authenticate_key_session(uow, clock, secret: str) -> KeySessionPrincipal:
    with uow:
        found = uow.panel_key_sessions.get_with_key(_hash(secret))
    if found is None:
        raise Unauthorized(SESSION_UNAUTHORIZED)
    session, key = found
    now = clock.now()
    if not hmac.compare_digest(session.id, _hash(secret)) or session.revoked_at is not None \
            or session.expires_at <= now or key is None or key.revoked_at is not None \
            or (key.expires_at is not None and key.expires_at <= now):
        raise Unauthorized(SESSION_UNAUTHORIZED)
    return KeySessionPrincipal(key=key, permissions=permissions_of(key), session=session, user=None)


def authenticate_session(uow, clock, secret: str | None, *, users: bool = True) -> SessionPrincipal:
    """The session of a cookie's secret: a key session acting as its key as it is now, or
    (with ``users``: OIDC login is configured) a login session with its user's current role."""
    if not secret or len(secret) > 256:
        raise Unauthorized(SESSION_UNAUTHORIZED)
    if secret.startswith(KEY_SESSION_PREFIX):
        return _authenticate_key_session(uow, clock, secret)
    if not users:
        raise Unauthorized(SESSION_UNAUTHORIZED)
    with uow:
        found = uow.panel_sessions.get_with_user(_hash(secret))
    if found is None:
        raise Unauthorized(SESSION_UNAUTHORIZED)
    session, user = found
    if not hmac.compare_digest(session.id, _hash(secret)) or session.revoked_at is not None \
            or session.expires_at <= clock.now() or user is None:
        raise Unauthorized(SESSION_UNAUTHORIZED)
    return SessionPrincipal(key=None, permissions=ROLES[user.role], session=session,  # type: ignore[arg-type]
                            user=user)  # (a session has no key: its class answers for one)


def revoke_session(uow, clock, secret: str | None) -> bool:
    """End the session of a cookie's secret; False when there was none to end."""
    if not secret or len(secret) > 256:
        return False
    sessions = uow.panel_key_sessions if secret.startswith(KEY_SESSION_PREFIX) else uow.panel_sessions
    with uow:
        ended = sessions.revoke(_hash(secret), clock.now())
        uow.commit()
    return ended


# --- credentials of long-lived connections ---------------------------------------------------

KEY_REVOKED = "the API key was revoked"
KEY_EXPIRED = "the API key expired"
SESSION_ENDED = "the session ended (logged out or revoked)"
SESSION_EXPIRED = "the session expired"
USER_CHANGED = "the session's user changed (role or customer): connect again"


def lapsed(uow, clock, principals) -> list:
    """For each principal (of an open WebSocket), None while its key or session still
    holds, else why not. All keys in one read and all sessions with their users in one
    read, whatever their number; keys and sessions ended by any process sharing the
    database count."""
    key_ids = {p.key.id for p in principals if p.key is not None}
    session_ids = {p.session.id for p in principals
                   if isinstance(p, SessionPrincipal) and not isinstance(p, KeySessionPrincipal)}
    key_session_ids = {p.session.id for p in principals if isinstance(p, KeySessionPrincipal)}
    with uow:
        keys = uow.api_keys.get_many(key_ids) if key_ids else {}
        sessions = uow.panel_sessions.get_many_with_users(session_ids) if session_ids else {}
        key_sessions = uow.panel_key_sessions.get_many(key_session_ids) if key_session_ids else {}
    now = clock.now()
    reasons: list[str | None] = []
    for p in principals:
        if isinstance(p, KeySessionPrincipal):  # the session first, then its key
            session = key_sessions.get(p.session.id)
            if session is None or session.revoked_at is not None:
                reasons.append(SESSION_ENDED)
            elif session.expires_at <= now:
                reasons.append(SESSION_EXPIRED)
            else:
                reasons.append(_key_lapsed(keys.get(p.key.id), now))
        elif isinstance(p, SessionPrincipal):
            found = sessions.get(p.session.id)
            session, user = found if found is not None else (None, None)
            if session is None or session.revoked_at is not None:
                reasons.append(SESSION_ENDED)
            elif session.expires_at <= now:
                reasons.append(SESSION_EXPIRED)
            elif user is None or (user.role, user.customer_id) != (p.user.role, p.user.customer_id):
                reasons.append(USER_CHANGED)
            else:
                reasons.append(None)
        elif p.key is None:  # an auth source's principal: the source is asked at each request only
            reasons.append(None)
        else:
            reasons.append(_key_lapsed(keys.get(p.key.id), now))
    return reasons


def _key_lapsed(key, now) -> str | None:
    if key is None or key.revoked_at is not None:
        return KEY_REVOKED
    if key.expires_at is not None and key.expires_at <= now:
        return KEY_EXPIRED
    return None
