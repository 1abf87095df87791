"""The route providers' rendering and settings: Caddy's server and TLS policy, the Traefik
file, the factories, and the hook ``register_route_providers`` picking one by name."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
import yaml

from app.config import Config, ConfigError
from app.pluginmanager import make_plugin_manager, route_providers
from app.composition import Composition
from core.panel.routes import Route
from plugins import routes_caddy, routes_file

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _route(hostname, port, service="svc_1"):
    return Route(hostname, service, f"http://127.0.0.1:{port}", NOW, NOW)


def test_caddy_server_has_one_route_per_record_with_retries():
    server = routes_caddy.render_server([_route("www.acme.test", 41001), _route("a.apps.example.test", 41001)],
                                        ":8443")
    assert server["listen"] == [":8443"]
    assert [r["match"] for r in server["routes"]] == [[{"host": ["a.apps.example.test"]}],
                                                       [{"host": ["www.acme.test"]}]]
    for route in server["routes"]:
        [handler] = route["handle"]
        assert route["terminal"] is True
        assert handler["handler"] == "reverse_proxy"
        assert handler["upstreams"] == [{"dial": "127.0.0.1:41001"}]
        assert handler["load_balancing"]["try_duration"] == "5s"  # a switch's refused dial is retried
    assert routes_caddy.render_server([], ":443") == {"listen": [":443"], "routes": []}


def test_caddy_tls_policy_only_for_internal_and_only_with_names():
    routes = [_route("b.test", 1), _route("a.test", 2)]
    assert routes_caddy.render_tls_policy(routes, "internal") == {
        "@id": "slipway-tls", "subjects": ["a.test", "b.test"], "issuers": [{"module": "internal"}]}
    assert routes_caddy.render_tls_policy(routes, "") is None  # Caddy's automatic ACME
    assert routes_caddy.render_tls_policy([], "internal") is None  # no subjects would mean every name


@pytest.mark.parametrize("target, dial", [("http://127.0.0.1:5", "127.0.0.1:5"), ("http://[::1]:80", "[::1]:80"),
                                          ("http://127.0.0.1:8080/", "127.0.0.1:8080")])
def test_caddy_dial(target, dial):
    assert routes_caddy.dial(target) == dial


@pytest.mark.parametrize("target", ["https://x:1", "http://127.0.0.1", "ftp://a:1", "http://10.0.0.2:8080",
                                    "http://example.com:80", "http://127.0.0.1:99999", "http://u@127.0.0.1:5",
                                    "http://127.0.0.1:5/x", "http://127.0.0.1:5?a", "127.0.0.1:5",
                                    'http://127.0.0.1:5"}', "http://127.0.0.1:5\n", None])
def test_caddy_dial_refuses_what_is_not_an_http_upstream(target):
    with pytest.raises(ValueError):
        routes_caddy.dial(target)


@pytest.mark.parametrize("settings, variable", [
    ({"SLIPWAY_CADDY_ADMIN": "localhost:2019"}, "SLIPWAY_CADDY_ADMIN"),
    ({"SLIPWAY_CADDY_TLS": "acme"}, "SLIPWAY_CADDY_TLS"),
    ({"SLIPWAY_CADDY_LISTEN": "443"}, "SLIPWAY_CADDY_LISTEN"),
])
def test_caddy_settings_are_checked(settings, variable):
    with pytest.raises(ValueError, match=variable):
        routes_caddy.CaddyRoutesFactory().create(settings)


def test_caddy_defaults():
    provider = routes_caddy.CaddyRoutesFactory().create({})
    assert (provider.admin, provider.listen, provider.tls) == ("http://127.0.0.1:2019", ":443", "")


def test_the_file_has_one_router_per_hostname(tmp_path):
    path = tmp_path / "proxy" / "slipway.yml"
    provider = routes_file.FileRoutesFactory().create({"SLIPWAY_ROUTES_FILE": str(path)})
    routes = [_route("acme.test", 41002), _route("web.apps.example.test", 41002)]
    assert provider.sync(routes) is True
    assert provider.sync(routes) is False  # unchanged: not written again
    document = yaml.safe_load(path.read_text())
    assert document["http"]["routers"] == {
        "slw-acme_test": {"rule": "Host(`acme.test`)", "service": "slw-acme_test", "tls": {}},
        "slw-web_apps_example_test": {"rule": "Host(`web.apps.example.test`)",
                                      "service": "slw-web_apps_example_test", "tls": {}}}
    assert document["http"]["services"]["slw-acme_test"] == {
        "loadBalancer": {"servers": [{"url": "http://127.0.0.1:41002"}]}}
    assert provider.sync([]) is True and yaml.safe_load(path.read_text()) == {}
    assert routes_file.FileRoutesFactory().create({}) is None  # no SLIPWAY_ROUTES_FILE: off


def test_the_file_key_is_one_per_host_name():
    assert routes_file.key("my.shop-apps.example.com") == "slw-my_shop-apps_example_com"
    assert routes_file.key("my-shop.apps.example.com") == "slw-my-shop_apps_example_com"
    # names that a dot-for-dash key would fold together, each pair two keys
    for a, b in [("my.shop-apps.example.com", "my-shop.apps.example.com"), ("a-b.test", "a.b.test"),
                 ("a--b.test", "a-.-b.test"), ("x.y-z.test", "x-y.z.test")]:
        assert routes_file.key(a) != routes_file.key(b), (a, b)
    # the dot is the only character the key writes differently, and never as itself: injective
    names = [f"{a}{sep}{b}.test" for a in ("w", "w-x", "w.x") for sep in ("-", ".") for b in ("y", "y-z", "y.z")]
    assert len({routes_file.key(n) for n in names}) == len(set(names))
    assert all("@" not in routes_file.key(n) and routes_file.key(n).startswith("slw-") for n in names)
    for bad in ("", "a_b.test", "A.test", "a b.test", "a@b.test", None):
        with pytest.raises(ValueError):
            routes_file.key(bad)


def test_a_custom_domain_never_takes_another_hosts_router_in_the_file():
    routes = [_route("my-shop.apps.example.com", 41010, "svc_shop"), _route("my.shop-apps.example.com", 41020, "svc_x")]
    document = yaml.safe_load(routes_file.render(routes))
    served = {router["rule"]: document["http"]["services"][router["service"]]["loadBalancer"]["servers"]
              for router in document["http"]["routers"].values()}
    assert served == {"Host(`my-shop.apps.example.com`)": [{"url": "http://127.0.0.1:41010"}],
                      "Host(`my.shop-apps.example.com`)": [{"url": "http://127.0.0.1:41020"}]}


def test_caddy_matches_each_host_name_alone():
    """Caddy's routes carry no ``@id`` (only Slipway's TLS policy has one): each is its own
    entry matched by its exact host name, so no name can stand for another's."""
    server = routes_caddy.render_server([_route("my-shop.apps.example.com", 41010, "svc_shop"),
                                         _route("my.shop-apps.example.com", 41020, "svc_x")], ":443")
    assert [(r["match"], r["handle"][0]["upstreams"]) for r in server["routes"]] == [
        ([{"host": ["my-shop.apps.example.com"]}], [{"dial": "127.0.0.1:41010"}]),
        ([{"host": ["my.shop-apps.example.com"]}], [{"dial": "127.0.0.1:41020"}])]
    assert not any("@id" in r for r in server["routes"])


