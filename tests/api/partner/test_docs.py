"""``GET /v1/docs``: the partner contract's browser documentation, with no token, like
``/v1/openapi.yaml``, served offline."""
from __future__ import annotations

import re


def test_the_partner_docs_need_no_token_and_render_the_partner_contract(client):
    page = client.get("/v1/docs", expect=200)
    assert page.headers["content-type"].startswith("text/html")
    assert 'url: "/v1/openapi.yaml"' in page.text
    assert "Slipway partner API" in page.text
    # every script and style sheet the page loads is served here without a token, not from a CDN
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert assets and all(a.startswith("/v1/docs/assets/") for a in assets)
    for asset in assets:
        assert len(client.get(asset, expect=200).content) > 100
    js = client.get("/v1/docs/assets/swagger-ui-bundle.js", expect=200)
    assert js.headers["content-type"].startswith("text/javascript")
    client.get("/v1/openapi.yaml", expect=200)


def test_unknown_partner_docs_assets_are_404(client):
    for name in ("nope.js", "LICENSE", "..%2Fsetup.cfg", "swagger-editor.js"):
        result = client.get(f"/v1/docs/assets/{name}", expect=404)
        assert result.json["error"]["code"] == "not-found"
