"""The panel API's tables: panel customers, API keys, users, sessions and pending logins,
services, route records, custom domains, worker leases, deploy jobs, releases, service
events, backups, backup policies, deploy keys, scheduled tasks and their runs."""
from __future__ import annotations

import peewee

from app.storage.models.base import UtcDateTimeField


def define(Base) -> dict:
    """{class name: model}, on ``Base`` (the database's, made by ``define_models``)."""

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
        # migration 37 (9 had git_url, git_branch and ai_url): the fields its deploy method
        # keeps (DeployMethod.source_fields), as a JSON object
        source = peewee.TextField(null=True, column_name="deploy_source")
        commit = peewee.CharField(max_length=64, null=True, column_name="source_commit")
        # migration 11: what the service counts against its customer's limits
        memory_mb = peewee.BigIntegerField(default=0, constraints=[peewee.SQL("DEFAULT 0")])
        millicpus = peewee.BigIntegerField(default=0, constraints=[peewee.SQL("DEFAULT 0")])
        containers = peewee.IntegerField(default=0, constraints=[peewee.SQL("DEFAULT 0")])  # migration 19
        release = peewee.IntegerField(null=True, column_name="release_number")  # migration 16: the one running
        # migration 23: the secret variables' values, encrypted (app.storage.secrets); the
        # service joins its customer's network
        secret_values = peewee.TextField(null=True)
        customer_network = peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")])
        deploy_key_id = peewee.CharField(max_length=40, null=True)  # migration 26: the key its ssh clones use
        # migration 27: deploy on push (core.panel.pushes): the webhook secret, encrypted
        # (app.storage.secrets; never on the Service entity), and whether a push deploys
        webhook_secret = peewee.TextField(null=True)
        auto_deploy = peewee.BooleanField(default=True, constraints=[peewee.SQL("DEFAULT TRUE")])
        # migration 28: preview environments (core.panel.previews): a git service's choice to
        # have them, and a preview's parent and pull-request number
        previews = peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")])
        previews_from_forks = peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")])
        preview_of = peewee.CharField(max_length=40, null=True)
        preview_number = peewee.IntegerField(null=True)
        # migration 30: the ssh host key its clones must be shown (core.panel.host_keys)
        ssh_host_key = peewee.TextField(null=True)
        # migration 36: the host ports its components keep across deploys, as JSON
        # {component: {container port: host port}} (core.panel.deploy_job)
        host_ports = peewee.TextField(null=True)

        class Meta:
            indexes = ((("preview_of", "preview_number"), True),)

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
        # migration 27: the commit to deploy (a push's); none: the branch's newest
        commit = peewee.CharField(max_length=64, null=True, column_name="source_commit")
        # migration 31: every commit pushed into it (JSON, in the order they came)
        commits = peewee.TextField(null=True, column_name="source_commits")

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
        secret_values = peewee.TextField(null=True)  # migration 23, as on the service
        branch = peewee.TextField(null=True, column_name="source_branch")  # migration 35: the branch cloned

        class Meta:
            table_name = "service_release"
            indexes = ((("service_id", "number"), True),)

    class ReleaseAncestor(Base):
        """An ancestor of the commit a release deployed (migration 31), as far as its
        deploy's clone read the history: a push of it is an old commit."""

        release_id = peewee.CharField(max_length=40)
        service_id = peewee.CharField(max_length=40, index=True)
        commit = peewee.CharField(max_length=64)

        class Meta:
            table_name = "release_ancestor"
            primary_key = peewee.CompositeKey("release_id", "commit")

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
        restore_service_id = peewee.CharField(max_length=40, null=True)  # a restore into another (new) service
        owner = peewee.CharField(max_length=40, null=True)  # the worker running its job (WorkerLease)
        destination = peewee.CharField(max_length=64, default="local")  # SLIPWAY_BACKUP_DESTINATIONS' name
        kind = peewee.CharField(max_length=16, default="volumes")  # volumes, postgres, mysql, redis
        verify_status = peewee.CharField(max_length=16, null=True, index=True)  # its verification job
        verified_at = UtcDateTimeField(null=True)
        verify_error = peewee.TextField(null=True)
        # made by the service's backup policy (migration 24)
        scheduled = peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")])

        class Meta:
            table_name = "backup"
            indexes = ((("service", "created_at"), False),)

    class BackupPolicy(Base):
        """A service's backup policy (``core.panel.backup_policies``): its cron schedule,
        destination, retention and verification, and when it is next due."""

        service = peewee.ForeignKeyField(Service, column_name="service_id", primary_key=True, on_delete="CASCADE")
        schedule = peewee.CharField(max_length=200)  # five-field cron, UTC
        destination = peewee.CharField(max_length=64)
        keep_last = peewee.IntegerField()
        verify = peewee.BooleanField(default=False)
        next_run_at = UtcDateTimeField(index=True)
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()
        last_run_at = UtcDateTimeField(null=True)
        last_backup_id = peewee.CharField(max_length=40, null=True)

        class Meta:
            table_name = "backup_policy"

    class ServiceTask(Base):
        """A scheduled task of a service (migration 38, ``core.panel.tasks``)."""

        id = peewee.CharField(max_length=40, primary_key=True)
        service = peewee.ForeignKeyField(Service, column_name="service_id", on_delete="CASCADE")
        name = peewee.TextField()
        schedule = peewee.CharField(max_length=200)  # five-field cron, UTC
        component = peewee.CharField(max_length=63)
        command = peewee.TextField()  # JSON array of strings
        timeout_s = peewee.IntegerField()
        enabled = peewee.BooleanField()
        next_run_at = UtcDateTimeField(index=True)
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()

        class Meta:
            table_name = "service_task"

    class TaskRun(Base):
        """A run of a scheduled task (migration 38): queued while ``running`` without
        ``started_at``; ``owner`` the worker lease of the process that started it."""

        id = peewee.CharField(max_length=40, primary_key=True)
        task = peewee.ForeignKeyField(ServiceTask, column_name="task_id", on_delete="CASCADE")
        service_id = peewee.CharField(max_length=40)
        customer_id = peewee.CharField(max_length=40)
        status = peewee.CharField(max_length=16)
        trigger = peewee.CharField(max_length=16)
        owner = peewee.CharField(max_length=64, null=True)
        created_at = UtcDateTimeField()
        started_at = UtcDateTimeField(null=True)
        finished_at = UtcDateTimeField(null=True)
        exit_code = peewee.IntegerField(null=True)
        output = peewee.TextField(default="")

        class Meta:
            table_name = "task_run"
            indexes = ((("status", "created_at"), False),)

    class DeployKey(Base):
        """A customer's deploy key (migration 26, ``core.panel.deploy_keys``): its public
        half, and its private half sealed with SLIPWAY_SECRET_KEY (app.storage.secrets)."""

        id = peewee.CharField(max_length=40, primary_key=True)
        name = peewee.TextField()
        customer = peewee.ForeignKeyField(PanelCustomer, column_name="customer_id", on_delete="CASCADE")
        public_key = peewee.TextField()
        fingerprint = peewee.CharField(max_length=64)
        private_key = peewee.TextField()  # sealed: v1:...
        created_at = UtcDateTimeField()

        class Meta:
            table_name = "deploy_key"

    class GitDelivery(Base):
        """A git provider's webhook delivery a service received (migration 27): one per
        delivery id, so a delivery sent again runs nothing (``core.panel.pushes``)."""

        # no index of its own: the primary key (service_id, delivery_id) starts with it
        service = peewee.ForeignKeyField(Service, column_name="service_id", on_delete="CASCADE", index=False)
        delivery_id = peewee.CharField(max_length=200)
        provider = peewee.CharField(max_length=32)
        received_at = UtcDateTimeField()

        class Meta:
            table_name = "git_delivery"
            primary_key = peewee.CompositeKey("service", "delivery_id")

    class PreviewJob(Base):
        """A preview's create, redeploy or delete a pull-request delivery queued
        (migration 33; ``core.panel.previews``)."""

        id = peewee.CharField(max_length=40, primary_key=True)
        service = peewee.ForeignKeyField(Service, column_name="service_id", on_delete="CASCADE")
        customer_id = peewee.CharField(max_length=40)
        number = peewee.IntegerField()
        request = peewee.TextField()  # the pull request's fields, JSON
        state = peewee.CharField(max_length=16)  # queued, running, done, failed
        owner = peewee.CharField(max_length=64, null=True)
        answer = peewee.TextField(null=True)  # what the job did, JSON
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()

        class Meta:
            table_name = "preview_job"
            indexes = ((("state", "created_at"), False),)

    return dict(PreviewJob=PreviewJob, GitDelivery=GitDelivery, PanelCustomer=PanelCustomer, PanelApiKey=PanelApiKey, PanelUser=PanelUser,
                PanelSession=PanelSession, PanelKeySession=PanelKeySession, PanelLogin=PanelLogin, Service=Service,
                ServiceRoute=ServiceRoute, CustomDomain=CustomDomain, WorkerLease=WorkerLease, DeployJob=DeployJob,
                Release=Release, ReleaseAncestor=ReleaseAncestor, ServiceEvent=ServiceEvent, Backup=Backup,
                BackupPolicy=BackupPolicy, DeployKey=DeployKey, ServiceTask=ServiceTask, TaskRun=TaskRun)
