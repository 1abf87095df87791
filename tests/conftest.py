"""Shared fixtures: a fresh database per test (SQLite by default, PostgreSQL when
``SLIPWAY_DATABASE_URL`` says so), a fake clock, the app, and a contract-checking client."""
from __future__ import annotations

import os
import re

import pytest

from app.config import Config
from app.factory import create_app
from app.storage.store import Store
from core import partners, tokens
from tests.contract_client import ContractClient
from tests.fakes import FakeClock

POSTGRES = (os.environ.get("SLIPWAY_DATABASE_URL") or "").startswith(("postgresql://", "postgres://"))


def _reset_postgres(url: str) -> None:
    import psycopg2

    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public;")
    conn.close()


@pytest.fixture
def database_url(tmp_path):
    if POSTGRES:
        url = os.environ["SLIPWAY_DATABASE_URL"]
        _reset_postgres(url)
        return url
    return f"sqlite:///{tmp_path / 'slipway.db'}"


@pytest.fixture
def store(database_url):
    from app.pluginmanager import license_services, make_plugin_manager

    store = Store(database_url, threads=2)
    store.migrate([f.migrate for f in license_services(make_plugin_manager()).values()])
    yield store
    store.close()


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def make_app(store, clock):
    def make(**overrides):
        overrides.setdefault("billing_interval", 0)  # tests drive recomputes themselves
        overrides.setdefault("deploy_worker", False)  # lifespan runs per request in falcon.testing
        config = Config(database_url=store.url, clock=clock, **overrides)
        return create_app(config, store=store)

    return make


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return ContractClient(app)


class World:
    """Partners and tokens made straight through the use cases, for API tests."""

    def __init__(self, store, clock):
        self.store, self.clock = store, clock

    def partner(self, name="Acme Hosting", type="reseller", parent=None):
        return partners.create_partner(self.store.uow(), self.clock, name=name, type=type,
                                       parent_id=parent.id if parent else None)

    def token(self, partner, scope="write", label="test"):
        token, secret = tokens.create_token(self.store.uow(), self.clock, partner_id=partner.id, label=label,
                                            scope=scope, created_by=None)
        return token, secret


    def contract(self, partner, currency="EUR", unit_price_cents=1000):
        from core import contracts

        return contracts.create_contract(self.store.uow(), self.clock, partner_id=partner.id,
                                         model="per_instance_metered", currency=currency,
                                         unit_price_cents=unit_price_cents, known_models={"per_instance_metered"})


@pytest.fixture
def world(store, clock):
    return World(store, clock)


class Reseller:
    """A partner seen through the API: its token, a contract, and helpers to make things."""

    def __init__(self, client, world, partner, secret, contract):
        self.client, self.world = client, world
        self.partner, self.secret, self.contract = partner, secret, contract
        self.id = partner.id

    def call(self, method, path, **kw):
        return self.client.request(method, path, token=self.secret, **kw)

    def customer(self, name="Customer", **fields):
        return self.call("POST", "/v1/customers", json_body={"name": name, **fields}, expect=201).json

    def license(self, customer, contract=None, edition="web-host", **fields):
        body = {"customerId": customer["id"], "contractId": (contract or self.contract).id, "edition": edition,
                **fields}
        return self.call("POST", "/v1/licenses", json_body=body, expect=201).json


@pytest.fixture
def reseller_factory(client, world):
    def make(name="Acme Hosting", parent=None, scope="write"):
        partner = world.partner(name, parent=parent.partner if parent else None)
        _, secret = world.token(partner, scope=scope)
        return Reseller(client, world, partner, secret, world.contract(partner))

    return make


@pytest.fixture
def acme(reseller_factory):
    return reseller_factory("Acme Hosting")


UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.fixture(scope="session")
def runtime_url():
    """The container engine's socket (``SLIPWAY_RUNTIME_URL``). Without one, tests that
    need it skip, unless ``SLIPWAY_REQUIRE_RUNTIME=1`` (CI), where they fail."""
    url = os.environ.get("SLIPWAY_RUNTIME_URL")
    if not url:
        if os.environ.get("SLIPWAY_REQUIRE_RUNTIME") == "1":
            pytest.fail("SLIPWAY_REQUIRE_RUNTIME=1 but SLIPWAY_RUNTIME_URL is not set")
        pytest.skip("no container engine (set SLIPWAY_RUNTIME_URL, e.g. from ../shared/tools/podman-service)")
    return url
