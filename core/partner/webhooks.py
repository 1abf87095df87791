"""Partner webhooks: endpoints a partner registers for ledger events, and the durable
queue of deliveries to them.

Every ledger event is queued, in the transaction that records it (``enqueue``), as one
delivery row per endpoint that wants it: endpoints of the event's partner and of its
ancestors (a parent sees its sub-resellers' activity, as through the API), whose
``events`` name it. The rows are the queue: a worker in any process claims a due one
with a conditional update (``claim_due``), sends it and records the attempt
(``record_attempt``). A claim lapses after ``hold`` seconds, so a delivery whose
process died mid-send is taken up again by another (or the restarted) process; the
request that wrote the event never waits for any of it.

Failed attempts are retried after ``retry_base * 2**(attempts - 1)`` seconds; after
``MAX_ATTEMPTS`` the delivery is ``failed``. Deleting an endpoint deletes its
deliveries, pending ones included (they are not sent).

Target URLs follow the SSRF rule (``url_refusal``): ``https`` to a public host; any of
``http``/``https`` to a host that is or resolves to a non-public address
(``core.addresses``) only when the operator allows private hosts. The rule is checked
when the endpoint is created (``check_url``, before the transaction: it may wait for
DNS) and again before every attempt (DNS may have changed).
"""
from __future__ import annotations

import base64
import ipaddress
import secrets
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from core import addresses
from core.errors import Conflict, Invalid, NotFound
from core.partner.events import EVENTS
from core.partner.partners import is_uuid
from core.partner.scope import Page

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
MAX_ATTEMPTS = 8
MAX_ENDPOINTS = 20  # per partner: each one multiplies the rows every ledger event writes
MAX_URL_LENGTH = 2048
STATUSES = ("pending", "succeeded", "failed")


@dataclass(frozen=True)
class Endpoint:
    id: str
    partner_id: str
    url: str
    events: tuple
    secret: str
    created_at: datetime


@dataclass(frozen=True)
class Delivery:
    id: str
    endpoint_id: str
    event_id: int
    event: str
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None
    next_attempt_at: datetime
    claimed_by: str | None = None
    claimed_until: datetime | None = None


