"""Fakes for unit tests of ``core`` and for driving time in API tests.

``FakeUnitOfWork`` is an in-memory ``ports.storage.UnitOfWork`` with every repository
core uses, faithful to what the use cases rely on:

- transactions: ``with uow:`` works on a snapshot; what the block wrote reaches the
  store (and other units of work on it) only when it called ``commit()`` and ended
  without an exception; otherwise it is discarded. Outside a block each call stands
  alone (autocommit). Blocks do not nest, as with the real one.
- ``emit``: events reach ``uow.published`` only when their block commits.
- orderings, filters and pages as the peewee repositories answer them;
- uniqueness (primary keys, ``token_hash``, ``human_id``, service names, one primary
  contact per customer, one route per service and hostname) fails with
  ``IntegrityError``, as the database does; so do deletes a foreign key restricts;
- row locks (``for_update=True``) are accepted and do nothing: there is one thread;
- sequences (note, ledger and timeline ids) are not transactional, as in a database;
  the human-id counters are (a rolled-back number comes back).

Several units of work may share one ``FakeStore`` (``uow.fork()``) to show what one sees
of another's uncommitted or committed writes.

Below it: fakes of the other ports the use cases call (license service, billing model,
deploy method and compose parser, container runtime, backup archives; the resolver is
above, beside the clocks), and two builders
of callers (``caller_of``, ``principal_of``).
"""
from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import itertools
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

from core.panel import access as panel_access
from core.partner import partners, tokens
from core.partner.billing import billable_days, quantity
from core.panel.compose import compose_parser, dump_compose
from core.panel.containers import KEPT_IMAGES, SERVICE_LABEL
from core.panel.services import ServiceSummary
from core.partner.licenses import LicenseSummary
from ports.billing import Line, LineDetail
from ports.clock import Clock
from ports.licensing import IssuedKey, LicenseServiceError
from ports.resolver import Resolver
from ports.runtime import ContainerState, Gone


class FakeClock(Clock):
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None):
        self._now = start or datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc)
        self._mono = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds

    def sleep(self, seconds: float) -> None:
        """Waits for real (what API and engine tests wait on is real: a container
        starting), and the time slept passes on :meth:`monotonic`, so a deadline counted
        in it comes; the calendar (:meth:`now`) stays where the test put it."""
        if seconds > 0:
            time.sleep(seconds)
            self._mono += seconds


class DrivenClock(FakeClock):
    """The clock of core's unit tests: a :meth:`sleep` waits for nothing and moves
    :meth:`now` and :meth:`monotonic` on at once, running the actions scheduled with
    :meth:`at` whose moment it passes (in order), so a test says what happens when (a
    container turns healthy 10 s in, a cancel 4 s in) and a 90 s health timeout takes no
    time. ``slept`` lists every sleep asked for."""

    def __init__(self, start: datetime | None = None):
        super().__init__(start)
        self._due: list = []  # (monotonic moment, order, action)
        self._order = itertools.count()
        self.slept: list = []

    def at(self, seconds: float, action) -> None:
        """Run ``action()`` once the clock has moved ``seconds`` on from now."""
        self._due.append((self._mono + seconds, next(self._order), action))
        self._due.sort(key=lambda due: due[:2])

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        end = self._mono + max(0.0, seconds)
        while self._due and self._due[0][0] <= end:
            moment, _, action = self._due.pop(0)
            self.advance(max(0.0, moment - self._mono))
            action()
        self.advance(end - self._mono)


class FakeResolver(Resolver):
    """A resolver that answers at once from ``answers`` ({name: addresses}); any other
    name does not resolve (None), as on a machine without DNS. An address written out
    answers itself. ``asked`` lists every name looked up."""

    def __init__(self, answers: dict | None = None):
        self.answers = dict(answers or {})
        self.asked: list = []

    def resolve(self, host: str, timeout: float = 0.0) -> list[str] | None:
        if _address(host):
            return [host.strip("[]")]
        self.asked.append(host)
        found = self.answers.get(host)
        return list(found) if found is not None else None

    def resolve_all(self, hosts, *, deadline: float = 0.0, workers: int = 8) -> dict:
        return {host: self.resolve(host) for host in dict.fromkeys(hosts)}


def _address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class IntegrityError(Exception):
    """What the database raises for a duplicate key or a restricted delete."""



def _sorted(rows, *keys, desc: bool = False):
    """Rows ordered by the attribute names ``keys`` (None sorts first, as on SQLite)."""
    def key(row):
        return tuple((getattr(row, k) is not None, getattr(row, k)) for k in keys)
    return sorted(rows, key=key, reverse=desc)


def _paginate(rows, page: int, per_page: int):
    start = max(0, (page - 1) * per_page)
    return rows[start:start + per_page]


def _contains(haystack: str, needle: str) -> bool:
    return needle.lower() in (haystack or "").lower()


class FakeStore:
    """The committed state: ``{table: {key: row}}`` and the sequences."""

    def __init__(self):
        self.tables: dict[str, dict] = {}
        self.sequences = itertools.count(1)
        self.recompute_lock_held = False  # True: "another process" holds the recompute lock

    def table(self, name: str) -> dict:
        return self.tables.setdefault(name, {})


class _Repo:
    table = ""

    def __init__(self, uow: "FakeUnitOfWork"):
        self.uow = uow

    @property
    def rows(self) -> dict:
        return self.uow._rows(self.table)

    def _insert(self, key, row, *, unique=(), table=None):
        table = table or self.table
        rows = self.uow._rows(table)
        if key in rows:
            raise IntegrityError(f"duplicate key {key!r} in {table}")
        for name in unique:
            value = getattr(row, name)
            if any(getattr(other, name) == value for other in rows.values()):
                raise IntegrityError(f"duplicate {name} {value!r} in {table}")
        self.uow._put(table, key, row)

    def _put(self, key, row, table=None):
        self.uow._put(table or self.table, key, row)

    def _delete(self, key, table=None):
        self.uow._delete(table or self.table, key)


# --- partner API -----------------------------------------------------------------------------


class InMemoryPartners(_Repo):
    table = "partners"

    def add(self, partner):
        if partner.parent_id is not None and partner.parent_id not in self.rows:
            raise IntegrityError("parent partner does not exist")
        self._insert(partner.id, partner)

    def get(self, partner_id):
        return self.rows.get(partner_id)

    def all_ids(self):
        return sorted(self.rows)

    def subtree_ids(self, partner_id):
        rows = self.rows
        if partner_id not in rows:
            return set()
        found, frontier = {partner_id}, [partner_id]
        while frontier:
            parent = frontier.pop()
            for p in rows.values():
                if p.parent_id == parent and p.id not in found:
                    found.add(p.id)
                    frontier.append(p.id)
        return found


class InMemoryTokens(_Repo):
    table = "tokens"

    def add(self, token):
        if token.partner_id not in self.uow._rows("partners"):
            raise IntegrityError("partner does not exist")
        self._insert(token.id, token, unique=("token_hash",))

    def get(self, token_id):
        return self.rows.get(token_id)

    def by_hash_with_partner(self, token_hash):
        for token in self.rows.values():
            if token.token_hash == token_hash:
                return token, self.uow._rows("partners")[token.partner_id]
        return None

    def list_for_partner(self, partner_id):
        return _sorted([t for t in self.rows.values() if t.partner_id == partner_id], "created_at", "id", desc=True)

    def revoke(self, token_id, at):
        token = self.rows.get(token_id)
        if token is not None and token.revoked_at is None:
            self._put(token_id, replace(token, revoked_at=at))

    def touch(self, token_id, at, older_than):
        token = self.rows.get(token_id)
        if token is not None and (token.last_used_at is None or token.last_used_at <= older_than):
            self._put(token_id, replace(token, last_used_at=at))


