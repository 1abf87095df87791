"""Partner webhook rules with the in-memory unit of work: the SSRF rule, who gets which
event, claims that exclude each other, retries with backoff and the give-up."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from core.errors import Invalid
from core.partner import ledger, webhooks
from core.partner.scope import Page
from tests.support.fakes import FakeResolver, caller_of

DNS = {"public.example": ["93.184.215.14"], "rebound.example": ["93.184.215.14", "10.0.0.8"],
       "mapped.example": ["::ffff:169.254.169.254"]}

RESOLVER = FakeResolver(DNS)


@pytest.mark.parametrize("url, private_ok, refused", [
    ("https://public.example/hook", False, None),
    ("https://unknown.example/hook", False, None),  # judged again at delivery
    ("http://public.example/hook", False, "must be https"),
    ("http://public.example/hook", True, "must be https"),
    ("https://rebound.example/hook", False, "rebound.example resolves to 10.0.0.8, which is a private address"),
    ("https://rebound.example/hook", True, None),
    ("http://rebound.example/hook", True, None),
    ("https://mapped.example/hook", False, "a link-local address"),
    ("https://169.254.169.254/", False, "169.254.169.254 is a link-local address"),
    ("gopher://public.example/", True, "http(s) URL"),
    ("https://[fec0::1]/", False, "a site-local address"),  # deprecated, but still routed to a site
    ("https://[::ffff:fec0::1]/", False, "not a valid URL"),
])
def test_url_rule(url, private_ok, refused):
    reason = webhooks.url_refusal(url, allow_private=private_ok, resolver=RESOLVER)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason


def _target(url):
    return webhooks.check_url(url, allow_private=False, resolver=RESOLVER)


def test_check_url_refuses_with_the_field_named():
    with pytest.raises(Invalid) as refused:
        _target("https://rebound.example/hook")
    assert "10.0.0.8" in refused.value.fields["url"]


def _event(uow, clock, caller, name="license.issued"):
    lic = SimpleNamespace(id="6f7d1c9e-0000-4000-8000-000000000001", partner_id=caller.partner.id, customer_id=None)
    with uow:
        stored = ledger.record(uow, clock, event=name, license=lic, actor=None)
        uow.commit()
    return stored


def test_events_reach_the_partners_and_its_ancestors_matching_endpoints(uow, clock):
    root = caller_of(uow, clock, "Root")
    mid = caller_of(uow, clock, "Mid", parent=root)
    leaf = caller_of(uow, clock, "Leaf", parent=mid)
    made = {name: webhooks.create_endpoint(uow, clock, who, target=_target("https://public.example/" + name),
                                           events=events)
            for name, who, events in (("root", root, None), ("mid", mid, ["license.suspended"]),
                                      ("leaf", leaf, None))}
    _event(uow, clock, leaf)
    _event(uow, clock, leaf, "license.suspended")
    _event(uow, clock, mid)

    def events_of(name, who):
        return [d.event for d in webhooks.list_deliveries(uow, who, made[name].id, Page())]

    assert events_of("root", root) == ["license.issued", "license.suspended", "license.issued"]
    assert events_of("mid", mid) == ["license.suspended"]
    assert events_of("leaf", leaf) == ["license.suspended", "license.issued"]
    with pytest.raises(Invalid) as bad:
        webhooks.create_endpoint(uow, clock, root, target=_target("https://public.example/"), events=["license.nope"])
    assert "events" in bad.value.fields


def test_one_claim_wins_retries_back_off_and_the_eighth_failure_gives_up(uow, clock):
    caller = caller_of(uow, clock, "Acme")
    webhooks.create_endpoint(uow, clock, caller, target=_target("https://public.example/"))
    _event(uow, clock, caller)
    first = webhooks.claim_due(uow, clock, "wkr_a", hold=30)
    assert first is not None and first.event.event == "license.issued" and first.endpoint.url.endswith("/")
    assert webhooks.claim_due(uow.fork(), clock, "wkr_b", hold=30) is None  # claimed: another process skips it
    assert webhooks.claim_due(uow, clock, "wkr_a", hold=30, busy={first.endpoint.id}) is None

    waits = []
    claimed = first
    for attempt in range(1, 9):
        done = webhooks.record_attempt(uow, clock, claimed, status_code=503, error="answered 503", retry_base=30)
        assert done.attempts == attempt
        if attempt == 8:
            assert done.status == "failed"
            break
        waits.append((done.next_attempt_at - clock.now()).total_seconds())
        assert webhooks.claim_due(uow, clock, "wkr_a", hold=30) is None  # not due yet
        clock.advance(waits[-1])
        claimed = webhooks.claim_due(uow, clock, "wkr_a", hold=30)
    assert waits == [30, 60, 120, 240, 480, 960, 1920]
    clock.advance(10**6)
    assert webhooks.claim_due(uow, clock, "wkr_a", hold=30) is None


def test_a_lapsed_claim_is_taken_over_and_the_late_result_is_dropped(uow, clock):
    caller = caller_of(uow, clock, "Acme")
    webhooks.create_endpoint(uow, clock, caller, target=_target("https://public.example/"))
    _event(uow, clock, caller)
    dead = webhooks.claim_due(uow, clock, "wkr_dead", hold=12)
    clock.advance(13)  # its process died: the claim lapses
    alive = webhooks.claim_due(uow, clock, "wkr_alive", hold=12)
    assert alive is not None and alive.delivery.id == dead.delivery.id
    assert webhooks.record_attempt(uow, clock, dead, status_code=200, error=None, retry_base=30) is None
    done = webhooks.record_attempt(uow, clock, alive, status_code=204, error=None, retry_base=30)
    assert (done.status, done.attempts, done.last_status_code, done.delivered_at) == \
        ("succeeded", 1, 204, clock.now())


def test_a_delivery_seen_due_but_retried_meanwhile_is_not_claimed_again_early(uow, clock):
    caller = caller_of(uow, clock, "Acme")
    webhooks.create_endpoint(uow, clock, caller, target=_target("https://public.example/"))
    _event(uow, clock, caller)
    seen = uow.webhook_deliveries.due(clock.now(), exclude=set(), limit=10)[0]  # process A looks
    other = uow.fork()  # process B claims, sends, fails
    claimed = webhooks.claim_due(other, clock, "wkr_b", hold=30)
    webhooks.record_attempt(other, clock, claimed, status_code=500, error="answered 500", retry_base=30)
    assert uow.webhook_deliveries.claim(seen.id, "wkr_a", clock.now(), clock.now()) is None  # not due again yet
    clock.advance(30)
    again = webhooks.claim_due(uow, clock, "wkr_a", hold=30)
    assert again.delivery.attempts == 1  # the count as stored, not as first seen
