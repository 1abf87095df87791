"""A service keeps its host port across redeploys, rollbacks and restarts, on a real
engine (Podman, through Slipway's Podman and Docker runtimes) and a real ``slipway serve``:
the service's ``url`` (``http://127.0.0.1:<host port>`` without a base domain) stays the
one a customer bookmarked, and it answers there after each. A port taken meanwhile (a
listener outside the engine, while the service was stopped) gives another free one, the
new ``url``, and a timeline event saying so."""
from __future__ import annotations

import socket

import httpx
import pytest

from tests.integration.test_deploy_safety_engine import WEB, _eventually, server  # noqa: F401 (a fixture)
from tests.support.releases import wait_job

pytestmark = pytest.mark.runtime


def _detail(panel, service_id) -> dict:
    return panel.http.get(f"/api/services/{service_id}").json()


def _job(panel, service_id, answer) -> None:
    assert answer.status_code == 200, answer.text
    assert wait_job(panel.http, service_id, answer.json()["deploy_job_id"], seconds=120)["status"] == "succeeded"


def _answers(url: str) -> bool:
    try:
        return "hello-" in httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return False


def _serving(panel, service_id) -> str:
    """Once the service runs and only its serving container is left: its url."""
    _eventually(lambda: _detail(panel, service_id)["status"] == "running", 120, "the service runs")
    _eventually(lambda: len(panel.engine.containers(service_id)) == 1, 60, "the retired container is removed")
    return _detail(panel, service_id)["url"]


@pytest.mark.parametrize("runtime", ["podman", "docker"])  # the Podman and Docker clients of one engine
def test_a_service_keeps_its_host_port_across_redeploy_rollback_and_restart(server, runtime):
    panel = server(SLIPWAY_RUNTIME=runtime, SLIPWAY_DEPLOY_SETTLE="1", SLIPWAY_DEPLOY_DRAIN="1")
    service_id = panel.create(panel.customer("Acme"), WEB, "kept")
    url = _serving(panel, service_id)
    assert url.startswith("http://127.0.0.1:") and _eventually(lambda: _answers(url), 30, "it answers")
    operations = {
        "redeploy": lambda: _job(panel, service_id, panel.http.post(f"/api/services/{service_id}/redeploy")),
        "rollback": lambda: _job(panel, service_id, panel.http.post(f"/api/services/{service_id}/rollback",
                                                                    json={})),
        "restart": lambda: panel.http.post(f"/api/services/{service_id}/restart", timeout=120).raise_for_status(),
        "stop, then start": lambda: [panel.http.post(f"/api/services/{service_id}/{op}",
                                                     timeout=120).raise_for_status() for op in ("stop", "start")],
    }
    for name, operate in operations.items():
        operate()
        assert _serving(panel, service_id) == url, name
        (state,) = panel.engine.containers(service_id)
        assert f"http://127.0.0.1:{state.ports[8080]}" == url, name  # the engine's binding, not only the record
        assert _eventually(lambda: _answers(url), 30, f"it answers after the {name}")
    assert _detail(panel, service_id)["release"] == 3
    events = panel.http.get(f"/api/services/{service_id}/events", params={"per_page": 100}).json()["data"]
    assert not [e for e in events if "taken meanwhile" in e["message"]]


def test_a_port_taken_while_the_service_was_stopped_gives_another_and_says_so(server):
    panel = server(SLIPWAY_DEPLOY_SETTLE="1", SLIPWAY_DEPLOY_DRAIN="1")
    service_id = panel.create(panel.customer("Acme"), WEB, "moved")
    url = _serving(panel, service_id)
    port = int(url.rsplit(":", 1)[1])
    panel.http.post(f"/api/services/{service_id}/stop", timeout=120).raise_for_status()
    with socket.socket() as squatter:  # another program took the port meanwhile
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        _eventually(lambda: _bound(squatter, port), 30, "the stopped container let the port go")
        squatter.listen()
        _job(panel, service_id, panel.http.post(f"/api/services/{service_id}/redeploy"))
        moved = _serving(panel, service_id)
    assert moved != url and _eventually(lambda: _answers(moved), 30, "it answers on the other port")
    new_port = int(moved.rsplit(":", 1)[1])
    events = panel.http.get(f"/api/services/{service_id}/events", params={"per_page": 100}).json()["data"]
    assert {"type": "redeploy", "status": "progress",
            "message": f"host port {port} of web (port 8080) was taken meanwhile: it now has host port {new_port}"} \
        in [{k: e[k] for k in ("type", "status", "message")} for e in events]
    # from now on the other port is the one kept
    _job(panel, service_id, panel.http.post(f"/api/services/{service_id}/redeploy"))
    assert _serving(panel, service_id) == moved


def _bound(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True
