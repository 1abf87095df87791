"""`slipway user set` and `slipway user list`: who may log in to the panel, as what."""
from __future__ import annotations

import pytest

from tests.support.processes import slipway


@pytest.fixture
def initialised(migrated_database_url):
    return migrated_database_url


def _customer(url) -> str:
    from app.config import Config
    from app.storage.store import Store
    from core.panel import customers

    store = Store(url, threads=1)
    try:
        return customers.create_customer(store.uow(), Config.from_env({}).clock, name="Acme").id
    finally:
        store.close()


def test_user_set_and_list(initialised):
    url = initialised
    _, empty = slipway(url, "user", "list")
    assert empty == {"users": []}
    _, ada = slipway(url, "user", "set", "--email", " Ada@Example.COM ", "--role", "admin")
    assert set(ada) == {"email", "role", "customerId", "createdAt", "updatedAt"}
    assert ada["email"] == "ada@example.com" and ada["role"] == "admin" and ada["customerId"] is None
    customer = _customer(url)
    _, bob = slipway(url, "user", "set", "--email", "bob@example.com", "--role", "customer", "--customer-id", customer)
    assert bob["customerId"] == customer
    _, changed = slipway(url, "user", "set", "--email", "ada@example.com", "--role", "viewer")  # safe to repeat
    assert changed["role"] == "viewer" and changed["createdAt"] == ada["createdAt"]
    _, listed = slipway(url, "user", "list")
    assert [(u["email"], u["role"], u["customerId"]) for u in listed["users"]] == [
        ("ada@example.com", "viewer", None), ("bob@example.com", "customer", customer)]


@pytest.mark.parametrize("args, status, code, field", [
    (["user", "set", "--email", "not-an-email", "--role", "admin"], 1, "unprocessable-entity", "email"),
    (["user", "set", "--email", "a@example.com", "--role", "customer"], 1, "unprocessable-entity", "customerId"),
    (["user", "set", "--email", "a@example.com", "--role", "admin", "--customer-id", "cust_1"], 1,
     "unprocessable-entity", "customerId"),
    (["user", "set", "--email", "a@example.com", "--role", "customer", "--customer-id", "cust_nope"], 1,
     "not-found", None),
    (["user", "set", "--email", "a@example.com", "--role", "root"], 2, "usage", None),
    (["user", "set", "--role", "admin"], 2, "usage", None),
    (["user"], 2, "usage", None),
])
def test_user_set_refusals(initialised, args, status, code, field):
    returncode, document = slipway(initialised, *args, check=False)
    assert returncode == status and document["error"]["code"] == code, document
    if field:
        assert field in document["error"]["message"]
    _, listed = slipway(initialised, "user", "list")
    assert listed == {"users": []}  # nothing was stored
