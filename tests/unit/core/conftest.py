"""Fixtures of core's unit tests: the in-memory unit of work, a fake clock, and fakes of
the ports the use cases call (``tests/support/fakes.py``). No database, no engine, no HTTP,
no waiting (the clock is driven): each test takes milliseconds."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from core.panel import customers
from tests.support.fakes import DrivenClock, FakeLicenseService, FakeMethod, FakeRuntime, FakeUnitOfWork, principal_of


@pytest.fixture
def uow():
    return FakeUnitOfWork()


@pytest.fixture
def clock():
    return DrivenClock(datetime(2026, 11, 1, 9, 0, tzinfo=timezone.utc))  # its sleeps take no time


# --- partner API ---------------------------------------------------------------------------


@pytest.fixture
def service():
    return FakeLicenseService()


# --- panel API -----------------------------------------------------------------------------


@pytest.fixture
def admin(uow, clock):
    return principal_of(uow, clock)


@pytest.fixture
def customer(uow, clock):
    return customers.create_customer(uow, clock, name="Acme", email="ops@acme.test")


@pytest.fixture
def methods():
    return {"compose": FakeMethod()}


@pytest.fixture
def runtime():
    return FakeRuntime()