def test_a_file_of_the_earlier_naming_is_replaced_whole(tmp_path):
    path = tmp_path / "slipway.yml"
    path.write_text(yaml.safe_dump({"http": {
        "routers": {"slw-my-shop-apps-example-com": {"rule": "Host(`my.shop-apps.example.com`)",
                                                     "service": "slw-my-shop-apps-example-com", "tls": {}}},
        "services": {"slw-my-shop-apps-example-com": {"loadBalancer": {"servers": [{"url": "http://127.0.0.1:1"}]}}}}}))
    provider = routes_file.FileRoutes(str(path))
    assert provider.sync([_route("my-shop.apps.example.com", 41010)]) is True
    document = yaml.safe_load(path.read_text())
    assert list(document["http"]["routers"]) == list(document["http"]["services"]) == ["slw-my-shop_apps_example_com"]


def test_register_route_providers_gives_file_and_caddy_and_the_setting_picks_one(tmp_path):
    pm = make_plugin_manager()
    assert set(route_providers(pm)) == {"file", "caddy"}
    assert Composition(Config(routes="file")).route_provider is None
    assert Composition(Config(routes="file", routes_file=str(tmp_path / "r.yml"))).route_provider.name == "file"
    assert Composition(Config(routes="caddy", caddy_tls="internal")).route_provider.tls == "internal"
    with pytest.raises(ConfigError, match="SLIPWAY_ROUTES: no loaded plugin provides 'nginx'.*caddy, file"):
        Composition(Config(routes="nginx")).route_provider  # noqa: B018 - builds it: the setting is refused
    with pytest.raises(ConfigError, match="SLIPWAY_CADDY_TLS"):
        Composition(Config(routes="caddy", caddy_tls="letsencrypt")).route_provider  # noqa: B018 - builds it: the setting is refused


