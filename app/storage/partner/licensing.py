"""peewee repositories of the licensing aggregates: customers, contacts, notes, editions,
licenses, transfers, the ledger, statements, and humanId counters."""
from __future__ import annotations

import json
from dataclasses import asdict, fields
from datetime import date, datetime

import peewee

from app.storage.models.base import utc_datetime
from app.storage.queries import _for_update
from core.partner.customers import Contact, Customer, Note
from core.partner.ledger import ExportRow, LedgerEvent, canonical_json
from core.partner.licenses import License, LicenseSummary
from core.partner.transfers import Transfer


def _page(query, page):
    return query.limit(page.limit).offset(page.offset)


class PeeweeHumanIds:
    def __init__(self, m):
        self.m = m

    def next(self, kind: str) -> str:
        C = self.m.HumanIdCounter
        C.update(value=C.value + 1).where(C.kind == kind).execute()  # row lock until commit
        return f"{kind}-{C.get_by_id(kind).value}"


_CUSTOMER_FIELDS = [f.name for f in fields(Customer)]


class PeeweeCustomers:
    def __init__(self, m):
        self.m = m

    def _entity(self, row) -> Customer:
        values = {name: getattr(row, name) for name in _CUSTOMER_FIELDS if name != "partner_id"}
        return Customer(partner_id=row.partner_id, **values)

    def add(self, customer: Customer) -> None:
        values = asdict(customer)
        values["partner"] = values.pop("partner_id")
        self.m.Customer.insert(**values).execute()

    def get(self, customer_id: str, for_update: bool = False) -> Customer | None:
        C = self.m.Customer
        query = C.select().where((C.id == customer_id) & C.deleted_at.is_null())
        row = _for_update(query, C._meta.database).first() if for_update else query.first()
        return self._entity(row) if row else None

    def list(self, scope, page, *, status=None, external_ref=None) -> list[Customer]:
        C = self.m.Customer
        query = C.select().where(C.partner.in_(list(scope)) & C.deleted_at.is_null())
        if status is not None:
            query = query.where(C.status == status)
        if external_ref is not None:
            query = query.where(C.external_ref == external_ref)
        return [self._entity(r) for r in _page(query.order_by(C.created_at.desc(), C.id.desc()), page)]

    def update(self, customer: Customer) -> None:
        values = asdict(customer)
        for key in ("id", "human_id", "partner_id", "created_at"):
            values.pop(key)
        self.m.Customer.update(**values).where(self.m.Customer.id == customer.id).execute()

    def delete(self, customer_id: str, at) -> None:
        self.m.Customer.update(deleted_at=at).where(self.m.Customer.id == customer_id).execute()


_CONTACT_FIELDS = [f.name for f in fields(Contact)]


class PeeweeContacts:
    def __init__(self, m):
        self.m = m

    def _entity(self, row) -> Contact:
        values = {name: getattr(row, name) for name in _CONTACT_FIELDS if name != "customer_id"}
        return Contact(customer_id=row.customer_id, **values)

    def add(self, contact: Contact) -> None:
        values = asdict(contact)
        values["customer"] = values.pop("customer_id")
        self.m.Contact.insert(**values).execute()

    def get(self, contact_id: str) -> Contact | None:
        row = self.m.Contact.get_or_none(self.m.Contact.id == contact_id)
        return self._entity(row) if row else None

    def list_for_customer(self, customer_id: str) -> list[Contact]:
        P = self.m.Contact
        rows = (P.select().where(P.customer == customer_id)
                .order_by(P.is_primary.desc(), P.created_at.asc(), P.id.asc()))
        return [self._entity(r) for r in rows]

    def update(self, contact: Contact) -> None:
        values = asdict(contact)
        for key in ("id", "human_id", "customer_id", "created_at"):
            values.pop(key)
        self.m.Contact.update(**values).where(self.m.Contact.id == contact.id).execute()

    def demote_primary(self, customer_id: str, at) -> None:
        P = self.m.Contact
        P.update(is_primary=False, updated_at=at).where((P.customer == customer_id) & P.is_primary).execute()

    def delete(self, contact_id: str) -> None:
        self.m.Contact.delete().where(self.m.Contact.id == contact_id).execute()


