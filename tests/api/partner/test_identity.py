"""Partner API: the contract, GET /me, tokens and the 401/403 rules."""
from __future__ import annotations

import hashlib

import yaml

from tests.support.partners import UUID_RE

UNAUTHORIZED = "missing, malformed, unknown or revoked token"


def test_contract_served_without_token(client):
    result = client.get("/v1/openapi.yaml", expect=200)
    assert result.headers["content-type"].startswith("application/yaml")
    document = yaml.safe_load(result.text)
    assert document["openapi"].startswith("3.0")
    assert "/me" in document["paths"]


def test_me_returns_the_partner_and_scope(client, world):
    partner = world.partner("Acme Hosting")
    _, secret = world.token(partner, scope="read")
    body = client.get("/v1/me", token=secret, expect=200).json
    assert body == {"partnerId": partner.id, "name": "Acme Hosting", "type": "reseller", "scope": "read"}


def test_me_of_a_root_partner(client, world):
    root = world.partner("Operator", type="root")
    _, secret = world.token(root)
    assert client.get("/v1/me", token=secret, expect=200).json["type"] == "root"


def _assert_unauthorized(result):
    assert result.status_code == 401
    assert result.json == {"error": {"code": "unauthorized", "message": UNAUTHORIZED}}


def test_missing_malformed_and_unknown_tokens_are_401(client, world, clock):
    partner = world.partner()
    _, secret = world.token(partner)
    cases = [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": f"Basic {secret}"},
        {"Authorization": "Bearer pcp_short"},
        {"Authorization": "Bearer " + secret.replace("pcp_", "xyz_")},
        {"Authorization": "Bearer " + secret[:-1] + ("A" if secret[-1] != "A" else "B")},
        {"Authorization": "Bearer pcp_" + "!" * 40},
    ]
    for headers in cases:
        clock.advance(5)  # keep the failed-auth brake out of this test
        _assert_unauthorized(client.get("/v1/me", headers=headers))


def test_token_lifecycle(client, world, store, clock):
    partner = world.partner()
    creator, secret = world.token(partner, label="ci")
    clock.advance(1)
    created = client.post("/v1/tokens", token=secret, json_body={"label": "deploy bot", "scope": "read"},
                          expect=201).json
    assert UUID_RE.match(created["id"])
    assert created["partnerId"] == partner.id
    assert created["label"] == "deploy bot" and created["scope"] == "read"
    assert created["token"].startswith("pcp_") and len(created["token"]) >= 36
    assert created["tokenPrefix"] == created["token"][4:12]
    assert created["createdBy"] == creator.id
    assert created["lastUsedAt"] is None and created["revokedAt"] is None

    # only the SHA-256 hash is stored
    row = store.models.ApiToken.get_by_id(created["id"])
    assert row.token_hash == hashlib.sha256(created["token"].encode()).hexdigest()
    stored = " ".join(str(v) for v in row.__data__.values())
    assert created["token"] not in stored and created["token"][4:] not in stored

    # the new token works, with its own scope
    assert client.get("/v1/me", token=created["token"], expect=200).json["scope"] == "read"

    listed = client.get("/v1/tokens", token=secret, expect=200).json
    assert [t["id"] for t in listed] == [created["id"], creator.id]  # newest first
    assert all("token" not in t for t in listed)

    client.delete(f"/v1/tokens/{created['id']}", token=secret, expect=204)
    _assert_unauthorized(client.get("/v1/me", token=created["token"]))  # the very next request
    client.delete(f"/v1/tokens/{created['id']}", token=secret, expect=204)  # already revoked: still 204
    listed = client.get("/v1/tokens", token=secret, expect=200).json
    assert listed[0]["revokedAt"] is not None and listed[1]["revokedAt"] is None


def test_a_token_may_revoke_itself(client, world):
    token, secret = world.token(world.partner())
    client.delete(f"/v1/tokens/{token.id}", token=secret, expect=204)
    _assert_unauthorized(client.get("/v1/tokens", token=secret))


def test_tokens_are_own_account(client, world):
    parent = world.partner("Parent")
    child = world.partner("Child", parent=parent)
    other = world.partner("Other")
    _, parent_secret = world.token(parent)
    child_token, child_secret = world.token(child)
    other_token, _ = world.token(other)
    assert [t["partnerId"] for t in client.get("/v1/tokens", token=parent_secret).json] == [parent.id]
    for foreign in (child_token, other_token):
        result = client.delete(f"/v1/tokens/{foreign.id}", token=parent_secret, expect=404)
        assert result.json["error"]["code"] == "not-found"
    client.get("/v1/me", token=child_secret, expect=200)  # untouched


def test_revoke_unknown_and_malformed_ids(client, world):
    _, secret = world.token(world.partner())
    client.delete("/v1/tokens/6f1c3a52-8f0e-4d5e-9b7a-2a4c1f0e9d11", token=secret, expect=404)
    result = client.delete("/v1/tokens/not-a-uuid", token=secret, expect=422)
    assert result.json["error"]["code"] == "unprocessable-entity"
    assert "tokenId" in result.json["error"]["message"]


