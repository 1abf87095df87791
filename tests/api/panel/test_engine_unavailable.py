"""With no engine configured, or one that does not answer its ping, the operations that
queue work for the engine are refused at once: 503 ``engine_unavailable`` naming
``SLIPWAY_RUNTIME_URL``, with ``Retry-After``; nothing is stored (app.engine_gate)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from core.panel import access, customers, services

DEAD_SOCKET = "unix:///nonexistent/slipway-dead.sock"


def _methods_and_catalog():
    from app.pluginmanager import deploy_methods, make_plugin_manager, templates

    pm = make_plugin_manager()
    return deploy_methods(pm), templates(pm)


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
    return customer.id, service.id, admin[1]


def _counts(store) -> dict:
    m = store.models
    with store.db.connection_context():
        return {name: getattr(m, name).select().count() for name in ("Service", "DeployJob", "Backup")
                if hasattr(m, name)}


@pytest.mark.parametrize("engine", ["none", "dead socket"])
def test_engine_work_is_refused_at_once_and_stores_nothing(make_app, store, clock, engine):
    from tests.support.contract_client import ContractClient

    url = None if engine == "none" else DEAD_SOCKET
    client = ContractClient(make_app(runtime_url=url))
    customer_id, service_id, key = _stopped_service(store, clock)
    before = _counts(store)
    listed = client.get("/api/services", token=key, expect=200).json
    refused = [
        ("POST", "/api/services", {"name": "new", "customer_id": customer_id, "deploy_method": "compose",
                                   "compose": "services:\n  web:\n    image: localhost/busybox:latest\n"}),
        ("POST", "/api/services", {"name": "site", "customer_id": customer_id, "deploy_method": "template",
                                   "template_id": "static-site"}),
        ("POST", f"/api/services/{service_id}/redeploy", None),
        ("POST", f"/api/services/{service_id}/start", None),
        ("POST", f"/api/services/{service_id}/restart", None),
        ("POST", f"/api/services/{service_id}/rollback", {}),
        ("POST", f"/api/services/{service_id}/backups", {}),
        ("POST", f"/api/services/{service_id}/backups/bkp_missing/restore", {}),
    ]
    for method, path, body in refused:
        result = client.request(method, path, token=key, json_body=body, expect=503)
        error = result.json["error"]
        assert error["code"] == "engine_unavailable", (path, error)
        assert "SLIPWAY_RUNTIME_URL" in error["message"] and "nothing was changed" in error["message"]
        if engine == "dead socket":
            assert "does not answer its ping" in error["message"]
        else:
            assert "no container engine is configured" in error["message"]
        assert int(result.headers["Retry-After"]) > 0
    assert _counts(store) == before  # nothing stored
    assert client.get("/api/services", token=key, expect=200).json == listed
    with store.uow() as uow:
        assert uow.services.get(service_id).status == "stopped"


def test_the_ping_is_kept_a_short_while_and_asked_again(make_app, store, clock, runtime_url):
    """An answer is kept ``OK_FOR`` seconds, a failure ``DOWN_FOR`` (app.engine_gate): an
    engine that comes back is used at once after that."""
    from app import engine_gate
    from tests.support.contract_client import ContractClient

    app = make_app(runtime_url=runtime_url)
    client = ContractClient(app)
    customer_id, service_id, key = _stopped_service(store, clock)
    gate = app.parts.engine_gate
    now = [1000.0]
    gate.monotonic = lambda: now[0]
    gate.remember(False)  # as if the last ping had failed
    client.post(f"/api/services/{service_id}/redeploy", token=key, expect=503)
    now[0] += engine_gate.DOWN_FOR  # the failure is forgotten: the engine is asked again
    client.post(f"/api/services/{service_id}/redeploy", token=key, expect=200)
    assert gate.cached() is True
