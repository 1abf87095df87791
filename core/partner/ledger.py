"""The activity ledger: append-only events of every license change, and how they are read."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from core.errors import Invalid
from core.partner.events import EVENTS
from core.partner.scope import Page, subtree, visible
from core.partner.webhooks import enqueue

EXPORT_ROW_LIMIT = 5000


class ExportRow(NamedTuple):
    """One line of the activity export: an event as stored, its ``data`` the canonical
    JSON text it was written as (sorted keys, no spaces), so the export never decodes
    and re-encodes it."""
    id: int
    at: datetime
    event: str
    actor: str | None
    partner_id: str
    customer_id: str | None
    license_id: str
    data: str


def canonical_json(data: dict) -> str:
    """How a ledger event's ``data`` is stored and exported."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class LedgerEvent:
    id: int | None
    event: str
    at: datetime
    actor: str | None
    partner_id: str
    customer_id: str | None
    license_id: str
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ActivityFilter:
    event: str | None = None
    actor: str | None = None
    actor_given: bool = False  # an empty ``actor=`` selects unattributed events
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive


def make_filter(*, event=None, actor=None, since=None, until=None) -> ActivityFilter:
    if event is not None and event not in EVENTS:
        raise Invalid("invalid event filter", fields={"event": "must be one of " + ", ".join(EVENTS)})
    return ActivityFilter(event=event, actor=actor or None, actor_given=actor is not None, since=since,
                          until=until)


def record(uow, clock, *, event: str, license, actor: str | None, data: dict | None = None,
           partner_id: str | None = None, customer_id: str | None = None) -> LedgerEvent:
    """Append one event in the caller's transaction, and queue its webhook deliveries
    in the same transaction (``core.partner.webhooks``): both are kept, or neither."""
    assert event in EVENTS, event
    stored = uow.ledger.append(LedgerEvent(
        id=None, event=event, at=clock.now(), actor=actor,
        partner_id=partner_id or license.partner_id,
        customer_id=customer_id if customer_id is not None else license.customer_id,
        license_id=license.id, data=data or {}))
    enqueue(uow, stored)
    return stored


def customer_activity(uow, caller, customer_id: str, filters: ActivityFilter, page: Page) -> list[LedgerEvent]:
    with uow:
        visible(uow.customers.get(customer_id), subtree(uow, caller), "customer", customer_id)
        return uow.ledger.for_customer(customer_id, filters, page)


def customer_activity_summary(uow, caller, customer_id: str, filters: ActivityFilter) -> dict:
    with uow:
        visible(uow.customers.get(customer_id), subtree(uow, caller), "customer", customer_id)
        by_event, first_at, last_at = uow.ledger.summary_for_customer(customer_id, filters)
    return {"customer_id": customer_id, "total": sum(by_event.values()), "by_event": by_event,
            "first_at": first_at, "last_at": last_at}


def check_customer_visible(uow, caller, customer_id: str) -> None:
    with uow:
        visible(uow.customers.get(customer_id), subtree(uow, caller), "customer", customer_id)


def export_batches(uow, customer_id: str, filters: ActivityFilter, after_id: int | None,
                   size: int) -> list[ExportRow]:
    """One batch of the export, newest first, continuing below ``after_id``."""
    with uow:
        return uow.ledger.export_rows(customer_id, filters, after_id, size)


def export_count(uow, customer_id: str, filters: ActivityFilter) -> int:
    with uow:
        by_event, _, _ = uow.ledger.summary_for_customer(customer_id, filters)
    return sum(by_event.values())
