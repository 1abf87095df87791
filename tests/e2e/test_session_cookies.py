"""The session cookie against cookie tossing, through real `slipway serve` processes, httpx
and a real WebSocket client (docs/decisions.md "Tenant safety, second round"): with an https
`SLIPWAY_PUBLIC_URL` the cookie is `__Host-slipway_session` (Secure, Path=/, HttpOnly,
SameSite=Lax) and a plain `slipway_session` counts for nothing; a request that carries two
session cookies is 401 and changes nothing, on REST operations, the login flow and the
`/api/ws` upgrade. The server is reached on http loopback; what the test checks is the
cookies' names and attributes and what the server does with what a browser sends back."""
from __future__ import annotations

import httpx
import pytest

from tests.e2e.test_ws_credentials import _alive, _key, _refusal, _ws, db  # noqa: F401 (db: a fixture)
from tests.support.servers import Server

PUBLIC = "https://panel.example.test"  # what the browser sees; the test reaches the server on loopback
HOST = "__Host-slipway_session"
PLAIN = "slipway_session"


def _set_cookies(response) -> dict:
    """Set-Cookie headers by cookie name: {name: (value, {attribute: value})}."""
    out = {}
    for header in response.headers.get_list("set-cookie"):
        first, *attributes = [part.strip() for part in header.split(";")]
        name, _, value = first.partition("=")
        out[name] = (value, {a.partition("=")[0].lower(): a.partition("=")[2] for a in attributes})
    return out


def _sign_in(server, key: str, origin: str, cookie: str | None = None):
    headers = {"Origin": origin, **({"Cookie": cookie} if cookie else {})}
    return httpx.post(server.base + "/api/auth/key", json={"key": key}, headers=headers, timeout=20)


def _session_secret(server, key: str, origin: str, name: str) -> str:
    done = _sign_in(server, key, origin)
    assert done.status_code == 204, done.text
    return _set_cookies(done)[name][0]


def _who(server, cookie: str) -> httpx.Response:
    return httpx.get(server.base + "/api/auth/session", headers={"Cookie": cookie}, timeout=20)


def _unauthorized(response, says="two session cookies") -> None:
    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "unauthorized" and says in response.json()["error"]["message"]


def test_an_https_panel_names_its_cookie_host_and_ignores_a_plain_one(db):
    admin = _key(db)
    with Server(db, SLIPWAY_PUBLIC_URL=PUBLIC) as server:
        done = _sign_in(server, admin["key"], PUBLIC)
        assert done.status_code == 204, done.text
        cookies = _set_cookies(done)
        secret, attributes = cookies[HOST]
        assert secret and attributes["path"] == "/" and "domain" not in attributes
        assert {"secure", "httponly"} <= set(attributes) and attributes["samesite"] == "Lax"
        cleared, old = cookies[PLAIN]  # a plain cookie kept from before would make two: it is cleared
        assert cleared in ("", '""') and old["path"] == "/api" and "1970" in old["expires"]
        assert _who(server, f"{HOST}={secret}").json()["key"]["id"] == admin["id"]
        _unauthorized(_who(server, f"{PLAIN}={secret}"), says="missing credentials")  # the plain name: absent
        out = httpx.post(server.base + "/api/auth/logout", headers={"Cookie": f"{HOST}={secret}", "Origin": PUBLIC},
                         timeout=20)
        assert out.status_code == 204
        gone = _set_cookies(out)
        assert gone[HOST][1]["path"] == "/" and "1970" in gone[HOST][1]["expires"] and "secure" in gone[HOST][1]
        _unauthorized(_who(server, f"{HOST}={secret}"), says="")


@pytest.mark.parametrize("public", [PUBLIC, None])
def test_two_session_cookies_are_401_and_change_nothing(db, public):
    """The tenant's cookie first (a longer path comes first), the operator's after it; over
    plain http the cookie keeps its name, ``slipway_session``."""
    admin, tenant = _key(db), _key(db, "viewer")
    env = {"SLIPWAY_PUBLIC_URL": public} if public else {}
    with Server(db, **env) as server:
        origin = public or server.base
        name = HOST if public else PLAIN
        if not public:
            done = _sign_in(server, tenant["key"], origin)
            assert done.status_code == 204 and set(_set_cookies(done)) == {PLAIN}
            assert _set_cookies(done)[PLAIN][1]["path"] == "/api" and "secure" not in _set_cookies(done)[PLAIN][1]
        mine = _session_secret(server, admin["key"], origin, name)
        theirs = _session_secret(server, tenant["key"], origin, name)
        other = PLAIN if public else HOST
        tossed = [f"{other}={theirs}; {name}={mine}", f"{name}={mine}; {other}={theirs}",
                  f"{name}={theirs}; {name}={mine}"]
        bearer = {"Authorization": f"Bearer {admin['key']}"}
        customers = httpx.get(server.base + "/api/customers", headers=bearer, timeout=20).json()["total"]
        for cookie in tossed:
            _unauthorized(_who(server, cookie))
            _unauthorized(httpx.get(server.base + "/api/services", headers={"Cookie": cookie}, timeout=20))
            made = httpx.post(server.base + "/api/customers", json={"name": "Tossed"},
                              headers={"Cookie": cookie, "Origin": origin}, timeout=20)
            _unauthorized(made)
            _unauthorized(httpx.get(server.base + "/api/nowhere", headers={"Cookie": cookie}, timeout=20))
            _unauthorized(httpx.get(server.base + "/api/services", headers={"Cookie": cookie, **bearer}, timeout=20))
            out = httpx.post(server.base + "/api/auth/logout", headers={"Cookie": cookie, "Origin": origin},
                             timeout=20)
            _unauthorized(out)
            _unauthorized(_sign_in(server, admin["key"], origin, cookie=cookie))
            status, body = _refusal(server, "/api/ws", headers={"Cookie": cookie, "Origin": origin})
            assert status == 401 and "two session cookies" in body["error"]["message"]
        # nothing changed: no customer was made, both sessions live on, each works alone
        assert httpx.get(server.base + "/api/customers", headers=bearer, timeout=20).json()["total"] == customers
        assert _who(server, f"{name}={mine}").json()["key"]["id"] == admin["id"]
        assert _who(server, f"{name}={theirs}").json()["key"]["id"] == tenant["id"]
        with _ws(server, "/api/ws", headers={"Cookie": f"{name}={mine}", "Origin": origin}) as ws:
            _alive(ws)
