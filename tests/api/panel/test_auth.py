"""Panel API: browser login through an OIDC identity provider (a real fake one on loopback),
session cookies, the CSRF rule, precedence of keys, and every documented refusal (each
creates no session). Responses are held to the contract."""
from __future__ import annotations

import socket
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from core.panel import access, customers as panel_customers, sessions as panel_sessions
from tests.support.contract_client import ContractClient
from tests.fixtures.fake_oidc import FakeOIDC

PUBLIC = "http://panel.test"
CLIENT, SECRET = "slipway-panel", "s3cret"
EMAIL = "ada@example.com"


@pytest.fixture
def idp(clock):
    with FakeOIDC(client_id=CLIENT, client_secret=SECRET, redirect_uri=PUBLIC + "/api/auth/callback",
                  now=lambda: clock.now().timestamp()) as fake:
        fake.user = {"sub": "u-ada", "email": EMAIL, "email_verified": True}
        yield fake


def login_config(idp, **overrides):
    return dict(dict(oidc_issuer=idp.issuer, oidc_client_id=CLIENT, oidc_client_secret=SECRET, public_url=PUBLIC),
                **overrides)


@pytest.fixture
def panel(make_app, idp):
    return ContractClient(make_app(**login_config(idp)))


@pytest.fixture
def user(store, clock):
    def make(email=EMAIL, role="admin", customer_id=None):
        return panel_sessions.set_user(store.uow(), clock, email=email, role=role, customer_id=customer_id)

    return make


def sessions(store) -> int:
    with store.db.connection_context():
        return store.models.PanelSession.select().count()


def begin(panel, **params):
    """GET /api/auth/login; returns the state cookie and the provider URL."""
    result = panel.get("/api/auth/login", params=params or None, expect=302)
    return result.cookies["slipway_login"].value, result.headers["location"]


def at_provider(url) -> dict:
    """The browser at the provider (auto-approve): the query it is sent back with."""
    answer = httpx.get(url, timeout=10)
    assert answer.status_code == 302, answer.text
    back = answer.headers["location"]
    assert back.startswith(PUBLIC + "/api/auth/callback?")
    return {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}


def callback(panel, query, state_cookie, expect=None):
    return panel.get("/api/auth/callback", params=query, headers={"Cookie": f"slipway_login={state_cookie}"},
                     expect=expect)


def login(panel, **params) -> str:
    state, url = begin(panel, **params)
    done = callback(panel, at_provider(url), state, expect=302)
    return done.cookies["slipway_session"].value


def cookie(secret, **headers):
    return {"Cookie": f"slipway_session={secret}", **headers}


# --- the flow --------------------------------------------------------------------------------

def test_login_redirects_with_state_nonce_and_pkce(panel, idp):
    state, url = begin(panel, next="/api/services?page=2")
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == idp.issuer + "/authorize"
    q = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert q["state"] == state and q["client_id"] == CLIENT and q["response_type"] == "code"
    assert q["redirect_uri"] == PUBLIC + "/api/auth/callback" and "openid" in q["scope"].split()
    assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43 and len(q["nonce"]) >= 32
    result = panel.get("/api/auth/login", expect=302)
    assert "HttpOnly" in result.headers["set-cookie"] and "SameSite=Lax" in result.headers["set-cookie"]
    assert "Secure" not in result.headers["set-cookie"]  # the public URL is http
    assert result.headers["x-ratelimit-limit"] == "60"  # per-address tier, no credentials needed


