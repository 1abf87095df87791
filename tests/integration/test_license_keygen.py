"""The ``keygen`` license service against a fake Keygen on loopback: every port call, its
failures (which must never leak the bearer token), its settings and its entry point."""
from __future__ import annotations

import socket
import traceback

import httpx
import pytest

from plugins.license_keygen import KeygenFactory
from ports.licensing import IssuedKey, LicenseServiceError
from tests.fixtures.fake_keygen import ACTIVE, REVOKED, SUSPENDED, FakeKeygen

TOKEN = "admin-tok-3f9c2a7e51b84d06"
ACCOUNT = "acme"
POLICY, OTHER_POLICY = "pol-standard", "pol-premium"


def settings_for(url, **overrides):
    settings = {"SLIPWAY_KEYGEN_URL": url, "SLIPWAY_KEYGEN_ACCOUNT": ACCOUNT, "SLIPWAY_KEYGEN_TOKEN": TOKEN}
    settings.update(overrides)
    return settings


@pytest.fixture
def fake():
    with FakeKeygen(account=ACCOUNT, token=TOKEN) as fake:
        yield fake


@pytest.fixture
def make_service():
    services = []

    def make(settings):
        service = KeygenFactory().create(settings)
        services.append(service)
        return service

    yield make
    for service in services:
        service.close()


@pytest.fixture
def service(fake, make_service):
    return make_service(settings_for(fake.url))


@pytest.fixture
def issued(service, fake):
    issued = service.issue(policy=POLICY, metadata={"partnerId": "p-1"})
    fake.requests.clear()
    return issued


def assert_no_token(exc_info):
    """Neither the message nor the whole chained traceback shows the token."""
    assert TOKEN not in str(exc_info.value)
    assert TOKEN not in "".join(traceback.format_exception(exc_info.value))


# --- the port ---------------------------------------------------------------------


def test_issue_returns_the_key_and_records_policy_and_metadata(service, fake):
    issued = service.issue(policy=POLICY, metadata={"partnerId": "p-1", "edition": "standard"})

    assert isinstance(issued, IssuedKey)
    lic = fake.licenses[issued.service_license_id]
    assert issued.key == lic.key
    assert (lic.policy, lic.metadata, lic.status) == (POLICY, {"partnerId": "p-1", "edition": "standard"}, ACTIVE)
    [request] = fake.requests
    assert (request.method, request.path) == ("POST", f"/v1/accounts/{ACCOUNT}/licenses")
    assert request.json == {"data": {
        "type": "licenses",
        "attributes": {"metadata": {"partnerId": "p-1", "edition": "standard"}},
        "relationships": {"policy": {"data": {"type": "policies", "id": POLICY}}},
    }}
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["accept"] == request.headers["content-type"] == "application/vnd.api+json"


def test_suspend_and_reinstate(service, fake, issued):
    lid = issued.service_license_id
    service.suspend(lid)
    assert fake.licenses[lid].status == SUSPENDED
    service.reinstate(lid)
    assert fake.licenses[lid].status == ACTIVE
    assert [(r.method, r.path) for r in fake.requests] == [
        ("POST", f"/v1/accounts/{ACCOUNT}/licenses/{lid}/actions/suspend"),
        ("POST", f"/v1/accounts/{ACCOUNT}/licenses/{lid}/actions/reinstate"),
    ]


def test_revoke(service, fake, issued):
    lid = issued.service_license_id
    service.revoke(lid)
    assert fake.licenses[lid].status == REVOKED
    assert [(r.method, r.path) for r in fake.requests] == [
        ("DELETE", f"/v1/accounts/{ACCOUNT}/licenses/{lid}/actions/revoke")]


def test_change_policy(service, fake, issued):
    lid = issued.service_license_id
    service.change_policy(lid, OTHER_POLICY)
    assert fake.licenses[lid].policy == OTHER_POLICY
    [request] = fake.requests
    assert (request.method, request.path) == ("PUT", f"/v1/accounts/{ACCOUNT}/licenses/{lid}/policy")
    assert request.json == {"data": {"type": "policies", "id": OTHER_POLICY}}


def test_update_metadata_replaces_it(service, fake, issued):
    lid = issued.service_license_id
    service.update_metadata(lid, {"partnerId": "p-2"})
    assert fake.licenses[lid].metadata == {"partnerId": "p-2"}
    [request] = fake.requests
    assert (request.method, request.path) == ("PATCH", f"/v1/accounts/{ACCOUNT}/licenses/{lid}")
    assert request.json == {"data": {"type": "licenses", "attributes": {"metadata": {"partnerId": "p-2"}}}}


# --- failures -----------------------------------------------------------------------


