"""Each API's credential sent to the other API: a panel key (``slw_...``) on the partner
API and a partner token (``pcp_...``) on the panel API are 401 with the decided code
(``unauthorized``), and the message says it is the other API's credential. Another bad
credential keeps the plain message."""
from __future__ import annotations

from app.http.errors import PANEL_KEY_ON_PARTNER_API, PARTNER_TOKEN_ON_PANEL_API
from core.panel import access

PARTNER_UNAUTHORIZED = "missing, malformed, unknown or revoked token"
PANEL_UNAUTHORIZED = "missing, malformed, unknown, expired or revoked API key"
XRW = {"X-Requested-With": "slipway"}


def _panel_key(store, clock) -> str:
    return access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=1000)[1]


def test_a_panel_key_on_the_partner_api_is_401_saying_it_is_the_panel_apis(client, store, clock):
    key = _panel_key(store, clock)
    result = client.get("/v1/me", token=key, expect=401)
    assert result.json == {"error": {"code": "unauthorized",
                                     "message": f"{PARTNER_UNAUTHORIZED}: {PANEL_KEY_ON_PARTNER_API}"}}
    assert "panel API key" in result.json["error"]["message"] and "pcp_" in result.json["error"]["message"]
    # a write operation alike (the gate answers before the body is read)
    clock.advance(5)  # keep the failed-auth brake out of this test
    created = client.post("/v1/customers", token=key, json_body={"name": "x"}, expect=401)
    assert created.json["error"]["message"].endswith(PANEL_KEY_ON_PARTNER_API)


def test_a_bad_partner_token_keeps_the_plain_401(client, clock):
    for token in ("pcp_" + "A" * 43, "xyz_" + "A" * 43):
        clock.advance(5)
        result = client.get("/v1/me", token=token, expect=401)
        assert result.json == {"error": {"code": "unauthorized", "message": PARTNER_UNAUTHORIZED}}


def test_a_partner_token_on_the_panel_api_is_401_saying_it_is_the_partner_apis(client, world):
    _, secret = world.token(world.partner())
    result = client.get("/api/services", token=secret, expect=401)
    assert result.json == {"error": {"code": "unauthorized",
                                     "message": f"{PANEL_UNAUTHORIZED}: {PARTNER_TOKEN_ON_PANEL_API}"}}
    assert "partner token" in result.json["error"]["message"] and "slw_" in result.json["error"]["message"]
    # the partner token still works where it belongs
    client.get("/v1/me", token=secret, expect=200)


def test_a_partner_token_given_to_the_key_sign_in_is_401_saying_so(client, world):
    _, secret = world.token(world.partner())
    result = client.post("/api/auth/key", json_body={"key": secret}, headers=XRW, expect=401)
    assert result.json["error"]["code"] == "unauthorized"
    assert result.json["error"]["message"].endswith(PARTNER_TOKEN_ON_PANEL_API)


def test_a_bad_panel_key_keeps_the_plain_401(client):
    result = client.get("/api/services", token="slw_" + "0" * 16 + "_" + "A" * 40, expect=401)
    assert result.json == {"error": {"code": "unauthorized", "message": PANEL_UNAUTHORIZED}}
