"""Deploy jobs in /metrics, counted by outcome with their duration, from a real server
running real deploys on the container engine."""
from __future__ import annotations

import os
import re
import time

import httpx
import pytest

from tests.support.engine import engine_settings
from tests.support.servers import Server
from tests.support.processes import slipway

pytestmark = pytest.mark.runtime

SLEEPER = "services:\n  app:\n    image: localhost/busybox:latest\n    command: [sleep, '600']\n"
MISSING = "services:\n  app:\n    image: localhost/slipway-no-such-image:never\n"


def _value(text: str, line_start: str) -> float:
    found = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)]
    return sum(found)


def test_deploy_jobs_are_counted_by_outcome(runtime_url, migrated_database_url, engine_ulimits):
    key = slipway(migrated_database_url, "apikey", "create", "--name", "m", "--role", "admin",
                  "--rate-limit-rpm", "10000")[1]
    token = "m-" + os.urandom(8).hex()
    auth = {"Authorization": f"Bearer {key['key']}"}
    made = []
    with Server(migrated_database_url, SLIPWAY_DEPLOY_WORKER="1", SLIPWAY_RUNTIME="podman",
                SLIPWAY_RUNTIME_URL=runtime_url,
                SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DEPLOY_SETTLE="1", SLIPWAY_METRICS_TOKEN=token,
                SLIPWAY_RUNTIME_HELPER_IMAGE="localhost/busybox:latest") as server, \
            httpx.Client(base_url=server.base, headers=auth, timeout=60) as http:
        try:
            customer = http.post("/api/customers", json={"name": "Acme"}).json()["id"]
            for name, compose in (("ok-" + os.urandom(3).hex(), SLEEPER), ("bad-" + os.urandom(3).hex(), MISSING)):
                created = http.post("/api/services", json={"name": name, "customer_id": customer,
                                                           "deploy_method": "compose", "compose": compose})
                assert created.status_code == 201, created.text
                made.append(created.json()["id"])
            deadline = time.monotonic() + 180
            while True:
                statuses = [http.get(f"/api/services/{s}").json()["status"] for s in made]
                if statuses[0] == "running" and statuses[1] == "failed":
                    break
                assert statuses[0] != "failed", statuses
                assert time.monotonic() < deadline, statuses
                time.sleep(0.5)
            # a job is counted once it has ended (app.workers.deploys.record_deploy, after the
            # status the loop above saw was committed): the counters, a moment later
            deadline = time.monotonic() + 30
            while True:
                text = http.get("/metrics", headers={"Authorization": f"Bearer {token}"}).text
                if _value(text, "slipway_deploy_jobs_total{") >= 2 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert _value(text, 'slipway_deploy_jobs_total{outcome="succeeded"}') == 1, text
            assert _value(text, 'slipway_deploy_jobs_total{outcome="failed"}') == 1, text
            assert _value(text, 'slipway_deploy_job_duration_seconds_count{outcome="succeeded"}') == 1
            assert _value(text, 'slipway_deploy_job_duration_seconds_count{outcome="failed"}') == 1
            assert re.search(r'slipway_deploy_job_duration_seconds_sum\{outcome="succeeded"\} [1-9]', text), text
        finally:
            for service_id in made:
                http.delete(f"/api/services/{service_id}")
            from app.pluginmanager import make_plugin_manager, runtimes

            engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, engine_ulimits))
            for service_id in made:
                engine.remove_service(service_id)