class InMemoryContracts(_Repo):
    table = "contracts"

    def add(self, contract):
        self._insert(contract.id, contract)

    def get(self, contract_id):
        return self.rows.get(contract_id)

    def for_partner(self, partner_id):
        return _sorted([c for c in self.rows.values() if c.partner_id == partner_id], "id")

    def page(self, partner_id, page):
        mine = sorted(sorted(self.for_partner(partner_id), key=lambda c: c.id), key=lambda c: c.created_at,
                      reverse=True)
        return mine[page.offset:page.offset + page.limit]


class InMemoryHumanIds(_Repo):
    table = "human_ids"

    def next(self, kind):
        value = self.rows.get(kind, 1000) + 1  # the migration seeds C, L, T, P at 1000
        self._put(kind, value)
        return f"{kind}-{value}"


class InMemoryCustomers(_Repo):
    table = "customers"

    def _live(self):
        deleted = self.uow._rows("customers_deleted")
        return [c for c in self.rows.values() if c.id not in deleted]

    def add(self, customer):
        self._insert(customer.id, customer, unique=("human_id",))

    def get(self, customer_id, for_update=False):
        if customer_id in self.uow._rows("customers_deleted"):
            return None
        return self.rows.get(customer_id)

    def list(self, scope, page, *, status=None, external_ref=None):
        rows = [c for c in self._live() if c.partner_id in scope
                and (status is None or c.status == status)
                and (external_ref is None or c.external_ref == external_ref)]
        rows = _sorted(rows, "created_at", "id", desc=True)
        return rows[page.offset:page.offset + page.limit]

    def update(self, customer):
        old = self.rows[customer.id]
        self._put(customer.id, replace(customer, human_id=old.human_id, partner_id=old.partner_id,
                                       created_at=old.created_at))

    def delete(self, customer_id, at):
        if customer_id in self.rows:
            self._put(customer_id, at, table="customers_deleted")


class InMemoryContacts(_Repo):
    table = "contacts"

    def _check_primary(self, contact):
        if contact.is_primary and any(c.is_primary and c.customer_id == contact.customer_id and c.id != contact.id
                                      for c in self.rows.values()):
            raise IntegrityError("contact_one_primary: the customer has a primary contact")

    def add(self, contact):
        self._check_primary(contact)
        self._insert(contact.id, contact, unique=("human_id",))

    def get(self, contact_id):
        return self.rows.get(contact_id)

    def list_for_customer(self, customer_id):
        rows = [c for c in self.rows.values() if c.customer_id == customer_id]
        return sorted(rows, key=lambda c: (not c.is_primary, c.created_at, c.id))

    def update(self, contact):
        self._check_primary(contact)
        old = self.rows[contact.id]
        self._put(contact.id, replace(contact, human_id=old.human_id, customer_id=old.customer_id,
                                      created_at=old.created_at))

    def demote_primary(self, customer_id, at):
        for c in list(self.rows.values()):
            if c.customer_id == customer_id and c.is_primary:
                self._put(c.id, replace(c, is_primary=False, updated_at=at))

    def delete(self, contact_id):
        self._delete(contact_id)


class InMemoryNotes(_Repo):
    table = "notes"

    def append(self, note):
        stored = replace(note, id=self.uow._next_id())
        self._insert(stored.id, stored)
        return stored

    def recent(self, customer_id, count):
        return _sorted([n for n in self.rows.values() if n.customer_id == customer_id], "id", desc=True)[:count]


class InMemoryEditions(_Repo):
    table = "editions"

    def policy_for(self, edition):
        return self.rows.get(edition)

    def all(self):
        return dict(sorted(self.rows.items()))

    def set(self, edition, policy, at):
        self._put(edition, policy)


LIVE_STATES = ("active", "trial", "suspended")


class InMemoryLicenses(_Repo):
    table = "licenses"

    def add(self, lic):
        self._insert(lic.id, lic, unique=("human_id",))

    def get(self, license_id, for_update=False):
        return self.rows.get(license_id)

    def list(self, scope, page, *, customer_id=None, state=None, edition=None):
        rows = [lic for lic in self.rows.values() if lic.partner_id in scope
                and (customer_id is None or lic.customer_id == customer_id)
                and (state is None or lic.state == state) and (edition is None or lic.edition == edition)]
        rows = _sorted(rows, "issued_at", "id", desc=True)
        return [LicenseSummary.of(lic) for lic in rows[page.offset:page.offset + page.limit]]

    def update(self, lic):
        old = self.rows[lic.id]
        self._put(lic.id, replace(lic, human_id=old.human_id, issued_at=old.issued_at))

    def count_live_for_customer(self, customer_id):
        return sum(1 for lic in self.rows.values() if lic.customer_id == customer_id and lic.state in LIVE_STATES)


class InMemoryTransfers(_Repo):
    table = "transfers"

    def add(self, transfer):
        self._insert(transfer.id, transfer, unique=("human_id",))

    def list(self, scope, page, *, license_id=None):
        rows = [t for t in self.rows.values() if (t.from_partner_id in scope or t.to_partner_id in scope)
                and (license_id is None or t.license_id == license_id)]
        rows = _sorted(rows, "created_at", "id", desc=True)
        return rows[page.offset:page.offset + page.limit]

    def set_sync_error(self, transfer_id, message):
        if transfer_id in self.rows:
            self._put(transfer_id, replace(self.rows[transfer_id], sync_error=message))

    def sync_failures(self):
        return _sorted([t for t in self.rows.values() if t.sync_error is not None], "created_at")


_BILLING_EVENTS = ("license.issued", "license.suspended", "license.resumed", "license.terminated",
                   "license.state_changed", "license.transferred_in")


class InMemoryLedger(_Repo):
    table = "ledger"

    def append(self, event):
        stored = replace(event, id=self.uow._next_id(), data=dict(event.data))
        self._insert(stored.id, stored)
        return replace(stored, data=dict(stored.data))

    def get(self, event_id):
        found = self.rows.get(event_id)
        return replace(found, data=dict(found.data)) if found else None

    def _matching(self, customer_id, filters, before_id=None):
        theirs = {lic.id for lic in self.uow._rows("licenses").values() if lic.customer_id == customer_id}
        out = []
        for e in self.rows.values():
            if not (e.customer_id == customer_id or (e.customer_id is None and e.license_id in theirs)):
                continue
            if filters.event is not None and e.event != filters.event:
                continue
            if filters.actor_given and e.actor != filters.actor:
                continue
            if filters.since is not None and e.at < filters.since:
                continue
            if filters.until is not None and e.at >= filters.until:
                continue
            if before_id is not None and e.id >= before_id:
                continue
            out.append(replace(e, data=dict(e.data)))
        return _sorted(out, "id", desc=True)

    def for_customer(self, customer_id, filters, page):
        return self._matching(customer_id, filters)[page.offset:page.offset + page.limit]

    def for_customer_before(self, customer_id, filters, before_id, size):
        return self._matching(customer_id, filters, before_id)[:size]

    def export_rows(self, customer_id, filters, before_id, size):
        from core.partner.ledger import ExportRow, canonical_json

        return [ExportRow(e.id, e.at, e.event, e.actor, e.partner_id, e.customer_id, e.license_id,
                          canonical_json(e.data)) for e in self.for_customer_before(customer_id, filters, before_id, size)]

    def histories_for_partner(self, partner_id):
        from core.partner.billing import LicenseHistory, change_from_event

        events = _sorted(self.rows.values(), "id")
        owned = {e.license_id for e in events
                 if e.partner_id == partner_id and e.event in ("license.issued", "license.transferred_in")}
        out = []
        for license_id in sorted(owned):
            mine = [e for e in events if e.license_id == license_id and e.event in _BILLING_EVENTS]
            issued = next((e for e in mine if e.event == "license.issued"), None)
            history = LicenseHistory(license_id, (issued.data.get("keyMasked") if issued else "") or "")
            contracts = set()
            for e in mine:
                if e.event == "license.issued":
                    contracts.add(e.data.get("contractId"))
                elif e.event == "license.transferred_in":
                    contracts.add(e.data.get("toContractId"))
                history.changes.append(change_from_event(e.id, e.at, e.event, e.partner_id, e.data))
            out.append((history, contracts))
        return out

    def summary_for_customer(self, customer_id, filters):
        by_event, first, last = {}, None, None
        for e in self._matching(customer_id, filters):
            by_event[e.event] = by_event.get(e.event, 0) + 1
            first = e.at if first is None or e.at < first else first
            last = e.at if last is None or e.at > last else last
        return by_event, first, last


