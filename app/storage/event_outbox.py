"""peewee repository of the plugins' event outbox (``event_outbox``), its deliveries
(``event_delivery``) and which process delivers each subscriber's events
(``event_subscriber_claim``): what ``app.extensions.outbox`` reads and writes. The app
uses it, core does not, so it is not part of ``ports.storage``.

A claim is an ``INSERT`` the subscriber's primary key decides, then an ``UPDATE``
conditioned on the holder (this process, or one whose worker lease is gone or stale), so
of processes asking at once the database lets one hold it.
"""
from __future__ import annotations

import json

from peewee import fn

from ports.extensions import DeliveredEvent


class PeeweeEventOutbox:
    def __init__(self, m):
        self.m = m

    def claim(self, subscriber: str, holder: str, now, live_since) -> bool:
        """Whether ``holder`` holds ``subscriber``'s claim now: it held it, took it from a
        holder whose lease has no heartbeat at or after ``live_since``, or it was free."""
        C, L = self.m.EventSubscriberClaim, self.m.WorkerLease
        live = L.select(L.worker_id).where(L.heartbeat_at >= live_since)
        C.insert(subscriber=subscriber, holder=holder, claimed_at=now).on_conflict_ignore().execute()
        held = C.update(holder=holder, claimed_at=now).where(
            (C.subscriber == subscriber) & ((C.holder == holder) | C.holder.not_in(live))).execute()
        return held == 1

    def pending(self, subscriber: str, limit: int) -> list[DeliveredEvent]:
        """The oldest ``limit`` events ``subscriber`` has not had, in order."""
        O, D = self.m.EventOutbox, self.m.EventDelivery
        done = D.select(D.event_id).where(D.subscriber == subscriber)
        return [DeliveredEvent(id=row.id, topic=row.topic, data=json.loads(row.data), at=row.at,
                               service_id=row.service_id, customer_id=row.customer_id)
                for row in O.select().where(O.id.not_in(done)).order_by(O.id).limit(limit)]

    def delivered(self, subscriber: str, event_id: int, now) -> None:
        """Record that ``subscriber`` had the event (a second record of it changes nothing)."""
        self.m.EventDelivery.insert(subscriber=subscriber, event_id=event_id,
                                    delivered_at=now).on_conflict_ignore().execute()

    def prune(self, subscribers) -> int:
        """Delete the events every one of ``subscribers`` has, and their delivery rows;
        never the newest event (SQLite numbers a new row one above the highest left:
        deleting the highest would hand its id to the next event, which a subscriber's
        delivery record would then claim already delivered). Answers how many went."""
        O, D = self.m.EventOutbox, self.m.EventDelivery
        names = list(subscribers)
        done = (D.select(D.event_id).where(D.subscriber.in_(names)).group_by(D.event_id)
                .having(fn.COUNT(D.event_id) >= len(names)))
        newest = O.select(fn.MAX(O.id))
        gone = O.delete().where(O.id.in_(done) & (O.id < newest)).execute()
        if gone:
            D.delete().where(D.event_id.not_in(O.select(O.id))).execute()
        return gone