def test_full_login_then_the_cookie_alone_authenticates(panel, idp, user, store):
    user()
    state, url = begin(panel, next="/api/services")
    done = callback(panel, at_provider(url), state, expect=302)
    assert done.headers["location"] == "/api/services"
    made = done.cookies["slipway_session"]
    assert made.http_only and made.same_site == "Lax" and made.path == "/api" and made.max_age == 28800
    assert not made.secure  # the public URL is http
    assert done.cookies["slipway_login"].value == ""  # the login's state cookie is cleared
    secret = made.value
    with store.db.connection_context():
        row = store.models.PanelSession.get()
        assert secret not in str(row.__data__)  # only the hash is stored
    me = panel.get("/api/auth/session", headers=cookie(secret), expect=200).json
    assert me["email"] == EMAIL and me["role"] == "admin" and me["customer_id"] is None and me["key"] is None
    assert "api_keys:manage" in me["permissions"]
    listed = panel.get("/api/services", headers=cookie(secret), expect=200)
    assert listed.headers["x-ratelimit-limit"] == "120"  # the session tier
    assert int(listed.headers["x-ratelimit-remaining"]) < 120
    # the token endpoint got the PKCE verifier and the client authenticated
    assert idp.token_requests[-1]["code_verifier"] and idp.token_requests[-1]["grant_type"] == "authorization_code"


def test_default_next_is_the_docs(panel, user):
    user()
    state, url = begin(panel)
    assert callback(panel, at_provider(url), state, expect=302).headers["location"] == "/api/docs"


def test_logout_revokes_the_session(panel, user):
    user()
    secret = login(panel)
    out = panel.post("/api/auth/logout", headers=cookie(secret, Origin=PUBLIC), expect=204)
    assert out.headers["set-cookie"].startswith('slipway_session=""') and "1970" in out.headers["set-cookie"]
    refused = panel.get("/api/services", headers=cookie(secret), expect=401)
    assert refused.json["error"]["code"] == "unauthorized"
    panel.get("/api/auth/session", headers=cookie(secret), expect=401)
    panel.post("/api/auth/logout", expect=204)  # nothing to end: still 204


def test_sessions_expire(panel, user, clock):
    user()
    secret = login(panel)
    clock.advance(28800 - 1)
    panel.get("/api/templates", headers=cookie(secret), expect=200)
    clock.advance(1)
    panel.get("/api/templates", headers=cookie(secret), expect=401)


def test_session_ttl_is_configurable(make_app, idp, user):
    user()
    panel = ContractClient(make_app(**login_config(idp, session_ttl=60)))
    state, url = begin(panel)
    assert callback(panel, at_provider(url), state, expect=302).cookies["slipway_session"].max_age == 60


def test_the_session_follows_the_users_current_role(panel, user):
    user(role="admin")
    secret = login(panel)
    panel.post("/api/customers", headers=cookie(secret, Origin=PUBLIC), json_body={"name": "A"}, expect=201)
    user(role="viewer")
    denied = panel.post("/api/customers", headers=cookie(secret, Origin=PUBLIC), json_body={"name": "B"},
                        expect=403)
    assert "session" in denied.json["error"]["message"]
    assert panel.get("/api/auth/session", headers=cookie(secret), expect=200).json["role"] == "viewer"


def test_a_customer_user_sees_only_its_customers_services(panel, user, store, clock):
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    other = panel_customers.create_customer(store.uow(), clock, name="Other")
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=1000)[1]
    made = {}
    for name, customer in (("mine", acme), ("theirs", other)):
        made[name] = panel.post("/api/services", token=admin, json_body={
            "name": name, "customer_id": customer.id, "deploy_method": "template",
            "template_id": "static-site"}, expect=201).json
    user(role="customer", customer_id=acme.id)
    secret = login(panel)
    assert panel.get("/api/auth/session", headers=cookie(secret), expect=200).json["customer_id"] == acme.id
    listed = panel.get("/api/services", headers=cookie(secret), expect=200).json
    assert [s["name"] for s in listed["data"]] == ["mine"] and listed["total"] == 1
    panel.get(f"/api/services/{made['theirs']['id']}", headers=cookie(secret), expect=404)
    panel.get(f"/api/services/{made['mine']['id']}", headers=cookie(secret), expect=200)
    panel.get("/api/customers", headers=cookie(secret), expect=403)
    # the deploy tier counts per session: its 10/min bucket is the tightest one
    created = panel.post("/api/services", headers=cookie(secret, Origin=PUBLIC), json_body={
        "name": "new", "customer_id": acme.id, "deploy_method": "template", "template_id": "static-site"},
        expect=201)
    assert created.headers["x-ratelimit-limit"] == "10"


