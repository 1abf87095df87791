"""One customer's slow engine operations never hold up other customers' requests
(docs/decisions.md "Tenant safety"), attacked for real: a real ``slipway serve`` on real
Podman, with a request pool of 8 engine threads (``SLIPWAY_ENGINE_THREADS``).

Customer A's containers ignore SIGTERM (``trap '' TERM``), so stopping one waits the
whole 10 s stop timeout before the engine kills it. A fires more stops at once than the
pool has threads; meanwhile customer B's detail, stop and start answer within a generous
bound. A stop of a service with many such components takes one stop timeout, not one per
component (they are stopped in parallel)."""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support.engine import engine_settings
from tests.support.processes import slipway
from tests.support.panel_server import _until, admin_key, serve_panel

pytestmark = pytest.mark.runtime
IMAGE = "localhost/busybox:latest"
STUBBORN = "    image: {image}\n    command: [sh, -c, \"trap '' TERM; sleep 1000\"]\n"
POLITE = "    image: {image}\n    command: [sh, -c, \"trap 'exit 0' TERM; sleep 1000 & wait\"]\n"
BOUND_S = 5  # generous: B's answers take well under a second on an idle engine
A_STOPS = 10  # more than the 8 threads of the pool


def _compose(template: str, components: int = 1) -> str:
    return "services:\n" + "".join(f"  c{i}:\n" + template.format(image=IMAGE) for i in range(components))


@pytest.fixture
def panel(runtime_url, migrated_database_url, engine_ulimits):
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_HEALTH_INTERVAL="5", SLIPWAY_BILLING_INTERVAL="0",
               SLIPWAY_ENGINE_THREADS="8", SLIPWAY_CUSTOMER_MAX_CPUS="100", SLIPWAY_CUSTOMER_MAX_MEMORY_MB="100000")
    server, admin = serve_panel(key, env)
    admin.timeout = httpx.Timeout(90)
    from app.pluginmanager import make_plugin_manager, runtimes

    engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, engine_ulimits))
    made: list[str] = []

    def customer(name):
        made_customer = admin.post("/api/customers", json={"name": name}).json()
        _, key = slipway(migrated_database_url, "apikey", "create", "--name", name, "--role", "customer", "--customer",
                         made_customer["id"], "--rate-limit-rpm", "10000")
        client = httpx.Client(base_url=str(admin.base_url), headers={"Authorization": f"Bearer {key['key']}"},
                              timeout=90)
        return made_customer, client

    def create(customer_, compose, prefix, http=admin):
        """(The deploy tier allows 10 creates a minute per key: spread them over keys.)"""
        name = f"{prefix}-{os.getpid()}-{len(made)}"
        created = http.post("/api/services", json={"name": name, "customer_id": customer_["id"],
                                                    "deploy_method": "compose", "compose": compose})
        assert created.status_code == 201, created.text
        made.append(created.json()["id"])
        return created.json()["id"]

    yield admin, customer, create
    for service_id in made:
        engine.remove_service(service_id)
    admin.close()
    server.terminate()
    server.wait(timeout=30)


def _timed(fn):
    started = time.monotonic()
    result = fn()
    return result, time.monotonic() - started


def test_a_customers_slow_stops_do_not_hold_up_another_customer(panel):
    admin, customer, create = panel
    a, a_http = customer("tenant-a")
    b, b_http = customer("tenant-b")
    a_services = [create(a, _compose(STUBBORN), "slow", http=a_http if i % 2 else admin) for i in range(A_STOPS)]
    b_service = create(b, _compose(POLITE), "fast", http=b_http)
    for service_id in a_services + [b_service]:
        _until(admin, service_id, "running")

    started = threading.Event()
    outcomes: list[tuple[int, float]] = []

    def stop_a(service_id):
        started.set()
        result, took = _timed(lambda: a_http.post(f"/api/services/{service_id}/stop"))
        outcomes.append((result.status_code, took))
        return result

    with ThreadPoolExecutor(max_workers=A_STOPS) as pool:
        futures = [pool.submit(stop_a, sid) for sid in a_services]
        started.wait()
        time.sleep(1)  # A's stops are now waiting on their containers
        detail, detail_s = _timed(lambda: b_http.get(f"/api/services/{b_service}"))
        stopped, stop_s = _timed(lambda: b_http.post(f"/api/services/{b_service}/stop"))
        begun, start_s = _timed(lambda: b_http.post(f"/api/services/{b_service}/start"))
        listed, list_s = _timed(lambda: b_http.get("/api/services"))
        a_busy = sum(not f.done() for f in futures)
        print(f"\nwhile {a_busy} of A's {A_STOPS} stops were in flight: B detail {detail_s:.2f} s, "
              f"stop {stop_s:.2f} s, start {start_s:.2f} s, list {list_s:.2f} s")
        for f in futures:
            f.result()
    print("A's stops (status, seconds):", sorted(outcomes, key=lambda o: o[1]))
    assert a_busy > 0  # the measurement was taken while A's stops held on
    assert detail.status_code == 200 and detail.json()["status"] == "running", detail.text
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped", stopped.text
    assert begun.status_code == 200 and begun.json()["status"] == "running", begun.text
    assert listed.status_code == 200 and [s["id"] for s in listed.json()["data"]] == [b_service]
    for took in (detail_s, stop_s, start_s, list_s):
        assert took < BOUND_S
    # A's own stops: each answered, 200 once done or 503 when its turn did not come within
    # SLIPWAY_ENGINE_TIMEOUT (A's calls run a few at a time); never a 500
    assert {status for status, _ in outcomes} <= {200, 503}
    assert any(status == 200 for status, _ in outcomes)


def test_the_components_of_a_service_are_stopped_in_parallel(panel):
    admin, customer, create = panel
    a, a_http = customer("tenant-many")
    service_id = create(a, _compose(STUBBORN, components=6), "many")
    _until(admin, service_id, "running")
    stopped, took = _timed(lambda: a_http.post(f"/api/services/{service_id}/stop"))
    print(f"\nstop of 6 components ignoring SIGTERM: {took:.1f} s")
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped", stopped.text
    assert took < 30  # one after the other would be 6 x 10 s
