"""API keys' bounds through a real `slipway serve` process and the `slipway` CLI
(docs/decisions.md "Tenant safety, second round"): a key revokes only keys whose effective
permissions are a subset of its own (else 403 and the key stays valid), as it creates them;
a key created without `rateLimitRpm`, by the API or the CLI, gets `SLIPWAY_RATE_AUTH_RPM`
(through the API at most the creating key's own)."""
from __future__ import annotations

import httpx

from core.panel.access import PERMISSIONS
from tests.e2e.test_ws_credentials import _key, db  # noqa: F401 (db: a fixture)
from tests.support.processes import slipway
from tests.support.servers import Server

ONLY_MANAGE = [p for p in PERMISSIONS if p != "api_keys:manage"]


def _auth(key: dict) -> dict:
    return {"Authorization": f"Bearer {key['key']}"}


def test_a_key_revokes_only_keys_within_its_own_permissions(db):
    admin = _key(db)
    manager = _key(db, "admin", "--deny", *ONLY_MANAGE)  # denied everything but api_keys:manage
    with Server(db) as server:
        keys = server.base + "/api/v1/api-keys"
        refused = httpx.delete(f"{keys}/{admin['id']}", headers=_auth(manager), timeout=20)
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "forbidden" and "services:read" in error["message"] and "revoke" in error["message"]
        assert httpx.get(keys, headers=_auth(admin), timeout=20).status_code == 200  # the admin key still works
        # a key within its bounds (its own permissions, or fewer) it revokes
        made = httpx.post(keys, headers=_auth(manager), timeout=20, json={
            "name": "helper", "role": "admin", "rateLimitRpm": 100, "deniedPermissions": ONLY_MANAGE})
        assert made.status_code == 201, made.text
        assert httpx.delete(f"{keys}/{made.json()['id']}", headers=_auth(manager), timeout=20).status_code == 204
        assert httpx.get(keys, headers={"Authorization": f"Bearer {made.json()['key']}"},
                         timeout=20).status_code == 401
        # the admin key may revoke the narrower one
        assert httpx.delete(f"{keys}/{manager['id']}", headers=_auth(admin), timeout=20).status_code == 204


def test_a_key_created_without_rate_limit_rpm_gets_the_operators_setting(db):
    admin = _key(db)  # 10000/min
    _, slow = slipway(db, "apikey", "create", "--name", "slow", "--role", "admin", "--rate-limit-rpm", "50")
    with Server(db, SLIPWAY_RATE_AUTH_RPM="77") as server:
        keys = server.base + "/api/v1/api-keys"
        made = httpx.post(keys, headers=_auth(admin), json={"name": "ci", "role": "viewer"}, timeout=20)
        assert made.status_code == 201, made.text
        assert made.json()["rateLimitRpm"] == 77
        used = httpx.get(server.base + "/api/templates", headers={"Authorization": f"Bearer {made.json()['key']}"},
                         timeout=20)
        assert used.status_code == 200 and used.headers["x-ratelimit-limit"] == "77"
        # a creating key below the setting: the default is capped at its own
        capped = httpx.post(keys, headers=_auth(slow), json={"name": "ci", "role": "viewer"}, timeout=20)
        assert capped.status_code == 201 and capped.json()["rateLimitRpm"] == 50
        named = httpx.post(keys, headers=_auth(slow), json={"name": "ci", "role": "viewer", "rateLimitRpm": 60},
                           timeout=20)  # named above its own: still 403
        assert named.status_code == 403 and "rateLimitRpm 60" in named.json()["error"]["message"]


def test_the_cli_gives_a_key_without_rate_limit_rpm_the_operators_setting(db):
    _, key = slipway(db, "apikey", "create", "--name", "ops", "--role", "admin", env={"SLIPWAY_RATE_AUTH_RPM": "333"})
    assert key["rateLimitRpm"] == 333
    _, named = slipway(db, "apikey", "create", "--name", "ops", "--role", "admin", "--rate-limit-rpm", "9",
                       env={"SLIPWAY_RATE_AUTH_RPM": "333"})
    assert named["rateLimitRpm"] == 9
