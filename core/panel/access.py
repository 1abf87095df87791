"""Panel API keys, roles and permissions: who may do what on the services API."""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime

from core.errors import Forbidden, Invalid, NotFound, Unauthorized

KEY_PREFIX = "slw"
PERMISSIONS = (
    "services:read", "services:create", "services:operate", "services:deploy", "services:delete",
    "services:logs", "services:secrets", "customers:read", "customers:write", "templates:read", "api_keys:manage",
    "backups:read", "backups:write",
)
ROLES = {
    "admin": frozenset(PERMISSIONS),
    # every services:* permission, for its own customer's services only
    "customer": frozenset(p for p in PERMISSIONS if p.startswith("services:")) | {"templates:read"},
    "viewer": frozenset({"services:read", "services:logs", "templates:read", "customers:read"}),
}
DEFAULT_RPM = 120  # a key's rateLimitRpm when none is given and the operator set no SLIPWAY_RATE_AUTH_RPM
UNAUTHORIZED_MESSAGE = "missing, malformed, unknown, expired or revoked API key"
_KEY = re.compile(r"slw_([0-9a-f]{16})_([A-Za-z0-9_-]{32,128})")


@dataclass(frozen=True)
class ApiKey:
    id: str  # the key id: the middle part of slw_<key_id>_<secret>
    name: str
    role: str
    secret_hash: str
    rate_limit_rpm: int
    created_at: datetime
    expires_at: datetime | None = None
    denied_permissions: tuple = ()
    customer_id: str | None = None
    revoked_at: datetime | None = None

    @property
    def key_prefix(self) -> str:
        return f"{KEY_PREFIX}_{self.id}"


@dataclass(frozen=True)
class Principal:
    """An authenticated panel caller: its key and what it may do."""

    key: ApiKey
    permissions: frozenset = field(default_factory=frozenset)

    @property
    def customer_id(self) -> str | None:
        """Set for role ``customer``: it sees only this customer's services."""
        return self.key.customer_id if self.key.role == "customer" else None

    @property
    def bucket_id(self) -> str:
        """Whose rate-limit bucket its requests draw on."""
        return self.key.id

    @property
    def rate_limit_rpm(self) -> int:
        return self.key.rate_limit_rpm

    def require(self, permission: str) -> None:
        if permission not in self.permissions:
            raise Forbidden(f"this API key lacks the {permission} permission")


@dataclass(frozen=True)
class SourcePrincipal(Principal):
    """A caller a plugin's auth source vouched for (``ports.extensions.AuthSource``): a role
    of the panel and, for ``customer``, an existing customer. ``key`` is None; it is
    bounded like a browser session (by its role and customer only)."""

    source: str = ""
    subject: str = ""
    role: str = "viewer"
    bound_customer_id: str | None = None
    rpm: int = DEFAULT_RPM

    @property
    def customer_id(self) -> str | None:
        return self.bound_customer_id if self.role == "customer" else None

    @property
    def bucket_id(self) -> str:
        return f"source:{self.source}:{self.subject}"

    @property
    def rate_limit_rpm(self) -> int:
        return self.rpm

    def require(self, permission: str) -> None:
        if permission not in self.permissions:
            raise Forbidden(f"this sign-in ({self.source}, role {self.role}) lacks the {permission} permission")


def source_principal(uow, *, source: str, subject, role, customer_id, rate_limit_rpm,
                     default_rpm: int) -> SourcePrincipal:
    """The principal an auth source's identity stands for; ``Unauthorized`` (never a
    principal) when it names no subject, a role the panel does not have, a customer role
    without an existing customer, or a rate that is not a positive whole number."""
    if not isinstance(subject, str) or not subject.strip() or len(subject) > 200:
        raise Unauthorized(f"the auth source {source} answered no usable subject")
    if role not in ROLES:
        raise Unauthorized(f"the auth source {source} answered an unknown role")
    if rate_limit_rpm is not None and (not isinstance(rate_limit_rpm, int) or isinstance(rate_limit_rpm, bool)
                                       or rate_limit_rpm < 1):
        raise Unauthorized(f"the auth source {source} answered an unusable rate limit")
    if role == "customer":
        if not isinstance(customer_id, str) or not customer_id:
            raise Unauthorized(f"the auth source {source} answered a customer role without a customer")
        with uow.reading():
            if uow.panel_customers.get(customer_id) is None:
                raise Unauthorized(f"the auth source {source} answered a customer that does not exist")
    else:
        customer_id = None
    return SourcePrincipal(key=None, permissions=ROLES[role], source=source,  # type: ignore[arg-type]
                           subject=subject, role=role,  # (an auth source's caller has no key: its class answers)
                           bound_customer_id=customer_id, rpm=rate_limit_rpm or default_rpm)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def permissions_of(key: ApiKey) -> frozenset:
    return ROLES[key.role] - frozenset(key.denied_permissions)


def _reach(holder: Principal, *, role: str, denied_permissions, customer_id: str | None,
           acts: str = "creates") -> list[str]:
    """What a key of ``role`` minus ``denied_permissions`` (of ``customer_id``) holds beyond
    ``holder``: its effective permissions must be a subset of the holder's, and a holder
    bound to a customer reaches only role customer keys of that customer. The bound of both
    creating and revoking a key (docs/decisions.md "Tenant safety", "second round")."""
    excess = []
    extra = sorted((ROLES[role] - frozenset(denied_permissions)) - holder.permissions, key=PERMISSIONS.index)
    if extra:
        excess.append("permissions " + ", ".join(extra) + (" (the creator lacks them)" if acts == "creates"
                                                           else " (the caller lacks them)"))
    if holder.customer_id is not None and (role != "customer" or customer_id != holder.customer_id):
        excess.append(f"customer: a key of customer {holder.customer_id} {acts} only role customer keys of "
                      f"that customer")
    return excess