class InMemoryWebhookEndpoints(_Repo):
    table = "webhook_endpoints"

    def add(self, endpoint):
        self._insert(endpoint.id, endpoint)

    def get(self, endpoint_id):
        return self.rows.get(endpoint_id)

    def list_for_partner(self, partner_id):
        return _sorted([e for e in self.rows.values() if e.partner_id == partner_id], "created_at", "id", desc=True)

    def count_for_partner(self, partner_id):
        return sum(1 for e in self.rows.values() if e.partner_id == partner_id)

    def for_partners(self, partner_ids):
        wanted = set(partner_ids)
        return _sorted([e for e in self.rows.values() if e.partner_id in wanted], "created_at", "id")

    def delete(self, endpoint_id):
        if any(d.endpoint_id == endpoint_id for d in self.uow._rows("webhook_deliveries").values()):
            raise IntegrityError(f"webhook endpoint {endpoint_id} still has deliveries")
        self._delete(endpoint_id)


class InMemoryWebhookDeliveries(_Repo):
    table = "webhook_deliveries"

    def add(self, delivery):
        self._insert(delivery.id, delivery)

    def for_endpoint(self, endpoint_id, page):
        mine = _sorted([d for d in self.rows.values() if d.endpoint_id == endpoint_id], "event_id", "id", desc=True)
        return mine[page.offset:page.offset + page.limit]

    def delete_for_endpoint(self, endpoint_id):
        gone = [d.id for d in self.rows.values() if d.endpoint_id == endpoint_id]
        for key in gone:
            self._delete(key)
        return len(gone)

    @staticmethod
    def _claimable(d, now):
        return d.status == "pending" and (d.claimed_until is None or d.claimed_until < now)

    def due(self, now, exclude, limit):
        found = [d for d in self.rows.values()
                 if self._claimable(d, now) and d.next_attempt_at <= now and d.endpoint_id not in exclude]
        return _sorted(found, "next_attempt_at", "event_id", "id")[:limit]

    def claim(self, delivery_id, owner, now, until):
        d = self.rows.get(delivery_id)
        if d is None or not self._claimable(d, now) or d.next_attempt_at > now:
            return None
        claimed = replace(d, claimed_by=owner, claimed_until=until)
        self._put(delivery_id, claimed)
        return claimed

    def finish(self, delivery, owner):
        d = self.rows.get(delivery.id)
        if d is None or d.claimed_by != owner or d.status != "pending":
            return False
        self._put(delivery.id, replace(d, status=delivery.status, attempts=delivery.attempts,
                                       last_status_code=delivery.last_status_code, last_error=delivery.last_error,
                                       delivered_at=delivery.delivered_at, next_attempt_at=delivery.next_attempt_at,
                                       claimed_by=delivery.claimed_by, claimed_until=delivery.claimed_until))
        return True


class InMemoryStatements(_Repo):
    table = "statements"

    def add(self, s):
        self._insert(s.id, s)

    def try_lock_recompute(self):
        return not self.uow.store.recompute_lock_held

    def draft(self, partner_id, period):
        return next((s for s in self.rows.values() if s.partner_id == partner_id and s.period.start == period.start
                     and s.status == "draft"), None)

    def replace_draft(self, s):
        old = self.draft(s.partner_id, s.period)
        if old is not None:
            self._delete(old.id)
        self.add(s)

    def latest_finalized(self, partner_id, period):
        found = [s for s in self.rows.values() if s.partner_id == partner_id and s.period.start == period.start
                 and s.revision is not None]
        return max(found, key=lambda s: s.revision) if found else None

    def finalize_draft(self, s):
        old = self.rows[s.id]
        self._put(s.id, replace(old, status=s.status, revision=s.revision, finalized_by=s.finalized_by,
                                finalized_at=s.finalized_at))

    def supersede(self, statement_id):
        if statement_id in self.rows:
            self._put(statement_id, replace(self.rows[statement_id], status="superseded"))

    def get(self, statement_id):
        return self.rows.get(statement_id)

    def visible_for(self, partner_id):
        rows = [s for s in self.rows.values() if s.partner_id == partner_id and s.status != "draft"]
        return sorted(rows, key=lambda s: (s.period.start, s.revision or 0), reverse=True)


# --- panel API -------------------------------------------------------------------------------


class InMemoryApiKeys(_Repo):
    table = "api_keys"

    def add(self, key):
        if key.customer_id is not None and key.customer_id not in self.uow._rows("panel_customers"):
            raise IntegrityError("panel customer does not exist")
        self._insert(key.id, key)

    def get(self, key_id):
        return self.rows.get(key_id)

    def get_many(self, key_ids):
        rows = self.rows
        return {k: rows[k] for k in set(key_ids) if k in rows}

    def all(self):
        return _sorted([k for k in self.rows.values() if k.revoked_at is None], "created_at", "id")

    def revoke(self, key_id, at):
        if key_id in self.rows:
            self._put(key_id, replace(self.rows[key_id], revoked_at=at))

    def count_for_customer(self, customer_id):
        return sum(1 for k in self.rows.values() if k.customer_id == customer_id and k.revoked_at is None)


class InMemoryPanelCustomers(_Repo):
    table = "panel_customers"

    def add(self, c):
        self._insert(c.id, c)

    def get(self, customer_id, for_update=False):
        return self.rows.get(customer_id)

    def usage(self, customer_id):
        mine = [s for s in self.uow._rows("services").values() if s.customer_id == customer_id]
        return (len(mine), sum(s.memory_mb for s in mine), sum(s.millicpus for s in mine),
                sum(s.containers for s in mine))

    def page(self, *, page, per_page, sort, order, search):
        rows = [c for c in self.rows.values() if not search or _contains(c.name, search)]
        column = sort if sort in ("name", "created_at", "email") else "created_at"
        rows = _sorted(rows, column, "id", desc=order == "desc")
        return _paginate(rows, page, per_page), len(rows)

    def update(self, c):
        old = self.rows[c.id]
        self._put(c.id, replace(old, name=c.name, email=c.email, limits=c.limits))

    def delete(self, customer_id):
        for key in list(self.uow._rows("api_keys").values()):  # revoked keys go with it
            if key.customer_id == customer_id and key.revoked_at is not None:
                for session in list(self.uow._rows("panel_key_sessions").values()):  # their sessions too
                    if session.key_id == key.id:
                        self._delete(session.id, table="panel_key_sessions")
                self._delete(key.id, table="api_keys")
        if any(s.customer_id == customer_id for s in self.uow._rows("services").values()) \
                or any(k.customer_id == customer_id for k in self.uow._rows("api_keys").values()):
            raise IntegrityError("the customer is referenced (services or live API keys)")
        for user in list(self.uow._rows("panel_users").values()):  # ON DELETE CASCADE
            if user.customer_id == customer_id:
                self._delete(user.email, table="panel_users")
        for key_id, (key, _) in list(self.uow._rows("deploy_keys").items()):  # ON DELETE CASCADE
            if key.customer_id == customer_id:
                self._delete(key_id, table="deploy_keys")
        self._delete(customer_id)


class InMemoryPanelUsers(_Repo):
    table = "panel_users"

    def get(self, email):
        return self.rows.get(email)

    def add(self, user):
        self._insert(user.email, user)

    def update(self, user):
        old = self.rows[user.email]
        self._put(user.email, replace(old, role=user.role, customer_id=user.customer_id, updated_at=user.updated_at))

    def all(self):
        return _sorted(self.rows.values(), "email")

    def remove(self, email):
        sessions = self.uow._rows("panel_sessions")
        for sid in [sid for sid, s in sessions.items() if s.email == email]:
            self._delete(sid, table="panel_sessions")
        self._delete(email)