class PeeweeNotes:
    """Append and read; there is deliberately no update or delete here (and the database
    refuses both)."""

    def __init__(self, m):
        self.m = m

    def append(self, note: Note) -> Note:
        new_id = self.m.Note.insert(customer_id=note.customer_id, author=note.author, body=note.body,
                                    at=note.at).execute()
        return Note(id=new_id, customer_id=note.customer_id, author=note.author, body=note.body, at=note.at)

    def recent(self, customer_id: str, count: int) -> list[Note]:
        N = self.m.Note
        rows = N.select().where(N.customer_id == customer_id).order_by(N.id.desc()).limit(count)
        return [Note(id=r.id, customer_id=r.customer_id, author=r.author, body=r.body, at=r.at) for r in rows]


class PeeweeEditions:
    def __init__(self, m):
        self.m = m

    def policy_for(self, edition: str) -> str | None:
        row = self.m.Edition.get_or_none(self.m.Edition.name == edition)
        return row.policy if row else None

    def all(self) -> dict[str, str]:
        return {row.name: row.policy for row in self.m.Edition.select().order_by(self.m.Edition.name)}

    def set(self, edition: str, policy: str, at) -> None:
        E = self.m.Edition
        (E.insert(name=edition, policy=policy, updated_at=at)
         .on_conflict(conflict_target=[E.name], update={E.policy: policy, E.updated_at: at}).execute())


_LICENSE_FIELDS = [f.name for f in fields(License)]
_LICENSE_FKS = ("partner_id", "customer_id", "contract_id")
LIVE_STATES = ("active", "trial", "suspended")


class PeeweeLicenses:
    def __init__(self, m):
        self.m = m

    def _entity(self, row) -> License:
        return License(**{name: getattr(row, name) for name in _LICENSE_FIELDS})

    def _row_values(self, lic: License) -> dict:
        values = asdict(lic)
        for fk in _LICENSE_FKS:
            values[fk[:-3]] = values.pop(fk)
        return values

    def add(self, lic: License) -> None:
        self.m.License.insert(**self._row_values(lic)).execute()

    def get(self, license_id: str, for_update: bool = False) -> License | None:
        L = self.m.License
        query = L.select().where(L.id == license_id)
        row = (_for_update(query, L._meta.database) if for_update else query).first()
        return self._entity(row) if row else None

    def list(self, scope, page, *, customer_id=None, state=None, edition=None) -> list[LicenseSummary]:
        # a list page of every partner: its SQL is built once per store and shape (the
        # number of partners in scope, the filters given), rows come back as tuples
        # (app.storage.readpath)
        L = self.m.License
        partners = sorted(scope)
        filters = [(L.customer, customer_id), (L.state, state), (L.edition, edition)]
        given = [(column, value) for column, value in filters if value is not None]

        def build():
            where = L.partner.in_(["?"] * len(partners))
            for column, _ in given:
                where &= column == "?"
            return (L.select(*self._columns()).where(where).order_by(L.issued_at.desc(), L.id.desc())
                    .limit(page.limit).offset(page.offset))

        shape = f"licenses:{len(partners)}:" + ",".join(column.name for column, _ in given)
        sql = self.m.statements.sql(shape, build)
        rows = self.m.statements.rows(sql, (*partners, *(value for _, value in given), page.limit, page.offset))
        return [LicenseSummary(*row[:9], utc_datetime(row[9]), row[10], row[11], utc_datetime(row[12]))
                for row in rows]

    def _columns(self):
        L = self.m.License
        # in the order of core.partner.licenses.License's fields
        return (L.id, L.human_id, L.partner, L.customer, L.contract, L.license_service_license_id, L.key_masked,
                L.edition, L.state, L.issued_at, L.external_billing_ref, L.metadata, L.terminated_at)

    def update(self, lic: License) -> None:
        values = self._row_values(lic)
        for key in ("id", "human_id", "issued_at"):
            values.pop(key)
        self.m.License.update(**values).where(self.m.License.id == lic.id).execute()

    def count_live_for_customer(self, customer_id: str) -> int:
        L = self.m.License
        return L.select().where((L.customer == customer_id) & L.state.in_(LIVE_STATES)).count()


_TRANSFER_FIELDS = [f.name for f in fields(Transfer)]


