"""Customers of a partner, their contacts and their append-only notes."""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field, fields, replace
from datetime import datetime

from core.errors import Conflict, Invalid, NotFound
from core.partner.scope import Page, subtree, visible

STATUSES = ("prospect", "active", "suspended", "churned")
_COUNTRY = re.compile(r"^([A-Z]{2})?$")
NOTES_SHOWN = 50


@dataclass(frozen=True)
class Customer:
    id: str
    human_id: str
    partner_id: str
    name: str
    created_at: datetime
    external_ref: str = ""
    legal_name: str = ""
    vat_id: str = ""
    email: str = ""
    phone: str = ""
    billing_street: str = ""
    billing_postal_code: str = ""
    billing_city: str = ""
    billing_region: str = ""
    billing_country: str = ""
    postal_street: str = ""
    postal_postal_code: str = ""
    postal_city: str = ""
    postal_region: str = ""
    postal_country: str = ""
    website: str = ""
    owner_email: str = ""
    status: str = "active"


#: what a partner may set on create and change with PATCH
EDITABLE = tuple(f.name for f in fields(Customer) if f.name not in ("id", "human_id", "partner_id", "created_at"))


@dataclass(frozen=True)
class Contact:
    id: str
    human_id: str
    customer_id: str
    created_at: datetime
    updated_at: datetime
    first_name: str = ""
    last_name: str = ""
    title: str = ""
    email: str = ""
    phone: str = ""
    locale: str = ""
    notes: str = ""
    is_primary: bool = False


CONTACT_EDITABLE = ("first_name", "last_name", "title", "email", "phone", "locale", "notes", "is_primary")


@dataclass(frozen=True)
class Note:
    id: int | None
    customer_id: str
    author: str
    body: str
    at: datetime | None = field(default=None)


def _check_customer_values(values: dict) -> None:
    problems = {}
    if "name" in values and not str(values["name"]).strip():
        problems["name"] = "must not be empty"
    if "status" in values and values["status"] not in STATUSES:
        problems["status"] = "must be one of " + ", ".join(STATUSES)
    for key in ("billing_country", "postal_country"):
        if key in values and not _COUNTRY.match(values[key] or ""):
            problems[key] = "must be a two-letter upper-case ISO 3166-1 code or empty"
    for key, value in values.items():
        if key in EDITABLE and not isinstance(value, str):
            problems.setdefault(key, "must be a string")
    if problems:
        raise Invalid("invalid customer", fields=problems)


# --- customers -------------------------------------------------------------------------


def create_customer(uow, clock, caller, values: dict, partner_id: str | None = None) -> Customer:
    values = {k: v for k, v in values.items() if k in EDITABLE}
    if "name" not in values:
        raise Invalid("invalid customer", fields={"name": "is required"})
    _check_customer_values(values)
    with uow:
        scope = subtree(uow, caller)
        owner = partner_id or caller.partner.id
        if owner not in scope:
            raise NotFound(f"partner {owner} not found")
        customer = Customer(id=str(uuid.uuid4()), human_id=uow.human_ids.next("C"), partner_id=owner,
                            created_at=clock.now(), **values)
        uow.customers.add(customer)
        uow.commit()
    return customer


def get_customer(uow, caller, customer_id: str) -> Customer:
    with uow:
        return visible(uow.customers.get(customer_id), subtree(uow, caller), "customer", customer_id)


def list_customers(uow, caller, page: Page, *, status: str | None = None, external_ref: str | None = None):
    with uow:
        return uow.customers.list(subtree(uow, caller), page, status=status, external_ref=external_ref)


def update_customer(uow, caller, customer_id: str, values: dict) -> Customer:
    values = {k: v for k, v in values.items() if k in EDITABLE}
    _check_customer_values(values)
    with uow:
        customer = visible(uow.customers.get(customer_id, for_update=True), subtree(uow, caller), "customer",
                           customer_id)
        if values:
            customer = replace(customer, **values)
            uow.customers.update(customer)
            uow.commit()
    return customer