class _SessionRepo(_Repo):
    """What both kinds of browser session (a panel user's, a key's) do alike."""

    def revoke(self, session_id, at):
        s = self.rows.get(session_id)
        if s is None or s.revoked_at is not None:
            return False
        self._put(session_id, replace(s, revoked_at=at))
        return True

    def purge(self, ended_before):
        for s in list(self.rows.values()):
            if s.expires_at < ended_before:
                self._delete(s.id)


class InMemoryPanelKeySessions(_SessionRepo):
    table = "panel_key_sessions"

    def add(self, s):
        if s.key_id not in self.uow._rows("api_keys"):
            raise IntegrityError("API key does not exist")
        self._insert(s.id, s)

    def get_with_key(self, session_id):
        s = self.rows.get(session_id)
        key = None if s is None else self.uow._rows("api_keys").get(s.key_id)
        return None if key is None else (s, key)

    def get_many(self, session_ids):
        return {sid: self.rows[sid] for sid in set(session_ids) if sid in self.rows}


class InMemoryPanelSessions(_SessionRepo):
    table = "panel_sessions"

    def add(self, s):
        if s.email not in self.uow._rows("panel_users"):
            raise IntegrityError("panel user does not exist")
        self._insert(s.id, s)

    def get_with_user(self, session_id):
        s = self.rows.get(session_id)
        return None if s is None else (s, self.uow._rows("panel_users").get(s.email))

    def get_many_with_users(self, session_ids):
        return {sid: found for sid in set(session_ids) if (found := self.get_with_user(sid)) is not None}


class InMemoryPanelLogins(_Repo):
    table = "panel_logins"

    def add(self, p):
        self._insert(p.state_hash, p)

    def take(self, state_hash):
        found = self.rows.get(state_hash)
        if found is not None:
            self._delete(state_hash)
        return found

    def purge(self, now):
        for p in list(self.rows.values()):
            if p.expires_at <= now:
                self._delete(p.state_hash)


class InMemoryServices(_Repo):
    table = "services"

    def _copy(self, s):
        if s is None:
            return None
        domains = tuple(sorted(h for h, (owner, _) in self.uow._rows("custom_domains").items() if owner == s.id))
        return replace(s, variables=dict(s.variables or {}), source=dict(s.source or {}), custom_domains=domains)

    def add(self, s):
        if s.customer_id not in self.uow._rows("panel_customers"):
            raise IntegrityError("panel customer does not exist")
        self._insert(s.id, self._copy(s), unique=("name",))

    def get(self, service_id, for_update=False):
        return self._copy(self.rows.get(service_id))

    def by_name(self, name):
        return self._copy(next((s for s in self.rows.values() if s.name == name), None))

    def update(self, s):
        if any(o.name == s.name and o.id != s.id for o in self.rows.values()):
            raise IntegrityError(f"duplicate name {s.name!r} in services")
        if s.id in self.rows:
            self._put(s.id, self._copy(s))

    def delete(self, service_id):
        for key in [k for k in self.uow._rows("git_deliveries") if k[0] == service_id]:  # ON DELETE CASCADE
            self._delete(key, table="git_deliveries")
        for key in [k for k, j in self.uow._rows("preview_jobs").items() if j.service_id == service_id]:
            self._delete(key, table="preview_jobs")  # ON DELETE CASCADE
        if service_id in self.uow._rows("webhook_secrets"):  # a column of the row
            self._delete(service_id, table="webhook_secrets")
        if service_id in self.uow._rows("host_ports"):  # a column of the row
            self._delete(service_id, table="host_ports")
        for b in list(self.uow._rows("backups").values()):  # ON DELETE CASCADE
            if b.service_id == service_id:
                self._delete(b.id, table="backups")
        if service_id in self.uow._rows("backup_policies"):
            self._delete(service_id, table="backup_policies")
        for t in list(self.uow._rows("tasks").values()):  # ON DELETE CASCADE, and their runs
            if t.service_id == service_id:
                InMemoryTasks(self.uow).delete(t.id)
        self._delete(service_id)

    def count_for_customer(self, customer_id):
        return sum(1 for s in self.rows.values() if s.customer_id == customer_id)

    def on_customer_network(self, customer_id):
        return sum(1 for s in self.rows.values() if s.customer_id == customer_id and s.customer_network)

    def existing(self, service_ids):
        return {i for i in service_ids if i in self.rows}

    def with_status(self, status):
        return [self._copy(s) for s in self.rows.values() if s.status == status]

    def page(self, *, page, per_page, status, customer_id, sort, order, search):
        rows = [self._copy(s) for s in self.rows.values() if (not status or s.status == status)
                and (not customer_id or s.customer_id == customer_id) and (not search or _contains(s.name, search))]
        column = sort if sort in ("name", "status", "created_at", "updated_at") else "created_at"
        rows = _sorted(rows, column, "id", desc=order == "desc")
        return [ServiceSummary.of(s) for s in _paginate(rows, page, per_page)], len(rows)

    def customer_names(self, customer_ids):
        customers = self.uow._rows("panel_customers")
        return {i: customers[i].name for i in customer_ids if i in customers}

    def _previews(self, parent_id):
        return sorted((s for s in self.rows.values() if s.preview_of == parent_id),
                      key=lambda s: (s.preview_number, s.id))

    def preview(self, parent_id, number, for_update=False):
        return self._copy(next((s for s in self._previews(parent_id) if s.preview_number == number), None))

    def preview_ids(self, parent_id):
        return [s.id for s in self._previews(parent_id)]

    def previews_page(self, parent_id, *, page, per_page):
        rows = [self._copy(s) for s in self._previews(parent_id)]
        return _paginate(rows, page, per_page), len(rows)
    def webhook_secret(self, service_id):
        return self.uow._rows("webhook_secrets").get(service_id) if service_id in self.rows else None

    def set_webhook_secret(self, service_id, secret):
        if service_id in self.rows:
            self._put(service_id, secret, table="webhook_secrets")

    def host_ports(self, service_id):
        kept = self.uow._rows("host_ports").get(service_id) if service_id in self.rows else None
        return {component: dict(ports) for component, ports in (kept or {}).items()}

    def keep_host_ports(self, service_id, ports):
        if service_id in self.rows:
            self._put(service_id, {c: dict(p) for c, p in ports.items()}, table="host_ports")


class InMemoryGitDeliveries(_Repo):
    table = "git_deliveries"

    def seen(self, service_id, delivery_id):
        return (service_id, delivery_id) in self.rows

    def forget_before(self, service_id, before):
        gone = [k for k, (_, at) in self.rows.items() if k[0] == service_id and at < before]
        for key in gone:
            self._delete(key)
        return len(gone)

    def add(self, service_id, delivery_id, provider, now):
        if service_id not in self.uow._rows("services"):
            raise IntegrityError("service does not exist")
        self._insert((service_id, delivery_id), (provider, now))


class InMemoryPreviewJobs(_Repo):
    table = "preview_jobs"

    def add(self, job):
        if job.service_id not in self.uow._rows("services"):
            raise IntegrityError("service does not exist")
        self._insert(job.id, job)

    def get(self, job_id):
        return self.rows.get(job_id)

    def claim_queued(self, now, owner=None):
        running = {j.customer_id for j in self.rows.values() if j.state == "running"}
        queued = sorted((j for j in self.rows.values() if j.state == "queued" and j.customer_id not in running),
                        key=lambda j: (j.created_at, j.id))
        if not queued:
            return None
        job = replace(queued[0], state="running", owner=owner, updated_at=now)
        self._put(job.id, job)
        return job

    def finish(self, job_id, state, answer, now):
        job = self.rows.get(job_id)
        if job is not None:
            self._put(job_id, replace(job, state=state, answer=answer, updated_at=now))

    def requeue_orphaned(self, live_owners, now):
        live = set(live_owners)
        orphans = [j for j in self.rows.values() if j.state == "running" and j.owner not in live]
        for job in orphans:
            self._put(job.id, replace(job, state="queued", owner=None, updated_at=now))
        return [j.id for j in orphans]

    def forget_before(self, before):
        gone = [k for k, j in self.rows.items() if j.state in ("done", "failed") and j.updated_at < before]
        for key in gone:
            self._delete(key)
        return len(gone)


