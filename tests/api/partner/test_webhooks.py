"""Partner API: webhook endpoints (/v1/webhooks), their delivery log, the SSRF rule on
target URLs, and the queue the ledger fills (sending is tests/e2e/test_webhooks.py)."""
from __future__ import annotations

import pytest
import standardwebhooks

from core.partner.ledger import EVENTS
from tests.support.contract_client import ContractClient
from tests.support.partners import UUID_RE

PUBLIC = "https://93.184.215.14/hooks/slipway"  # an address literal: no DNS in the tests
OTHER_ID = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def app(make_app):
    return make_app(rate_burst=10_000.0)  # many calls on one token; the limiter is tested elsewhere


def _create(reseller, url=PUBLIC, expect=201, **body):
    return reseller.call("POST", "/v1/webhooks", json_body={"url": url, **body}, expect=expect)


def _deliveries(reseller, endpoint_id, **params):
    return reseller.call("GET", f"/v1/webhooks/{endpoint_id}/deliveries", params=params or None, expect=200).json


def test_endpoint_lifecycle_and_the_secret_shown_once(acme, clock):
    created = _create(acme).json
    assert UUID_RE.match(created["id"]) and created["url"] == PUBLIC
    assert created["events"] == list(EVENTS)  # all when omitted
    assert created["secret"].startswith("whsec_")
    standardwebhooks.Webhook(created["secret"])  # the reference implementation takes it
    clock.advance(1)
    only = _create(acme, events=["license.issued", "license.suspended", "license.issued"]).json
    assert only["events"] == ["license.issued", "license.suspended"]
    assert only["secret"] != created["secret"]
    listed = acme.call("GET", "/v1/webhooks", expect=200).json
    assert [e["id"] for e in listed] == [only["id"], created["id"]]  # newest first
    assert all("secret" not in e for e in listed)
    got = acme.call("GET", f"/v1/webhooks/{created['id']}", expect=200).json
    assert got == {k: v for k, v in created.items() if k != "secret"}
    acme.call("DELETE", f"/v1/webhooks/{created['id']}", expect=204)
    acme.call("GET", f"/v1/webhooks/{created['id']}", expect=404)
    acme.call("DELETE", f"/v1/webhooks/{created['id']}", expect=404)
    assert [e["id"] for e in acme.call("GET", "/v1/webhooks").json] == [only["id"]]


def test_without_a_token_every_operation_is_401(client, acme, clock):
    endpoint = _create(acme).json["id"]
    for method, path in (("GET", "/v1/webhooks"), ("POST", "/v1/webhooks"), ("GET", f"/v1/webhooks/{endpoint}"),
                         ("DELETE", f"/v1/webhooks/{endpoint}"), ("GET", f"/v1/webhooks/{endpoint}/deliveries")):
        clock.advance(5)  # keep the failed-authentication brake out of this test
        result = client.request(method, path, json_body={"url": PUBLIC} if method == "POST" else None)
        assert result.status_code == 401, (method, path)


def test_a_read_token_is_403_on_every_operation_reads_included(reseller_factory, world, client):
    writer = reseller_factory("Writer")
    endpoint = _create(writer).json["id"]
    _, read_secret = world.token(writer.partner, scope="read")
    for method, path in (("GET", "/v1/webhooks"), ("POST", "/v1/webhooks"), ("GET", f"/v1/webhooks/{endpoint}"),
                         ("DELETE", f"/v1/webhooks/{endpoint}"), ("GET", f"/v1/webhooks/{endpoint}/deliveries")):
        result = client.request(method, path, token=read_secret,
                                json_body={"url": PUBLIC} if method == "POST" else None)
        assert result.status_code == 403, (method, path, result.text)
        assert result.json["error"]["code"] == "forbidden"
    writer.call("GET", f"/v1/webhooks/{endpoint}", expect=200)  # still there


def test_another_partners_endpoint_is_404_a_parents_and_a_childs_too(reseller_factory):
    parent = reseller_factory("Parent")
    child = reseller_factory("Child", parent=parent)
    stranger = reseller_factory("Stranger")
    theirs = _create(child).json["id"]
    for who in (parent, stranger):
        who.call("GET", f"/v1/webhooks/{theirs}", expect=404)
        who.call("GET", f"/v1/webhooks/{theirs}/deliveries", expect=404)
        who.call("DELETE", f"/v1/webhooks/{theirs}", expect=404)
        assert who.call("GET", "/v1/webhooks", expect=200).json == []
    for who in (child, parent):
        who.call("GET", f"/v1/webhooks/{OTHER_ID}", expect=404)
    child.call("GET", f"/v1/webhooks/{theirs}", expect=200)  # untouched
    result = child.call("GET", "/v1/webhooks/not-a-uuid", expect=422)
    assert "webhookId" in result.json["error"]["message"]


@pytest.mark.parametrize("url, why", [
    ("http://93.184.215.14/hook", "must be https"),
    ("ftp://93.184.215.14/hook", "http(s) URL"),
    ("https:///nohost", "http(s) URL"),
    ("not a url", "http(s) URL"),
    ("https://127.0.0.1/hook", "loopback"),
    ("https://localhost:8443/hook", "loopback"),
    ("https://[::1]/hook", "loopback"),
    ("https://[::ffff:127.0.0.1]/hook", "loopback"),
    ("https://10.1.2.3/hook", "private"),
    ("https://192.168.0.10/hook", "private"),
    ("https://[fd00::1]/hook", "private"),
    ("https://[fec0::8]/hook", "site-local"),
    ("https://2130706433/hook", "loopback"),  # decimal, hex and octal spellings of 127.0.0.1
    ("https://0x7f000001/hook", "loopback"),
    ("https://0177.0.0.1/hook", "not a valid URL"),  # httpx refuses the octal one outright
    ("https://[64:ff9b::a9fe:a9fe]/hook", "link-local"),  # NAT64 of the metadata address
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("https://169.254.169.254/latest/meta-data/", "link-local"),
    ("https://0.0.0.0/hook", "unspecified"),
    ("https://224.0.0.1/hook", "multicast"),
    ("https://240.0.0.1/hook", "private"),
    ("https://user:pw@93.184.215.14/hook", "credentials"),
    ("https://93.184.215.14:99999/hook", "not a valid URL"),
])
def test_urls_outside_the_rule_are_422_on_url(acme, url, why):
    result = _create(acme, url=url, expect=422)
    assert result.json["error"]["code"] == "unprocessable-entity"
    assert "url" in result.json["error"]["message"] and why in result.json["error"]["message"]
    assert acme.call("GET", "/v1/webhooks").json == []