def test_settings_come_from_the_environment():
    config = Config.from_env({"SLIPWAY_ROUTES": "Caddy", "SLIPWAY_CADDY_ADMIN": "http://127.0.0.1:2020",
                              "SLIPWAY_CADDY_TLS": "internal", "SLIPWAY_CADDY_LISTEN": "127.0.0.1:8443"})
    assert (config.routes, config.caddy_admin, config.caddy_tls, config.caddy_listen) == (
        "caddy", "http://127.0.0.1:2020", "internal", "127.0.0.1:8443")
    assert (Config.from_env({}).routes, Config.from_env({}).caddy_listen) == ("file", ":443")


def test_the_deploy_worker_gets_the_blocking_sync_when_it_takes_one(make_app, monkeypatch, tmp_path):
    """interface: DeployWorker(..., routes_changed=...) is handed the route sync's blocking
    sync (which logs instead of raising); without a provider, or a DeployWorker without the
    parameter, nothing is passed."""
    import app.workers.deploys as factory

    real = factory.DeployWorker
    seen = {}

    class Taking(real):
        def __init__(self, *args, routes_changed=None, **kwargs):
            seen["routes_changed"] = routes_changed
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(factory, "DeployWorker", Taking)
    app = make_app(routes_file=str(tmp_path / "routes.yml"))
    route_sync = app.parts.route_sync
    assert seen["routes_changed"] == route_sync.sync_now
    seen["routes_changed"]()  # syncs at once: the file is there
    assert (tmp_path / "routes.yml").exists()
    seen.clear()
    assert make_app().parts.route_sync is None and seen["routes_changed"] is None
    monkeypatch.setattr(factory, "DeployWorker", real)
    assert make_app(routes_file=str(tmp_path / "routes.yml")).parts.route_sync is not None


# --- review fixes (t14-rreview): nothing but a host name and a loopback upstream reaches a proxy ---

BAD_RECORDS = [Route("evil.test`) || HostRegexp(`.*", "svc_x", "http://127.0.0.1:5", NOW, NOW),
               Route("evil.test\n", "svc_x", "http://127.0.0.1:5", NOW, NOW),
               Route('a"b.test', "svc_x", "http://127.0.0.1:5", NOW, NOW),
               Route("UPPER.test", "svc_x", "http://127.0.0.1:5", NOW, NOW),
               Route("other.test", "svc_x", "http://10.0.0.9:22", NOW, NOW),
               Route("admin.test", "svc_x", "http://127.0.0.1:2019/load", NOW, NOW)]


def test_ill_formed_records_never_reach_caddy_and_do_not_keep_the_others_out():
    good = _route("www.acme.test", 41001)
    server = routes_caddy.render_server(BAD_RECORDS + [good], ":443")
    assert [r["match"] for r in server["routes"]] == [[{"host": ["www.acme.test"]}]]
    assert routes_caddy.render_tls_policy(BAD_RECORDS + [good], "internal")["subjects"] == ["www.acme.test"]
    assert routes_caddy.render_tls_policy(BAD_RECORDS, "internal") is None  # no subjects: no policy at all


def test_ill_formed_records_never_reach_the_traefik_file():
    document = yaml.safe_load(routes_file.render(BAD_RECORDS + [_route("www.acme.test", 41001)]))
    assert [r["rule"] for r in document["http"]["routers"].values()] == ["Host(`www.acme.test`)"]
    assert [s["loadBalancer"]["servers"] for s in document["http"]["services"].values()] == [
        [{"url": "http://127.0.0.1:41001"}]]


@pytest.mark.sockets
def test_a_caddy_that_never_answers_fails_the_sync_within_its_timeout():
    import socket
    import time

    from ports.routes import RouteProviderError

    with socket.socket() as listener:  # accepts connections (the backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        provider = routes_caddy.CaddyRoutes(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(RouteProviderError):
            provider.sync([_route("www.acme.test", 41001)])
        assert time.monotonic() - started < 3


@pytest.mark.sockets
def test_a_caddy_error_answer_is_a_route_provider_error():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from ports.routes import RouteProviderError

    class Broken(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"boom")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        provider = routes_caddy.CaddyRoutes(f"http://127.0.0.1:{server.server_address[1]}", timeout=2)
        with pytest.raises(RouteProviderError, match="500"):
            provider.sync([_route("www.acme.test", 41001)])
    finally:
        server.shutdown()
        server.server_close()