class InMemoryDeployJobs(_Repo):
    table = "deploy_jobs"
    owners = "deploy_job_owners"

    def add(self, job):
        self._insert(job.id, job)

    def get(self, job_id):
        return self.rows.get(job_id)

    def running_by_customer(self):
        services = self.uow._rows("services")
        counts = {}
        for job in self.rows.values():
            if job.state == "running" and job.service_id in services:
                customer = services[job.service_id].customer_id
                counts[customer] = counts.get(customer, 0) + 1
        return counts

    def claim_queued(self, now, owner=None, per_customer=None):
        services = self.uow._rows("services")
        busy = set()
        if per_customer is not None:
            busy = {c for c, n in self.running_by_customer().items() if n >= per_customer}
        running = {j.service_id for j in self.rows.values() if j.state == "running"}  # one job per service at a time
        for job in _sorted([j for j in self.rows.values() if j.state == "queued" and j.service_id not in running],
                           "created_at", "id"):
            service = services.get(job.service_id)
            if service is not None and service.customer_id in busy:
                continue
            claimed = replace(job, state="running", updated_at=now, attempts=job.attempts + 1)
            self._put(job.id, claimed)
            self._put(job.id, owner, table=self.owners)
            return claimed
        return None

    def queued_push(self, service_id):
        queued = [j for j in self.rows.values() if j.service_id == service_id and j.state == "queued"
                  and j.commit and (j.created_by or "").startswith("git:")]
        return _sorted(queued, "created_at", "id")[-1] if queued else None

    def retarget(self, job_id, commit, created_by, now, commits=()):
        job = self.rows.get(job_id)
        if job is None or job.state != "queued":
            return False
        self._put(job_id, replace(job, commit=commit, commits=tuple(commits), created_by=created_by, updated_at=now))
        return True

    def requeue_orphaned(self, now, live_owners):
        owners = self.uow._rows(self.owners)
        orphaned = [j for j in self.rows.values() if j.state == "running"
                    and (owners.get(j.id) is None or owners.get(j.id) not in live_owners)]
        for job in orphaned:
            self._put(job.id, replace(job, state="queued", updated_at=now))
            self._put(job.id, None, table=self.owners)
        return orphaned

    def set_step(self, job_id, step, now):
        if job_id in self.rows:
            self._put(job_id, replace(self.rows[job_id], step=step, updated_at=now))

    def finish(self, job_id, state, error, now, release_id=None):
        if job_id in self.rows:
            job = self.rows[job_id]
            self._put(job_id, replace(job, state=state, error=error, updated_at=now, finished_at=now,
                                      release_id=release_id if release_id is not None else job.release_id))

    def page(self, service_id, *, page, per_page):
        rows = _sorted([j for j in self.rows.values() if j.service_id == service_id], "created_at", "id", desc=True)
        return _paginate(rows, page, per_page), len(rows)

    def cancel_queued(self, job_id, now):
        job = self.rows.get(job_id)
        if job is None or job.state != "queued":
            return False
        self._put(job_id, replace(job, state="cancelled", error="cancelled", updated_at=now, finished_at=now,
                                  cancel_requested=True))
        return True

    def request_cancel(self, job_id, now):
        job = self.rows.get(job_id)
        if job is None or job.state in ("succeeded", "failed", "cancelled"):
            return False
        self._put(job_id, replace(job, cancel_requested=True, updated_at=now))
        return True

    def cancels_requested(self, job_ids):
        return {i for i in job_ids if i in self.rows and self.rows[i].cancel_requested}

    def fail_queued(self, service_id, error, now):
        queued = [j for j in self.rows.values() if j.service_id == service_id and j.state == "queued"]
        for job in queued:
            self._put(job.id, replace(job, state="failed", error=error, updated_at=now, finished_at=now))
        return [j.id for j in queued]

    def running_ids(self, service_id):
        return sorted(j.id for j in self.rows.values() if j.service_id == service_id and j.state == "running")

    def crowded(self, keep):
        counts = {}
        for j in self.rows.values():
            counts[j.service_id] = counts.get(j.service_id, 0) + 1
        return [service_id for service_id, count in counts.items() if count > keep]

    def prune(self, service_id, keep):
        older = _sorted([j for j in self.rows.values() if j.service_id == service_id], "created_at", "id",
                        desc=True)[keep:]
        gone = [j for j in older if j.state in ("succeeded", "failed", "cancelled")]
        for j in gone:
            self._delete(j.id)
        return len(gone)


class InMemoryReleases(_Repo):
    table = "releases"

    def add(self, release):
        if any(r.service_id == release.service_id and r.number == release.number for r in self.rows.values()):
            raise IntegrityError(f"duplicate release number {release.number}")
        self._insert(release.id, release)

    def get(self, release_id):
        return self.rows.get(release_id)

    def last_number(self, service_id):
        return max((r.number for r in self.rows.values() if r.service_id == service_id), default=0)

    def numbered(self, service_id, number):
        return next((r for r in self.rows.values() if r.service_id == service_id and r.number == number), None)

    def for_service(self, service_id):
        return _sorted([r for r in self.rows.values() if r.service_id == service_id], "number", desc=True)

    def page(self, service_id, *, page, per_page):
        rows = self.for_service(service_id)
        return _paginate(rows, page, per_page), len(rows)

    def delete_for(self, service_id):
        for key in [k for k, r in self.rows.items() if r.service_id == service_id]:
            self._delete(key)
        ancestors = self.uow._rows("release_ancestors")  # (release id, commit) -> service id
        for key in [k for k, owner in ancestors.items() if owner == service_id]:
            self._delete(key, table="release_ancestors")

    def add_ancestry(self, release_id, service_id, commits):
        for commit in commits:
            self._put((release_id, commit), service_id, table="release_ancestors")

    def ancestry(self, release_id):
        return tuple(sorted(c for (r, c) in self.uow._rows("release_ancestors") if r == release_id))

    def has_ancestor(self, release_id, commit):
        return (release_id, commit) in self.uow._rows("release_ancestors")


class InMemoryServiceEvents(_Repo):
    table = "service_events"

    def add(self, event):
        stored = replace(event, id=self.uow._next_id())
        self._insert(stored.id, stored)
        return stored

    def page(self, service_id, *, page, per_page):
        rows = _sorted([e for e in self.rows.values() if e.service_id == service_id], "id", desc=True)
        return _paginate(rows, page, per_page), len(rows)

    def crowded(self, keep):
        counts = {}
        for e in self.rows.values():
            counts[e.service_id] = counts.get(e.service_id, 0) + 1
        return [service_id for service_id, count in counts.items() if count > keep]

    def prune(self, service_id, keep):
        older = _sorted([e for e in self.rows.values() if e.service_id == service_id], "id", desc=True)[keep:]
        for e in older:
            self._delete(e.id)
        return len(older)


BUSY = ("pending", "running")


