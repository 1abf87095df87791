"""Custom domains: the host-name rules (``core.panel.domains``), PATCH of a service's
domains with the in-memory unit of work, and the route records they get."""
from __future__ import annotations

import pytest

from core.errors import Conflict, Forbidden, Invalid, NotFound
from core.panel import domains, routes, services
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from tests.support.fakes import FakeResolver, principal_of

DOMAIN = "apps.example.test"


@pytest.mark.parametrize("name", ["example.com", "www.example.com", "a.b", "x1-y2.example.org", "0day.example",
                                  "a" * 63 + ".com", ".".join(["a" * 49] * 5) + ".com"[:0]])
def test_good_names(name):
    assert domains.problem(name, DOMAIN) is None, name


@pytest.mark.parametrize("name, why", [
    ("Example.com", "lower-case"), ("EXAMPLE.COM", "lower-case"), ("example.com.", "trailing dot"),
    ("*.example.com", "wildcard"), ("localhost", "two labels"), ("", "host name"), (None, "host name"),
    (42, "host name"), ("10.0.0.1", "IP address"), ("::1", "IP address"), ("[::1]", "IP address"),
    ("-a.example.com", "labels"), ("a-.example.com", "labels"), ("a..example.com", "labels"),
    ("a_b.example.com", "labels"), ("a" * 64 + ".com", "labels"), ("é.example.com", "ASCII"),
    ("exa mple.com", "labels"), ("a." * 127 + "com", "253"), (DOMAIN, "SLIPWAY_BASE_DOMAIN"),
    ("web." + DOMAIN, "SLIPWAY_BASE_DOMAIN"), ("a.b." + DOMAIN, "SLIPWAY_BASE_DOMAIN"),
])
def test_bad_names(name, why):
    assert why in domains.problem(name, DOMAIN)


@pytest.mark.parametrize("name, why", [
    # review (t14-rreview): names that route someone else's traffic or never leave the machine
    ("example.com\n", "labels"), ("www.example.com\n", "labels"), ("a.b\n", "labels"),
    ("1.2.3.4", "IP address"), ("127.0.0.1", "IP address"), ("example.0x7f", "IP address"),
    ("a.123", "IP address"), ("0x7f.1", "IP address"),
    ("a.localhost", "special-use"), ("x.y.local", "special-use"), ("db.internal", "special-use"),
    ("host.localdomain", "special-use"), ("printer.home.arpa", "special-use"), ("1.0.0.127.in-addr.arpa", "special-use"),
    ("nothing.invalid", "special-use"),
    ("\u0430pple.com", "ASCII"), ("ｗｅｂ." + DOMAIN, "ASCII"), ("web." + DOMAIN.replace("a", "\u0430"), "ASCII"),
    ("web.apps.example.test\u3002", "ASCII"),
    ("xn--.com", "labels"), ("xn--abc.com", "punycode"), ("xn--web-.com", "labels"), ("ab--cd.com", "punycode"),
    ("xn--ls8h.xn--abc", "punycode"),
])
def test_names_that_could_hijack_or_stay_local_are_refused(name, why):
    assert why in domains.problem(name, DOMAIN), name


def test_valid_punycode_and_lookalike_free_names_pass():
    assert domains.problem("xn--pple-43d.com", DOMAIN) is None  # аpple.com in its ASCII form: another name
    assert domains.problem("xn--mnchen-3ya.de", DOMAIN) is None
    assert domains.problem("127.0.0.1.nip.io", DOMAIN) is None
    assert domains.problem("local.example.com", DOMAIN) is None  # only the last label is special-use


def test_the_panel_and_caddy_admin_hosts_and_names_under_them_are_refused():
    reserved = ("panel.example.com", "caddy-admin.example.net")
    for name in ("panel.example.com", "x.panel.example.com", "caddy-admin.example.net"):
        assert "Slipway's own" in domains.problem(name, DOMAIN, reserved), name
    assert domains.problem("example.com", DOMAIN, reserved) is None
    assert domains.problem("mypanel.example.com", DOMAIN, reserved) is None
    with pytest.raises(Invalid) as raised:
        domains.check(["ok.example.org", "panel.example.com"], DOMAIN, reserved)
    assert list(raised.value.fields) == ["custom_domains[1]"]


