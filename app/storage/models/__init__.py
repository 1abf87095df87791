"""peewee models, defined per database (no module-level binding), one class per table."""
from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import peewee

from app.storage.readpath import Statements


class UtcDateTimeField(peewee.DateTimeField):
    """Stores naive UTC, hands back aware UTC datetimes."""

    def db_value(self, value):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return super().db_value(value)

    def python_value(self, value):
        if isinstance(value, str):  # SQLite's text: ISO 8601, read by Python itself (peewee tries formats)
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                value = super().python_value(value)
        else:
            value = super().python_value(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


def define_models(db: peewee.Database) -> SimpleNamespace:
    class Base(peewee.Model):
        class Meta:
            database = db
            legacy_table_names = False

    class SchemaVersion(Base):
        version = peewee.IntegerField(primary_key=True)
        description = peewee.TextField()
        applied_at = UtcDateTimeField()

        class Meta:
            table_name = "slipway_schema"

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

    class PanelCustomer(Base):
        id = peewee.CharField(max_length=40, primary_key=True)
        name = peewee.TextField()
        email = peewee.TextField(default="")
        created_at = UtcDateTimeField()
        # migration 11: the customer's own limits; null is the operator's default
        max_services = peewee.IntegerField(null=True)
        max_memory_mb = peewee.BigIntegerField(null=True)
        max_millicpus = peewee.BigIntegerField(null=True)
        max_containers = peewee.IntegerField(null=True)  # migration 19

        class Meta:
            table_name = "panel_customer"
            indexes = ((("created_at", "id"), False),)

    class PanelApiKey(Base):
        id = peewee.CharField(max_length=16, primary_key=True)  # the key id of slw_<key_id>_<secret>
        name = peewee.TextField()
        role = peewee.CharField(max_length=16)
        secret_hash = peewee.CharField(max_length=64)
        rate_limit_rpm = peewee.IntegerField()
        expires_at = UtcDateTimeField(null=True)
        denied_permissions = peewee.TextField(default="[]")
        customer = peewee.ForeignKeyField(PanelCustomer, column_name="customer_id", null=True,
                                          on_delete="RESTRICT")
        created_at = UtcDateTimeField()
        revoked_at = UtcDateTimeField(null=True)

        class Meta:
            table_name = "panel_api_key"

    class PanelUser(Base):
        """Who may log in to the panel through the identity provider, and as what."""

        email = peewee.CharField(max_length=320, primary_key=True)  # lower-case
        role = peewee.CharField(max_length=16)
        # a customer's users (and their sessions) go with the customer
        customer = peewee.ForeignKeyField(PanelCustomer, column_name="customer_id", null=True,
                                          on_delete="CASCADE")
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()

        class Meta:
            table_name = "panel_user"

    class PanelSession(Base):
        id = peewee.CharField(max_length=64, primary_key=True)  # SHA-256 of the cookie's secret
        user = peewee.ForeignKeyField(PanelUser, column_name="email", on_delete="CASCADE", index=True)
        created_at = UtcDateTimeField()
        expires_at = UtcDateTimeField(index=True)
        revoked_at = UtcDateTimeField(null=True)

        class Meta:
            table_name = "panel_session"

    class PanelKeySession(Base):
        """A browser session opened with an API key (migration 13): it acts as the key."""

        id = peewee.CharField(max_length=64, primary_key=True)  # SHA-256 of the cookie's secret
        api_key = peewee.ForeignKeyField(PanelApiKey, column_name="api_key_id", on_delete="CASCADE", index=True)
        created_at = UtcDateTimeField()
        expires_at = UtcDateTimeField(index=True)
        revoked_at = UtcDateTimeField(null=True)

        class Meta:
            table_name = "panel_key_session"

    class PanelLogin(Base):
        """A login begun at GET /api/auth/login, waiting for the provider's callback."""

        state_hash = peewee.CharField(max_length=64, primary_key=True)
        nonce = peewee.CharField(max_length=128)
        code_verifier = peewee.CharField(max_length=128)
        next_path = peewee.TextField()
        expires_at = UtcDateTimeField(index=True)

        class Meta:
            table_name = "panel_login"

    class Service(Base):
        id = peewee.CharField(max_length=40, primary_key=True)
        name = peewee.CharField(max_length=63, unique=True)
        customer = peewee.ForeignKeyField(PanelCustomer, column_name="customer_id", on_delete="RESTRICT")
        deploy_method = peewee.CharField(max_length=32)
        status = peewee.CharField(max_length=16)
        template_id = peewee.CharField(max_length=64, null=True)
        compose = peewee.TextField(default="")
        variables = peewee.TextField(default="{}")
        url = peewee.TextField(default="")
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()
        deployed_at = UtcDateTimeField(null=True)
        health_status = peewee.CharField(max_length=16, default="unknown")
        health_checked_at = UtcDateTimeField(null=True)
        health_failures = peewee.IntegerField(default=0)
        git_url = peewee.TextField(null=True)  # migration 9
        git_branch = peewee.CharField(max_length=255, null=True)
        ai_url = peewee.TextField(null=True)
        commit = peewee.CharField(max_length=64, null=True, column_name="source_commit")
        # migration 11: what the service counts against its customer's limits
        memory_mb = peewee.BigIntegerField(default=0, constraints=[peewee.SQL("DEFAULT 0")])
        millicpus = peewee.BigIntegerField(default=0, constraints=[peewee.SQL("DEFAULT 0")])
        containers = peewee.IntegerField(default=0, constraints=[peewee.SQL("DEFAULT 0")])  # migration 19
        release = peewee.IntegerField(null=True, column_name="release_number")  # migration 16: the one running

    class ServiceRoute(Base):
        """A route record of a service: hostname -> upstream. Its name under
        SLIPWAY_BASE_DOMAIN and each of its custom domains (migration 17: several per service)."""

        hostname = peewee.CharField(max_length=253, primary_key=True)
        service_id = peewee.CharField(max_length=40, index=True)
        target = peewee.CharField(max_length=255)  # e.g. http://127.0.0.1:49153
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()

        class Meta:
            table_name = "service_route"

    class CustomDomain(Base):
        """A custom domain of a service; the primary key makes a name one service's only."""

        hostname = peewee.CharField(max_length=253, primary_key=True)
        service_id = peewee.CharField(max_length=40, index=True)
        created_at = UtcDateTimeField()

        class Meta:
            table_name = "custom_domain"

    class WorkerLease(Base):
        """A process that runs jobs, alive while its heartbeat is recent: the jobs it owns
        are left alone; those of a worker whose lease went stale are taken back."""

        worker_id = peewee.CharField(max_length=40, primary_key=True)
        heartbeat_at = UtcDateTimeField()

        class Meta:
            table_name = "worker_lease"

    class DeployJob(Base):
        id = peewee.CharField(max_length=40, primary_key=True)
        service_id = peewee.CharField(max_length=40, index=True)
        kind = peewee.CharField(max_length=16)
        state = peewee.CharField(max_length=16, index=True)
        step = peewee.CharField(max_length=32, default="")
        error = peewee.TextField(null=True)
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()
        owner = peewee.CharField(max_length=40, null=True)  # the worker running it (WorkerLease)
        attempts = peewee.IntegerField(default=0)  # claims so far (a job that keeps killing its worker stops)
        # migration 16: releases, rollbacks, cancels
        release_id = peewee.CharField(max_length=40, null=True)  # the release it recorded
        target_release_id = peewee.CharField(max_length=40, null=True)  # rollback: the release it runs again
        cancel_requested = peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")])
        finished_at = UtcDateTimeField(null=True)
        created_by = peewee.CharField(max_length=80, default="system", constraints=[peewee.SQL("DEFAULT 'system'")])

        class Meta:
            table_name = "deploy_job"

    class Release(Base):
        """What a successful deploy, redeploy or rollback ran (migration 16): its images
        (kept under tags of the service's own), compose and variables."""

        id = peewee.CharField(max_length=40, primary_key=True)
        service_id = peewee.CharField(max_length=40)
        number = peewee.IntegerField()
        deploy_job_id = peewee.CharField(max_length=40)
        images = peewee.TextField(default="[]")  # JSON [{component, image, image_id}]
        compose = peewee.TextField(default="")
        variables = peewee.TextField(default="{}")
        commit = peewee.CharField(max_length=64, null=True, column_name="source_commit")
        created_at = UtcDateTimeField()
        created_by = peewee.CharField(max_length=80, default="system")

        class Meta:
            table_name = "service_release"
            indexes = ((("service_id", "number"), True),)

    class ServiceEvent(Base):
        id = peewee.BigAutoField()
        service_id = peewee.CharField(max_length=40)
        type = peewee.CharField(max_length=16)
        status = peewee.CharField(max_length=16)
        message = peewee.TextField()
        timestamp = UtcDateTimeField()

        class Meta:
            table_name = "service_event"
            indexes = ((("service_id", "id"), False),)

    class Backup(Base):
        """A backup of a service's volumes (an archive under SLIPWAY_BACKUP_DIR) and the
        state of its one job, plus that of its latest restore; the rows are the job queue."""

        id = peewee.CharField(max_length=40, primary_key=True)
        service = peewee.ForeignKeyField(Service, column_name="service_id", on_delete="CASCADE")
        status = peewee.CharField(max_length=16, index=True)  # pending, running, completed, failed
        progress = peewee.IntegerField(default=0)
        size_bytes = peewee.BigIntegerField(default=0)
        sha256 = peewee.CharField(max_length=64, null=True)
        volumes = peewee.TextField(default="[]")  # JSON: the compose volume names backed up
        error = peewee.TextField(null=True)
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()
        completed_at = UtcDateTimeField(null=True)
        restore_status = peewee.CharField(max_length=16, null=True, index=True)
        restore_progress = peewee.IntegerField(default=0)
        restore_requested_at = UtcDateTimeField(null=True)
        restore_completed_at = UtcDateTimeField(null=True)
        restore_error = peewee.TextField(null=True)
        restore_containers = peewee.TextField(null=True)  # JSON: containers to start again afterwards
        owner = peewee.CharField(max_length=40, null=True)  # the worker running its job (WorkerLease)

        class Meta:
            table_name = "backup"
            indexes = ((("service", "created_at"), False),)

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

    webhooks = dict(WebhookEndpoint=WebhookEndpoint, WebhookDelivery=WebhookDelivery)

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

    webhooks.update(EventOutbox=EventOutbox, EventDelivery=EventDelivery)

    return SimpleNamespace(statements=Statements(db), PanelUser=PanelUser, PanelSession=PanelSession, PanelKeySession=PanelKeySession, PanelLogin=PanelLogin, Service=Service, DeployJob=DeployJob, Release=Release, ServiceEvent=ServiceEvent, ServiceRoute=ServiceRoute, CustomDomain=CustomDomain,
                           PanelCustomer=PanelCustomer, PanelApiKey=PanelApiKey, SchemaVersion=SchemaVersion, Partner=Partner, ApiToken=ApiToken, Contract=Contract,
                           HumanIdCounter=HumanIdCounter, Customer=Customer, Contact=Contact, Note=Note,
                           Edition=Edition, License=License, Transfer=Transfer, LedgerEvent=LedgerEvent,
                           Statement=Statement, Backup=Backup, WorkerLease=WorkerLease,
                           IdempotencyKey=IdempotencyKey, **webhooks)
