"""Health, status and routes follow the release that serves, on a real engine (through
Slipway's Podman and Docker runtimes) with a real
server checking health every second: a compose service of three containers (each ignores
SIGTERM, so the engine shows it ``stopping`` for the whole stop timeout, then kills it:
exit 137) is redeployed, rolled back and restarted. After each, once the retired set is
gone from the engine and two more health checks have passed, the service is ``running``,
its route is kept (on the host port the published component kept), and its timeline has no ``unhealthy`` or ``failed`` health event."""
from __future__ import annotations

import time

import pytest

from tests.integration.test_deploy_safety_engine import IMAGE, _eventually, server  # noqa: F401 (a fixture)
from tests.support.releases import wait_job

pytestmark = pytest.mark.runtime

# busybox httpd as PID 1 has no SIGTERM handler: a stop waits its timeout, then kills (137)
COMPONENT = ("  {name}:\n    image: " + IMAGE + "\n"
             "    command: [sh, -c, 'mkdir -p /www; echo {name}-$$HOSTNAME > /www/index.html; "
             "exec httpd -f -p 8080 -h /www']\n")
COMPOSE = "services:\n" + "".join(COMPONENT.format(name=n) for n in ("a", "b", "c")) + "    ports: ['8080']\n"


def _sick_events(http, service_id) -> list:
    events = http.get(f"/api/services/{service_id}/events", params={"per_page": 100}).json()["data"]
    return [e for e in events if e["type"] == "health" and e["status"] in ("unhealthy", "failed")]


def _settled(panel, service_id) -> dict:
    """Wait until the engine holds the serving set only (three containers: the retired
    set is gone), then for two health checks after that; answers the detail."""
    _eventually(lambda: len(panel.engine.containers(service_id)) == 3, 120, "the retired set is removed")
    for _ in range(2):
        before = panel.http.get(f"/api/services/{service_id}").json()["health"]["last_check"]
        _eventually(lambda: _checked_after(panel, service_id, before), 30, "a health check ran")
    return panel.http.get(f"/api/services/{service_id}").json()


def _checked_after(panel, service_id, before) -> bool:
    detail = panel.http.get(f"/api/services/{service_id}").json()
    assert detail["status"] == "running", (detail["status"], _sick_events(panel.http, service_id))
    return detail["health"]["last_check"] != before


def _job(panel, service_id, answer) -> None:
    assert answer.status_code == 200, answer.text
    assert wait_job(panel.http, service_id, answer.json()["deploy_job_id"], seconds=120)["status"] == "succeeded"


@pytest.mark.parametrize("runtime", ["podman", "docker"])  # the Podman and Docker clients of one engine
def test_redeploy_rollback_and_restart_of_three_containers_stay_running_and_healthy(server, runtime):
    panel = server(SLIPWAY_RUNTIME=runtime, SLIPWAY_HEALTH_INTERVAL="1", SLIPWAY_BASE_DOMAIN="apps.example.test", SLIPWAY_DEPLOY_SETTLE="1",
                   SLIPWAY_DEPLOY_DRAIN="1", SLIPWAY_ENGINE_TIMEOUT="120")
    service_id = panel.create(panel.customer("Acme"), COMPOSE, "three")
    _eventually(lambda: panel.http.get(f"/api/services/{service_id}").json()["status"] == "running", 90,
                "the service runs")
    operations = {
        "redeploy": lambda: _job(panel, service_id, panel.http.post(f"/api/services/{service_id}/redeploy")),
        "rollback": lambda: _job(panel, service_id, panel.http.post(f"/api/services/{service_id}/rollback",
                                                                    json={})),
        "restart": lambda: panel.http.post(f"/api/services/{service_id}/restart", timeout=120).raise_for_status(),
    }
    route = panel.routes().get(service_id)  # http://127.0.0.1:<c's host port>, which c keeps
    for name, operate in operations.items():
        started = time.monotonic()
        operate()
        detail = _settled(panel, service_id)
        assert detail["status"] == "running" and detail["health"]["consecutive_failures"] == 0, (name, detail)
        assert _sick_events(panel.http, service_id) == [], (name, time.monotonic() - started)
        assert panel.routes().get(service_id) == route, name  # the route record stays, on the kept port
    assert panel.http.get(f"/api/services/{service_id}").json()["release"] == 3