class PeeweeTransfers:
    def __init__(self, m):
        self.m = m

    def _entity(self, row) -> Transfer:
        return Transfer(**{name: getattr(row, name) for name in _TRANSFER_FIELDS})

    def add(self, transfer: Transfer) -> None:
        values = asdict(transfer)
        values["license"] = values.pop("license_id")
        self.m.Transfer.insert(**values).execute()

    def list(self, scope, page, *, license_id=None) -> list[Transfer]:
        T = self.m.Transfer
        partners = list(scope)
        query = T.select().where(T.from_partner_id.in_(partners) | T.to_partner_id.in_(partners))
        if license_id is not None:
            query = query.where(T.license == license_id)
        return [self._entity(r) for r in _page(query.order_by(T.created_at.desc(), T.id.desc()), page)]

    def set_sync_error(self, transfer_id: str, message: str) -> None:
        self.m.Transfer.update(sync_error=message).where(self.m.Transfer.id == transfer_id).execute()

    def sync_failures(self) -> list[Transfer]:
        T = self.m.Transfer
        return [self._entity(r) for r in T.select().where(T.sync_error.is_null(False)).order_by(T.created_at)]


class PeeweeLedger:
    """Append and read; no update or delete path (and the database refuses both)."""

    #: set by a unit of work that writes the event outbox: record(topic, service, customer, data, at)
    record = None

    def __init__(self, m):
        self.m = m

    def append(self, event: LedgerEvent) -> LedgerEvent:
        new_id = self.m.LedgerEvent.insert(
            event=event.event, at=event.at, actor=event.actor, partner_id=event.partner_id,
            customer_id=event.customer_id, license_id=event.license_id,
            data=canonical_json(event.data)).execute()
        if self.record is not None:
            self.record(("partner.ledger", None, None,
                         {"id": new_id, "event": event.event, "at": event.at.isoformat(), "actor": event.actor,
                          "partner_id": event.partner_id, "customer_id": event.customer_id,
                          "license_id": event.license_id, "data": event.data}, event.at))
        return LedgerEvent(id=new_id, event=event.event, at=event.at, actor=event.actor,
                           partner_id=event.partner_id, customer_id=event.customer_id,
                           license_id=event.license_id, data=event.data)

    def get(self, event_id: int) -> LedgerEvent | None:
        row = self.m.LedgerEvent.get_or_none(self.m.LedgerEvent.id == event_id)
        return self._entity(row) if row else None

    def _entity(self, row) -> LedgerEvent:
        return LedgerEvent(id=row.id, event=row.event, at=row.at, actor=row.actor, partner_id=row.partner_id,
                           customer_id=row.customer_id, license_id=row.license_id, data=json.loads(row.data))

    def _of_customer(self, customer_id: str, filters, before_id=None):
        """The customer's events: those naming it and older ones without a customer
        reference reached through its licenses, one range of the internal
        ``(reach_customer_id, id)`` index (the database fills and keeps it, migration 18)."""
        E = self.m.LedgerEvent
        where = E.reach_customer_id == customer_id
        if filters.event is not None:
            where &= E.event == filters.event
        if filters.actor_given:
            where &= (E.actor == filters.actor) if filters.actor is not None else E.actor.is_null()
        if filters.since is not None:
            where &= E.at >= filters.since
        if filters.until is not None:
            where &= E.at < filters.until
        if before_id is not None:
            where &= E.id < before_id
        return E.select().where(where)

    def _newest_first(self, customer_id, filters, limit, offset=0, before_id=None) -> list[LedgerEvent]:
        query = (self._of_customer(customer_id, filters, before_id).order_by(self.m.LedgerEvent.id.desc())
                 .limit(limit).offset(offset))
        return [self._entity(r) for r in query]

    def for_customer(self, customer_id: str, filters, page) -> list[LedgerEvent]:
        return self._newest_first(customer_id, filters, page.limit, page.offset)

    def for_customer_before(self, customer_id: str, filters, before_id, size: int) -> list[LedgerEvent]:
        return self._newest_first(customer_id, filters, size, 0, before_id)

    def export_rows(self, customer_id: str, filters, before_id, size: int) -> list[ExportRow]:
        E = self.m.LedgerEvent
        query = (self._of_customer(customer_id, filters, before_id)
                 .select(E.id, E.at, E.event, E.actor, E.partner_id, E.customer_id, E.license_id, E.data)
                 .order_by(E.id.desc()).limit(size).tuples())
        return [ExportRow._make(row) for row in query]

    def histories_for_partner(self, partner_id: str) -> list:
        return ledger_histories(self.m, partner_id)

    def summary_for_customer(self, customer_id: str, filters):
        E = self.m.LedgerEvent
        by_event, first, last = {}, None, None
        python_value = E.at.python_value
        rows = (self._of_customer(customer_id, filters)
                .select(E.event, peewee.fn.COUNT(E.id), peewee.fn.MIN(E.at), peewee.fn.MAX(E.at))
                .group_by(E.event).tuples())
        for event, count, low, high in rows:
            by_event[event] = count
            low, high = python_value(low), python_value(high)
            first = low if first is None or low < first else first
            last = high if last is None or high > last else last
        return by_event, first, last


