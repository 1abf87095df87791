"""The operator's list/revoke commands and `--version`, through the installed console
script `slipway`: JSON out, JSON errors with a non-zero status, never a secret in a list."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

SCRIPT = os.path.join(os.path.dirname(sys.executable), "slipway")


def run(url, *args, expect=0) -> dict:
    proc = subprocess.run([SCRIPT, *args], env=dict(os.environ, SLIPWAY_DATABASE_URL=url), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return json.loads(proc.stdout)  # one JSON document, errors too


@pytest.fixture
def initialised(migrated_database_url):
    return migrated_database_url


def test_version_is_the_package_version(database_url):
    assert run(database_url, "--version") == {"version": version("slipway")}


def test_token_list_and_revoke(initialised):
    url = initialised
    acme = run(url, "partner", "create", "--name", "Acme")["id"]
    other = run(url, "partner", "create", "--name", "Other")["id"]
    first = run(url, "token", "create", "--partner", acme, "--label", "ci", "--scope", "write")
    second = run(url, "token", "create", "--partner", acme, "--label", "ro", "--scope", "read")
    run(url, "token", "create", "--partner", other, "--label", "theirs", "--scope", "read")

    listed = run(url, "token", "list", "--partner", acme)["tokens"]
    assert {t["id"] for t in listed} == {first["id"], second["id"]}
    assert all("token" not in t and t["revokedAt"] is None for t in listed)
    text = json.dumps(listed)
    assert first["token"] not in text and second["token"] not in text

    revoked = run(url, "token", "revoke", "--token", first["id"])
    assert revoked["id"] == first["id"] and revoked["revokedAt"] and "token" not in revoked
    again = run(url, "token", "revoke", "--token", first["id"])  # safe to run twice
    assert again["revokedAt"] == revoked["revokedAt"]
    states = {t["id"]: t["revokedAt"] for t in run(url, "token", "list", "--partner", acme)["tokens"]}
    assert states == {first["id"]: revoked["revokedAt"], second["id"]: None}
    # the revoked token no longer authenticates
    from app.config import Config
    from app.storage.store import Store
    from core.partner import tokens
    from core.errors import Unauthorized

    store = Store(url, threads=1)
    try:
        with pytest.raises(Unauthorized):
            tokens.authenticate(store.uow(transaction=False), Config.from_env({}).clock, first["token"])
        assert tokens.authenticate(store.uow(transaction=False), Config.from_env({}).clock, second["token"])
    finally:
        store.close()


@pytest.mark.parametrize("args, code", [
    (["token", "list", "--partner", "nope"], "not-found"),
    (["token", "list", "--partner", "00000000-0000-4000-8000-000000000000"], "not-found"),
    (["token", "revoke", "--token", "nope"], "not-found"),
    (["apikey", "revoke", "--id", "nope"], "not-found"),
    (["user", "remove", "--email", "nobody@example.com"], "not-found"),
])
def test_unknown_ids_are_json_errors(initialised, args, code):
    assert run(initialised, *args, expect=1)["error"]["code"] == code


@pytest.mark.parametrize("args", [["token", "list"], ["token", "revoke"], ["apikey", "revoke"], ["user", "remove"]])
def test_missing_flags_are_usage_errors(initialised, args):
    assert run(initialised, *args, expect=2)["error"]["code"] == "usage"


def test_apikey_list_and_revoke(initialised):
    url = initialised
    admin = run(url, "apikey", "create", "--name", "ops", "--role", "admin")
    viewer = run(url, "apikey", "create", "--name", "look", "--role", "viewer")
    listed = run(url, "apikey", "list")["apiKeys"]
    assert [k["id"] for k in sorted(listed, key=lambda k: k["name"])] == [viewer["id"], admin["id"]]
    assert all("key" not in k and k["revokedAt"] is None for k in listed)
    assert admin["key"] not in json.dumps(listed) and viewer["key"] not in json.dumps(listed)
    revoked = run(url, "apikey", "revoke", "--id", admin["id"])
    assert revoked["id"] == admin["id"] and revoked["revokedAt"] and "key" not in revoked
    assert [k["id"] for k in run(url, "apikey", "list")["apiKeys"]] == [viewer["id"]]  # the active keys
    assert run(url, "apikey", "revoke", "--id", admin["id"], expect=1)["error"]["code"] == "not-found"


def test_user_remove_ends_its_sessions(initialised):
    url = initialised
    run(url, "user", "set", "--email", "ada@example.com", "--role", "admin")
    run(url, "user", "set", "--email", "bob@example.com", "--role", "viewer")
    from app.config import Config
    from app.storage.store import Store
    from core.panel import sessions
    from core.errors import Unauthorized

    clock = Config.from_env({}).clock
    store = Store(url, threads=1)
    try:
        _, _, secret = sessions.open_session(store.uow(), clock, email="ada@example.com", ttl_seconds=600)
        assert sessions.authenticate_session(store.uow(transaction=False), clock, secret)
        removed = run(url, "user", "remove", "--email", " ADA@example.com ")
        assert removed["email"] == "ada@example.com" and removed["removed"] is True
        with pytest.raises(Unauthorized):
            sessions.authenticate_session(store.uow(transaction=False), clock, secret)
    finally:
        store.close()
    assert [u["email"] for u in run(url, "user", "list")["users"]] == ["bob@example.com"]
    assert run(url, "user", "remove", "--email", "ada@example.com", expect=1)["error"]["code"] == "not-found"