@pytest.mark.parametrize("url", [
    "https://93.184.215.14/hook\x01",  # a control character
    "https://xn--zz.example/hook",  # not an IDNA name
    "https://\u2603.example/hook",  # a name IDNA 2008 refuses
])
def test_urls_the_sender_cannot_parse_are_422_on_url(acme, url):
    """Such an endpoint could never be sent to: each of its deliveries would be taken up
    again and again without an attempt counted."""
    result = _create(acme, url=url, expect=422)
    assert "url" in result.json["error"]["message"] and "not a valid URL" in result.json["error"]["message"]
    assert acme.call("GET", "/v1/webhooks").json == []


@pytest.mark.parametrize("body", [
    {"events": ["license.exploded"]},
    {"events": []},
    {"events": "license.issued"},
    {"url": 42},
    {"url": "https://93.184.215.14/" + "a" * 2100},
])
def test_bad_events_and_url_values_are_422(acme, body):
    result = acme.call("POST", "/v1/webhooks", json_body={"url": PUBLIC, **body}, expect=422)
    assert result.json["error"]["code"] == "unprocessable-entity"


def test_missing_url_and_malformed_bodies(acme):
    acme.call("POST", "/v1/webhooks", json_body={}, expect=422)
    acme.call("POST", "/v1/webhooks", body="{", headers={"Content-Type": "application/json"}, expect=400)
    acme.call("POST", "/v1/webhooks", body="url=x", headers={"Content-Type": "text/plain"}, expect=415)


def test_private_hosts_only_when_the_operator_allows_them(make_app, world):
    private = ContractClient(make_app(webhook_allow_private=True, rate_burst=10_000.0))
    _, secret = world.token(world.partner("Lab"))

    def create(url):
        return private.post("/v1/webhooks", token=secret, json_body={"url": url})

    for url in ("http://127.0.0.1:9/hook", "https://localhost/hook", "http://10.0.0.5/x",
                "http://169.254.169.254/latest/meta-data/"):
        assert create(url).status_code == 201, url
    refused = create("http://93.184.215.14/hook")  # plain http to a public host: never
    assert refused.status_code == 422 and "must be https" in refused.json["error"]["message"]


def test_at_most_twenty_endpoints_per_partner(acme):
    for n in range(20):
        _create(acme, url=f"{PUBLIC}/{n}")
    result = _create(acme, expect=409)
    assert result.json["error"]["code"] == "conflict"


def test_ledger_events_queue_one_delivery_per_matching_endpoint(reseller_factory, clock, store):
    parent = reseller_factory("Parent")
    child = reseller_factory("Child", parent=parent)
    everything = _create(parent).json["id"]
    suspensions = _create(parent, events=["license.suspended"]).json["id"]
    childs = _create(child).json["id"]
    lic = child.license(child.customer())["license"]  # a child's event reaches its ancestors' endpoints
    clock.advance(1)
    child.call("POST", f"/v1/licenses/{lic['id']}/suspend", expect=200)
    own = parent.license(parent.customer())["license"]  # a parent's event does not reach the child's
    log = _deliveries(parent, everything)
    assert [d["event"] for d in log["data"]] == ["license.issued", "license.suspended", "license.issued"]
    assert (log["limit"], log["offset"]) == (50, 0)
    first = log["data"][-1]
    assert first["status"] == "pending" and first["attempts"] == 0
    assert first["lastStatusCode"] is None and first["lastError"] is None and first["deliveredAt"] is None
    assert UUID_RE.match(first["id"]) and isinstance(first["eventId"], int)
    assert [d["event"] for d in _deliveries(parent, suspensions)["data"]] == ["license.suspended"]
    assert [d["event"] for d in _deliveries(child, childs)["data"]] == ["license.suspended", "license.issued"]
    activity = parent.call("GET", f"/v1/customers/{own['customerId']}/activity").json["data"]
    assert log["data"][0]["eventId"] == activity[0]["id"]  # the ledger event it carries
    page = _deliveries(parent, everything, limit=1, offset=1)
    assert [d["event"] for d in page["data"]] == ["license.suspended"] and page["limit"] == 1

    # deleting an endpoint drops its deliveries, pending ones included
    parent.call("DELETE", f"/v1/webhooks/{everything}", expect=204)
    D = store.models.WebhookDelivery
    with store.db.connection_context():
        assert D.select().where(D.endpoint == everything).count() == 0
        assert D.select().where(D.endpoint == suspensions).count() == 1


def test_a_refused_license_change_queues_nothing(acme, store):
    endpoint = _create(acme).json["id"]
    customer = acme.customer()
    acme.call("POST", "/v1/licenses", json_body={"customerId": customer["id"], "contractId": OTHER_ID,
                                                 "edition": "web-host"}, expect=404)
    assert _deliveries(acme, endpoint)["data"] == []
