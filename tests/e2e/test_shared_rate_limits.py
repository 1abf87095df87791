"""Two ``slipway serve`` processes on one database behind a real load balancer (Caddy,
round robin): with ``SLIPWAY_RATE_STORE=redis://...`` a partner token's burst of 30 is
spent across both and the 31st request is 429 whichever process it reaches, and a panel
key's rpm likewise; with the default ``memory`` store each process gives the whole burst
again (what the shared store is for)."""
from __future__ import annotations

import contextlib

import httpx
import pytest

from tests.support.caddy import running_caddy
from tests.support.processes import free_port, slipway
from tests.support.servers import Server

pytestmark = pytest.mark.storage  # its point is two processes on one database (PostgreSQL in CI)

# the default burst of 30, refilled slowly enough that the test's own pace adds no token
NO_ENGINE = {"SLIPWAY_RUNTIME_URL": "", "PC_RATE_RPS": "0.01"}


@contextlib.contextmanager
def balanced(tmp_path, database_url, **env):
    """Two servers with ``env`` and Caddy in front of them; yields (base URL, servers)."""
    with Server(database_url, **NO_ENGINE, **env) as one, Server(database_url, **NO_ENGINE, **env) as two:
        port = free_port()
        server = {"listen": [f"127.0.0.1:{port}"], "automatic_https": {"disable": True},
                  "routes": [{"handle": [{
                      "handler": "reverse_proxy",
                      "upstreams": [{"dial": f"127.0.0.1:{one.port}"}, {"dial": f"127.0.0.1:{two.port}"}],
                      "load_balancing": {"selection_policy": {"policy": "round_robin"}}}]}]}
        with running_caddy(tmp_path, apps={"http": {"servers": {"balancer": server}}}):
            yield f"http://127.0.0.1:{port}", (one, two)


def _served(servers, path) -> list[int]:
    """How many requests for ``path`` each server's access log shows."""
    return [server.log().count(path) for server in servers]


def _credentials(database_url):
    """A token and an admin key on the migrated database."""
    _, partner = slipway(database_url, "partner", "create", "--name", "Acme")
    _, token = slipway(database_url, "token", "create", "--partner", partner["id"], "--label", "ops", "--scope", "read")
    _, key = slipway(database_url, "apikey", "create", "--name", "ci", "--role", "admin", "--rate-limit-rpm", "6")
    return token["token"], key["key"]


def test_one_limit_across_two_processes_with_the_redis_store(tmp_path, migrated_database_url, redis_url):
    token, key = _credentials(migrated_database_url)
    with balanced(tmp_path, migrated_database_url, SLIPWAY_RATE_STORE=redis_url) as (base, servers):
        with httpx.Client(base_url=base, timeout=30) as client:
            me = {"Authorization": f"Bearer {token}"}
            statuses = [client.get("/v1/me", headers=me).status_code for _ in range(30)]
            assert statuses == [200] * 30
            assert min(_served(servers, "/v1/me")) >= 10  # both processes spent the burst
            # the 31st and 32nd: one reaches each process, both refused
            refused = [client.get("/v1/me", headers=me) for _ in range(2)]
            assert [r.status_code for r in refused] == [429, 429]
            assert all(int(r.headers["Retry-After"]) >= 1 for r in refused)
            assert min(_served(servers, "/v1/me")) >= 16

            panel = {"Authorization": f"Bearer {key}"}
            answers = [client.get("/api/services", headers=panel) for _ in range(8)]
            assert [a.status_code for a in answers] == [200] * 6 + [429, 429]
            assert [a.headers["X-RateLimit-Limit"] for a in answers] == ["6"] * 8
            assert [int(a.headers["X-RateLimit-Remaining"]) for a in answers[:6]] == [5, 4, 3, 2, 1, 0]
            assert min(_served(servers, "/api/services")) == 4


def test_without_the_shared_store_each_process_gives_the_whole_burst(tmp_path, migrated_database_url):
    """The control: on ``memory`` the same 32 requests all pass (16 per process)."""
    token, _ = _credentials(migrated_database_url)
    with balanced(tmp_path, migrated_database_url, SLIPWAY_RATE_STORE="memory") as (base, servers):
        with httpx.Client(base_url=base, timeout=30) as client:
            me = {"Authorization": f"Bearer {token}"}
            statuses = [client.get("/v1/me", headers=me).status_code for _ in range(32)]
            assert statuses == [200] * 32
            assert _served(servers, "/v1/me") == [16, 16]
