"""Fixtures of the panel API tests that drive the panel in process."""
from __future__ import annotations

import pytest

from core.panel import access, customers


@pytest.fixture
def panel(make_app, store, clock):
    """``(make, acme, admin)``: ``make(**settings)`` builds the app with those plugin
    settings and answers ``(contract-checking client, app)``; ``acme`` is a panel
    customer and ``admin`` an admin key's secret."""
    def make(**settings):
        from tests.support.contract_client import ContractClient

        app = make_app(settings=settings)
        return ContractClient(app), app

    acme = customers.create_customer(store.uow(), clock, name="Acme")
    _, admin = access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=10000)
    return make, acme, admin

