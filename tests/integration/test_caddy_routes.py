"""The ``caddy`` route provider against a real Caddy (tests/support/caddy.py): a real
``slipway serve`` (SLIPWAY_ROUTES=caddy, SLIPWAY_CADDY_TLS=internal, a base domain)
deploys a service on Podman; its hostname answers through Caddy over HTTPS, a custom
domain added by PATCH does too, and is no longer routed once PATCH drops it; deleting the
service takes its hostname and domains away. Without an engine: the provider keeps the
operator's own servers and TLS policies, writes only on change, and a Caddy that is down
is an error the route worker logs and retries."""
from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timezone

import httpx
import pytest

from core.panel.routes import Route
from plugins.routes_caddy import CaddyRoutes
from ports.routes import RouteProviderError
from tests.support.engine import engine_settings
from tests.support.caddy import running_caddy
from tests.support.panel_server import IMAGE, _until, admin_key, serve_panel, shop_and_squatter
from tests.support.processes import free_port

BASE = "apps.example.test"
NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _answers(caddy, hostname: str, text: str) -> bool:
    try:
        response = caddy.get(hostname, timeout=5)
    except httpx.HTTPError:  # no certificate for an unknown name: the handshake fails
        return False
    return response.status_code == 200 and text in response.text


def _eventually(check, seconds=30, what=""):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


@pytest.mark.runtime
def test_hostname_and_custom_domains_answer_through_caddy_over_https(runtime_url, migrated_database_url,
                                                                     engine_ulimits, tmp_path):
    operator = {"listen": [f"127.0.0.1:{free_port()}"],
                "routes": [{"handle": [{"handler": "static_response", "body": "the operator's"}]}]}
    with running_caddy(tmp_path, apps={"http": {"servers": {"operator": operator}}}) as caddy:
        key = admin_key(migrated_database_url)
        env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
                   SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_BASE_DOMAIN=BASE,
                   SLIPWAY_ROUTES="caddy", SLIPWAY_CADDY_ADMIN=caddy.admin_url, SLIPWAY_CADDY_TLS="internal",
                   SLIPWAY_CADDY_LISTEN=f"127.0.0.1:{caddy.https_port}", SLIPWAY_ROUTES_INTERVAL="0.2")
        env.pop("SLIPWAY_ROUTES_FILE", None)
        server, client = serve_panel(key, env, stderr=open(tmp_path / "server.log", "w+"))
        service_id = second_id = None
        try:
            customer = client.post("/api/customers", json={"name": "Acme"}).json()
            name = f"caddy-{os.getpid()}-{time.monotonic_ns() % 100000}"
            created = client.post("/api/services", json={
                "name": name, "customer_id": customer["id"], "deploy_method": "template",
                "template_id": "static-site", "variables": {"IMAGE": IMAGE, "TITLE": "Through Caddy"}})
            assert created.status_code == 201, created.text
            service_id = created.json()["id"]
            hostname = f"{name}.{BASE}"
            assert _until(client, service_id, "running")["url"] == f"https://{hostname}"
            _eventually(lambda: _answers(caddy, hostname, "Through Caddy"), what="the hostname through Caddy")

            patched = client.patch(f"/api/services/{service_id}",
                                   json={"custom_domains": ["shop.acme.test", "acme.test"]})
            assert patched.status_code == 200, patched.text
            assert patched.json()["custom_domains"] == ["acme.test", "shop.acme.test"]
            for domain in ("shop.acme.test", "acme.test"):
                _eventually(lambda: _answers(caddy, domain, "Through Caddy"), what=f"{domain} through Caddy")

            # two requests racing for one name, through the real server: one 200, one 409
            second = client.post("/api/services", json={
                "name": name + "-b", "customer_id": customer["id"], "deploy_method": "template",
                "template_id": "static-site", "variables": {"IMAGE": IMAGE, "TITLE": "The other one"}})
            assert second.status_code == 201, second.text
            second_id = second.json()["id"]
            _until(client, second_id, "running")
            statuses, start = {}, threading.Barrier(2)

            def race(sid):
                start.wait()
                statuses[sid] = client.patch(f"/api/services/{sid}",
                                             json={"custom_domains": ["race.acme.test"]}).status_code

            threads = [threading.Thread(target=race, args=(sid,)) for sid in (service_id, second_id)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert sorted(statuses.values()) == [200, 409], statuses
            winner = "Through Caddy" if statuses[service_id] == 200 else "The other one"
            _eventually(lambda: _answers(caddy, "race.acme.test", winner), what="the race's winner through Caddy")
            assert client.delete(f"/api/services/{second_id}").status_code == 204
            second_id = None

            assert client.patch(f"/api/services/{service_id}", json={"custom_domains": ["acme.test"]}).status_code == 200
            _eventually(lambda: not _answers(caddy, "shop.acme.test", "Through Caddy"), what="shop.acme.test gone")
            # the names kept answer again once Caddy has its certificates back: right after the
            # TLS policy's subjects change, Caddy may refuse a handshake for a kept name
            # ("tlsv1 alert internal error") until it has loaded that name's certificate
            _eventually(lambda: _answers(caddy, "acme.test", "Through Caddy") and _answers(caddy, hostname,
                                                                                           "Through Caddy"),
                        what="the names kept still answer")

            assert client.delete(f"/api/services/{service_id}").status_code == 204
            service_id = None
            _eventually(lambda: not _answers(caddy, hostname, "Through Caddy")
                        and not _answers(caddy, "acme.test", "Through Caddy"), what="all gone after delete")
            config = caddy.config()
            assert config["apps"]["http"]["servers"]["slipway"]["routes"] == []
            assert config["apps"]["http"]["servers"]["operator"] == operator  # never touched
        finally:
            for left in (service_id, second_id):
                if left is not None:
                    from app.pluginmanager import make_plugin_manager, runtimes

                    runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url)).remove_service(left)
            client.close()
            server.terminate()
            server.wait(timeout=20)