def test_a_service_host_that_is_or_is_above_a_reserved_host_is_refused():
    reserved = ("A.Panel.Example.com.", "caddy-admin.example.net", "", None)
    assert "Slipway's own" in domains.service_host_problem("caddy-admin.example.net", reserved)
    assert "above a.panel.example.com" in domains.service_host_problem("panel.example.com", reserved)
    assert "Slipway's own" in domains.service_host_problem("a.panel.example.com", reserved)
    for fine in ("b.panel.example.com", "x.a.panel.example.com", "mypanel.example.com", "anel.example.com",
                 "example.org"):
        assert domains.service_host_problem(fine, reserved) is None, fine
    assert domains.service_host_problem("panel.example.com", ()) is None


def test_a_name_merely_ending_like_the_base_domain_is_not_under_it():
    assert domains.problem("myapps.example.test", DOMAIN) is None
    assert domains.problem("web.apps.example.test", None) is None  # no base domain: nothing reserved


def test_the_list_rules():
    assert domains.check([], DOMAIN) == []
    with pytest.raises(Invalid) as raised:
        domains.check([f"s{i}.example.com" for i in range(11)], DOMAIN)
    assert "at most 10" in raised.value.fields["custom_domains"]
    with pytest.raises(Invalid) as raised:
        domains.check(["a.example.com", "b.example.com", "a.example.com"], DOMAIN)
    assert raised.value.fields == {"custom_domains[2]": "a.example.com appears twice"}
    with pytest.raises(Invalid) as raised:
        domains.check("a.example.com", DOMAIN)
    assert "custom_domains" in raised.value.fields


def _running(uow, clock, admin, customer, methods, runtime, name="web"):
    request = {"name": name, "deploy_method": "compose", "customer_id": customer.id}
    service, job = services.create_service(uow, clock, admin, request, methods, {})
    run_job(uow, Deployer(clock, runtime, DeploySettings(health_timeout=90, drain_seconds=2.0, base_domain=DOMAIN,
                                                         settle_seconds=0), resolver=FakeResolver()), job)
    return service


def _patch(uow, clock, principal, service_id, body, methods):
    return services.patch_service(uow, clock, principal, service_id, body, methods, {}, base_domain=DOMAIN)


def test_domains_get_route_records_at_once_and_lose_them_when_dropped(uow, clock, admin, customer, methods, runtime):
    service = _running(uow, clock, admin, customer, methods, runtime)
    [own] = routes.list_routes(uow)
    changed = _patch(uow, clock, admin, service.id, {"custom_domains": ["www.acme.test", "acme.test"]}, methods)
    assert changed.custom_domains == ("acme.test", "www.acme.test")
    assert services.get_service(uow, admin, service.id).custom_domains == ("acme.test", "www.acme.test")
    assert {(r.hostname, r.target) for r in routes.list_routes(uow)} == {
        (own.hostname, own.target), ("acme.test", own.target), ("www.acme.test", own.target)}
    _patch(uow, clock, admin, service.id, {"custom_domains": ["acme.test"]}, methods)
    assert [r.hostname for r in routes.list_routes(uow)] == ["acme.test", own.hostname]
    # a stop removes every record, a start writes them all again
    with uow:
        routes.follow(uow, service, "", DOMAIN, clock.now())
        uow.commit()
    assert routes.list_routes(uow) == []
    with uow:
        routes.follow(uow, service, "http://127.0.0.1:9", DOMAIN, clock.now())
        uow.commit()
    assert [(r.hostname, r.target) for r in routes.list_routes(uow)] == [
        ("acme.test", "http://127.0.0.1:9"), (own.hostname, "http://127.0.0.1:9")]
    services.delete_service(uow, runtime, admin, service.id)
    assert routes.list_routes(uow) == []
    with uow:
        assert uow.custom_domains.for_service(service.id) == []


