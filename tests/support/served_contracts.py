"""A real `slipway serve` with the operator's credentials, for the tests that take the
contracts from where clients take them: the server's own contract endpoints."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from tests.support.servers import Server
from tests.support.processes import slipway


@dataclass
class Served:
    server: Server
    partner_token: str  # a write token of a root partner
    panel_key: str  # an admin API key

    @property
    def base(self) -> str:
        return self.server.base

    def contract(self, api: str) -> str:
        """The contract text exactly as the server serves it."""
        path, headers = {"partner": ("/v1/openapi.yaml", {}),
                         "panel": ("/api/openapi.yaml", {"Authorization": f"Bearer {self.panel_key}"})}[api]
        response = httpx.get(self.base + path, headers=headers, timeout=10)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/yaml")
        return response.text


@contextmanager
def served(database_url: str, *, panel_rpm: int = 120, init: bool = True, **env):
    """A server on ``database_url`` with a partner token and an admin key; ``init``: run
    ``slipway init`` first (False: the database is migrated already, the
    ``migrated_database_url`` fixture)."""
    if init:
        slipway(database_url, "init")
    _, partner = slipway(database_url, "partner", "create", "--name", "Contract Check", "--type", "root")
    _, token = slipway(database_url, "token", "create", "--partner", partner["id"], "--label", "contracts",
                       "--scope", "write")
    _, key = slipway(database_url, "apikey", "create", "--name", "contracts", "--role", "admin",
                     "--rate-limit-rpm", str(panel_rpm))
    with Server(database_url, **env) as server:
        yield Served(server, token["token"], key["key"])