class InMemoryBackups(_Repo):
    table = "backups"
    owners = "backup_owners"

    def add(self, backup):
        if backup.service_id not in self.uow._rows("services"):
            raise IntegrityError("service does not exist")
        self._insert(backup.id, backup)

    def get(self, backup_id):
        return self.rows.get(backup_id)

    def update(self, backup):
        if backup.id in self.rows:
            self._put(backup.id, backup)

    def delete(self, backup_id):
        self._delete(backup_id)

    def busy_for_service(self, service_id):
        rows = [b for b in self.rows.values() if b.service_id == service_id
                and (b.status in BUSY or b.restore_status in BUSY)]
        return next(iter(_sorted(rows, "created_at", "id")), None)

    def page(self, service_id, *, page, per_page, status=None):
        rows = [b for b in self.rows.values() if b.service_id == service_id and (not status or b.status == status)]
        rows = _sorted(rows, "created_at", "id", desc=True)
        return _paginate(rows, page, per_page), len(rows)

    def in_state(self, status):
        return _sorted([b for b in self.rows.values() if b.status == status], "created_at", "id")

    def in_restore_state(self, status):
        return _sorted([b for b in self.rows.values() if b.restore_status == status], "created_at", "id")

    def orphaned(self, live_owners, *, restore=False, verify=False):
        owners = self.uow._rows(self.owners)
        rows = [b for b in self.rows.values()
                if (b.restore_status if restore else b.verify_status if verify else b.status) == "running"
                and (owners.get(b.id) is None or owners.get(b.id) not in live_owners)]
        return _sorted(rows, "created_at", "id")

    def claim_queued(self, now, owner=None, per_customer=False):
        services = self.uow._rows("services")
        busy = set()
        if per_customer:
            busy = {services[b.service_id].customer_id for b in self.rows.values() if b.service_id in services
                    and "running" in (b.status, b.restore_status, b.verify_status)}
        queued = [b for b in self.rows.values()
                  if (b.status == "pending" or b.restore_status == "pending" or b.verify_status == "pending")
                  and not (b.service_id in services and services[b.service_id].customer_id in busy)]
        if not queued:
            return None
        backup = _sorted(queued, "updated_at", "id")[0]
        self._put(backup.id, owner, table=self.owners)
        if backup.status == "pending":
            claimed = replace(backup, status="running", updated_at=now)
            self._put(backup.id, claimed)
            return "backup", claimed
        if backup.restore_status == "pending":
            claimed = replace(backup, restore_status="running", updated_at=now)
            self._put(backup.id, claimed)
            return "restore", claimed
        claimed = replace(backup, verify_status="running", updated_at=now)
        self._put(backup.id, claimed)
        return "verify", claimed

    def completed_scheduled(self, service_id):
        rows = [b for b in self.rows.values() if b.service_id == service_id and b.status == "completed"
                and b.scheduled]
        return _sorted(rows, "created_at", "id", desc=True)


class InMemoryDeployKeys(_Repo):
    """Rows are ``(key, private text)``: nothing here is encrypted (the peewee repository
    seals the private half)."""

    table = "deploy_keys"

    def add(self, key, private_key):
        if key.customer_id not in self.uow._rows("panel_customers"):
            raise IntegrityError("panel customer does not exist")
        self._insert(key.id, (key, private_key))

    def get(self, key_id, for_update=False):
        row = self.rows.get(key_id)
        return row[0] if row else None

    def private_key(self, key_id):
        from core.panel.deploy_keys import PrivateKey

        row = self.rows.get(key_id)
        return PrivateKey(key_id, row[1]) if row else None

    def page(self, *, page, per_page, customer_id):
        keys = [k for k, _ in self.rows.values() if customer_id is None or k.customer_id == customer_id]
        keys = _sorted(keys, "created_at", "id")
        return _paginate(keys, page, per_page), len(keys)

    def users(self, key_id):
        return [f"{s.id} ({s.name})" for s in _sorted(self.uow._rows("services").values(), "id")
                if s.deploy_key_id == key_id]

    def delete(self, key_id):
        if key_id in self.rows:
            self._delete(key_id)


class InMemoryBackupPolicies(_Repo):
    table = "backup_policies"

    def get(self, service_id):
        return self.rows.get(service_id)

    def put(self, policy):
        if policy.service_id not in self.uow._rows("services"):
            raise IntegrityError("service does not exist")
        self._put(policy.service_id, policy)

    def delete(self, service_id):
        if service_id not in self.rows:
            return False
        self._delete(service_id)
        return True

    def due(self, now, limit, after=None):
        rows = [p for p in self.rows.values() if p.next_run_at <= now and (after is None or p.service_id > after)]
        return _sorted(rows, "service_id")[:limit]

    def advance(self, service_id, due_at, next_run_at, *, ran_at=None, backup_id=None):
        policy = self.rows.get(service_id)
        if policy is None or policy.next_run_at != due_at:
            return False
        changes = {"next_run_at": next_run_at}
        if ran_at is not None:
            changes.update(last_run_at=ran_at, last_backup_id=backup_id)
        self._put(service_id, replace(policy, **changes))
        return True


class InMemoryTasks(_Repo):
    table = "tasks"

    def add(self, task):
        if task.service_id not in self.uow._rows("services"):
            raise IntegrityError("service does not exist")
        self._insert(task.id, task)

    def get(self, task_id):
        return self.rows.get(task_id)

    def update(self, task):
        if task.id in self.rows:
            self._put(task.id, task)

    def delete(self, task_id):
        for run_id in [r.id for r in self.uow._rows("task_runs").values() if r.task_id == task_id]:
            self._delete(run_id, table="task_runs")
        if task_id in self.rows:
            self._delete(task_id)

    def count(self, service_id):
        return sum(1 for t in self.rows.values() if t.service_id == service_id)

    def page(self, service_id, *, page, per_page):
        rows = _sorted([t for t in self.rows.values() if t.service_id == service_id], "created_at", "id", desc=True)
        return _paginate(rows, page, per_page), len(rows)

    def due(self, now, limit, after=None):
        rows = [t for t in self.rows.values() if t.enabled and t.next_run_at <= now and (after is None or t.id > after)]
        return _sorted(rows, "id")[:limit]

    def advance(self, task_id, due_at, next_run_at):
        task = self.rows.get(task_id)
        if task is None or task.next_run_at != due_at or not task.enabled:
            return False
        self._put(task_id, replace(task, next_run_at=next_run_at))
        return True


class InMemoryTaskRuns(_Repo):
    table = "task_runs"

    def add(self, run):
        if run.task_id not in self.uow._rows("tasks"):
            raise IntegrityError("task does not exist")
        self._insert(run.id, run)

    def get(self, run_id):
        return self.rows.get(run_id)

    def running(self, task_id):
        return next((r for r in self.rows.values() if r.task_id == task_id and r.status == "running"), None)

    def _of(self, task_id):
        return _sorted([r for r in self.rows.values() if r.task_id == task_id], "created_at", "id", desc=True)

    def newest(self, task_id):
        runs = self._of(task_id)
        return runs[0] if runs else None

    def newest_of(self, task_ids):
        return {task_id: run for task_id in task_ids if (run := self.newest(task_id)) is not None}

    def page(self, task_id, *, page, per_page):
        runs = self._of(task_id)
        return _paginate(runs, page, per_page), len(runs)

    def claim_queued(self, now, owner):
        started = {r.customer_id for r in self.rows.values() if r.status == "running" and r.started_at is not None}
        queued = sorted((r for r in self.rows.values() if r.status == "running" and r.started_at is None
                         and r.customer_id not in started), key=lambda r: (r.created_at, r.id))
        if not queued:
            return None
        run = replace(queued[0], started_at=now, owner=owner)
        self._put(run.id, run)
        return run

    def finish(self, run):
        found = self.rows.get(run.id)
        if found is not None and found.status == "running":
            self._put(run.id, replace(found, status=run.status, exit_code=run.exit_code, output=run.output,
                                      finished_at=run.finished_at))

    def fail_orphaned(self, live_owners, now, reason):
        live = set(live_owners)
        orphans = [r for r in self.rows.values() if r.status == "running" and r.started_at is not None
                   and r.owner not in live]
        for run in orphans:
            output = (run.output + "\n" if run.output else "") + reason
            self._put(run.id, replace(run, status="failed", finished_at=now, output=output))
        return [r.id for r in orphans]


