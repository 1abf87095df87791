"""One suite for every license-service plugin: the embedded one on the real database, the
keygen one against its fake on loopback. A new plugin adds itself to ``SERVICES``."""
from __future__ import annotations

import uuid

import pytest

from ports.licensing import LicenseService, LicenseServiceError
from tests.fixtures.fake_keygen import FakeKeygen


@pytest.fixture(params=["embedded", "keygen"])
def service(request, store):
    from app.pluginmanager import license_services, make_plugin_manager
    from ports.settings import Settings

    factories = license_services(make_plugin_manager())
    if request.param == "embedded":
        yield factories["embedded"].create(Settings({}, database=store.db))
        return
    with FakeKeygen(account="acct", token="tok") as fake:
        yield factories["keygen"].create(Settings({
            "SLIPWAY_KEYGEN_URL": fake.url, "SLIPWAY_KEYGEN_ACCOUNT": "acct", "SLIPWAY_KEYGEN_TOKEN": "tok"},
            database=store.db))


def _in_transaction(service, store, fn):
    # the app calls services inside a unit of work (the named exception of core.waits'
    # rule: core.partner.licenses.LICENSE_SERVICE); the embedded one writes in that transaction
    from core import waits
    from core.partner.licenses import LICENSE_SERVICE

    with store.uow() as uow, waits.allowed(LICENSE_SERVICE):
        result = fn()
        uow.commit()
    return result


def test_is_a_license_service(service):
    assert isinstance(service, LicenseService) and service.name in ("embedded", "keygen")


def test_issue_and_every_change(service, store):
    issued = _in_transaction(service, store, lambda: service.issue(policy="web-host", metadata={"a": "1"}))
    uuid.UUID(issued.service_license_id)
    assert len(issued.key) >= 16
    other = _in_transaction(service, store, lambda: service.issue(policy="web-host", metadata={}))
    assert other.key != issued.key and other.service_license_id != issued.service_license_id
    for call in (lambda: service.suspend(issued.service_license_id),
                 lambda: service.reinstate(issued.service_license_id),
                 lambda: service.change_policy(issued.service_license_id, "power-user"),
                 lambda: service.update_metadata(issued.service_license_id, {"customerId": "c2"}),
                 lambda: service.revoke(issued.service_license_id)):
        _in_transaction(service, store, call)


def test_unknown_licenses_are_a_service_error(service, store):
    missing = str(uuid.uuid4())
    for call in (lambda: service.suspend(missing), lambda: service.reinstate(missing),
                 lambda: service.change_policy(missing, "web-host"), lambda: service.update_metadata(missing, {})):
        with pytest.raises(LicenseServiceError):
            _in_transaction(service, store, call)
