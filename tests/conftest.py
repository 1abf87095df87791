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


@pytest.fixture
def world(store, clock):
    return World(store, clock)


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
