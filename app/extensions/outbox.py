"""The plugins' event subscribers fed from the persisted outbox: every event to every
subscriber, in order, at least once, one process at a time per subscriber. The outbox's
queries are the storage's (``app.storage.event_outbox``)."""
from __future__ import annotations

import asyncio
import logging

from app.storage.event_outbox import PeeweeEventOutbox
from app.workers.loop import Background
from ports.extensions import ExtensionContext, Subscriber

log = logging.getLogger("slipway.extensions")


class OutboxDelivery(Background):
    """Hands every outbox event to every subscriber, in order, at least once: a delivery
    is recorded (``event_delivery``) only after the subscriber returned, so an event whose
    delivery a stop interrupted is delivered again after the restart. A subscriber that
    raises gets the same event again after ``RETRY_S`` (doubling up to ``RETRY_MAX_S``);
    its later events wait. Events every subscriber has are deleted.

    One process at a time delivers a subscriber's events, whichever number of processes
    share the database: the one whose worker lease (``lease``) holds the subscriber's
    claim (``event_subscriber_claim``). Another process takes the claim over only once
    that lease is gone (a clean stop drops it) or stale (``core.panel.leases.STALE_S``
    after a crash), so a subscriber never hears a later event from one process while an
    earlier one is still in another's hands."""

    POLL_S = 1.0  # between looks when nothing woke it (events of other processes)
    BATCH = 100
    RETRY_S, RETRY_MAX_S = 1.0, 60.0

    def __init__(self, store, subscribers, context: ExtensionContext, calls, lease, bus=None):
        self.store, self.subscribers, self.context, self.calls = store, tuple(subscribers), context, calls
        self.lease, self.bus = lease, bus
        #: the outbox's queries, run inside this delivery's units of work
        self.outbox = PeeweeEventOutbox(store.models)
        self._handle = None
        self._retry_at: dict[str, float] = {}
        self._backoff: dict[str, float] = {}

    def tasks(self) -> dict:
        return {"event-outbox": self._run}

    def start(self) -> None:
        super().start()
        if self.bus is not None:  # a committed event wakes the delivery at once
            self._handle = self.bus.subscribe(lambda event: self.wake())

    async def stop(self) -> None:
        if self._handle is not None and self.bus is not None:
            self.bus.unsubscribe(self._handle)
            self._handle = None
        await super().stop()

    async def _run(self) -> None:
        await self.lease.hold()  # the lease is written before a claim names it
        while True:
            try:
                busy = await self.calls.run(self.deliver)
            except asyncio.CancelledError:
                raise
            except Exception:  # the database went away: the next round tries again
                log.exception("event outbox delivery failed")
                busy = False
            if not busy:
                await self.idle(self.POLL_S)

    def deliver(self) -> bool:
        """One round (in a thread): each subscriber's next events; then the outbox pruned.
        True when a subscriber may have more waiting."""
        more = False
        now = self.context.clock.monotonic()
        for subscriber in self.subscribers:
            if self._retry_at.get(subscriber.name, 0) > now:
                continue
            if not self._pending(subscriber.name, limit=1):  # nothing waits: no claim written
                continue
            if not self._claim(subscriber.name):  # another process delivers its events
                continue
            more |= self._deliver_to(subscriber)
        self._prune()
        return more

    def _claim(self, name: str) -> bool:
        """Whether this process delivers ``name``'s events now: it holds the claim, or
        takes it from a holder whose worker lease is gone or stale (one short write
        transaction; the database decides between processes asking at once)."""
        from core.panel.leases import stale_before

        clock = self.context.clock
        with self.store.uow() as uow:
            held = self.outbox.claim(name, self.lease.id, clock.now(), stale_before(clock))
            uow.commit()
        return held

    def _pending(self, name: str, limit: int = BATCH) -> list:
        with self.store.uow(write=False).reading():
            return self.outbox.pending(name, limit)

    def _deliver_to(self, subscriber: Subscriber) -> bool:
        events = self._pending(subscriber.name)
        for event in events:
            try:
                subscriber.handle(event, self.context)
            except Exception:  # delivered again later; the events after it wait
                wait = self._backoff.get(subscriber.name, self.RETRY_S / 2) * 2
                self._backoff[subscriber.name] = min(wait, self.RETRY_MAX_S)
                self._retry_at[subscriber.name] = self.context.clock.monotonic() + self._backoff[subscriber.name]
                log.exception("event subscriber %s failed on event %s (%s); trying again in %.0f s",
                              subscriber.name, event.id, event.topic, self._backoff[subscriber.name])
                return False
            self._backoff.pop(subscriber.name, None)
            with self.store.uow() as uow:
                self.outbox.delivered(subscriber.name, event.id, self.context.clock.now())
                uow.commit()
        return len(events) == self.BATCH

    def _prune(self) -> None:
        """Delete the events every current subscriber has (``PeeweeEventOutbox.prune``)."""
        with self.store.uow() as uow:
            self.outbox.prune(s.name for s in self.subscribers)
            uow.commit()