# --- CSRF and precedence -------------------------------------------------------------------

@pytest.mark.parametrize("headers, status", [
    ({}, 403),
    ({"Origin": "http://evil.test"}, 403),
    ({"Origin": "null"}, 403),
    ({"Origin": "http://evil.test", "X-Requested-With": "XMLHttpRequest"}, 403),
    ({"Origin": "https://panel.test"}, 403),  # another scheme is another origin
    ({"Origin": PUBLIC}, 201),
    ({"Origin": "http://PANEL.test:80"}, 201),  # the same origin, spelled out
    ({"X-Requested-With": "XMLHttpRequest"}, 201),
])
def test_csrf_rule_for_cookie_authenticated_writes(panel, user, headers, status):
    user()
    secret = login(panel)
    result = panel.post("/api/customers", headers=cookie(secret, **headers), json_body={"name": "C"},
                        expect=status)
    if status == 403:
        assert result.json["error"]["code"] == "forbidden" and "cross-site" in result.json["error"]["message"]


def test_csrf_rule_does_not_touch_reads_or_keys(panel, user, store, clock):
    user()
    secret = login(panel)
    panel.get("/api/customers", headers=cookie(secret, Origin="http://evil.test"), expect=200)
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=1000)[1]
    panel.post("/api/customers", token=admin, headers={"Origin": "http://evil.test"}, json_body={"name": "K"},
               expect=201)


def test_cross_site_logout_is_refused_and_the_session_lives(panel, user):
    user()
    secret = login(panel)
    panel.post("/api/auth/logout", headers=cookie(secret, Origin="http://evil.test"), expect=403)
    panel.get("/api/auth/session", headers=cookie(secret), expect=200)
    panel.post("/api/auth/logout", headers=cookie(secret, **{"X-Requested-With": "fetch"}), expect=204)
    panel.get("/api/auth/session", headers=cookie(secret), expect=401)


def test_a_bearer_key_takes_precedence_over_the_cookie(panel, user, store, clock):
    user(role="admin")
    secret = login(panel)
    viewer = access.create_api_key(store.uow(), clock, name="v", role="viewer", rate_limit_rpm=1000)[1]
    # the key decides: a viewer may not create customers although the session may
    panel.post("/api/customers", token=viewer, headers=cookie(secret), json_body={"name": "X"}, expect=403)
    # a bad key is 401 even with a good cookie
    panel.get("/api/templates", headers=cookie(secret, Authorization="Bearer slw_0123456789abcdef_" + "A" * 40),
              expect=401)
    # the session endpoint describes the cookie's session whatever key comes along
    assert panel.get("/api/auth/session", token=viewer, headers=cookie(secret), expect=200).json["email"] == EMAIL
    refused = panel.get("/api/auth/session", token=viewer, expect=401)
    assert "no browser session" in refused.json["error"]["message"]


def test_garbage_cookies_are_401(panel):
    for value in ("", "x", "A" * 43, "é" * 10, "A" * 300):
        panel.get("/api/templates", headers={"Cookie": f"slipway_session={value}"}, expect=401)
    panel.get("/api/auth/session", expect=401)


# --- refusals: each is the documented error and creates no session ---------------------------

