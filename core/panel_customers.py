"""The panel's customers (``cust_<id>``): whose services a hosting panel runs."""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace
from datetime import datetime

from core.errors import Conflict, Invalid, NotFound

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@dataclass(frozen=True)
class PanelCustomer:
    id: str
    name: str
    email: str
    created_at: datetime


def _check(values: dict) -> None:
    problems = {}
    if "name" in values and not str(values["name"]).strip():
        problems["name"] = "must not be empty"
    if "email" in values and values["email"] and not _EMAIL.match(values["email"]):
        problems["email"] = "must be an email address"
    if problems:
        raise Invalid("invalid customer", fields=problems)


def create_customer(uow, clock, *, name: str, email: str = "") -> PanelCustomer:
    _check({"name": name, "email": email})
    customer = PanelCustomer(id=f"cust_{secrets.token_hex(8)}", name=name.strip(), email=email,
                             created_at=clock.now())
    with uow:
        uow.panel_customers.add(customer)
        uow.commit()
    return customer


def get_customer(uow, customer_id: str) -> PanelCustomer:
    with uow:
        found = uow.panel_customers.get(customer_id)
    if found is None:
        raise NotFound(f"customer {customer_id} not found")
    return found


def list_customers(uow, *, page: int, per_page: int, sort: str = "created_at", order: str = "asc",
                   search: str | None = None):
    with uow:
        return uow.panel_customers.page(page=page, per_page=per_page, sort=sort, order=order, search=search)


def update_customer(uow, customer_id: str, values: dict) -> PanelCustomer:
    values = {k: v for k, v in values.items() if k in ("name", "email")}
    _check(values)
    with uow:
        found = uow.panel_customers.get(customer_id)
        if found is None:
            raise NotFound(f"customer {customer_id} not found")
        if values:
            found = replace(found, **{k: (v.strip() if k == "name" else v) for k, v in values.items()})
            uow.panel_customers.update(found)
            uow.commit()
    return found


def delete_customer(uow, customer_id: str) -> None:
    with uow:
        if uow.panel_customers.get(customer_id) is None:
            raise NotFound(f"customer {customer_id} not found")
        if uow.services.count_for_customer(customer_id):
            raise Conflict("the customer still has services; delete them first")
        if uow.api_keys.count_for_customer(customer_id):
            raise Conflict("API keys of role customer still belong to this customer; revoke them first")
        uow.panel_customers.delete(customer_id)
        uow.commit()