def test_read_token_cannot_write(client, world):
    partner = world.partner()
    read_token, read_secret = world.token(partner, scope="read")
    for method, path, body in [("POST", "/v1/tokens", {"label": "x", "scope": "write"}),
                               ("DELETE", f"/v1/tokens/{read_token.id}", None)]:
        result = client.request(method, path, token=read_secret, json_body=body, expect=403)
        assert result.json["error"]["code"] == "forbidden"
    client.get("/v1/tokens", token=read_secret, expect=200)
    client.get("/v1/me", token=read_secret, expect=200)  # not revoked by the refused DELETE


def test_scope_is_checked_before_the_body(client, world):
    _, read_secret = world.token(world.partner(), scope="read")
    client.post("/v1/tokens", token=read_secret, body="{not json", headers={"Content-Type": "application/json"},
                expect=403)


def test_authentication_is_checked_before_the_body(client):
    client.post("/v1/tokens", body="{not json", headers={"Content-Type": "application/json"}, expect=401)


def test_last_used_at_is_set_then_refreshed_at_most_once_a_minute(client, world, clock):
    token, secret = world.token(world.partner())
    first = clock.now()
    client.get("/v1/me", token=secret, expect=200)

    def last_used():
        return next(t for t in client.get("/v1/tokens", token=secret).json if t["id"] == token.id)["lastUsedAt"]

    assert last_used().startswith(first.strftime("%Y-%m-%dT%H:%M:%S"))
    clock.advance(30)
    assert last_used().startswith(first.strftime("%Y-%m-%dT%H:%M:%S"))  # within the minute: unchanged
    clock.advance(31)
    assert last_used().startswith(clock.now().strftime("%Y-%m-%dT%H:%M:%S"))


def test_create_token_bad_bodies(client, world):
    _, secret = world.token(world.partner())
    json_headers = {"Content-Type": "application/json"}
    cases = [
        ({"scope": "read"}, "label"),
        ({"label": "x"}, "scope"),
        ({"label": "x", "scope": "admin"}, "scope"),
        ({"label": "", "scope": "read"}, "label"),
        ({"label": "   ", "scope": "read"}, "label"),
        ({"label": 7, "scope": "read"}, "label"),
        ({"label": "x", "scope": None}, "scope"),
        ([], ""),
        ("label", ""),
    ]
    before = len(client.get("/v1/tokens", token=secret).json)
    for body, field in cases:
        result = client.post("/v1/tokens", token=secret, body=__import__("json").dumps(body), headers=json_headers,
                             expect=422)
        assert result.json["error"]["code"] == "unprocessable-entity"
        assert field in result.json["error"]["message"]
    client.post("/v1/tokens", token=secret, body="", headers=json_headers, expect=422)
    assert len(client.get("/v1/tokens", token=secret).json) == before  # nothing changed


def test_malformed_json_wrong_media_type_and_large_bodies(client, world):
    _, secret = world.token(world.partner())
    for raw in ["{", "{'label': 'x'}", "NaN", '{"label": "x", "scope": "read"', "\xff"]:
        result = client.post("/v1/tokens", token=secret, body=raw, headers={"Content-Type": "application/json"},
                             expect=400)
        assert result.json["error"]["code"] == "bad-request"
    for media in ["text/plain", "application/x-www-form-urlencoded", ""]:
        result = client.post("/v1/tokens", token=secret, body='{"label": "x", "scope": "read"}',
                             headers={"Content-Type": media}, expect=415)
        assert result.json["error"]["code"] == "unsupported-media-type"
    client.post("/v1/tokens", token=secret, body='{"label": "x", "scope": "read"}',
                headers={"Content-Type": "application/json; charset=utf-8"}, expect=201)
    big = '{"label": "' + "x" * (1024 * 1024) + '", "scope": "read"}'
    result = client.post("/v1/tokens", token=secret, body=big, headers={"Content-Type": "application/json"},
                         expect=413)
    assert result.json == {"error": {"code": "payload-too-large", "message": "request body is larger than 1 MiB"}}


def test_unknown_routes_and_wrong_methods_use_the_partner_format(client, world):
    _, secret = world.token(world.partner())
    for path in ["/v1/nope", "/v1/me/extra", "/v1/tokens/x/y", "/v1"]:
        result = client.get(path, token=secret, expect=404)
        assert result.json == {"error": {"code": "not-found", "message": "no such route"}}
    for method, path in [("PUT", "/v1/me"), ("DELETE", "/v1/me"), ("PATCH", "/v1/tokens"),
                         ("POST", "/v1/openapi.yaml")]:
        result = client.request(method, path, token=secret, expect=405)
        assert result.json["error"]["code"] == "method-not-allowed"
        assert "GET" in result.headers["allow"] or "DELETE" in result.headers["allow"]