def test_callback_without_the_browsers_state_cookie_is_400(panel, user, store):
    user()
    state, url = begin(panel)
    query = at_provider(url)
    missing = panel.get("/api/auth/callback", params=query, expect=400)
    assert missing.json["error"]["code"] == "bad_request"
    callback(panel, query, "another-browsers-state", expect=400)
    callback(panel, dict(query, state="forged"), "forged", expect=400)  # both forged: unknown to the panel
    assert sessions(store) == 0
    callback(panel, query, state, expect=302)  # the real one still works once ...
    callback(panel, query, state, expect=400)  # ... and only once
    assert sessions(store) == 1


def test_an_expired_login_state_is_400(panel, user, store, clock):
    user()
    state, url = begin(panel)
    query = at_provider(url)
    clock.advance(601)
    assert "expired" in callback(panel, query, state, expect=400).json["error"]["message"]
    assert sessions(store) == 0


def test_a_replayed_code_is_refused_by_the_provider_401(panel, user, store, idp):
    user()
    state, url = begin(panel)
    first = at_provider(url)
    callback(panel, first, state, expect=302)
    assert sessions(store) == 1
    state2, url2 = begin(panel)
    at_provider(url2)
    replay = callback(panel, {"code": first["code"], "state": state2}, state2, expect=401)
    assert replay.json["error"]["code"] == "unauthorized" and "invalid_grant" in replay.json["error"]["message"]
    assert sessions(store) == 1


@pytest.mark.parametrize("claims, sign_with, says", [
    ({"nonce": "not-the-login-nonce"}, "key", "nonce"),
    ({"nonce": None}, "key", "nonce"),
    ({"aud": "someone-else"}, "key", "aud"),
    ({"aud": ["someone-else", "another"]}, "key", "aud"),
    ({"iss": "http://evil.test"}, "key", "iss"),
    ("expired", "key", "expired"),
    ("future", "key", "iat"),
    ({}, "other", "bad signature"),
])
def test_an_id_token_that_does_not_hold_is_401(panel, user, store, idp, clock, claims, sign_with, says):
    user()
    now = int(clock.now().timestamp())
    if claims == "expired":
        claims = {"iat": now - 4000, "exp": now - 3600}
    elif claims == "future":
        claims = {"iat": now + 3600, "exp": now + 7200}
    idp.claims, idp.sign_with = claims, sign_with
    state, url = begin(panel)
    refused = callback(panel, at_provider(url), state, expect=401)
    assert refused.json["error"]["code"] == "unauthorized"
    assert says in refused.json["error"]["message"], refused.json
    assert sessions(store) == 0


def test_an_unknown_email_is_403(panel, user, store, idp):
    user(email="someone-else@example.com")
    state, url = begin(panel)
    refused = callback(panel, at_provider(url), state, expect=403)
    assert refused.json["error"]["code"] == "forbidden" and "not a panel user" in refused.json["error"]["message"]
    assert sessions(store) == 0


@pytest.mark.parametrize("claims", [{"email_verified": False}, {"email_verified": None}, {"email": None}])
def test_an_unverified_or_missing_email_is_403(panel, user, store, idp, claims):
    user()
    idp.claims = claims
    state, url = begin(panel)
    callback(panel, at_provider(url), state, expect=403)
    assert sessions(store) == 0


def test_emails_match_without_case(panel, user, idp):
    user(email="Ada@Example.com")
    idp.user = dict(idp.user, email="ADA@example.COM")
    login(panel)


def test_a_login_the_provider_refused_is_401(panel, user, store, idp):
    user()
    idp.deny = True
    state, url = begin(panel)
    query = at_provider(url)
    assert query["error"] == "access_denied"
    refused = callback(panel, query, state, expect=401)
    assert "access_denied" in refused.json["error"]["message"]
    callback(panel, {"state": begin(panel)[0]}, "x", expect=400)
    assert sessions(store) == 0


def test_a_callback_without_a_code_is_400(panel, user, store):
    user()
    state, _ = begin(panel)
    refused = callback(panel, {"state": state}, state, expect=400)
    assert refused.json["error"]["fields"] == {"code": "is required"}


