"""The partner API's tables: partners, API tokens, contracts, humanId counters, customers,
contacts, notes, editions, licenses, transfers, the ledger, statements, webhook endpoints
and deliveries."""
from __future__ import annotations

import peewee

from app.storage.models.base import UtcDateTimeField


def define(Base) -> dict:
    """{class name: model}, on ``Base`` (the database's, made by ``define_models``)."""

    class Partner(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        name = peewee.TextField()
        type = peewee.CharField(max_length=16)
        parent = peewee.ForeignKeyField("self", null=True, backref="children", column_name="parent_id",
                                        on_delete="RESTRICT")
        created_at = UtcDateTimeField()

    class ApiToken(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        partner = peewee.ForeignKeyField(Partner, column_name="partner_id", on_delete="RESTRICT")
        label = peewee.TextField()
        token_prefix = peewee.CharField(max_length=8)
        token_hash = peewee.CharField(max_length=64, unique=True)
        scope = peewee.CharField(max_length=8)
        created_by = peewee.CharField(max_length=36, null=True)
        created_at = UtcDateTimeField()
        last_used_at = UtcDateTimeField(null=True)
        revoked_at = UtcDateTimeField(null=True)

        class Meta:
            table_name = "api_token"
            indexes = ((("partner", "created_at"), False),)

    class Contract(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        partner = peewee.ForeignKeyField(Partner, column_name="partner_id", on_delete="RESTRICT")
        model = peewee.CharField(max_length=64)
        currency = peewee.CharField(max_length=3)
        unit_price_cents = peewee.BigIntegerField()
        created_at = UtcDateTimeField()

    class HumanIdCounter(Base):
        kind = peewee.CharField(max_length=1, primary_key=True)
        value = peewee.BigIntegerField()

    class Customer(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        human_id = peewee.CharField(max_length=24, unique=True)
        partner = peewee.ForeignKeyField(Partner, column_name="partner_id", on_delete="RESTRICT")
        name = peewee.TextField()
        external_ref = peewee.TextField(default="", index=True)
        legal_name = peewee.TextField(default="")
        vat_id = peewee.TextField(default="")
        email = peewee.TextField(default="")
        phone = peewee.TextField(default="")
        billing_street = peewee.TextField(default="")
        billing_postal_code = peewee.TextField(default="")
        billing_city = peewee.TextField(default="")
        billing_region = peewee.TextField(default="")
        billing_country = peewee.CharField(max_length=2, default="")
        postal_street = peewee.TextField(default="")
        postal_postal_code = peewee.TextField(default="")
        postal_city = peewee.TextField(default="")
        postal_region = peewee.TextField(default="")
        postal_country = peewee.CharField(max_length=2, default="")
        website = peewee.TextField(default="")
        owner_email = peewee.TextField(default="")
        status = peewee.CharField(max_length=16, default="active")
        created_at = UtcDateTimeField()
        deleted_at = UtcDateTimeField(null=True)  # removed from the API; history keeps its reference

        class Meta:
            indexes = ((("partner", "created_at", "id"), False), (("created_at", "id"), False))

    class Contact(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        human_id = peewee.CharField(max_length=24, unique=True)
        customer = peewee.ForeignKeyField(Customer, column_name="customer_id", on_delete="CASCADE")
        first_name = peewee.TextField(default="")
        last_name = peewee.TextField(default="")
        title = peewee.TextField(default="")
        email = peewee.TextField(default="")
        phone = peewee.TextField(default="")
        locale = peewee.TextField(default="")
        notes = peewee.TextField(default="")
        is_primary = peewee.BooleanField(default=False)
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()

    class Note(Base):
        # no foreign key: notes are append-only and outlive nothing they refer to
        id = peewee.BigAutoField()
        customer_id = peewee.CharField(max_length=36)
        author = peewee.TextField()
        body = peewee.TextField()
        at = UtcDateTimeField()

        class Meta:
            indexes = ((("customer_id", "id"), False),)

    class Edition(Base):
        name = peewee.CharField(max_length=64, primary_key=True)
        policy = peewee.TextField()
        updated_at = UtcDateTimeField()

    class License(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        human_id = peewee.CharField(max_length=24, unique=True)
        partner = peewee.ForeignKeyField(Partner, column_name="partner_id", on_delete="RESTRICT")
        customer = peewee.ForeignKeyField(Customer, column_name="customer_id", on_delete="RESTRICT")
        contract = peewee.ForeignKeyField(Contract, column_name="contract_id", on_delete="RESTRICT")
        license_service_license_id = peewee.CharField(max_length=64)
        key_masked = peewee.CharField(max_length=16)
        edition = peewee.CharField(max_length=64)
        state = peewee.CharField(max_length=16)
        external_billing_ref = peewee.TextField(default="")
        metadata = peewee.TextField(default="")
        issued_at = UtcDateTimeField()
        terminated_at = UtcDateTimeField(null=True)

        class Meta:
            indexes = ((("partner", "issued_at", "id"), False), (("issued_at", "id"), False),
                       (("customer", "issued_at", "id"), False), (("contract",), False))

    class Transfer(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        human_id = peewee.CharField(max_length=24, unique=True)
        license = peewee.ForeignKeyField(License, column_name="license_id", on_delete="RESTRICT")
        from_partner_id = peewee.CharField(max_length=36)
        from_customer_id = peewee.CharField(max_length=36)
        from_contract_id = peewee.CharField(max_length=36)
        to_partner_id = peewee.CharField(max_length=36)
        to_customer_id = peewee.CharField(max_length=36)
        to_contract_id = peewee.CharField(max_length=36)
        reason = peewee.TextField(default="")
        effective_date = peewee.DateField()
        created_at = UtcDateTimeField()
        created_by = peewee.CharField(max_length=36, null=True)
        sync_error = peewee.TextField(null=True)

        class Meta:
            indexes = ((("created_at", "id"), False), (("from_partner_id", "created_at"), False),
                       (("to_partner_id", "created_at"), False), (("license", "created_at"), False))

    class LedgerEvent(Base):
        id = peewee.BigAutoField()
        event = peewee.CharField(max_length=40)
        at = UtcDateTimeField()
        actor = peewee.CharField(max_length=36, null=True)
        partner_id = peewee.CharField(max_length=36)
        customer_id = peewee.CharField(max_length=36, null=True)
        license_id = peewee.CharField(max_length=36)
        data = peewee.TextField(default="{}")
        #: internal, never in an answer: the customer whose activity the event belongs to
        #: (``customer_id``, or for an event without one, its license's customer, kept
        #: equal to it when the license moves); the activity reads one index range of it
        reach_customer_id = peewee.CharField(max_length=36, null=True)

        class Meta:
            table_name = "ledger_event"
            indexes = ((("customer_id", "id"), False), (("license_id", "id"), False),
                       (("reach_customer_id", "id"), False))

    class Statement(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        partner = peewee.ForeignKeyField(Partner, column_name="partner_id", on_delete="RESTRICT")
        period_start = peewee.DateField()
        period_end = peewee.DateField()
        revision = peewee.IntegerField(null=True)  # null for the draft
        status = peewee.CharField(max_length=16)
        totals = peewee.TextField()  # JSON, stored once: exports are byte-identical
        lines = peewee.TextField()
        computed_at = UtcDateTimeField()
        finalized_by = peewee.TextField(null=True)
        finalized_at = UtcDateTimeField(null=True)
        supersedes_statement_id = peewee.CharField(max_length=36, null=True)

        class Meta:
            indexes = ((("partner", "period_start", "revision"), False),)

    # --- partner webhooks (migration 15) ---
    class WebhookEndpoint(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        partner = peewee.ForeignKeyField(Partner, column_name="partner_id", on_delete="RESTRICT", index=True)
        url = peewee.TextField()
        events = peewee.TextField()  # JSON list of ledger event names
        secret = peewee.CharField(max_length=80)
        created_at = UtcDateTimeField()

        class Meta:
            table_name = "webhook_endpoint"

    class WebhookDelivery(Base):
        """One ledger event for one endpoint; the rows are the delivery queue."""

        id = peewee.CharField(max_length=36, primary_key=True)
        endpoint = peewee.ForeignKeyField(WebhookEndpoint, column_name="endpoint_id", on_delete="CASCADE")
        event_id = peewee.BigIntegerField()
        event = peewee.CharField(max_length=40)
        status = peewee.CharField(max_length=16)  # pending, succeeded, failed
        attempts = peewee.IntegerField(default=0)
        last_status_code = peewee.IntegerField(null=True)
        last_error = peewee.TextField(null=True)
        created_at = UtcDateTimeField()
        delivered_at = UtcDateTimeField(null=True)
        next_attempt_at = UtcDateTimeField()
        claimed_by = peewee.CharField(max_length=40, null=True)  # the worker sending it now
        claimed_until = UtcDateTimeField(null=True)  # the claim lapses then (a process that died)

        class Meta:
            table_name = "webhook_delivery"
            indexes = ((("endpoint", "event_id"), False), (("status", "next_attempt_at"), False))

    return dict(Partner=Partner, ApiToken=ApiToken, Contract=Contract, HumanIdCounter=HumanIdCounter,
                Customer=Customer, Contact=Contact, Note=Note, Edition=Edition, License=License, Transfer=Transfer,
                LedgerEvent=LedgerEvent, Statement=Statement, WebhookEndpoint=WebhookEndpoint,
                WebhookDelivery=WebhookDelivery)
