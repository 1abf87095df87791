"""Infrastructure tables of both APIs: idempotency keys (app/http) and the event outbox
with its deliveries (app.extensions)."""
from __future__ import annotations

import peewee

from app.storage.models.base import UtcDateTimeField


def define(Base) -> dict:
    """{class name: model}, on ``Base`` (the database's, made by ``define_models``)."""

    class IdempotencyKey(Base):
        """A POST sent with an ``Idempotency-Key`` (app/http/idempotency.py): claimed by the
        request that inserted it (``attempt``), then its answer, replayed to repeats of the
        same request from the same credential for 24 h."""

        credential = peewee.CharField(max_length=80)  # token:<id>, key:<id> or session:<id>
        idempotency_key = peewee.CharField(max_length=255)
        method = peewee.CharField(max_length=8)
        path = peewee.TextField()
        fingerprint = peewee.CharField(max_length=64)  # sha256 of method, path and canonical body
        attempt = peewee.CharField(max_length=32)  # the claim of the request running (or that ran) it
        state = peewee.CharField(max_length=16)  # in_flight, done
        status = peewee.IntegerField(null=True)
        content_type = peewee.TextField(null=True)
        headers = peewee.TextField(null=True)  # JSON: the answer's own headers (e.g. Location)
        body = peewee.BlobField(null=True)
        created_at = UtcDateTimeField(index=True)
        claimed_at = UtcDateTimeField()

        class Meta:
            table_name = "idempotency_key"
            indexes = ((("credential", "idempotency_key"), True),)

    class EventOutbox(Base):
        """Every panel and ledger event, written in the transaction that made it, for the
        plugins' event subscribers (app.extensions.outbox); deleted once every subscriber
        has it."""

        id = peewee.BigAutoField()
        topic = peewee.CharField(max_length=40)
        service_id = peewee.CharField(max_length=64, null=True)
        customer_id = peewee.CharField(max_length=64, null=True)
        data = peewee.TextField()
        at = UtcDateTimeField()

        class Meta:
            table_name = "event_outbox"

    class EventDelivery(Base):
        """One subscriber has handled one outbox event."""

        subscriber = peewee.CharField(max_length=80)
        event_id = peewee.BigIntegerField()
        delivered_at = UtcDateTimeField()

        class Meta:
            table_name = "event_delivery"
            primary_key = peewee.CompositeKey("subscriber", "event_id")

    class EventSubscriberClaim(Base):
        """The process (its worker lease) that delivers one subscriber's events now."""

        subscriber = peewee.CharField(max_length=80, primary_key=True)
        holder = peewee.CharField(max_length=64)
        claimed_at = UtcDateTimeField()

        class Meta:
            table_name = "event_subscriber_claim"

    return dict(IdempotencyKey=IdempotencyKey, EventOutbox=EventOutbox, EventDelivery=EventDelivery,
                EventSubscriberClaim=EventSubscriberClaim)