def test_a_500_raises_with_status_and_the_services_error(service, fake):
    fake.fail_next(1)
    with pytest.raises(LicenseServiceError) as exc_info:
        service.issue(policy=POLICY, metadata={})
    message = str(exc_info.value)
    assert "500" in message and "Internal server error" in message and "Something went wrong" in message
    assert isinstance(exc_info.value.__cause__, httpx.HTTPStatusError)
    assert_no_token(exc_info)
    assert fake.licenses == {}

    assert service.issue(policy=POLICY, metadata={}).key  # only the next call failed


def test_every_call_failing(service, fake, issued):
    fake.fail_all()
    for call in (service.suspend, service.reinstate, service.revoke):
        with pytest.raises(LicenseServiceError, match="500"):
            call(issued.service_license_id)
    assert fake.licenses[issued.service_license_id].status == ACTIVE


def test_a_dropped_connection_raises(service, fake):
    fake.fail_next(1, "drop")
    with pytest.raises(LicenseServiceError) as exc_info:
        service.issue(policy=POLICY, metadata={})
    assert isinstance(exc_info.value.__cause__, httpx.TransportError)
    assert_no_token(exc_info)


def test_a_refused_connection_raises(make_service):
    with socket.socket() as sock:  # a port that nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    service = make_service(settings_for(f"http://127.0.0.1:{port}"))
    with pytest.raises(LicenseServiceError) as exc_info:
        service.issue(policy=POLICY, metadata={})
    assert isinstance(exc_info.value.__cause__, httpx.ConnectError)
    assert_no_token(exc_info)


def test_a_timeout_raises(fake, make_service):
    service = make_service(settings_for(fake.url, SLIPWAY_KEYGEN_TIMEOUT="0.2"))
    fake.fail_next(1, "hang")
    with pytest.raises(LicenseServiceError, match="timed out") as exc_info:
        service.issue(policy=POLICY, metadata={})
    fake.heal()
    assert isinstance(exc_info.value.__cause__, httpx.TimeoutException)
    assert_no_token(exc_info)


def test_a_wrong_token_raises_401_without_showing_either_token(fake, make_service):
    wrong = "wrong-tok-9d1e44c0aa"
    service = make_service(settings_for(fake.url, SLIPWAY_KEYGEN_TOKEN=wrong))
    with pytest.raises(LicenseServiceError) as exc_info:
        service.issue(policy=POLICY, metadata={})
    message = str(exc_info.value)
    assert "401" in message and "Unauthorized" in message
    assert wrong not in message and wrong not in "".join(traceback.format_exception(exc_info.value))
    assert_no_token(exc_info)


def test_a_wrong_account_raises_404(fake, make_service):
    service = make_service(settings_for(fake.url, SLIPWAY_KEYGEN_ACCOUNT="someone-else"))
    with pytest.raises(LicenseServiceError, match="404"):
        service.issue(policy=POLICY, metadata={})


def test_an_unknown_license_raises_404(service):
    with pytest.raises(LicenseServiceError, match="404.*not found"):
        service.suspend("00000000-0000-0000-0000-000000000000")


def test_a_service_refusal_is_reported(service, issued):
    with pytest.raises(LicenseServiceError, match="422.*not suspended"):
        service.reinstate(issued.service_license_id)


# --- settings -----------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["SLIPWAY_KEYGEN_URL", "SLIPWAY_KEYGEN_ACCOUNT", "SLIPWAY_KEYGEN_TOKEN"])
def test_a_missing_setting_is_named(variable):
    settings = settings_for("http://127.0.0.1:1")
    del settings[variable]
    with pytest.raises(ValueError, match=variable):
        KeygenFactory().create(settings)
    settings[variable] = "  "
    with pytest.raises(ValueError, match=variable):
        KeygenFactory().create(settings)


@pytest.mark.parametrize("timeout", ["soon", "0", "-1", "nan"])
def test_a_bad_timeout_is_named(timeout):
    with pytest.raises(ValueError, match="SLIPWAY_KEYGEN_TIMEOUT"):
        KeygenFactory().create(settings_for("http://x", SLIPWAY_KEYGEN_TIMEOUT=timeout))


def test_the_timeout_setting_is_used(make_service):
    assert make_service(settings_for("http://x"))._http.timeout.read == 10.0
    assert make_service(settings_for("http://x", SLIPWAY_KEYGEN_TIMEOUT="2.5"))._http.timeout.read == 2.5


# --- discovery ----------------------------------------------------------------------


def test_the_entry_point_names_this_plugin():
    from importlib.metadata import entry_points

    [ep] = [ep for ep in entry_points(group="slipway") if ep.name == "license_keygen"]
    assert "keygen" in {f.name for f in ep.load().register_license_services()}


def test_the_plugin_manager_finds_the_service():
    from app.pluginmanager import license_services, make_plugin_manager

    assert "keygen" in license_services(make_plugin_manager())
