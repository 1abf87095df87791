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
