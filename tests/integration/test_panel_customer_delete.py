"""A panel customer whose customer-role keys were all revoked can be deleted (the revoked
keys go with it); while a live key or a service remains, the delete is a Conflict and
nothing changes. Against the real database (SQLite or PostgreSQL)."""
from __future__ import annotations

import pytest

from core.panel import access, customers
from core.errors import Conflict, NotFound


def test_revoked_keys_do_not_keep_a_customer_from_being_deleted(store, clock):
    customer = customers.create_customer(store.uow(), clock, name="Acme")
    revoked, _ = access.create_api_key(store.uow(), clock, name="old", role="customer",
                                             customer_id=customer.id, rate_limit_rpm=60)
    live, _ = access.create_api_key(store.uow(), clock, name="new", role="customer",
                                          customer_id=customer.id, rate_limit_rpm=60)
    other = customers.create_customer(store.uow(), clock, name="Other")
    kept, _ = access.create_api_key(store.uow(), clock, name="other", role="customer",
                                          customer_id=other.id, rate_limit_rpm=60)
    access.revoke_api_key(store.uow(), clock, revoked.id)
    with pytest.raises(Conflict):
        customers.delete_customer(store.uow(), customer.id)
    access.revoke_api_key(store.uow(), clock, live.id)
    customers.delete_customer(store.uow(), customer.id)
    with pytest.raises(NotFound):
        customers.get_customer(store.uow(), customer.id)
    with store.uow() as uow:
        assert uow.api_keys.get(revoked.id) is None and uow.api_keys.get(live.id) is None
        assert uow.api_keys.get(kept.id) is not None  # another customer's keys stay
