"""A container engine that is down, or that accepts connections and never answers, gives
a clear 503 and changes nothing; never a request that hangs."""
from __future__ import annotations

import socket
import threading
from dataclasses import replace

import pytest

from core.panel import access, customers, services


@pytest.fixture
def hung_engine(tmp_path):
    """A unix socket that accepts connections and reads them, but never answers."""
    path = str(tmp_path / "hung.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"unix://{path}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def _stopped_service(store, clock):
    customer = customers.create_customer(store.uow(), clock, name="Acme")
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=10000)
    principal = access.authenticate_key(store.uow(), clock, admin[1])
    service, _ = services.create_service(store.uow(), clock, principal, {
        "name": "quiet", "customer_id": customer.id, "deploy_method": "compose",
        "compose": "services:\n  web:\n    image: localhost/busybox:latest\n"}, *_methods_and_catalog())
    with store.uow() as uow:
        uow.services.update(replace(uow.services.get(service.id), status="stopped"))
        uow.commit()
    return service.id, admin[1]


def _methods_and_catalog():
    from app.pluginmanager import deploy_methods, make_plugin_manager, templates

    pm = make_plugin_manager()
    return deploy_methods(pm), templates(pm)


@pytest.mark.parametrize("engine", ["down", "hung"])
def test_engine_trouble_is_503_and_changes_nothing(make_app, store, clock, engine, hung_engine):
    from tests.support.contract_client import ContractClient

    url = "unix:///nonexistent/slipway-down.sock" if engine == "down" else hung_engine
    client = ContractClient(make_app(runtime_url=url, engine_timeout=1))
    service_id, key = _stopped_service(store, clock)
    calls = [("GET", f"/api/services/{service_id}/logs"), ("DELETE", f"/api/services/{service_id}")]
    for method, path in calls:
        result = client.request(method, path, token=key, expect=503)
        assert result.json["error"]["code"] == "internal_error"
        if engine == "hung":
            assert "did not answer within 1 s" in result.json["error"]["message"]
    # start and restart ping the engine first (app.engine_gate): a ping that fails or is
    # not answered within the deadline is engine_unavailable
    for path in (f"/api/services/{service_id}/start", f"/api/services/{service_id}/restart"):
        result = client.request("POST", path, token=key, expect=503)
        assert result.json["error"]["code"] == "engine_unavailable"
        assert "SLIPWAY_RUNTIME_URL" in result.json["error"]["message"] and result.headers["Retry-After"]
    # resources are informative: zeros, the rest from the database
    detail = client.get(f"/api/services/{service_id}", token=key, expect=200).json
    assert detail["status"] == "stopped" and detail["resources"]["cpu_usage"] == 0
    listed = client.get("/api/services", token=key, expect=200).json
    assert [s["id"] for s in listed["data"]] == [service_id]
    with store.uow() as uow:
        assert uow.services.get(service_id).status == "stopped"  # nothing changed
