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


def test_a_source_that_hangs_is_503_past_its_deadline_and_holds_up_no_other_source(store, clock):
    """Each source is a tenant of the sources' pool, each call with a deadline: a source
    that never answers gives 503 (the request is not let through), while another source
    still answers at once. (The deadline is shortened here; the app's is
    ``AUTH_SOURCE_TIMEOUT_S``.)"""
    import asyncio
    import threading
    from types import SimpleNamespace

    from app.engine_calls import EngineCalls
    from app.extensions import AuthSources
    from app.http.errors import ApiError
    from ports.extensions import ExtensionContext, Identity

    stuck = threading.Event()

    def hangs(request, context):
        stuck.wait(30)
        return Identity(subject="never", role="admin")

    def answers(request, context):
        return Identity(subject="ops", role="admin") if request.headers.get("x-ops") else None

    calls = EngineCalls(threads=8, deadline=0.5, name="test-auth", late="no answer within {deadline:g} s")
    sources = AuthSources([AuthSource(name="stuck", authenticate=hangs), AuthSource(name="ops", authenticate=answers)],
                          ExtensionContext(settings={}, clock=clock), store, calls, default_rpm=60)
    request = SimpleNamespace(method="GET", path="/api/services", headers={"X-Ops": "1"})
    only_ops = AuthSources([AuthSource(name="ops", authenticate=answers)], ExtensionContext(settings={}, clock=clock),
                           store, calls, default_rpm=60)

    async def ask():
        hung = [asyncio.ensure_future(sources.authenticate(request, "203.0.113.9")) for _ in range(3)]
        admitted = await only_ops.authenticate(request, "203.0.113.9")  # while "stuck" holds its share
        answers_ = await asyncio.gather(*hung, return_exceptions=True)
        return admitted, answers_

    try:
        admitted, answers_ = asyncio.run(ask())
    finally:
        stuck.set()
        calls.close()
    assert (admitted.source, admitted.subject) == ("ops", "ops")
    assert all(isinstance(a, ApiError) and a.status == 503 and "stuck did not answer" in a.message
               and a.headers == {"Retry-After": "1"} for a in answers_), answers_
