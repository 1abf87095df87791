"""Browser login end to end: `slipway serve` (uvicorn) in its own process, a fake OIDC
provider on loopback, httpx as the browser (it follows the redirects and keeps cookies),
and the operator's `slipway user set`."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.fixtures.fake_oidc import FakeOIDC
from tests.support.database import POSTGRES, _reset_postgres
from tests.support.http import wait_answering
from tests.support.processes import free_port, read_output, slipway

pytestmark = pytest.mark.storage  # browser sessions and users live in the database

CLIENT, SECRET = "slipway-panel", "s3cret"
ADA = "ada@example.com"


def _serve(url, port, extra_env):
    env = dict(os.environ, SLIPWAY_DATABASE_URL=url, SLIPWAY_DEPLOY_WORKER="0", SLIPWAY_BILLING_INTERVAL="0",
               **extra_env)
    for name in ("SLIPWAY_OIDC_ISSUER", "SLIPWAY_OIDC_CLIENT_ID", "SLIPWAY_OIDC_CLIENT_SECRET",
                 "SLIPWAY_PUBLIC_URL"):
        if name not in extra_env:
            env.pop(name, None)
    log = tempfile.TemporaryFile(mode="w+")  # one access line per request: a pipe nobody reads would fill
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=log, text=True)
    wait_answering(f"http://127.0.0.1:{port}/api/auth/session", alive=lambda: proc.poll() is None, seconds=30,
                   said=lambda: read_output(log))
    return proc


def _stop(proc):
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def idp():
    with FakeOIDC(client_id=CLIENT, client_secret=SECRET) as fake:
        yield fake


@pytest.fixture(scope="module")
def server(tmp_path_factory, idp):
    if POSTGRES:
        url = os.environ["SLIPWAY_DATABASE_URL"]
        _reset_postgres(url)
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('oidc') / 'slipway.db'}"
    slipway(url, "init")
    _, key = slipway(url, "apikey", "create", "--name", "ops", "--role", "admin", "--rate-limit-rpm", "10000")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    idp.redirect_uri = base + "/api/auth/callback"
    proc = _serve(url, port, {"SLIPWAY_OIDC_ISSUER": idp.issuer, "SLIPWAY_OIDC_CLIENT_ID": CLIENT,
                              "SLIPWAY_OIDC_CLIENT_SECRET": SECRET, "SLIPWAY_PUBLIC_URL": base})
    try:
        yield SimpleNamespace(url=url, base=base, admin={"Authorization": f"Bearer {key['key']}"})
    finally:
        _stop(proc)


@pytest.fixture(autouse=True)
def fresh_idp(request):
    if "idp" not in request.fixturenames:
        yield
        return
    idp = request.getfixturevalue("idp")
    idp.user = {"sub": "u-ada", "email": ADA, "email_verified": True}
    idp.claims, idp.sign_with, idp.deny = {}, "key", False
    yield


def sessions(url) -> int:
    from app.storage.store import Store

    store = Store(url, threads=1)
    try:
        with store.db.connection_context():
            return store.models.PanelSession.select().count()
    finally:
        store.close()


def browser(server) -> httpx.Client:
    return httpx.Client(base_url=server.base, follow_redirects=True, timeout=10)


def by_hand(server):
    """A login step by step: (browser, state, the callback query the provider sent back)."""
    client = httpx.Client(base_url=server.base, timeout=10)
    start = client.get("/api/auth/login")
    assert start.status_code == 302, start.text
    back = httpx.get(start.headers["location"], timeout=10)
    assert back.status_code == 302
    query = {k: v[0] for k, v in parse_qs(urlsplit(back.headers["location"]).query).items()}
    return client, client.cookies["slipway_login"], query


def test_login_then_the_cookie_alone_authenticates_until_logout(server, idp):
    slipway(server.url, "user", "set", "--email", ADA, "--role", "admin")
    with browser(server) as client:
        landed = client.get("/api/auth/login", params={"next": "/api/services"})
        assert [r.status_code for r in landed.history] == [302, 302, 302]
        assert landed.history[1].url.host == "127.0.0.1" and str(landed.history[1].url).startswith(idp.issuer)
        assert landed.status_code == 200 and landed.url.path == "/api/services"
        secret = client.cookies["slipway_session"]
    only_cookie = {"Cookie": f"slipway_session={secret}"}
    services = httpx.get(f"{server.base}/api/services", headers=only_cookie, timeout=10)
    assert services.status_code == 200 and services.json()["page"] == 1
    assert services.headers["x-ratelimit-limit"] == "120"
    assert {"x-ratelimit-remaining", "x-ratelimit-reset"} <= set(services.headers)
    me = httpx.get(f"{server.base}/api/auth/session", headers=only_cookie, timeout=10)
    assert me.status_code == 200 and me.json()["email"] == ADA and me.json()["role"] == "admin"
    docs = httpx.get(f"{server.base}/api/openapi.yaml", headers=only_cookie, timeout=10)
    assert docs.status_code == 200 and "/api/auth/login" in docs.text

    out = httpx.post(f"{server.base}/api/auth/logout", headers={**only_cookie, "Origin": server.base}, timeout=10)
    assert out.status_code == 204
    after = httpx.get(f"{server.base}/api/services", headers=only_cookie, timeout=10)
    assert after.status_code == 401 and after.json()["error"]["code"] == "unauthorized"
    assert httpx.get(f"{server.base}/api/auth/session", headers=only_cookie, timeout=10).status_code == 401


@pytest.mark.parametrize("case, status, says", [
    ("wrong nonce", 401, "nonce"),
    ("other audience", 401, "aud"),
    ("expired", 401, "expired"),
    ("bad signature", 401, "bad signature"),
    ("unknown email", 403, "not a panel user"),
])
def test_refused_logins_create_no_session(server, idp, case, status, says):
    slipway(server.url, "user", "set", "--email", ADA, "--role", "viewer")
    now = int(time.time())
    if case == "wrong nonce":
        idp.claims = {"nonce": "another-login"}
    elif case == "other audience":
        idp.claims = {"aud": "another-client"}
    elif case == "expired":
        idp.claims = {"iat": now - 7200, "exp": now - 3600}
    elif case == "bad signature":
        idp.sign_with = "other"
    else:
        idp.user = dict(idp.user, email="mallory@example.com")
    before = sessions(server.url)
    client, state, query = by_hand(server)
    refused = client.get("/api/auth/callback", params=query)
    assert refused.status_code == status, refused.text
    assert refused.json()["error"]["code"] == {401: "unauthorized", 403: "forbidden"}[status]
    assert says in refused.json()["error"]["message"]
    assert "slipway_session" not in client.cookies and sessions(server.url) == before


def test_bad_state_and_replayed_code(server, idp):
    slipway(server.url, "user", "set", "--email", ADA, "--role", "viewer")
    before = sessions(server.url)
    client, state, query = by_hand(server)
    forged = client.get("/api/auth/callback", params=dict(query, state="forged"))
    assert forged.status_code == 400 and forged.json()["error"]["code"] == "bad_request"
    assert client.get("/api/auth/callback", params=query).status_code == 302  # the real state, once
    assert sessions(server.url) == before + 1
    again, state2, _ = by_hand(server)
    replayed = again.get("/api/auth/callback", params={"code": query["code"], "state": state2})
    assert replayed.status_code == 401 and "invalid_grant" in replayed.json()["error"]["message"]
    assert sessions(server.url) == before + 1


def test_csrf_and_a_customer_users_scope(server, idp):
    made = {}
    for name in ("Acme", "Other"):
        created = httpx.post(f"{server.base}/api/customers", headers=server.admin, json={"name": name}, timeout=10)
        assert created.status_code == 201
        made[name] = created.json()["id"]
        service = httpx.post(f"{server.base}/api/services", headers=server.admin, timeout=10, json={
            "name": f"site-{name.lower()}", "customer_id": made[name], "deploy_method": "template",
            "template_id": "static-site"})
        assert service.status_code == 201, service.text
    slipway(server.url, "user", "set", "--email", ADA, "--role", "customer", "--customer-id", made["Acme"])
    with browser(server) as client:
        assert client.get("/api/auth/login", params={"next": "/api/auth/session"}).json()["customer_id"] == made["Acme"]
        listed = client.get("/api/services").json()
        assert [s["name"] for s in listed["data"]] == ["site-acme"]
        body = {"name": "site-new", "customer_id": made["Acme"], "deploy_method": "template",
                "template_id": "static-site"}
        cross_site = client.post("/api/services", json=body, headers={"Origin": "http://evil.example"})
        assert cross_site.status_code == 403 and cross_site.json()["error"]["code"] == "forbidden"
        assert client.post("/api/services", json=body).status_code == 403  # neither Origin nor X-Requested-With
        same_site = client.post("/api/services", json=body, headers={"Origin": server.base})
        assert same_site.status_code == 201 and same_site.headers["x-ratelimit-limit"] == "10"
        other = client.post("/api/services", json=dict(body, name="site-x", customer_id=made["Other"]),
                            headers={"X-Requested-With": "XMLHttpRequest"})
        assert other.status_code == 403, other.text  # its own customer only


def test_login_not_configured_is_404(server):
    port = free_port()
    proc = _serve(server.url, port, {})  # the same database, a server without SLIPWAY_OIDC_ISSUER
    try:
        for method, path in (("GET", "/api/auth/login"), ("GET", "/api/auth/callback")):
            answer = httpx.request(method, f"http://127.0.0.1:{port}{path}", timeout=10)
            assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
            assert "not configured" in answer.json()["error"]["message"]
        # signing out needs no OIDC: it also ends key sessions (POST /api/auth/key)
        assert httpx.post(f"http://127.0.0.1:{port}/api/auth/logout", timeout=10).status_code == 204
        keyed = httpx.get(f"http://127.0.0.1:{port}/api/services", headers=server.admin, timeout=10)
        assert keyed.status_code == 200  # API keys keep working
    finally:
        _stop(proc)