_BILLING_EVENTS = ("license.issued", "license.suspended", "license.resumed", "license.terminated",
                   "license.state_changed", "license.transferred_in")


def ledger_histories(m, partner_id: str) -> list:
    """Every license the partner ever owned, with its billing-relevant ledger events:
    ``[(LicenseHistory, {contract ids it was under}), ...]``. Raw SQL, tuples, and the
    JSON fields pulled out by the database: this reads a row per license and event for a
    partner with hundreds of thousands of licenses."""
    from core.partner.billing import Change, LicenseHistory

    db = m.LedgerEvent._meta.database
    p = db.param
    if isinstance(db, peewee.PostgresqlDatabase):
        at = "e.at"

        def field(key):
            return f"(e.data::json ->> '{key}')"
    else:
        at = "substr(e.at, 1, 10)"  # stored as UTC text: its day is all billing needs

        def field(key):
            return f"json_extract(e.data, '$.{key}')"
    sql = (
        # keyMasked travels in license.issued (the key never changes): no join with license;
        # the owner (partner_id) only matters for license.issued
        f"SELECT e.license_id, e.id, {at}, e.event, CASE e.event WHEN 'license.issued' THEN e.partner_id END, "
        f"CASE e.event WHEN 'license.issued' THEN {field('keyMasked')} END, "
        f"CASE e.event WHEN 'license.issued' THEN {field('contractId')} "
        f"WHEN 'license.transferred_in' THEN {field('toContractId')} END, "
        f"CASE e.event WHEN 'license.transferred_in' THEN {field('toPartnerId')} END, "
        f"CASE e.event WHEN 'license.transferred_in' THEN {field('effectiveDate')} END, "
        f"CASE e.event WHEN 'license.state_changed' THEN {field('to')} END "
        "FROM ledger_event e "
        f"WHERE e.event IN ({', '.join([p] * len(_BILLING_EVENTS))}) AND e.license_id IN ("
        f"SELECT o.license_id FROM ledger_event o WHERE o.partner_id = {p} "
        f"AND o.event IN ({p}, {p})) ORDER BY e.license_id, e.id")
    params = (*_BILLING_EVENTS, partner_id, "license.issued", "license.transferred_in")
    # One pass, a few hundred thousand rows: locals only, each day parsed once, and each
    # Change built whole from a tuple in its field order (id, on, event, state_to,
    # effective, to_partner, to_contract, partner, contract).
    out, current, contracts, changes = [], None, None, None
    fromiso, make, days = date.fromisoformat, Change._make, {}
    for license_id, event_id, at, event, owner, key_masked, contract, to_partner, effective, state_to \
            in db.execute_sql(sql, params):
        if license_id != current:
            current, contracts = license_id, set()
            history = LicenseHistory(license_id, key_masked or "")
            changes = history.changes
            out.append((history, contracts))
        if isinstance(at, datetime):
            on = at.date()
        else:
            on = days.get(at)
            if on is None:
                on = days[at] = fromiso(at)
        if event == "license.issued":
            contracts.add(contract)
            changes.append(make((event_id, on, event, None, None, None, None, owner, contract)))
        elif event == "license.transferred_in":
            contracts.add(contract)
            changes.append(make((event_id, on, event, None, fromiso(effective), to_partner, contract, None, None)))
        else:  # state_to is NULL but for license.state_changed
            changes.append(make((event_id, on, event, state_to, None, None, None, None, None)))
    return out


