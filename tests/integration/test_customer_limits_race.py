"""Customer limits under concurrent creates, against two real server processes sharing
one database (SQLite, or PostgreSQL with ``SLIPWAY_DATABASE_URL``): the check and the
insert are one transaction under the customer's row lock, so however many creates race
at the limit, exactly as many win as there is room for."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from core.panel import access
from core.panel import customers as panel_customers
from tests.support.http import wait_answering
from tests.support.processes import free_port, read_output

ONE = "services:\n  a: {image: localhost/busybox:latest, mem_limit: 512m, cpus: 0.5}\n"


@pytest.fixture
def servers(store, database_url):
    """Two ``slipway serve`` processes on the test database (no deploy worker: the
    services stay queued, which is all these tests need)."""
    env = dict(os.environ, SLIPWAY_DATABASE_URL=database_url, SLIPWAY_DEPLOY_WORKER="0",
               SLIPWAY_BILLING_INTERVAL="0")
    procs, bases, logs = [], [], []
    for _ in range(2):
        port = free_port()
        logs.append(tempfile.TemporaryFile(mode="w+"))
        procs.append(subprocess.Popen([sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)], env=env,
                                      stdout=logs[-1], stderr=subprocess.STDOUT, text=True))
        bases.append(f"http://127.0.0.1:{port}")

    def said(log):
        return "the server did not start: " + read_output(log)

    try:
        for proc, base, log in zip(procs, bases, logs):
            wait_answering(base + "/api/openapi.yaml", alive=lambda proc=proc: proc.poll() is None,
                           said=lambda log=log: said(log))
        yield bases
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        for log in logs:
            log.close()


def _keys(store, clock, n):
    """One admin key per racer: each key has its own 10/min deploy bucket."""
    return [access.create_api_key(store.uow(), clock, name=f"racer{i}", role="admin",
                                        rate_limit_rpm=10000)[1] for i in range(n)]


def _race(bases, keys, customer_id, prefix):
    barrier = threading.Barrier(len(keys))

    def create(i):
        with httpx.Client(base_url=bases[i % len(bases)], timeout=60) as http:
            barrier.wait()
            return http.post("/api/services", headers={"Authorization": f"Bearer {keys[i]}"},
                             json={"name": f"{prefix}{i}", "customer_id": customer_id, "deploy_method": "compose",
                                   "compose": ONE})

    with ThreadPoolExecutor(max_workers=len(keys)) as pool:
        results = list(pool.map(create, range(len(keys))))
    assert {r.status_code for r in results} <= {201, 409}, [r.text for r in results]
    for refused in (r for r in results if r.status_code == 409):
        assert refused.json()["error"]["code"] == "conflict" and "limits." in refused.json()["error"]["message"]
    return sum(r.status_code == 201 for r in results)


def _count(store, customer_id):
    with store.uow(write=False) as uow:
        return uow.panel_customers.usage(customer_id)


def test_two_creates_at_the_limit_exactly_one_wins(servers, store, clock):
    keys = _keys(store, clock, 2)
    for round_ in range(3):
        customer = panel_customers.create_customer(store.uow(), clock, name=f"edge{round_}",
                                                   limits={"services": 1})
        assert _race(servers, keys, customer.id, f"e{round_}-") == 1
        assert _count(store, customer.id)[0] == 1


def test_many_creates_race_and_each_limit_holds(servers, store, clock):
    keys = _keys(store, clock, 12)
    by_services = panel_customers.create_customer(store.uow(), clock, name="count", limits={"services": 3})
    assert _race(servers, keys, by_services.id, "s") == 3
    assert _count(store, by_services.id) == (3, 1536, 1500, 3)
    by_memory = panel_customers.create_customer(store.uow(), clock, name="memory", limits={"memory_mb": 2048})
    assert _race(servers, keys, by_memory.id, "m") == 4
    assert _count(store, by_memory.id) == (4, 2048, 2000, 4)
    by_cpus = panel_customers.create_customer(store.uow(), clock, name="cpus", limits={"cpus": 1.5})
    assert _race(servers, keys, by_cpus.id, "c") == 3
    assert _count(store, by_cpus.id) == (3, 1536, 1500, 3)
    by_containers = panel_customers.create_customer(store.uow(), clock, name="containers", limits={"containers": 5})
    assert _race(servers, keys, by_containers.id, "k") == 5
    assert _count(store, by_containers.id) == (5, 2560, 2500, 5)
    # the other customers' services are untouched by all this: a fresh customer has room
    fresh = panel_customers.create_customer(store.uow(), clock, name="fresh")
    assert _race(servers, keys[:4], fresh.id, "f") == 4  # the default, 4 CPUs: 8 x 0.5