def _beyond(creator: Principal, *, role: str, rate_limit_rpm: int, expires_at: datetime | None,
            denied_permissions, customer_id: str | None) -> list[str]:
    """What a new key would hold beyond its creator (docs/decisions.md "Tenant safety"): its
    effective permissions must be a subset of the creator's; a key's ``expiresAt`` and
    ``rateLimitRpm`` bound the new key's; a creator bound to a customer mints keys of that
    customer only. A browser session is bounded by its user's role (and customer) only."""
    excess = _reach(creator, role=role, denied_permissions=denied_permissions, customer_id=customer_id)
    key = creator.key
    if key is not None:
        if key.expires_at is not None and (expires_at is None or expires_at > key.expires_at):
            wanted = "never" if expires_at is None else expires_at.isoformat()
            excess.append(f"expiresAt {wanted} is later than the creating key's {key.expires_at.isoformat()}")
        if rate_limit_rpm > key.rate_limit_rpm:
            excess.append(f"rateLimitRpm {rate_limit_rpm} is above the creating key's {key.rate_limit_rpm}")
    return excess


def create_api_key(uow, clock, *, name: str, role: str, rate_limit_rpm: int | None,
                   expires_at: datetime | None = None, denied_permissions=(), customer_id: str | None = None,
                   creator: Principal | None = None, default_rpm: int = DEFAULT_RPM) -> tuple[ApiKey, str]:
    """Mint a key; returns it and the full ``slw_<key_id>_<secret>``, shown only now.

    ``creator`` is the caller (a key or a session); None is the operator (CLI), unbounded.
    A key beyond its creator (``_beyond``) is ``Forbidden`` naming what exceeds, and
    nothing is created. Without ``rate_limit_rpm`` the key gets ``default_rpm`` (the
    operator's ``SLIPWAY_RATE_AUTH_RPM``), capped at the creating key's own (an omitted
    value never exceeds the creator)."""
    if rate_limit_rpm is None:
        rate_limit_rpm = default_rpm
        if creator is not None and creator.key is not None:
            rate_limit_rpm = min(rate_limit_rpm, creator.key.rate_limit_rpm)
    problems = {}
    if not (name or "").strip():
        problems["name"] = "must not be empty"
    if role not in ROLES:
        problems["role"] = "must be one of " + ", ".join(ROLES)
    if not isinstance(rate_limit_rpm, int) or isinstance(rate_limit_rpm, bool) or not 1 <= rate_limit_rpm <= 100_000:
        problems["rateLimitRpm"] = "must be an integer from 1 to 100000"
    unknown = [p for p in denied_permissions if p not in PERMISSIONS]
    if unknown:
        problems["deniedPermissions"] = "unknown permission(s): " + ", ".join(unknown)
    if role == "customer" and not customer_id:
        problems["customerId"] = "is required for role customer"
    if role != "customer" and customer_id is not None:  # an empty id is given too, not absent
        problems["customerId"] = "is only for role customer"
    now = clock.now()
    if expires_at is not None and expires_at <= now:
        problems["expiresAt"] = "must be in the future"
    if problems:
        raise Invalid("invalid API key", fields=problems)
    if creator is not None:
        excess = _beyond(creator, role=role, rate_limit_rpm=rate_limit_rpm, expires_at=expires_at,
                         denied_permissions=denied_permissions, customer_id=customer_id)
        if excess:
            raise Forbidden("a key cannot be created with more than its creator holds: " + "; ".join(excess))
    key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    key = ApiKey(id=key_id, name=name.strip(), role=role, secret_hash=_hash(secret), rate_limit_rpm=rate_limit_rpm,
                 created_at=now, expires_at=expires_at, denied_permissions=tuple(sorted(set(denied_permissions))),
                 customer_id=customer_id)
    with uow:
        if customer_id and uow.panel_customers.get(customer_id) is None:
            raise Invalid("invalid API key", fields={"customerId": "no such customer"})
        uow.api_keys.add(key)
        uow.commit()
    return key, f"{KEY_PREFIX}_{key_id}_{secret}"


def authenticate_key(uow, clock, raw: str | None) -> Principal:
    """Look the key up by its id and compare the secret's hash in constant time."""
    match = _KEY.fullmatch(raw or "")
    if match is None:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    key_id, secret = match.groups()
    with uow:
        key = uow.api_keys.get(key_id)
    expected = key.secret_hash if key is not None else _hash("")
    matches = hmac.compare_digest(expected, _hash(secret))
    if key is None or not matches or key.revoked_at is not None:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    if key.expires_at is not None and key.expires_at <= clock.now():
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    return Principal(key=key, permissions=permissions_of(key))


def list_api_keys(uow) -> list[ApiKey]:
    with uow:
        return uow.api_keys.all()


def revoke_api_key(uow, clock, key_id: str, *, revoker: Principal | None = None) -> None:
    """Revoke a key. ``revoker`` is the caller (a key or a session); None is the operator
    (CLI), unbounded. A key revokes only keys within its own bounds, as it creates them
    (``_reach``): else ``Forbidden`` naming what exceeds, and nothing changes."""
    with uow:
        key = uow.api_keys.get(key_id)
        if key is None or key.revoked_at is not None:
            raise NotFound(f"API key {key_id} not found")
        if revoker is not None:
            excess = _reach(revoker, role=key.role, denied_permissions=key.denied_permissions,
                            customer_id=key.customer_id, acts="revokes")
            if excess:
                raise Forbidden("a key cannot revoke a key that holds more than the caller: " + "; ".join(excess))
        uow.api_keys.revoke(key_id, clock.now())
        uow.commit()
