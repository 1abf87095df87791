"""The outbox's repository (``app.storage.event_outbox``) on a real database, and one
delivery round of ``app.extensions.outbox.OutboxDelivery`` through it: claims, pending
events in order, deliveries recorded, pruning that keeps the newest event. (Several
processes at once: tests/integration/test_outbox_claims.py.)"""
from __future__ import annotations

import json
from app.extensions import OutboxDelivery
from app.storage.event_outbox import PeeweeEventOutbox
from app.workers.loop import WorkerLease
from core.panel import leases
from core.panel.leases import stale_before
from ports.extensions import DeliveredEvent, ExtensionContext, Subscriber


def _events(store, clock, count: int) -> list[int]:
    O = store.models.EventOutbox
    with store.uow() as uow:
        ids = [O.insert(topic="panel.timeline", data=json.dumps({"n": n}), at=clock.now(), service_id="svc_1")
               .execute() for n in range(count)]
        uow.commit()
    return ids


def test_claims_pending_events_deliveries_and_pruning(store, clock):
    outbox = PeeweeEventOutbox(store.models)
    ids = _events(store, clock, 3)
    leases.beat(store.uow(), clock, "worker-a")
    leases.beat(store.uow(), clock, "worker-b")
    with store.uow() as uow:
        assert outbox.claim("audit", "worker-a", clock.now(), stale_before(clock)) is True
        assert outbox.claim("audit", "worker-b", clock.now(), stale_before(clock)) is False  # a's lease is live
        assert outbox.claim("audit", "worker-a", clock.now(), stale_before(clock)) is True
        uow.commit()
    with store.uow(write=False).reading():
        pending = outbox.pending("audit", limit=10)
    assert [e.id for e in pending] == ids and all(isinstance(e, DeliveredEvent) for e in pending)
    assert (pending[1].topic, pending[1].data, pending[1].service_id) == ("panel.timeline", {"n": 1}, "svc_1")
    with store.uow() as uow:
        for event_id in ids:
            outbox.delivered("audit", event_id, clock.now())
        outbox.delivered("audit", ids[0], clock.now())  # twice: nothing more
        assert outbox.pending("audit", limit=10) == [] and len(outbox.pending("other", limit=2)) == 2
        assert outbox.prune(["audit", "other"]) == 0  # "other" has none yet
        assert outbox.prune(["audit"]) == 2  # all but the newest
        uow.commit()
    assert [row.id for row in store.models.EventOutbox.select()] == ids[-1:]
    clock.advance(3600)  # a's lease went stale: b takes the claim over
    leases.beat(store.uow(), clock, "worker-b")
    with store.uow() as uow:
        assert outbox.claim("audit", "worker-b", clock.now(), stale_before(clock)) is True
        uow.commit()


def test_a_delivery_round_hands_each_event_over_in_order_and_records_it(store, clock):
    heard = []
    lease = WorkerLease(store, clock)
    leases.beat(store.uow(), clock, lease.id)
    delivery = OutboxDelivery(store, [Subscriber(name="audit", handle=lambda event, context: heard.append(event.id))],
                              ExtensionContext(settings={}, clock=clock), calls=None, lease=lease)
    ids = _events(store, clock, 4)
    assert delivery.deliver() is False  # nothing more waits
    assert heard == ids
    delivery.deliver()
    assert heard == ids  # recorded: not again
    assert [row.id for row in store.models.EventOutbox.select()] == ids[-1:]  # pruned, the newest kept