class InMemoryRoutes(_Repo):
    table = "routes"

    def put(self, route):
        self._delete(route.hostname)
        self._insert(route.hostname, route)

    def replace_for(self, service_id, routes):
        self.delete_for(service_id)
        for route in routes:
            self._delete(route.hostname)
            self._insert(route.hostname, route)

    def for_service(self, service_id):
        return _sorted([r for r in self.rows.values() if r.service_id == service_id], "hostname")

    def delete_for(self, service_id):
        gone = [r for r in self.rows.values() if r.service_id == service_id]
        for r in gone:
            self._delete(r.hostname)
        return len(gone)

    def all(self):
        return _sorted(self.rows.values(), "hostname")


class InMemoryCustomDomains(_Repo):
    table = "custom_domains"  # hostname -> (service_id, created_at)

    def for_service(self, service_id):
        return sorted(h for h, (owner, _) in self.rows.items() if owner == service_id)

    def for_services(self, service_ids):
        return {i: self.for_service(i) for i in service_ids}

    def claim(self, hostname, service_id, now):
        if hostname not in self.rows:
            self._insert(hostname, (service_id, now))
        return self.rows[hostname][0]

    def release(self, service_id, hostnames):
        gone = [h for h in hostnames if self.rows.get(h, (None,))[0] == service_id]
        for h in gone:
            self._delete(h)
        return len(gone)

    def delete_for(self, service_id):
        return self.release(service_id, list(self.rows))


class InMemoryLeases(_Repo):
    table = "leases"

    def beat(self, worker_id, now):
        self._put(worker_id, now)

    def drop(self, worker_id):
        self._delete(worker_id)

    def live(self, since):
        return {w for w, at in self.rows.items() if at >= since}

    def held(self, prefix, since):
        return {w for w, at in self.rows.items() if w.startswith(prefix) and at >= since}

    def purge(self, before):
        gone = [w for w, at in self.rows.items() if at < before]
        for w in gone:
            self._delete(w)
        return len(gone)


# --- the unit of work ------------------------------------------------------------------------


class FakeUnitOfWork:
    """An in-memory unit of work (see the module's docstring). ``commits`` counts the
    blocks that called ``commit()``; ``published`` holds the events of committed blocks."""

    def __init__(self, store: FakeStore | None = None):
        self.store = store or FakeStore()
        self.commits = 0
        self.published: list = []
        self._work: dict | None = None  # table -> rows of the open block
        self._dirty: set = set()  # (table, key) the open block wrote
        self._outbox: list = []
        self._committed = False
        self.partners = InMemoryPartners(self)
        self.tokens = InMemoryTokens(self)
        self.contracts = InMemoryContracts(self)
        self.human_ids = InMemoryHumanIds(self)
        self.customers = InMemoryCustomers(self)
        self.contacts = InMemoryContacts(self)
        self.notes = InMemoryNotes(self)
        self.editions = InMemoryEditions(self)
        self.licenses = InMemoryLicenses(self)
        self.transfers = InMemoryTransfers(self)
        self.ledger = InMemoryLedger(self)
        self.webhook_endpoints = InMemoryWebhookEndpoints(self)
        self.webhook_deliveries = InMemoryWebhookDeliveries(self)
        self.statements = InMemoryStatements(self)
        self.api_keys = InMemoryApiKeys(self)
        self.panel_customers = InMemoryPanelCustomers(self)
        self.panel_users = InMemoryPanelUsers(self)
        self.panel_sessions = InMemoryPanelSessions(self)
        self.panel_key_sessions = InMemoryPanelKeySessions(self)
        self.panel_logins = InMemoryPanelLogins(self)
        self.services = InMemoryServices(self)
        self.deploy_jobs = InMemoryDeployJobs(self)
        self.git_deliveries = InMemoryGitDeliveries(self)
        self.preview_jobs = InMemoryPreviewJobs(self)
        self.releases = InMemoryReleases(self)
        self.service_events = InMemoryServiceEvents(self)
        self.backups = InMemoryBackups(self)
        self.backup_policies = InMemoryBackupPolicies(self)
        self.tasks = InMemoryTasks(self)
        self.task_runs = InMemoryTaskRuns(self)
        self.deploy_keys = InMemoryDeployKeys(self)
        self.routes = InMemoryRoutes(self)
        self.custom_domains = InMemoryCustomDomains(self)
        self.leases = InMemoryLeases(self)

    def fork(self) -> "FakeUnitOfWork":
        """Another unit of work on the same store (another request, another process)."""
        return FakeUnitOfWork(self.store)

    @property
    def in_transaction(self) -> bool:
        return self._work is not None

    # --- transactions ---

    def __enter__(self):
        if self._work is not None:
            raise RuntimeError("FakeUnitOfWork is not re-entrant: a block is already open")
        self._work = {}
        self._dirty = set()
        self._outbox = []
        self._committed = False
        return self

    def __exit__(self, exc_type, exc, tb):
        work, dirty, outbox = self._work, self._dirty, self._outbox
        self._work, self._dirty, self._outbox = None, set(), []
        if exc_type is None and self._committed:
            for table, key in dirty:  # only the rows this block wrote: others' commits stay
                rows = work[table]
                target = self.store.table(table)
                if key in rows:
                    target[key] = rows[key]
                else:
                    target.pop(key, None)
            self.published.extend(outbox)
        return None

    def commit(self) -> None:
        if self._work is None:
            raise RuntimeError("commit() outside a unit of work")
        self._committed = True
        self.commits += 1

    def emit(self, event) -> None:
        if self._work is None:
            raise RuntimeError("emit() outside a unit of work")
        self._outbox.append(event)

    @contextlib.contextmanager
    def reading(self):
        with self:
            yield self

    # --- what the repositories use ---

    def _rows(self, table: str) -> dict:
        if self._work is None:  # autocommit: each call stands alone
            return self.store.table(table)
        if table not in self._work:  # the snapshot, taken on first use in the block
            self._work[table] = dict(self.store.table(table))
        return self._work[table]

    def _put(self, table: str, key, row) -> None:
        self._rows(table)[key] = row
        if self._work is not None:
            self._dirty.add((table, key))

    def _delete(self, table: str, key) -> None:
        self._rows(table).pop(key, None)
        if self._work is not None:
            self._dirty.add((table, key))

    def _next_id(self) -> int:
        return next(self.store.sequences)


# --- fakes of the other ports, and builders of callers ----------------------------------------


def caller_of(uow, clock, name: str, parent=None, scope: str = "write"):
    """A new partner (a reseller under ``parent``'s partner, or a root) and its caller."""
    partner = partners.create_partner(uow, clock, name=name, type="reseller" if parent else "root",
                                      parent_id=parent.partner.id if parent else None)
    _, secret = tokens.create_token(uow, clock, partner_id=partner.id, label="test", scope=scope, created_by=None)
    return tokens.authenticate(uow, clock, secret)


class FakeLicenseService:
    """Records every call; ``fail`` names the operations that raise ``LicenseServiceError``."""

    name = "fake"

    def __init__(self):
        self.calls: list[tuple] = []
        self.fail: set[str] = set()
        self._ids = itertools.count(1)

    def _call(self, op, *args):
        self.calls.append((op, *args))
        if op in self.fail:
            raise LicenseServiceError(f"{op} refused")

    def issue(self, *, policy, metadata):
        self._call("issue", policy, metadata)
        n = next(self._ids)
        return IssuedKey(service_license_id=f"svc-{n}", key=f"KEY-{n:06d}-ABCDEF{n:06d}")

    def suspend(self, sid):
        self._call("suspend", sid)

    def reinstate(self, sid):
        self._call("reinstate", sid)

    def revoke(self, sid):
        self._call("revoke", sid)

    def change_policy(self, sid, policy):
        self._call("change_policy", sid, policy)

    def update_metadata(self, sid, metadata):
        self._call("update_metadata", sid, metadata)

    def ops(self):
        return [c[0] for c in self.calls]