def delete_customer(uow, clock, caller, customer_id: str) -> None:
    with uow:
        customer = visible(uow.customers.get(customer_id, for_update=True), subtree(uow, caller), "customer",
                           customer_id)
        live = uow.licenses.count_live_for_customer(customer.id)
        if live:
            raise Conflict(f"customer {customer_id} has {live} license(s) that are not terminated or expired")
        uow.customers.delete(customer.id, clock.now())
        uow.commit()


# --- contacts --------------------------------------------------------------------------


def _check_contact_values(values: dict, *, creating: bool, current: Contact | None = None) -> None:
    problems = {}
    for key, value in values.items():
        if key == "is_primary":
            if not isinstance(value, bool):
                problems[key] = "must be a boolean"
        elif not isinstance(value, str):
            problems[key] = "must be a string"
    if not problems:
        first = values.get("first_name", current.first_name if current else "")
        last = values.get("last_name", current.last_name if current else "")
        if not (first or "").strip() and not (last or "").strip():
            problems["firstName"] = "at least one of firstName and lastName is required"
    if problems:
        raise Invalid("invalid contact", fields=problems)


def list_contacts(uow, caller, customer_id: str) -> list[Contact]:
    with uow:
        visible(uow.customers.get(customer_id), subtree(uow, caller), "customer", customer_id)
        return uow.contacts.list_for_customer(customer_id)


def create_contact(uow, clock, caller, customer_id: str, values: dict) -> Contact:
    values = {k: v for k, v in values.items() if k in CONTACT_EDITABLE}
    _check_contact_values(values, creating=True)
    with uow:
        customer = visible(uow.customers.get(customer_id, for_update=True), subtree(uow, caller), "customer",
                           customer_id)
        now = clock.now()
        contact = Contact(id=str(uuid.uuid4()), human_id=uow.human_ids.next("P"), customer_id=customer.id,
                          created_at=now, updated_at=now, **values)
        if contact.is_primary:
            uow.contacts.demote_primary(customer.id, now)
        uow.contacts.add(contact)
        uow.commit()
    return contact


def update_contact(uow, clock, caller, customer_id: str, contact_id: str, values: dict) -> Contact:
    values = {k: v for k, v in values.items() if k in CONTACT_EDITABLE}
    with uow:
        # the customer row lock serializes primary changes of one customer
        visible(uow.customers.get(customer_id, for_update=True), subtree(uow, caller), "customer", customer_id)
        contact = uow.contacts.get(contact_id)
        if contact is None or contact.customer_id != customer_id:
            raise NotFound(f"contact {contact_id} not found")
        _check_contact_values(values, creating=False, current=contact)
        if values:
            now = clock.now()
            if values.get("is_primary") and not contact.is_primary:
                uow.contacts.demote_primary(customer_id, now)
            contact = replace(contact, updated_at=now, **values)
            uow.contacts.update(contact)
            uow.commit()
    return contact


def delete_contact(uow, caller, customer_id: str, contact_id: str) -> None:
    with uow:
        visible(uow.customers.get(customer_id), subtree(uow, caller), "customer", customer_id)
        contact = uow.contacts.get(contact_id)
        if contact is None or contact.customer_id != customer_id:
            raise NotFound(f"contact {contact_id} not found")
        uow.contacts.delete(contact.id)
        uow.commit()


# --- notes -----------------------------------------------------------------------------


def list_notes(uow, caller, customer_id: str) -> list[Note]:
    with uow:
        visible(uow.customers.get(customer_id), subtree(uow, caller), "customer", customer_id)
        return uow.notes.recent(customer_id, NOTES_SHOWN)


def add_note(uow, clock, caller, customer_id: str, body) -> Note:
    if not isinstance(body, str) or not body.strip():
        raise Invalid("invalid note", fields={"body": "must not be empty or only whitespace"})
    with uow:
        visible(uow.customers.get(customer_id), subtree(uow, caller), "customer", customer_id)
        note = uow.notes.append(Note(id=None, customer_id=customer_id, author=caller.partner.id, body=body,
                                     at=clock.now()))
        uow.commit()
    return note