def new_secret() -> str:
    """``whsec_`` + base64 of 32 random bytes: the Standard Webhooks secret format."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


# --- the SSRF rule -----------------------------------------------------------------------------


def judge_url(url: str, *, allow_private: bool, resolver: addresses.Resolver) -> tuple[str | None, list[str]]:
    """(why deliveries may not go to ``url`` now or None, the addresses its host has now,
    as ``resolver`` answers). A name that does not resolve is judged public (its delivery
    will fail, and be judged again)."""
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
        return f"must be a URL of at most {MAX_URL_LENGTH} characters", []
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError:
        return "is not a valid URL", []
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL with a host", []
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials", []
    host = parts.hostname
    try:
        found = [str(ipaddress.ip_address(host.split("%", 1)[0]))]
    except ValueError:
        found = resolver.resolve(host) or []
    private = addresses.refusal(host, found, "only public hosts are allowed (over https)")
    if private is not None:
        return (None if allow_private else private), found
    if parts.scheme != "https":
        return "must be https (plain http only to a private host, where the operator allows private hosts)", found
    return None, found


def url_refusal(url: str, *, allow_private: bool, resolver: addresses.Resolver) -> str | None:
    """Why deliveries may not go to ``url`` now, or None (``judge_url``)."""
    return judge_url(url, allow_private=allow_private, resolver=resolver)[0]


# --- endpoints (the API) -----------------------------------------------------------------------


def _events(events) -> tuple:
    if events is None:
        return EVENTS
    wanted = tuple(dict.fromkeys(events))
    unknown = [e for e in wanted if e not in EVENTS]
    if unknown or not wanted:
        raise Invalid("invalid webhook events", fields={
            "events": "must be a non-empty list of: " + ", ".join(EVENTS)})
    return wanted


@dataclass(frozen=True)
class Target:
    """A URL that passed the rule (``check_url``): what ``create_endpoint`` takes."""

    url: str


def check_url(url: str, *, allow_private: bool, resolver: addresses.Resolver) -> Target:
    """``Invalid`` on ``url`` unless it passes the rule. May wait for ``resolver`` (the
    system's waits up to ``core.addresses.RESOLVE_TIMEOUT_S``): run it apart from
    database work."""
    reason = url_refusal(url, allow_private=allow_private, resolver=resolver)
    if reason is not None:
        raise Invalid("invalid webhook url", fields={"url": reason})
    return Target(url)


def create_endpoint(uow, clock, caller, *, target: Target, events=None) -> Endpoint:
    """A new endpoint of the caller's own partner; its secret is returned only here."""
    wanted = _events(events)
    endpoint = Endpoint(id=str(uuid.uuid4()), partner_id=caller.partner.id, url=target.url, events=wanted,
                        secret=new_secret(), created_at=clock.now())
    with uow:
        if uow.webhook_endpoints.count_for_partner(caller.partner.id) >= MAX_ENDPOINTS:
            raise Conflict(f"a partner may have at most {MAX_ENDPOINTS} webhook endpoints")
        uow.webhook_endpoints.add(endpoint)
        uow.commit()
    return endpoint


def list_endpoints(uow, caller) -> list[Endpoint]:
    """The caller's own endpoints, newest first."""
    with uow:
        return uow.webhook_endpoints.list_for_partner(caller.partner.id)


def _own(uow, caller, endpoint_id: str) -> Endpoint:
    endpoint = uow.webhook_endpoints.get(endpoint_id) if is_uuid(endpoint_id) else None
    if endpoint is None or endpoint.partner_id != caller.partner.id:  # a parent's or child's too
        raise NotFound(f"webhook endpoint {endpoint_id} not found")
    return endpoint


def get_endpoint(uow, caller, endpoint_id: str) -> Endpoint:
    with uow:
        return _own(uow, caller, endpoint_id)


def delete_endpoint(uow, caller, endpoint_id: str) -> None:
    """Remove the endpoint and its deliveries: pending ones are never sent."""
    with uow:
        _own(uow, caller, endpoint_id)
        uow.webhook_deliveries.delete_for_endpoint(endpoint_id)
        uow.webhook_endpoints.delete(endpoint_id)
        uow.commit()


def list_deliveries(uow, caller, endpoint_id: str, page: Page) -> list[Delivery]:
    """The endpoint's delivery log, newest event first."""
    with uow:
        _own(uow, caller, endpoint_id)
        return uow.webhook_deliveries.for_endpoint(endpoint_id, page)


# --- the queue ---------------------------------------------------------------------------------


def _owners(uow, partner_id: str) -> list[str]:
    """The partner and its ancestors: whose endpoints see its events."""
    owners: list[str] = []
    current: str | None = partner_id
    while current is not None and current not in owners:
        owners.append(current)
        partner = uow.partners.get(current)
        current = partner.parent_id if partner is not None else None
    return owners


def enqueue(uow, event) -> int:
    """Queue ``event`` (a stored ``LedgerEvent``) for every endpoint that wants it, in the
    caller's transaction; how many deliveries were queued."""
    endpoints = [e for e in uow.webhook_endpoints.for_partners(_owners(uow, event.partner_id))
                 if event.event in e.events]
    for endpoint in endpoints:
        uow.webhook_deliveries.add(Delivery(
            id=str(uuid.uuid4()), endpoint_id=endpoint.id, event_id=event.id, event=event.event,
            status="pending", attempts=0, last_status_code=None, last_error=None, created_at=event.at,
            delivered_at=None, next_attempt_at=event.at))
    return len(endpoints)


@dataclass(frozen=True)
class Claimed:
    delivery: Delivery
    endpoint: Endpoint
    event: object  # core.partner.ledger.LedgerEvent


def claim_due(uow, clock, owner: str, *, hold: float, busy=frozenset(), full=frozenset(),
              batch: int = 10) -> Claimed | None:
    """Claim the oldest due delivery (pending, due, unclaimed or its claim lapsed) whose
    endpoint is not in ``busy`` and not of a partner in ``full`` (one with as many
    deliveries in flight as it may have), for ``hold`` seconds; None when there is none.
    The claim is a conditional update: of two processes racing for a row, one gets it."""
    now = clock.now()
    with uow.reading():  # polled often: looking takes no write lock
        exclude = set(busy)
        for partner_id in full:
            exclude.update(e.id for e in uow.webhook_endpoints.list_for_partner(partner_id))
        candidates = uow.webhook_deliveries.due(now, exclude=frozenset(exclude), limit=batch)
    if not candidates:
        return None
    with uow:
        for candidate in candidates:
            delivery = uow.webhook_deliveries.claim(candidate.id, owner, now, now + timedelta(seconds=hold))
            if delivery is None:
                continue  # another process took it first (or sent it meanwhile)
            endpoint = uow.webhook_endpoints.get(delivery.endpoint_id)
            event = uow.ledger.get(delivery.event_id)
            uow.commit()
            return Claimed(delivery, endpoint, event)
        return None


def record_attempt(uow, clock, claimed: Claimed, *, status_code: int | None, error: str | None,
                   retry_base: float) -> Delivery | None:
    """Record one attempt: a 2xx answer (``error`` None) makes the delivery ``succeeded``;
    anything else counts against it and schedules the next attempt, or after
    ``MAX_ATTEMPTS`` makes it ``failed``. The claim is released. None when the claim was
    lost meanwhile (it lapsed and another process took the delivery, or the endpoint was
    deleted): that process records its own attempt."""
    now = clock.now()
    d = claimed.delivery
    attempts = d.attempts + 1
    if error is None:
        done = replace(d, status="succeeded", attempts=attempts, last_status_code=status_code, last_error=None,
                       delivered_at=now, claimed_by=None, claimed_until=None)
    else:
        failed = attempts >= MAX_ATTEMPTS
        done = replace(d, status="failed" if failed else "pending", attempts=attempts,
                       last_status_code=status_code, last_error=error[:500], claimed_by=None, claimed_until=None,
                       next_attempt_at=now + timedelta(seconds=retry_base * 2 ** (attempts - 1)))
    with uow:
        if not uow.webhook_deliveries.finish(done, d.claimed_by):
            return None
        uow.commit()
    return done
