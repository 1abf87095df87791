"""WebSockets and their credentials through real `slipway serve` processes and a real
WebSocket client (docs/decisions.md "Tenant safety"): a revoked or expired key's sockets, and
an ended session's, are closed with 1008 within 10 s (also when the revoke happened in
another process sharing the database), a key session's when its key is revoked or it logs
out; a key or session holds at most SLIPWAY_WS_PER_KEY sockets (429 beyond); subscribes beyond 5 per second are refused;
a partner token given as the key is 401 saying it is the partner API's credential."""
from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.support.servers import Server
from tests.support.processes import free_port, slipway
from tests.fixtures.fake_oidc import FakeOIDC

CLOSE_WITHIN_S = 10  # docs/decisions.md
SLEEPER = "services:\n  app:\n    image: localhost/busybox:latest\n    command: [sleep, '600']\n"


def _key(url, role="admin", *extra) -> dict:
    return slipway(url, "apikey", "create", "--name", role, "--role", role, "--rate-limit-rpm", "10000", *extra)[1]


def _ws(server, path, key=None, headers=None):
    if key is not None:
        path += ("&" if "?" in path else "?") + f"api_key={key}"
    return connect(server.ws_base + path, additional_headers=headers or {}, open_timeout=20, close_timeout=5)


def _refusal(server, path, key=None, headers=None) -> tuple[int, dict]:
    with pytest.raises(InvalidStatus) as refused:
        with _ws(server, path, key, headers):
            pass
    return refused.value.response.status_code, json.loads(refused.value.response.body)


def _closed(ws, seconds: float):
    """Wait for the server to close ``ws``: (code, reason, when), reading what comes before."""
    deadline = time.monotonic() + seconds
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the socket was not closed in time"
            ws.recv(timeout=remaining)
    return closed.value.rcvd.code, closed.value.rcvd.reason, time.monotonic()


def _alive(ws) -> None:
    ws.send(json.dumps({"type": "subscribe"}))
    while True:
        message = json.loads(ws.recv(timeout=20))
        if message["type"] == "subscribed":
            return


@pytest.fixture
def db(migrated_database_url):
    return migrated_database_url


def test_revoking_a_key_in_another_process_closes_its_sockets_within_10_s(db):
    admin, doomed = _key(db), _key(db, "admin")
    with Server(db) as a, Server(db) as b:  # two processes sharing the database
        service = httpx.post(a.base + "/api/customers", headers={"Authorization": f"Bearer {admin['key']}"},
                             json={"name": "Acme"}, timeout=20).json()
        created = httpx.post(a.base + "/api/services", headers={"Authorization": f"Bearer {admin['key']}"},
                             json={"name": f"rv-{os.getpid()}", "customer_id": service["id"],
                                   "deploy_method": "compose", "compose": SLEEPER}, timeout=20)
        assert created.status_code == 201, created.text
        with _ws(a, "/api/ws", doomed["key"]) as channel, \
                _ws(a, f"/api/services/{created.json()['id']}/logs?follow=true", doomed["key"]) as follow, \
                _ws(a, "/api/ws", admin["key"]) as bystander:
            _alive(channel)
            revoked = httpx.delete(f"{b.base}/api/v1/api-keys/{doomed['id']}",
                                   headers={"Authorization": f"Bearer {admin['key']}"}, timeout=20)
            assert revoked.status_code == 204
            at = time.monotonic()
            for ws in (channel, follow):
                code, reason, when = _closed(ws, CLOSE_WITHIN_S + 5)
                assert (code, reason) == (1008, "the API key was revoked")
                assert when - at <= CLOSE_WITHIN_S
            _alive(bystander)  # another key's socket is untouched
        status, body = _refusal(a, "/api/ws", doomed["key"])
        assert status == 401 and body["error"]["code"] == "unauthorized"


def test_a_key_that_expires_has_its_sockets_closed(db):
    admin = _key(db)
    with Server(db) as server:
        ends = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=10)
        made = httpx.post(server.base + "/api/v1/api-keys", headers={"Authorization": f"Bearer {admin['key']}"},
                          json={"name": "brief", "role": "viewer", "rateLimitRpm": 100,
                                "expiresAt": ends.isoformat().replace("+00:00", "Z")}, timeout=20)
        assert made.status_code == 201, made.text
        with _ws(server, "/api/ws", made.json()["key"]) as ws:
            _alive(ws)
            code, reason, _ = _closed(ws, 10 + CLOSE_WITHIN_S + 5)
            assert (code, reason) == (1008, "the API key expired")
            assert datetime.now(timezone.utc) <= ends + timedelta(seconds=CLOSE_WITHIN_S)


