"""`X-Forwarded-For` through a real `slipway serve` process (docs/decisions.md "Tenant
safety"): with SLIPWAY_TRUSTED_PROXIES unset no proxy header is believed, from loopback
neither (uvicorn's own default would believe 127.0.0.1), so the partner API's
failed-authentication brake and the panel's unauthenticated tier are per real peer
whatever the header says; with SLIPWAY_TRUSTED_PROXIES=127.0.0.1 the header names the
client."""
from __future__ import annotations

import httpx
import pytest

from tests.support.servers import Server

BAD_TOKEN = {"Authorization": "Bearer pcp_" + "x" * 43}


@pytest.fixture
def db(migrated_database_url):
    return migrated_database_url


def _forged(i: int) -> dict:
    """A different client address each time (the right-most hop varies)."""
    return {"X-Forwarded-For": f"198.51.100.{i // 250}, 203.0.113.{i % 250}"}


def test_without_trusted_proxies_a_forged_header_does_not_dodge_the_brakes(db):
    # PC_AUTHFAIL_RPS=0.01: one failed attempt per address, the next one in 100 s
    with Server(db, PC_AUTHFAIL_RPS="0.01") as server, httpx.Client(base_url=server.base, timeout=20) as http:
        answers = [http.get("/v1/me", headers={**BAD_TOKEN, **_forged(i)}).status_code for i in range(5)]
        assert answers == [401, 429, 429, 429, 429]

        # the panel: 60/min per address for requests without credentials
        statuses = []
        for i in range(300):
            statuses.append(http.get("/api/services", headers=_forged(i)).status_code)
            if statuses[-1] == 429:
                break
        # about 60 went through (the server's readiness probe drew on the same bucket)
        assert statuses[-1] == 429 and len(statuses) - 1 >= 50, statuses
        refused = http.get("/api/services", headers=_forged(999))
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"


def test_with_trusted_proxies_the_header_names_the_client(db):
    with Server(db, PC_AUTHFAIL_RPS="0.01", SLIPWAY_TRUSTED_PROXIES="127.0.0.1") as server, \
            httpx.Client(base_url=server.base, timeout=20) as http:
        # each client address has its own brake: one failure each, then 429 for that address only
        assert [http.get("/v1/me", headers={**BAD_TOKEN, "X-Forwarded-For": f"203.0.113.{i}"}).status_code
                for i in range(5)] == [401] * 5
        assert http.get("/v1/me", headers={**BAD_TOKEN, "X-Forwarded-For": "203.0.113.1"}).status_code == 429
        # the right-most hop the proxy appended is the client; what the client wrote left of it is not
        assert http.get("/v1/me", headers={**BAD_TOKEN,
                                           "X-Forwarded-For": "198.51.100.7, 203.0.113.1"}).status_code == 429
        # without the header the peer itself (the proxy) is the address
        assert http.get("/v1/me", headers=BAD_TOKEN).status_code == 401

        statuses = [http.get("/api/services", headers=_forged(i)).status_code for i in range(150)]
        assert set(statuses) == {401}  # 150 clients behind the proxy, none over its 60/min
