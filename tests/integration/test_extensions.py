"""What start-up refuses of the behaviour hooks' registrations (app.extensions), and the
rules an auth source's identity must meet before it becomes a principal
(core.panel.access.source_principal), on a real database."""
from __future__ import annotations

import pytest

from app.composition import Composition
from app.config import Config, ConfigError
from core.errors import Forbidden, Unauthorized
from core.panel import access
from core.panel.customers import create_customer
from ports import hookimpl
from ports.extensions import AuthSource, Job, Route, RouteReply, Subscriber

pytestmark = pytest.mark.storage


def _route(**changes):
    fields = dict(plugin="mine", method="GET", path="/thing", operation_id="thing", permission="services:read",
                  handler=lambda request: RouteReply(200, {}))
    return Route(**{**fields, **changes})


def _extensions(*, routes=(), jobs=(), subscribers=(), sources=()):
    class Plugin:
        @hookimpl
        def register_routes(self):
            return list(routes)

        @hookimpl
        def register_jobs(self):
            return list(jobs)

        @hookimpl
        def register_event_subscribers(self):
            return list(subscribers)

        @hookimpl
        def register_auth_sources(self):
            return list(sources)

    return Composition(Config(database_url="sqlite:///:memory:", plugins=(Plugin(),))).extensions


@pytest.mark.parametrize("routes, words", [
    ([_route(plugin="Bad Name")], "plugin name"),
    ([_route(method="TRACE")], "method must be one of"),
    ([_route(path="/../etc")], "path must match"),
    ([_route(path="thing")], "path must match"),
    ([_route(operation_id="no-dashes")], "operation_id"),
    ([_route(permission="root:everything")], "permission must be one of"),
    ([_route(rate_tier="turbo")], "rate_tier"),
    ([_route(), _route()], "registered twice"),
    ([_route(path="/{a}"), _route(path="/{b}", operation_id="other")], "registered twice"),
    (["not a route"], "not a ports.extensions.Route"),
    ([_route(plugin="list", operation_id="services", mcp=True)], "is one of Slipway's own tools"),
])
def test_a_route_slipway_cannot_serve_stops_start_up(routes, words):
    with pytest.raises(ConfigError, match="plugins: ") as raised:
        _extensions(routes=routes)
    assert words in str(raised.value)


def test_jobs_subscribers_and_sources_are_checked():
    with pytest.raises(ConfigError, match="interval"):
        _extensions(jobs=[Job(name="j", interval=0, run=print)])
    with pytest.raises(ConfigError, match="two plugins register the job 'j'"):
        _extensions(jobs=[Job(name="j", interval=1, run=print)] * 2)
    with pytest.raises(ConfigError, match="event subscriber name"):
        _extensions(subscribers=[Subscriber(name="Has Space", handle=print)])
    with pytest.raises(ConfigError, match="auth source"):
        _extensions(sources=[object()])
    found = _extensions(routes=[_route()], jobs=[Job(name="j", interval=1, run=print)],
                        subscribers=[Subscriber(name="s", handle=print)],
                        sources=[AuthSource(name="a", authenticate=lambda r, c: None)])
    assert (len(found.routes), len(found.jobs), len(found.subscribers), len(found.auth_sources)) == (1, 1, 1, 1)


def test_an_identity_becomes_a_principal_only_of_an_existing_role_and_customer(store, clock):
    customer = create_customer(store.uow(), clock, name="Acme")

    def principal(**identity):
        fields = dict(source="src", subject="someone", role="customer", customer_id=customer.id, rate_limit_rpm=None)
        return access.source_principal(store.uow(write=False), default_rpm=120, **{**fields, **identity})

    made = principal()
    assert (made.customer_id, made.rate_limit_rpm, made.bucket_id) == (customer.id, 120, "source:src:someone")
    assert made.permissions == access.ROLES["customer"] and made.key is None
    assert principal(role="viewer").customer_id is None  # only a customer role is bound to a customer
    assert principal(rate_limit_rpm=30).rate_limit_rpm == 30
    for identity in ({"role": "root"}, {"role": None}, {"customer_id": None}, {"customer_id": "cus_nobody"},
                     {"customer_id": 5}, {"subject": ""}, {"subject": None}, {"subject": "x" * 201},
                     {"rate_limit_rpm": 0}, {"rate_limit_rpm": True}, {"rate_limit_rpm": "60"}):
        with pytest.raises(Unauthorized):
            principal(**identity)
    with pytest.raises(Forbidden, match="src"):
        made.require("customers:write")
