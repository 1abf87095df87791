"""``Idempotency-Key`` across processes: two `slipway serve` on one database, the same
POST sent to both from threads at once, makes one customer; every answer is the first
one (or 409 while it ran) and a later repeat to either server is its replay. The claim
is the database's unique index, so it holds for every process sharing the database
(SQLite here, PostgreSQL with ``SLIPWAY_DATABASE_URL``)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support.processes import slipway
from tests.support.servers import Server

NO_ENGINE = {"SLIPWAY_RUNTIME_URL": "", "PC_RATE_BURST": "1000"}


@pytest.mark.storage
def test_two_servers_share_the_keys(migrated_database_url):
    _, partner = slipway(migrated_database_url, "partner", "create", "--name", "Acme")
    _, token = slipway(migrated_database_url, "token", "create", "--partner", partner["id"], "--label", "ops",
                       "--scope", "write")
    headers = {"Authorization": f"Bearer {token['token']}", "Idempotency-Key": "once"}
    with Server(migrated_database_url, **NO_ENGINE) as one, Server(migrated_database_url, **NO_ENGINE) as two:
        bases = [one.base, two.base] * 6

        def post(base):
            return httpx.post(base + "/v1/customers", json={"name": "Acme customer"}, headers=headers, timeout=30)

        with ThreadPoolExecutor(len(bases)) as pool:
            answers = list(pool.map(post, bases))
        created = [a for a in answers if a.status_code == 201]
        assert [a.status_code for a in answers if a.status_code != 201] == [409] * (len(answers) - len(created))
        assert len([a for a in created if "idempotent-replayed" not in a.headers]) == 1
        assert len({a.content for a in created}) == 1
        for base in (one.base, two.base):
            again = post(base)
            assert again.status_code == 201 and again.content == created[0].content
            assert again.headers["idempotent-replayed"] == "true"
        listed = httpx.get(one.base + "/v1/customers", headers=headers, timeout=30).json()
        assert [c["name"] for c in listed["data"]] == ["Acme customer"]
