"""Panel API: signing a browser in with an API key (``POST /api/auth/key``). The session
acts as the key (role, customer, denied permissions, rate bucket), expires at the earlier
of the session TTL and the key's expiry, dies with the key, and logging out ends only the
session. Every refusal creates no session. Responses are held to the contract."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
import yaml

from app.http.timefmt import parse_rfc3339
from core.panel import access, customers as panel_customers
from tests.support.contract_client import ContractClient

XRW = {"X-Requested-With": "slipway"}


@pytest.fixture
def panel(make_app):
    return ContractClient(make_app())


@pytest.fixture
def key(store, clock):
    def make(role="admin", **kw):
        kw.setdefault("rate_limit_rpm", 1000)
        return access.create_api_key(store.uow(), clock, name=f"{role} key", role=role, **kw)

    return make


def key_sessions(store) -> int:
    with store.db.connection_context():
        return store.models.PanelKeySession.select().count()


def sign_in(panel, secret, expect=204, headers=None, **kw):
    return panel.post("/api/auth/key", json_body={"key": secret}, headers=headers if headers is not None else XRW,
                      expect=expect, **kw)


def cookie(secret, **headers):
    return {"Cookie": f"slipway_session={secret}", **headers}


def session_of(result) -> str:
    return result.cookies["slipway_session"].value


def test_sign_in_sets_a_session_cookie_that_acts_as_the_key(panel, key, store):
    made, secret = key("admin")
    done = sign_in(panel, secret)
    jar = done.cookies["slipway_session"]
    assert jar.http_only and jar.same_site == "Lax" and jar.path == "/api" and jar.max_age == 28800
    assert not jar.secure  # no https public URL
    assert done.headers["cache-control"] == "no-store"
    with store.db.connection_context():
        row = store.models.PanelKeySession.get()
        assert jar.value not in json.dumps(row.__data__, default=str)  # only the hash is stored
        assert row.api_key_id == made.id
    me = panel.get("/api/auth/session", headers=cookie(jar.value), expect=200).json
    assert me["email"] is None and me["key"] == {"id": made.id, "name": "admin key"}
    assert me["role"] == "admin" and me["customer_id"] is None
    assert me["permissions"] == sorted(access.ROLES["admin"])
    listed = panel.get("/api/services", headers=cookie(jar.value), expect=200)
    assert listed.headers["x-ratelimit-limit"] == "1000"  # the key's own rate limit and bucket
    panel.post("/api/customers", headers=cookie(jar.value, **XRW), json_body={"name": "A"}, expect=201)


def test_a_viewer_keys_session_may_not_create(panel, key, store, clock):
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    _, secret = key("viewer")
    session = session_of(sign_in(panel, secret))
    me = panel.get("/api/auth/session", headers=cookie(session), expect=200).json
    assert me["role"] == "viewer" and "services:create" not in me["permissions"]
    denied = panel.post("/api/services", headers=cookie(session, **XRW), json_body={
        "name": "nope", "customer_id": acme.id, "deploy_method": "template", "template_id": "static-site"},
        expect=403)
    assert "API key lacks the services:create permission" in denied.json["error"]["message"]
    panel.post("/api/customers", headers=cookie(session, **XRW), json_body={"name": "B"}, expect=403)
    panel.get("/api/services", headers=cookie(session), expect=200)


def test_denied_permissions_hold_in_the_session(panel, key):
    _, secret = key("admin", denied_permissions=["customers:write", "api_keys:manage"])
    session = session_of(sign_in(panel, secret))
    me = panel.get("/api/auth/session", headers=cookie(session), expect=200).json
    assert "customers:write" not in me["permissions"] and "api_keys:manage" not in me["permissions"]
    panel.post("/api/customers", headers=cookie(session, **XRW), json_body={"name": "A"}, expect=403)
    panel.get("/api/v1/api-keys", headers=cookie(session), expect=403)
    panel.get("/api/customers", headers=cookie(session), expect=200)


def test_a_customer_keys_session_sees_only_its_customer(panel, key, store, clock):
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    other = panel_customers.create_customer(store.uow(), clock, name="Other")
    _, admin = key("admin")
    made = {}
    for name, customer in (("mine", acme), ("theirs", other)):
        made[name] = panel.post("/api/services", token=admin, json_body={
            "name": name, "customer_id": customer.id, "deploy_method": "template",
            "template_id": "static-site"}, expect=201).json
    _, secret = key("customer", customer_id=acme.id)
    session = session_of(sign_in(panel, secret))
    assert panel.get("/api/auth/session", headers=cookie(session), expect=200).json["customer_id"] == acme.id
    listed = panel.get("/api/services", headers=cookie(session), expect=200).json
    assert [s["name"] for s in listed["data"]] == ["mine"] and listed["total"] == 1
    panel.get(f"/api/services/{made['theirs']['id']}", headers=cookie(session), expect=404)
    panel.get(f"/api/services/{made['mine']['id']}", headers=cookie(session), expect=200)
    panel.get("/api/customers", headers=cookie(session), expect=403)
    # another customer's service cannot be created through the session either
    panel.post("/api/services", headers=cookie(session, **XRW), json_body={
        "name": "sneaky", "customer_id": other.id, "deploy_method": "template", "template_id": "static-site"},
        expect=403)


def test_the_session_ends_with_the_keys_expiry_when_that_comes_first(panel, key, clock):
    _, secret = key("viewer", expires_at=clock.now() + timedelta(hours=1))
    done = sign_in(panel, secret)
    assert done.cookies["slipway_session"].max_age == 3600
    session = session_of(done)
    me = panel.get("/api/auth/session", headers=cookie(session), expect=200).json
    assert parse_rfc3339(me["expires_at"]) == clock.now() + timedelta(hours=1)
    clock.advance(3599)
    panel.get("/api/services", headers=cookie(session), expect=200)
    clock.advance(2)
    panel.get("/api/services", headers=cookie(session), expect=401)
    sign_in(panel, secret, expect=401)  # the key is gone too


def test_the_session_ends_at_its_ttl_while_the_key_lives_on(make_app, key, clock):
    panel = ContractClient(make_app(session_ttl=60))
    _, secret = key("viewer", expires_at=clock.now() + timedelta(days=30))
    done = sign_in(panel, secret)
    assert done.cookies["slipway_session"].max_age == 60
    session = session_of(done)
    clock.advance(61)
    panel.get("/api/services", headers=cookie(session), expect=401)
    panel.get("/api/services", token=secret, expect=200)


def test_revoking_the_key_ends_its_sessions(panel, key):
    made, secret = key("viewer")
    _, admin = key("admin")
    session = session_of(sign_in(panel, secret))
    panel.get("/api/services", headers=cookie(session), expect=200)
    panel.delete(f"/api/v1/api-keys/{made.id}", token=admin, expect=204)
    refused = panel.get("/api/services", headers=cookie(session), expect=401)
    assert refused.json["error"]["code"] == "unauthorized"
    panel.get("/api/auth/session", headers=cookie(session), expect=401)


def test_logout_ends_the_session_and_not_the_key(panel, key):
    _, secret = key("viewer")
    session = session_of(sign_in(panel, secret))
    out = panel.post("/api/auth/logout", headers=cookie(session, **XRW), expect=204)
    assert out.headers["set-cookie"].startswith('slipway_session=""') and "1970" in out.headers["set-cookie"]
    panel.get("/api/services", headers=cookie(session), expect=401)
    panel.get("/api/services", token=secret, expect=200)  # the key still works
    again = session_of(sign_in(panel, secret))  # and signs in again
    panel.get("/api/services", headers=cookie(again), expect=200)
    # logging out with a live session needs the CSRF rule too
    panel.post("/api/auth/logout", headers=cookie(again), expect=403)
    panel.get("/api/services", headers=cookie(again), expect=200)


def test_signing_in_again_ends_the_browsers_previous_session(panel, key):
    _, first = key("viewer")
    _, second = key("admin")
    old = session_of(sign_in(panel, first))
    new = session_of(sign_in(panel, second, headers=cookie(old, **XRW)))
    panel.get("/api/services", headers=cookie(old), expect=401)
    assert panel.get("/api/auth/session", headers=cookie(new), expect=200).json["role"] == "admin"


def test_two_sessions_of_one_key_are_independent(panel, key):
    _, secret = key("viewer")
    one, two = session_of(sign_in(panel, secret)), session_of(sign_in(panel, secret))
    assert one != two
    panel.post("/api/auth/logout", headers=cookie(one, **XRW), expect=204)
    panel.get("/api/services", headers=cookie(one), expect=401)
    panel.get("/api/services", headers=cookie(two), expect=200)


def test_bad_keys_are_401_and_make_no_session(panel, key, store, clock):
    made, secret = key("viewer")
    revoked, revoked_secret = key("viewer")
    access.revoke_api_key(store.uow(), clock, revoked.id)
    _, expiring = key("viewer", expires_at=clock.now() + timedelta(seconds=10))
    clock.advance(11)
    wrong_secret = secret[:-4] + ("AAAA" if not secret.endswith("AAAA") else "BBBB")
    unknown = "slw_0123456789abcdef_" + "x" * 43
    for bad in ("nope", "Bearer " + secret, secret + " ", wrong_secret, unknown, revoked_secret, expiring):
        refused = sign_in(panel, bad, expect=401)
        assert refused.json["error"]["code"] == "unauthorized"
        assert "set-cookie" not in refused.headers
    assert key_sessions(store) == 0


@pytest.mark.parametrize("body, field", [
    ({}, "key"),
    ({"key": 5}, "key"),
    ({"key": None}, "key"),
    ({"key": ["slw_x"]}, "key"),
    ({"key": ""}, "key"),
    ({"key": "slw_" + "a" * 5000}, "key"),
    ({"key": "slw_x", "extra": 1}, None),
    ([], None),
    ("slw_x", None),
    (5, None),
])
def test_a_body_that_is_not_a_key_object_is_422(panel, store, body, field):
    refused = panel.post("/api/auth/key", body=json.dumps(body), headers={"Content-Type": "application/json", **XRW},
                         expect=422)
    assert refused.json["error"]["code"] == "validation_error" and refused.json["error"]["fields"]
    if field:
        assert field in refused.json["error"]["fields"]
    assert key_sessions(store) == 0


def test_malformed_oversized_or_non_json_bodies(panel, key):
    _, secret = key("viewer")
    assert panel.post("/api/auth/key", body="{key: nope", headers={"Content-Type": "application/json", **XRW},
                      expect=400).json["error"]["code"] == "bad_request"
    panel.post("/api/auth/key", body=f"key={secret}", expect=415,
               headers={"Content-Type": "application/x-www-form-urlencoded", **XRW})
    panel.post("/api/auth/key", body=json.dumps({"key": "x" * (1024 * 1024)}),
               headers={"Content-Type": "application/json", **XRW}, expect=413)


@pytest.mark.parametrize("headers, status", [
    ({}, 403),  # a cross-site form post carries neither
    ({"Origin": "http://evil.test"}, 403),
    ({"Origin": "null"}, 403),
    ({"Origin": "http://evil.test", "X-Requested-With": "slipway"}, 403),
    ({"X-Requested-With": "slipway"}, 204),
    ({"Origin": "http://falconframework.org"}, 204),  # no public URL: the request's own Host
    ({"Origin": "http://falconframework.org:8080"}, 403),  # another port is another origin
])
def test_csrf_rule_without_a_public_url(panel, key, store, headers, status):
    _, secret = key("admin")
    result = panel.post("/api/auth/key", json_body={"key": secret}, headers=headers, expect=status)
    if status == 403:
        assert result.json["error"]["code"] == "forbidden" and key_sessions(store) == 0


@pytest.mark.parametrize("origin, status", [
    ("https://panel.example", 204),
    ("https://PANEL.example:443", 204),
    ("http://panel.example", 403),  # another scheme
    ("http://falconframework.org", 403),  # with a public URL, the Host does not count
])
def test_csrf_rule_with_a_public_url(make_app, key, origin, status):
    panel = ContractClient(make_app(public_url="https://panel.example"))
    _, secret = key("admin")
    done = panel.post("/api/auth/key", json_body={"key": secret}, headers={"Origin": origin}, expect=status)
    if status == 204:
        assert done.cookies["__Host-slipway_session"].secure  # an https public URL: Secure, the __Host- name


def test_a_key_guessing_client_is_rate_limited_per_address(panel, key, store):
    _, secret = key("admin")
    for attempt in range(60):
        refused = sign_in(panel, f"slw_{attempt:016x}_" + "y" * 43, expect=401, remote_addr="203.0.113.9")
        assert refused.headers["x-ratelimit-limit"] == "60"
    limited = sign_in(panel, secret, expect=429, remote_addr="203.0.113.9")  # even the right key now
    assert limited.json["error"]["code"] == "rate_limited" and int(limited.headers["retry-after"]) >= 1
    assert key_sessions(store) == 0
    sign_in(panel, secret, remote_addr="203.0.113.10")  # another address is not affected


def test_key_sessions_work_alongside_oidc_login_settings(make_app, key):
    panel = ContractClient(make_app(oidc_issuer="http://idp.invalid", oidc_client_id="c",
                                    public_url="http://panel.test"))
    _, secret = key("viewer")
    session = session_of(sign_in(panel, secret, headers={"Origin": "http://panel.test"}))
    assert panel.get("/api/auth/session", headers=cookie(session), expect=200).json["key"] is not None


def test_openapi_json_is_the_served_yaml(panel, key):
    _, secret = key("viewer")
    session = session_of(sign_in(panel, secret))
    as_json = panel.get("/api/openapi.json", headers=cookie(session), expect=200)
    assert as_json.headers["content-type"].startswith("application/json")
    as_yaml = panel.get("/api/openapi.yaml", token=secret, expect=200)
    assert as_json.json == yaml.safe_load(as_yaml.text)
    assert "/api/auth/key" in as_json.json["paths"]
    methods = as_json.json["components"]["schemas"]["DeployMethod"]
    assert "compose" in json.dumps(methods)
    panel.get("/api/openapi.json", expect=401)