def test_a_partner_token_as_the_upgrades_key_is_401_saying_it_is_the_partner_apis(db):
    from app.http.errors import PARTNER_TOKEN_ON_PANEL_API

    _, partner = slipway(db, "partner", "create", "--name", "Reseller")
    _, token = slipway(db, "token", "create", "--partner", partner["id"], "--label", "ws", "--scope", "read")
    with Server(db) as server:
        status, body = _refusal(server, "/api/ws", token["token"])
        assert status == 401 and body["error"]["code"] == "unauthorized"
        assert body["error"]["message"].endswith(PARTNER_TOKEN_ON_PANEL_API)


def test_a_key_holds_at_most_20_sockets_per_process(db):
    key, other = _key(db), _key(db)
    with Server(db) as server, ExitStack() as opened:
        sockets = [opened.enter_context(_ws(server, "/api/ws", key["key"])) for _ in range(20)]
        status, body = _refusal(server, "/api/ws", key["key"])
        assert status == 429 and body["error"]["code"] == "rate_limited"
        assert "SLIPWAY_WS_PER_KEY" in body["error"]["message"]
        with _ws(server, "/api/ws", other["key"]) as ws:  # another key is not affected
            _alive(ws)
        for ws in sockets:  # the 20 are served
            _alive(ws)
        sockets.pop().close()
        deadline = time.monotonic() + 20  # the server notices the close, then the slot is free
        while True:
            try:
                sockets.append(opened.enter_context(_ws(server, "/api/ws", key["key"])))
                break
            except InvalidStatus as refused:
                assert refused.response.status_code == 429 and time.monotonic() < deadline
                time.sleep(0.2)
        _alive(sockets[-1])


def test_the_per_key_cap_is_a_setting(db):
    key = _key(db)
    with Server(db, SLIPWAY_WS_PER_KEY="2") as server:
        with _ws(server, "/api/ws", key["key"]), _ws(server, "/api/ws", key["key"]):
            assert _refusal(server, "/api/ws", key["key"])[0] == 429


@pytest.mark.runtime
def test_subscribes_beyond_5_per_second_are_refused_and_ignored(db, runtime_url):
    admin = _key(db)
    auth = {"Authorization": f"Bearer {admin['key']}"}
    with Server(db, SLIPWAY_RUNTIME_URL=runtime_url) as server:
        customer = httpx.post(server.base + "/api/customers", headers=auth, json={"name": "Acme"}, timeout=20).json()
        ids = []
        for name in ("kept", "ignored"):
            created = httpx.post(server.base + "/api/services", headers=auth, timeout=20, json={
                "name": f"{name}-{os.getpid()}", "customer_id": customer["id"], "deploy_method": "compose",
                "compose": SLEEPER})
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        kept, ignored = ids
        with _ws(server, "/api/ws", admin["key"]) as ws:
            for services in [[kept]] * 5 + [[ignored]] * 5:  # one burst
                ws.send(json.dumps({"type": "subscribe", "services": services}))
            answers = [json.loads(ws.recv(timeout=20)) for _ in range(10)]
            assert [a["type"] for a in answers] == ["subscribed"] * 5 + ["error"] * 5
            assert all(a["data"]["services"] == [kept] for a in answers[:5])
            assert all("at most 5 per second" in a["data"]["message"] for a in answers[5:])
            for service_id in (ignored, kept):  # the narrowing of the first five holds
                assert httpx.delete(f"{server.base}/api/services/{service_id}", headers=auth,
                                    timeout=60).status_code == 204
            while True:
                message = json.loads(ws.recv(timeout=30))
                assert ignored not in json.dumps(message), message
                if message["type"] == "service.status" and message["data"] == {"id": kept, "status": "deleted"}:
                    break


# --- browser sessions --------------------------------------------------------------------------

ADA = "ada@example.com"


@pytest.fixture
def idp():
    with FakeOIDC(client_id="slipway-panel", client_secret="s3cret") as fake:
        fake.user = {"sub": "u-ada", "email": ADA, "email_verified": True}
        yield fake


def _login_server(db, idp, **env) -> Server:
    port = free_port()  # the provider must know the redirect URI before the server starts
    idp.redirect_uri = f"http://127.0.0.1:{port}/api/auth/callback"
    return Server(db, port, SLIPWAY_OIDC_ISSUER=idp.issuer, SLIPWAY_OIDC_CLIENT_ID="slipway-panel",
                  SLIPWAY_OIDC_CLIENT_SECRET="s3cret", SLIPWAY_PUBLIC_URL=f"http://127.0.0.1:{port}", **env)


def _session(server) -> dict:
    """Log in through the fake provider; the headers a browser page's WebSocket sends."""
    with httpx.Client(base_url=server.base, follow_redirects=True, timeout=20) as browser:
        landed = browser.get("/api/auth/login", params={"next": "/api/auth/session"})
        assert landed.status_code == 200, landed.text
        return {"Cookie": f"slipway_session={browser.cookies['slipway_session']}", "Origin": server.base}


