"""Several processes deliver the plugins' event subscribers' events (app.extensions
``OutboxDelivery``) from one database: one process at a time delivers a subscriber's
events, so each is heard once and in order; another process takes over once the
holder's worker lease is gone (a clean stop) or stale (a crash). On a real database
(SQLite, and PostgreSQL in CI's storage part); each "process" is a delivery with a
worker lease of its own, its rounds run on threads of their own at once."""
from __future__ import annotations

import json
import threading

import pytest

from app.extensions import OutboxDelivery
from app.workers.loop import WorkerLease
from core.panel import leases
from ports.extensions import ExtensionContext, Subscriber

pytestmark = pytest.mark.storage


def _events(store, clock, count: int) -> list[int]:
    O = store.models.EventOutbox
    with store.uow() as uow:
        ids = [O.insert(topic="panel.timeline", data=json.dumps({"n": n}), at=clock.now()).execute()
               for n in range(count)]
        uow.commit()
    return ids


def _process(store, clock, heard: list, name: str) -> OutboxDelivery:
    lease = WorkerLease(store, clock)
    leases.beat(store.uow(), clock, lease.id)

    def handle(event, context):
        heard.append((name, event.id))

    return OutboxDelivery(store, [Subscriber(name="audit", handle=handle)],
                          ExtensionContext(settings={}, clock=clock), calls=None, lease=lease)


def _rounds(delivery: OutboxDelivery, start: threading.Barrier, errors: list) -> None:
    try:
        start.wait()
        for _ in range(20):
            delivery.deliver()
    except Exception as exc:  # noqa: BLE001 (the test reports it)
        errors.append(exc)


def test_processes_at_once_deliver_each_event_once_in_order_from_one_of_them(store, clock):
    heard: list = []
    processes = [_process(store, clock, heard, f"p{i}") for i in range(3)]
    ids = _events(store, clock, 250)
    start, errors = threading.Barrier(len(processes)), []
    threads = [threading.Thread(target=_rounds, args=(p, start, errors)) for p in processes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [event_id for _, event_id in heard] == ids  # each once, in order
    assert len({who for who, _ in heard}) == 1  # by the one process holding the claim


def test_another_process_takes_over_when_the_holders_lease_is_dropped_or_stale(store, clock):
    heard: list = []
    first, second = _process(store, clock, heard, "first"), _process(store, clock, heard, "second")
    ids = _events(store, clock, 2)
    first.deliver()
    second.deliver()
    assert heard == [("first", ids[0]), ("first", ids[1])]

    more = _events(store, clock, 1)
    second.deliver()  # the first still holds the claim: the second hears nothing
    assert heard[2:] == []
    leases.retire(store.uow(), first.lease.id)  # a clean stop
    second.deliver()
    assert heard[2:] == [("second", more[0])]

    leases.beat(store.uow(), clock, first.lease.id)  # the first is back: the second still holds
    last = _events(store, clock, 1)
    first.deliver()
    assert heard[3:] == []
    clock.advance(leases.STALE_S + 1)  # the second crashed: its lease goes stale, the first's is beaten
    leases.beat(store.uow(), clock, first.lease.id)
    first.deliver()
    assert heard[3:] == [("first", last[0])]