def test_wrong_client_credentials_are_401(make_app, idp, user, store):
    user()
    panel = ContractClient(make_app(**login_config(idp, oidc_client_secret="wrong")))
    state, url = begin(panel)
    refused = callback(panel, at_provider(url), state, expect=401)
    assert "invalid_client" in refused.json["error"]["message"]
    assert sessions(store) == 0


@pytest.mark.parametrize("target", ["//evil.test/x", "https://evil.test/", "relative/path", "/\\evil.test",
                                    "/with space"])
def test_next_must_be_a_path_on_the_panel(panel, target):
    refused = panel.get("/api/auth/login", params={"next": target}, expect=400)
    assert refused.json["error"]["code"] == "bad_request" and "next" in refused.json["error"]["fields"]


def test_an_unreachable_provider_is_503(make_app, user, store, clock):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    panel = ContractClient(make_app(oidc_issuer=f"http://127.0.0.1:{closed}", oidc_client_id=CLIENT,
                                    oidc_client_secret=SECRET, public_url=PUBLIC))
    refused = panel.get("/api/auth/login", expect=503)
    assert refused.json["error"]["code"] == "internal_error"
    with store.db.connection_context():
        assert store.models.PanelLogin.select().count() == 0  # nothing stored


def test_login_not_configured_is_404_and_keys_still_work(client, store, clock, user):
    user()
    for method, path in (("GET", "/api/auth/login"), ("GET", "/api/auth/callback")):
        refused = client.request(method, path, expect=404)
        assert refused.json["error"]["code"] == "not_found" and "not configured" in refused.json["error"]["message"]
    client.post("/api/auth/logout", expect=204)  # signing out needs no OIDC (key sessions, POST /api/auth/key)
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=1000)[1]
    client.get("/api/auth/session", expect=401)
    assert "no browser session" in client.get("/api/auth/session", token=admin, expect=401).json["error"]["message"]
    client.get("/api/templates", token=admin, expect=200)


def test_cookies_count_only_while_login_is_configured(make_app, idp, user, store):
    user()
    secret = login(ContractClient(make_app(**login_config(idp))))
    without_login = ContractClient(make_app())
    without_login.get("/api/templates", headers=cookie(secret), expect=401)


def test_the_login_flow_is_rate_limited_per_address(panel):
    for _ in range(60):
        panel.get("/api/auth/login", params={"next": "//bad"}, remote_addr="10.0.0.9", expect=400)
    limited = panel.get("/api/auth/login", remote_addr="10.0.0.9", expect=429)
    assert limited.json["error"]["code"] == "rate_limited" and limited.headers["retry-after"]
    panel.get("/api/auth/login", remote_addr="10.0.0.10", expect=302)


def test_cookies_are_secure_behind_an_https_public_url(make_app, idp, user):
    user()
    idp.redirect_uri = "https://panel.test/api/auth/callback"
    panel = ContractClient(make_app(**login_config(idp, public_url="https://panel.test")))
    started = panel.get("/api/auth/login", expect=302)
    assert started.cookies["slipway_login"].secure
    answer = httpx.get(started.headers["location"], timeout=10)
    query = {k: v[0] for k, v in parse_qs(urlsplit(answer.headers["location"]).query).items()}
    done = callback(panel, query, started.cookies["slipway_login"].value, expect=302)
    made = done.cookies["__Host-slipway_session"]  # an https public URL: the __Host- name, Secure, Path=/
    assert made.secure and made.path == "/" and made.http_only and made.same_site == "Lax"
    assert done.cookies["slipway_session"].value == ""  # a plain one kept from before is cleared
    secret = made.value
    host = {"Cookie": f"__Host-slipway_session={secret}"}
    panel.post("/api/customers", headers={**host, "Origin": "http://panel.test"}, json_body={"name": "C"},
               expect=403)
    panel.post("/api/customers", headers={**host, "Origin": "https://panel.test"}, json_body={"name": "C"},
               expect=201)