@pytest.mark.runtime
def test_a_custom_domain_folding_to_another_services_host_takes_nothing_from_it(runtime_url, migrated_database_url,
                                                                               engine_ulimits, tmp_path):
    """The service ``my-shop`` (``my-shop.apps.example.com``) and another customer's custom
    domain ``my.shop-apps.example.com``: Caddy serves each host name from its own service."""
    with running_caddy(tmp_path) as caddy:
        key = admin_key(migrated_database_url)
        env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
                   SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0",
                   SLIPWAY_BASE_DOMAIN="apps.example.com", SLIPWAY_ROUTES="caddy",
                   SLIPWAY_CADDY_ADMIN=caddy.admin_url, SLIPWAY_CADDY_TLS="internal",
                   SLIPWAY_CADDY_LISTEN=f"127.0.0.1:{caddy.https_port}", SLIPWAY_ROUTES_INTERVAL="0.2")
        env.pop("SLIPWAY_ROUTES_FILE", None)
        with shop_and_squatter(key, env, runtime_url, stderr=open(tmp_path / "server.log", "w+")) as (_, client, ids):
            patched = client.patch(f"/api/services/{ids[1]}", json={"custom_domains": ["my.shop-apps.example.com"]})
            assert patched.status_code == 200, patched.text
            _eventually(lambda: _answers(caddy, "my.shop-apps.example.com", "The squatter"),
                        what="the custom domain through Caddy")
            _eventually(lambda: _answers(caddy, "my-shop.apps.example.com", "The shop")
                        and _answers(caddy, "squatter.apps.example.com", "The squatter"),
                        what="both services' own names (Caddy reloads its certificates after a change)")
            assert not _answers(caddy, "my-shop.apps.example.com", "The squatter")
            hosts = [r["match"][0]["host"] for r in caddy.config()["apps"]["http"]["servers"]["slipway"]["routes"]]
            assert sorted(hosts) == [["my-shop.apps.example.com"], ["my.shop-apps.example.com"],
                                     ["squatter.apps.example.com"]]


def test_the_provider_keeps_the_operators_config_and_writes_only_on_change(tmp_path):
    import http.server
    import threading

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello from the upstream")

        def log_message(self, *args):
            pass

    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    catch_all = {"issuers": [{"module": "internal"}]}  # the operator's policy for every other name
    operator = {"listen": [f"127.0.0.1:{free_port()}"], "routes": []}
    try:
        with running_caddy(tmp_path, apps={"http": {"servers": {"operator": operator}},
                                           "tls": {"automation": {"policies": [catch_all]}}}) as caddy:
            provider = CaddyRoutes(caddy.admin_url, f"127.0.0.1:{caddy.https_port}", "internal")
            routes = [Route("a.example.test", "svc_1", f"http://127.0.0.1:{upstream.server_port}", NOW, NOW),
                      Route("b.example.test", "svc_1", f"http://127.0.0.1:{upstream.server_port}", NOW, NOW)]
            assert provider.sync(routes) is True
            assert provider.sync(routes) is False  # equal: nothing written
            assert _answers(caddy, "b.example.test", "hello from the upstream")
            policies = caddy.config()["apps"]["tls"]["automation"]["policies"]
            assert policies[0]["@id"] == "slipway-tls" and policies[1] == catch_all
            assert provider.sync(routes[:1]) is True
            assert not _answers(caddy, "b.example.test", "hello from the upstream")
            assert provider.sync([]) is True
            config = caddy.config()
            assert config["apps"]["tls"]["automation"]["policies"] == [catch_all]
            assert config["apps"]["http"]["servers"]["operator"] == operator
            assert config["apps"]["http"]["servers"]["slipway"]["routes"] == []
    finally:
        upstream.shutdown()


def test_a_caddy_that_is_down_is_an_error_to_retry(tmp_path):
    provider = CaddyRoutes(f"http://127.0.0.1:{free_port()}", ":443", "internal", timeout=2)
    with pytest.raises(RouteProviderError, match="admin API"):
        provider.sync([])
    # with a Caddy that starts later (empty config: every parent object is made) the next sync succeeds
    with running_caddy(tmp_path) as caddy:
        provider = CaddyRoutes(caddy.admin_url, f"127.0.0.1:{caddy.https_port}", "")
        assert provider.sync([Route("x.example.test", "svc_1", "http://127.0.0.1:9", NOW, NOW)]) is True
        assert caddy.config()["apps"]["http"]["servers"]["slipway"]["routes"][0]["match"] == [
            {"host": ["x.example.test"]}]