class PeeweeStatements:
    def __init__(self, m):
        self.m = m

    # JSON once, in a fixed shape: what is stored is what every export prints
    @staticmethod
    def _lines_json(lines) -> str:
        return json.dumps([{
            "contractId": line.contract_id, "model": line.model, "currency": line.currency,
            "quantity": str(line.quantity), "unitPriceCents": line.unit_price_cents,
            "amountCents": line.amount_cents,
            "detail": [{"licenseId": d.license_id, "keyMasked": d.key_masked, "days": d.days,
                        "amountCents": d.amount_cents} for d in line.detail],
        } for line in lines], separators=(",", ":"), ensure_ascii=False)

    @staticmethod
    def _lines(text: str) -> tuple:
        from decimal import Decimal

        from ports.billing import Line, LineDetail

        return tuple(Line(contract_id=x["contractId"], model=x["model"], currency=x["currency"],
                          quantity=Decimal(x["quantity"]), unit_price_cents=x["unitPriceCents"],
                          amount_cents=x["amountCents"],
                          detail=tuple(LineDetail(d["licenseId"], d["keyMasked"], d["days"], d["amountCents"])
                                       for d in x["detail"]))
                     for x in json.loads(text))

    def _entity(self, row):
        from core.partner.billing import Period
        from core.partner.statements import Statement

        return Statement(id=row.id, partner_id=row.partner_id, period=Period(row.period_start, row.period_end),
                         revision=row.revision, status=row.status,
                         totals=tuple((c, a) for c, a in json.loads(row.totals)), lines=self._lines(row.lines),
                         computed_at=row.computed_at, finalized_by=row.finalized_by, finalized_at=row.finalized_at,
                         supersedes_statement_id=row.supersedes_statement_id)

    def add(self, s) -> None:
        self.m.Statement.insert(
            id=s.id, partner=s.partner_id, period_start=s.period.start, period_end=s.period.end,
            revision=s.revision, status=s.status, totals=json.dumps([list(t) for t in s.totals]),
            lines=self._lines_json(s.lines), computed_at=s.computed_at, finalized_by=s.finalized_by,
            finalized_at=s.finalized_at, supersedes_statement_id=s.supersedes_statement_id).execute()

    def try_lock_recompute(self) -> bool:
        """One recompute at a time: a transaction-scoped advisory lock on PostgreSQL; on
        SQLite the write transaction already excludes every other writer."""
        db = self.m.Statement._meta.database
        if isinstance(db, peewee.PostgresqlDatabase):
            return db.execute_sql("SELECT pg_try_advisory_xact_lock(%s)", (0x51_1B_2A_02,)).fetchone()[0]
        return True

    def draft(self, partner_id: str, period):
        S = self.m.Statement
        row = S.get_or_none((S.partner == partner_id) & (S.period_start == period.start) & (S.status == "draft"))
        return self._entity(row) if row else None

    def replace_draft(self, s) -> None:
        S = self.m.Statement
        S.delete().where((S.partner == s.partner_id) & (S.period_start == s.period.start)
                         & (S.status == "draft")).execute()
        self.add(s)

    def latest_finalized(self, partner_id: str, period):
        S = self.m.Statement
        row = (S.select().where((S.partner == partner_id) & (S.period_start == period.start)
                                & S.revision.is_null(False)).order_by(S.revision.desc()).first())
        return self._entity(row) if row else None

    def finalize_draft(self, s) -> None:
        S = self.m.Statement
        S.update(status=s.status, revision=s.revision, finalized_by=s.finalized_by,
                 finalized_at=s.finalized_at).where(S.id == s.id).execute()

    def supersede(self, statement_id: str) -> None:
        S = self.m.Statement
        S.update(status="superseded").where(S.id == statement_id).execute()

    def get(self, statement_id: str):
        row = self.m.Statement.get_or_none(self.m.Statement.id == statement_id)
        return self._entity(row) if row else None

    def visible_for(self, partner_id: str) -> list:
        S = self.m.Statement
        rows = (S.select().where((S.partner == partner_id) & (S.status != "draft"))
                .order_by(S.period_start.desc(), S.revision.desc()))
        return [self._entity(r) for r in rows]