class PerDayModel:
    """A billing model for the tests: unit price per billable day, one detail per license."""

    name = "per-day"

    def price(self, contract, period, histories, today):
        detail, days_total = [], 0
        for history in histories:
            days = billable_days(history, period, today).get((contract.partner_id, contract.id), 0)
            if days:
                detail.append(LineDetail(history.license_id, history.key_masked, days,
                                         days * contract.unit_price_cents))
                days_total += days
        return Line(contract_id=contract.id, model=self.name, currency=contract.currency,
                    quantity=quantity(days_total, period.days), unit_price_cents=contract.unit_price_cents,
                    amount_cents=days_total * contract.unit_price_cents, detail=tuple(detail))


def principal_of(uow, clock, role: str = "admin", customer_id=None, **options):
    """A new panel API key of ``role`` and the principal it authenticates as."""
    _, raw = panel_access.create_api_key(uow, clock, name=f"{role} key", role=role, customer_id=customer_id,
                                         rate_limit_rpm=options.pop("rate_limit_rpm", 600), **options)
    return panel_access.authenticate_key(uow, clock, raw)


class FakeMethod:
    """A deploy method whose plan is one component per entry of ``request["components"]``
    (``[(name, memory_mb, volumes), ...]``; default one ``web`` component)."""

    name = "compose"

    def plan(self, request, catalog):
        return parse(compose_of(request.get("components")), {})

    def prepare(self, service, runtime, workdir, progress, cancel=None):
        return None


def compose_of(components=None) -> str:
    """A compose text for ``[(name, memory_mb, volumes), ...]`` (default one ``web`` of 256
    MB): busybox, half a CPU each, port 8080 published by the first, each volume at
    ``/data/<volume>``. Read by core's parser, as every deploy reads it."""
    components = components or [("web", 256, ())]
    services = {}
    for i, (name, memory, volumes) in enumerate(components):
        services[name] = {"image": "docker.io/library/busybox:latest", "mem_limit": f"{memory}m", "cpus": 0.5,
                          **({"ports": ["8080"]} if i == 0 else {}),
                          **({"volumes": [f"{v}:/data/{v}" for v in volumes]} if volumes else {})}
    volumes = sorted({v for _, _, vols in components for v in vols})
    return dump_compose({"services": services, **({"volumes": {v: {} for v in volumes}} if volumes else {})})


#: the compose parser of core's unit tests: core's own, with the default host ports
parse = compose_parser()



@dataclass
class FakeRuntime:
    """Containers in a dict; ``exit_on_run`` makes every started container exit at once."""

    states: dict = field(default_factory=dict)  # id -> ContainerState
    calls: list = field(default_factory=list)
    exit_on_run: bool = False
    exit_code: int = 3  # of a container that exits at once
    next_port: int = 40000
    fail: set = field(default_factory=set)
    tags: dict = field(default_factory=dict)  # keep tag -> image id
    gone_images: set = field(default_factory=set)  # images image_id() answers None for
    taken: set = field(default_factory=set)  # host ports something outside the engine holds

    def _call(self, op, *args):
        self.calls.append((op, *args))
        if op in self.fail:
            raise RuntimeError(f"engine refused {op}")

    def containers(self, service_id):
        return [s for s in self.states.values() if s.labels.get(SERVICE_LABEL) == service_id]

    def has_image(self, image):
        return True

    def pull_image(self, image, *, timeout=None, cancel=None):
        self._call("pull_image", image)

    def create_network(self, name, labels):
        self._call("create_network", name)

    def create_volume(self, name, labels):
        self._call("create_volume", name)

    def run(self, spec):
        """Ports as a runtime gives them: a fixed host port (refused while a running
        container or something outside the engine, ``taken``, holds it), a port's
        ``prefer`` when no container publishes it (running or not, as Podman lists them)
        and nothing outside holds it, else the next number."""
        self._call("run", spec.name)
        self.next_port += 1
        published = {h for s in self.states.values() for h in s.ports.values()}
        bound = {h for s in self.states.values() if s.running for h in s.ports.values()} | set(self.taken)
        ports = {}
        for p in spec.ports:
            if p.host_port is not None:
                if p.host_port in bound:
                    raise RuntimeError(f"starting container {spec.name}: address already in use ({p.host_port})")
                ports[p.container_port] = p.host_port
            elif p.prefer is not None and p.prefer not in published | set(self.taken):
                ports[p.container_port] = p.prefer
            else:
                ports[p.container_port] = self.next_port
        cid = f"c{len(self.states) + 1}-{spec.name}"
        running = not self.exit_on_run
        self.states[cid] = ContainerState(id=cid, name=spec.name, status="running" if running else "exited",
                                          running=running, health=None, ports=ports,
                                          labels=dict(spec.labels), exit_code=None if running else self.exit_code)
        return cid

    def _set(self, cid, running):
        state = self.states.get(cid) or next((s for s in self.states.values() if s.name == cid), None)
        if state is None:  # as the engine answers for a container removed meanwhile
            raise Gone(f"no such container: {cid}")
        self.states[state.id] = replace(state, running=running, status="running" if running else "exited")

    def start(self, cid):
        self._call("start", cid)
        self._set(cid, True)

    def stop(self, cid, timeout=10):
        self._call("stop", cid)
        self._set(cid, False)

    def restart(self, cid, timeout=10):
        self._call("restart", cid)
        self._set(cid, True)

    def remove_container(self, cid):
        self._call("remove_container", cid)
        self.states.pop(cid, None)

    def remove_service(self, service_id):
        self._call("remove_service", service_id)
        for state in self.containers(service_id):
            self.states.pop(state.id)

    def remove_image(self, image):
        self._call("remove_image", image)
        self.tags.pop(image, None)

    def image_id(self, image):
        """Keep tags answer while tagged; any other image is present with an id of its name."""
        if image in self.gone_images:
            return None
        if image.startswith(KEPT_IMAGES):
            return self.tags.get(image)
        return image if image.startswith("sha256:") else "sha256:" + hashlib.sha256(image.encode()).hexdigest()

    def tag_image(self, image, tag):
        self._call("tag_image", image, tag)
        self.tags[tag] = self.image_id(image)

    def remove_network(self, name):
        self._call("remove_network", name)

    def labelled(self, service_id):
        return {"containers": sorted(s.name for s in self.containers(service_id)), "volumes": [], "networks": []}

    def logs(self, cid, tail=100, since=None):
        return []

    def export_volume(self, name, cancel=None):
        self._call("export_volume", name)
        return iter([name.encode()])

    def import_volume(self, name, chunks):
        self._call("import_volume", name, b"".join(chunks))


class FakeArchives:
    """Backup archives in a dict (``core.panel.backups``'s ``archives`` collaborator), at
    destinations ``local`` (the default) and ``offsite``."""

    default = "local"

    def __init__(self):
        self.stored: dict = {}  # (destination, key) -> {part name: bytes}
        self.removed: list = []
        self.fail_write = False
        self.damaged: set = set()  # (destination, key) whose verification fails

    def has(self, name):
        return name in ("local", "offsite")

    def write(self, destination, key, manifest, parts, on_part):
        content = {}
        for index, (name, kind, chunks) in enumerate(parts):
            content[name] = b"".join(chunks)
            on_part(index)
        if self.fail_write:
            raise OSError("disk full")
        self.stored[(destination, key)] = content
        blob = b"".join(content.values())
        return len(blob), hashlib.sha256(blob).hexdigest()

    def verify(self, destination, key, sha256, fetched=None):
        content = self.stored[(destination, key)]
        if fetched is not None:
            fetched(sum(len(part) for part in content.values()))
        if (destination, key) in self.damaged:
            raise ValueError("checksum mismatch")
        return {"parts": [{"name": n, "kind": "volumes", "member": n} for n in content]}

    def part_chunks(self, destination, key, part):
        return iter([self.stored[(destination, key)][part["member"]]])

    def remove(self, destination, key):
        self.removed.append(key)
        self.stored.pop((destination, key), None)

    def remove_service(self, prefix):
        self.removed.append(prefix)
