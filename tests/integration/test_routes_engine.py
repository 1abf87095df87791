"""Route records under ``SLIPWAY_BASE_DOMAIN``: a deploy writes the record (and the
Traefik file the proxy reads), the url is ``https://<name>.<base domain>``, the upstream
in the record answers HTTP, a custom domain gets a record (and a router) of its own, and
delete removes the records with the service."""
from __future__ import annotations

import os
import time

import pytest
import yaml

from tests.support.engine import engine_settings
from tests.support.processes import slipway
from tests.support.panel_server import IMAGE, _get, _until, admin_key, serve_panel, shop_and_squatter

pytestmark = pytest.mark.runtime


def _file_routes(path):
    if not path.exists():
        return None
    document = yaml.safe_load(path.read_text()) or {}
    return {name: (router["rule"], document["http"]["services"][router["service"]]["loadBalancer"]["servers"][0]["url"])
            for name, router in document.get("http", {}).get("routers", {}).items()}


def _eventually(check, seconds=15):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_deploy_writes_a_route_record_and_delete_removes_it(runtime_url, migrated_database_url, engine_ulimits,
                                                            tmp_path):
    routes_file = tmp_path / "proxy" / "slipway.yml"
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_BASE_DOMAIN="apps.example.test",
               SLIPWAY_ROUTES_FILE=str(routes_file), SLIPWAY_ROUTES_INTERVAL="0.2")
    server, client = serve_panel(key, env)
    service_id = None
    try:
        customer = client.post("/api/customers", json={"name": "Acme"}).json()
        name = f"routed-{os.getpid()}-{time.monotonic_ns() % 100000}"
        created = client.post("/api/services", json={
            "name": name, "customer_id": customer["id"], "deploy_method": "template", "template_id": "static-site",
            "variables": {"IMAGE": IMAGE, "TITLE": "Routed"}})
        assert created.status_code == 201, created.text
        service_id = created.json()["id"]
        detail = _until(client, service_id, "running")
        hostname = f"{name}.apps.example.test"
        assert detail["url"] == f"https://{hostname}"

        _, listed = slipway(migrated_database_url, "route", "list")
        [route] = listed["routes"]
        assert route["hostname"] == hostname and route["service_id"] == service_id
        assert route["target"].startswith("http://127.0.0.1:")
        assert "Routed" in _get(route["target"])  # the upstream the proxy is given is the service

        in_file = _eventually(lambda: _file_routes(routes_file))
        assert list(in_file.values()) == [(f"Host(`{hostname}`)", route["target"])]

        # a custom domain gets a router of its own, to the same upstream, at once
        patched = client.patch(f"/api/services/{service_id}", json={"custom_domains": ["www.routed.test"]})
        assert patched.status_code == 200, patched.text
        assert sorted(r["hostname"] for r in slipway(migrated_database_url, "route", "list")[1]["routes"]) == [
            hostname, "www.routed.test"]
        in_file = _eventually(lambda: len(_file_routes(routes_file) or {}) == 2 and _file_routes(routes_file))
        assert sorted(in_file.values()) == sorted([(f"Host(`{hostname}`)", route["target"]),
                                                   ("Host(`www.routed.test`)", route["target"])])
        _, written = slipway(migrated_database_url, "route", "write", env={"SLIPWAY_ROUTES_FILE": str(routes_file)})
        assert (written["provider"], written["file"], written["changed"]) == ("file", str(routes_file), False)

        assert client.delete(f"/api/services/{service_id}").status_code == 204
        assert slipway(migrated_database_url, "route", "list")[1] == {"routes": []}
        _eventually(lambda: _file_routes(routes_file) == {})
        service_id = None
    finally:
        if service_id is not None:
            from app.pluginmanager import make_plugin_manager, runtimes

            runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url)).remove_service(service_id)
        client.close()
        server.terminate()
        server.wait(timeout=20)


def test_route_write_needs_the_file_setting(migrated_database_url):
    status, out = slipway(migrated_database_url, "route", "write", check=False)
    assert status != 0 and "SLIPWAY_ROUTES_FILE" in out["error"]["message"]


def test_a_custom_domain_folding_to_another_services_host_takes_nothing_from_it(runtime_url, migrated_database_url,
                                                                               engine_ulimits, tmp_path):
    """``my.shop-apps.example.com``, a custom domain another customer may add, and the host
    ``my-shop.apps.example.com`` of the service ``my-shop``: a key of dots turned dashes
    folded both into one router; each keeps its own router, rule and upstream."""
    routes_file = tmp_path / "proxy" / "slipway.yml"
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_BASE_DOMAIN="apps.example.com",
               SLIPWAY_ROUTES_FILE=str(routes_file), SLIPWAY_ROUTES_INTERVAL="0.2")
    with shop_and_squatter(key, env, runtime_url) as (server, client, ids):
        shop, squatter = (client.get(f"/api/services/{sid}").json() for sid in ids)
        assert shop["url"] == "https://my-shop.apps.example.com"
        patched = client.patch(f"/api/services/{squatter['id']}", json={"custom_domains": ["my.shop-apps.example.com"]})
        assert patched.status_code == 200, patched.text

        records = {r["hostname"]: r for r in slipway(migrated_database_url, "route", "list")[1]["routes"]}
        assert set(records) == {"my-shop.apps.example.com", "squatter.apps.example.com", "my.shop-apps.example.com"}
        assert records["my-shop.apps.example.com"]["service_id"] == shop["id"]
        assert records["my.shop-apps.example.com"]["service_id"] == squatter["id"]
        assert "The shop" in _get(records["my-shop.apps.example.com"]["target"])
        assert "The squatter" in _get(records["my.shop-apps.example.com"]["target"])

        in_file = _eventually(lambda: len(_file_routes(routes_file) or {}) == 3 and _file_routes(routes_file))
        assert sorted(in_file.values()) == sorted((f"Host(`{hostname}`)", record["target"])
                                                  for hostname, record in records.items())
        assert len(set(in_file)) == 3  # three routers, three names
        assert server.poll() is None and client.get("/api/services").status_code == 200