def test_without_a_base_domain_domains_still_get_records(uow, clock, admin, customer, methods, runtime):
    request = {"name": "web", "deploy_method": "compose", "customer_id": customer.id}
    service, job = services.create_service(uow, clock, admin, request, methods, {})
    run_job(uow, Deployer(clock, runtime, DeploySettings(health_timeout=90, drain_seconds=2.0, base_domain=None,
                                                         settle_seconds=0), resolver=FakeResolver()), job)
    assert routes.list_routes(uow) == []
    url = services.get_service(uow, admin, service.id).url
    assert url.startswith("http://127.0.0.1:")
    services.patch_service(uow, clock, admin, service.id, {"custom_domains": ["acme.test"]}, methods, {})
    assert [(r.hostname, r.target) for r in routes.list_routes(uow)] == [("acme.test", url)]


def test_a_name_of_another_service_is_409_and_nothing_changes(uow, clock, admin, customer, methods, runtime):
    first = _running(uow, clock, admin, customer, methods, runtime, "one")
    second = _running(uow, clock, admin, customer, methods, runtime, "two")
    _patch(uow, clock, admin, first.id, {"custom_domains": ["acme.test"]}, methods)
    _patch(uow, clock, admin, second.id, {"custom_domains": ["old.test"]}, methods)
    before = routes.list_routes(uow)
    with pytest.raises(Conflict, match="acme.test"):
        _patch(uow, clock, admin, second.id, {"custom_domains": ["new.test", "acme.test"]}, methods)
    assert services.get_service(uow, admin, second.id).custom_domains == ("old.test",)
    assert routes.list_routes(uow) == before
    # once the first lets it go, the second may have it
    _patch(uow, clock, admin, first.id, {"custom_domains": []}, methods)
    assert _patch(uow, clock, admin, second.id, {"custom_domains": ["acme.test"]}, methods).custom_domains == (
        "acme.test",)


def test_refusals(uow, clock, admin, customer, methods, runtime):
    service = _running(uow, clock, admin, customer, methods, runtime)
    for body, field in [({}, "body"), ({"name": "x"}, "name"), ({"compose": "x"}, "compose"),
                        ({"git_branch": "main"}, "git_branch"), ({"custom_domains": ["A.test"]}, "custom_domains[0]"),
                        ({"custom_domains": ["x." + DOMAIN]}, "custom_domains[0]")]:
        with pytest.raises(Invalid) as raised:
            _patch(uow, clock, admin, service.id, body, methods)
        assert field in raised.value.fields, body
    from core.panel import customers

    someone = customers.create_customer(uow, clock, name="Other")
    other = principal_of(uow, clock, "customer", customer_id=someone.id)
    with pytest.raises(NotFound):
        _patch(uow, clock, other, service.id, {"custom_domains": ["acme.test"]}, methods)
    viewer = principal_of(uow, clock, "viewer")
    with pytest.raises(Forbidden):
        _patch(uow, clock, viewer, service.id, {"custom_domains": ["acme.test"]}, methods)
    assert services.get_service(uow, admin, service.id).custom_domains == ()


def test_a_domain_claimed_before_the_base_domain_covered_it_gets_no_record(uow, clock, admin, customer, methods,
                                                                          runtime):
    """Review (t14-rreview): a name claimed while SLIPWAY_BASE_DOMAIN was unset (or
    another) and now under it would take another service's own name over; it is left out."""
    one = _running(uow, clock, admin, customer, methods, runtime, "one")
    two = _running(uow, clock, admin, customer, methods, runtime, "two")
    with uow:
        uow.custom_domains.claim(f"two.{DOMAIN}", one.id, clock.now())
        uow.custom_domains.claim("shop.test", one.id, clock.now())
        routes.follow(uow, one, "http://127.0.0.1:9", DOMAIN, clock.now())
        uow.commit()
    by_name = {r.hostname: r.service_id for r in routes.list_routes(uow)}
    assert by_name == {f"one.{DOMAIN}": one.id, "shop.test": one.id, f"two.{DOMAIN}": two.id}
