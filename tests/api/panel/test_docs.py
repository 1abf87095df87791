"""``GET /api/docs``: the browser documentation, served offline, behind authentication."""
from __future__ import annotations

import re

from core.panel import access


def _admin(store, clock):
    return access.create_api_key(store.uow(), clock, name="docs", role="admin", rate_limit_rpm=1000)[1]


def test_docs_page_needs_authentication_and_renders_the_contract(client, store, clock):
    client.get("/api/docs", expect=401)
    key = _admin(store, clock)
    page = client.get("/api/docs", token=key, expect=200)
    assert page.headers["content-type"].startswith("text/html")
    assert "X-RateLimit-Remaining" in page.headers
    assert 'url: "/api/openapi.yaml"' in page.text
    # every script and style sheet the page loads is served here, not from a CDN
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert assets and all(a.startswith("/api/docs/assets/") for a in assets)
    for asset in assets:
        served = client.get(asset, token=key, expect=200)
        assert len(served.content) > 100
    js = client.get("/api/docs/assets/swagger-ui-bundle.js", token=key, expect=200)
    assert js.headers["content-type"].startswith("text/javascript")
    assert "SwaggerUIBundle" in js.text


def test_docs_assets_need_a_key_and_unknown_ones_are_404(client, store, clock):
    client.get("/api/docs/assets/swagger-ui.css", expect=401)
    key = _admin(store, clock)
    for name in ("nope.js", "LICENSE", "..%2Fsetup.cfg", "swagger-editor.js"):
        result = client.get(f"/api/docs/assets/{name}", token=key, expect=404)
        assert result.json["error"]["code"] == "not_found"


BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


def test_a_browser_signed_out_is_sent_to_the_sign_in_and_back(client, store, clock):
    sent = client.get("/api/docs", headers={"Accept": BROWSER}, expect=303)
    assert sent.headers["location"] == "/sign-in?next=%2Fapi%2Fdocs"
    assert sent.headers["cache-control"] == "no-store"
    assert "X-RateLimit-Remaining" in sent.headers
    # a session that ended (an unknown cookie) is sent there too
    sent = client.get("/api/docs", headers={"Accept": BROWSER, "Cookie": "slipway_session=gone"}, expect=303)
    assert sent.headers["location"] == "/sign-in?next=%2Fapi%2Fdocs"


def test_api_clients_signed_out_keep_the_json_401(client, store, clock):
    for accept in ("application/json", "*/*", "application/json, text/html"):
        refused = client.get("/api/docs", headers={"Accept": accept}, expect=401)
        assert refused.json["error"]["code"] == "unauthorized"
    # a request with a (bad) key is a script, never sent to a page
    refused = client.get("/api/docs", headers={"Accept": BROWSER, "Authorization": "Bearer slw_nope"}, expect=401)
    assert refused.json["error"]["code"] == "unauthorized"
    # two session cookies: signing in again would not help, so the 401 says what to do
    refused = client.get("/api/docs", headers={"Accept": BROWSER, "Cookie": "slipway_session=a; slipway_session=b"},
                         expect=401)
    assert "two session cookies" in refused.json["error"]["message"]
    # the assets and the contract are not pages: their 401 stays
    client.get("/api/docs/assets/swagger-ui.css", headers={"Accept": BROWSER}, expect=401)
    client.get("/api/openapi.yaml", headers={"Accept": BROWSER}, expect=401)


def test_the_401_without_oidc_names_no_login_route_that_is_404(client):
    refused = client.get("/api/docs", headers={"Accept": "application/json"}, expect=401)
    message = refused.json["error"]["message"]
    assert "/api/auth/login" not in message and "POST /api/auth/key" in message
    client.get("/api/auth/login", expect=404)