def test_logging_out_closes_the_sessions_sockets_and_a_session_holds_at_most_20(db, idp):
    slipway(db, "user", "set", "--email", ADA, "--role", "viewer")
    with _login_server(db, idp) as server:
        mine, other = _session(server), _session(server)
        with ExitStack() as opened:
            sockets = [opened.enter_context(_ws(server, "/api/ws", headers=mine)) for _ in range(20)]
            status, body = _refusal(server, "/api/ws", headers=mine)
            assert status == 429 and body["error"]["code"] == "rate_limited"
            with _ws(server, "/api/ws", headers=other) as bystander:  # another session of the same user
                _alive(bystander)
                out = httpx.post(server.base + "/api/auth/logout", headers=mine, timeout=20)
                assert out.status_code == 204
                at = time.monotonic()
                for ws in sockets:
                    code, reason, when = _closed(ws, CLOSE_WITHIN_S + 5)
                    assert (code, reason) == (1008, "the session ended (logged out or revoked)")
                    assert when - at <= CLOSE_WITHIN_S
                _alive(bystander)
        assert _refusal(server, "/api/ws", headers=mine)[0] == 401


def test_a_session_that_expires_has_its_sockets_closed(db, idp):
    slipway(db, "user", "set", "--email", ADA, "--role", "viewer")
    with _login_server(db, idp, SLIPWAY_SESSION_TTL="10") as server:
        started = time.monotonic()
        headers = _session(server)
        with _ws(server, "/api/ws", headers=headers) as ws:
            code, reason, when = _closed(ws, 10 + CLOSE_WITHIN_S + 5)
            assert (code, reason) == (1008, "the session expired")
            assert when - started <= 10 + CLOSE_WITHIN_S


def test_a_role_change_closes_the_sessions_sockets(db, idp):
    slipway(db, "user", "set", "--email", ADA, "--role", "admin")
    with _login_server(db, idp) as server:
        headers = _session(server)
        with _ws(server, "/api/ws", headers=headers) as ws:
            _alive(ws)
            slipway(db, "user", "set", "--email", ADA, "--role", "viewer")
            code, reason, _ = _closed(ws, CLOSE_WITHIN_S + 5)
            assert code == 1008 and "role or customer" in reason
        with _ws(server, "/api/ws", headers=headers) as ws:  # connecting again takes the new role
            _alive(ws)


# --- key sessions (POST /api/auth/key, the web frontend's sign-in) ----------------------------

def _key_session(server, key: str) -> dict:
    done = httpx.post(server.base + "/api/auth/key", json={"key": key}, headers={"X-Requested-With": "slipway"},
                      timeout=20)
    assert done.status_code == 204, done.text
    # no SLIPWAY_PUBLIC_URL: the panel's origin is the request's own (its Host)
    return {"Cookie": f"slipway_session={done.cookies['slipway_session']}", "Origin": server.base}


def test_a_key_sessions_sockets_close_when_its_key_is_revoked_or_it_logs_out(db):
    admin, doomed = _key(db), _key(db, "viewer")
    with Server(db) as server:
        of_doomed, of_admin = _key_session(server, doomed["key"]), _key_session(server, admin["key"])
        with _ws(server, "/api/ws", headers=of_doomed) as revoked, \
                _ws(server, "/api/ws", headers=of_admin) as logged_out, \
                _ws(server, "/api/ws", admin["key"]) as bystander:
            _alive(revoked)
            _alive(logged_out)
            gone = httpx.delete(f"{server.base}/api/v1/api-keys/{doomed['id']}",
                                headers={"Authorization": f"Bearer {admin['key']}"}, timeout=20)
            assert gone.status_code == 204
            code, reason, _ = _closed(revoked, CLOSE_WITHIN_S + 5)
            assert (code, reason) == (1008, "the API key was revoked")
            out = httpx.post(server.base + "/api/auth/logout", headers=of_admin, timeout=20)
            assert out.status_code == 204
            code, reason, _ = _closed(logged_out, CLOSE_WITHIN_S + 5)
            assert (code, reason) == (1008, "the session ended (logged out or revoked)")
            _alive(bystander)  # logging out ended the session, not the key
        for headers in (of_doomed, of_admin):
            status, body = _refusal(server, "/api/ws", headers=headers)
            assert status == 401 and body["error"]["code"] == "unauthorized"
        # a cross-site page cannot open the key session's socket
        fresh = _key_session(server, admin["key"])
        status, body = _refusal(server, "/api/ws", headers={**fresh, "Origin": "http://evil.test"})
        assert status == 403 and body["error"]["code"] == "forbidden"
