"""One composition: every port and background part Slipway runs, built from the
configuration in one place, used by ``create_app`` (app.factory), the operator's CLI
(app.cli) and the tests.

Each part is built on first use and kept (``functools.cached_property``), so the CLI
builds only the store and the plugins it needs, and ``create_app`` gets every part. The
registries are chosen the way their row of ``app.registries.REGISTRIES`` says: the
factory a setting names (or every factory) builds the part with ``create(settings)``,
given everything it needs; nothing is set on a part after it is built. The background
jobs start in the order ``JOBS`` declares and stop in the same order.
"""
from __future__ import annotations

import os
from functools import cached_property

from app import waits as waits_guard
from app.config import Config, ConfigError
from app.engine_calls import EngineCalls
from app import registries
from app.extensions import AUTH_SOURCE_TIMEOUT_S, AuthSources, ExtensionError, ExtensionJobs, Extensions, OutboxDelivery
from app.pluginmanager import make_plugin_manager
from app.registries import PluginError
from app.storage.store import Store
from core.panel.compose import compose_parser
from core.panel.customers import Quota
from ports.extensions import ExtensionContext
from ports.settings import Settings

#: the background jobs in the order they start and stop (names of ``Composition``
#: attributes; a part that is off is None and skipped):
JOBS = (
    "billing_recompute",     # statements' usage, every SLIPWAY_BILLING_INTERVAL
    "deployer",              # deploy jobs
    "backup_worker",         # backups and restores
    "preview_worker",        # the previews pull-request deliveries open and close
    "backup_scheduler",      # the backup policies' due runs
    "task_worker",           # scheduled tasks' runs
    "task_scheduler",        # scheduled tasks' due runs
    "idempotency_cleanup",   # expired Idempotency-Key records
    "history",               # each service's newest events and jobs
    "webhook_worker",        # partner webhook deliveries
    "extension_jobs",        # the plugins' jobs (register_jobs)
    "outbox_delivery",       # the plugins' event subscribers (register_event_subscribers)
    "route_sync",            # the reverse proxy's feed
    "lease",                 # dropped after the workers above stopped
    "mcp",                   # /api/mcp's session manager (made by create_app: Composition.jobs), before the hub and bus
    "hub",                   # WebSocket subscriptions; stopped after every job that publishes
    "bus",                   # the event bus, stopped last but one
    "rates",                 # its connections closed after every request was answered
)


class Composition:
    """Every part of one Slipway, from ``config`` (and, optionally, a ``store`` the caller
    owns and closes)."""

    def __init__(self, config: Config | None = None, *, store: Store | None = None):
        self.config = config or Config.from_env()
        if self.config.strict_waits:  # (never turned off here: one test's app must not loosen another's)
            waits_guard.configure(True)
        self.owns_store = store is None
        self._given_store = store

    # --- settings and plugins --------------------------------------------------------

    @cached_property
    def plugins(self):
        return make_plugin_manager(self.config.plugins, self.config.load_entrypoints)

    @cached_property
    def settings(self) -> Settings:
        """The ``SLIPWAY_*`` variables every factory reads, with the values the
        configuration resolved on top (it may have been given directly, not by the
        environment; ``SLIPWAY_HOST_PORTS`` is the app's one range, for every deploy
        method and the runtime); ``part(kind)`` is what another registry made for this
        app (``app.registries.settings_of``); ``resolver`` the configuration's name
        lookups (``Config.resolver``), for a factory whose object looks hosts up."""
        c = self.config
        values = dict(c.settings or os.environ)
        values.update({"SLIPWAY_DATABASE_URL": c.database_url, "SLIPWAY_RUNTIME_URL": c.runtime_url or "",
                       "SLIPWAY_RUNTIME": c.runtime, "SLIPWAY_LICENSE_SERVICE": c.license_service,
                       "SLIPWAY_ROUTES": c.routes,
                       "SLIPWAY_RATE_STORE": c.rate_store, "SLIPWAY_EVENT_BUS": c.event_bus,
                       "SLIPWAY_ROUTES_FILE": c.routes_file or "", "SLIPWAY_CADDY_ADMIN": c.caddy_admin,
                       "SLIPWAY_CADDY_TLS": c.caddy_tls, "SLIPWAY_CADDY_LISTEN": c.caddy_listen,
                       "SLIPWAY_HOST_PORTS": "{}-{}".format(*c.host_ports)})
        return registries.settings_of(self.plugins, values, resolver=c.resolver)

    def _select(self, kind: str):
        """The part the registry ``kind`` selects from the settings (``app.registries``):
        ``settings.part``, so a factory that asks for it gets the app's own."""
        return self.settings.part(kind)

    @cached_property
    def deploy_methods(self) -> dict:
        """Every deploy method, each created once with the settings (its own ``SLIPWAY_*``
        variables, the app's host ports, the analyzer: a bad one stops start-up naming it)."""
        return self._select("deploy_methods")

    @cached_property
    def billing_models(self) -> dict:
        # two plugins claiming one model stop start-up
        return self._select("billing_models")

    @cached_property
    def templates(self) -> dict:
        return self._select("templates")

    @cached_property
    def extensions(self) -> Extensions:
        try:
            return Extensions.collect(self.plugins)
        except (ExtensionError, PluginError) as exc:
            raise ConfigError(f"plugins: {exc}") from exc

    @cached_property
    def extension_context(self) -> ExtensionContext:
        return ExtensionContext(settings=Settings(self.settings), clock=self.config.clock)

    @cached_property
    def git_providers(self) -> list:
        """Every git provider a loaded plugin offers (``register_git_providers``), each
        created once with empty settings, in name order: what ``POST /api/hooks/git/{id}``
        asks to recognise a delivery. Two plugins providing one name stop start-up."""
        try:
            return list(registries.create_all(self.plugins, "git_providers", Settings({})).values())
        except PluginError as exc:
            raise ConfigError(f"plugins: {exc}") from exc

    # --- ports -----------------------------------------------------------------------

    @cached_property
    def bus(self):
        """``SLIPWAY_EVENT_BUS``; use cases publish through their units of work."""
        return self._select("event_buses")

    @cached_property
    def store(self) -> Store:
        store = self._given_store or Store(self.config.database_url, threads=self.config.db_threads)
        if self.config.secret_key is not None:  # SLIPWAY_SECRET_KEY or the key file (app.storage.secrets)
            store.use_secret_key(self.config.secret_key)
        store.require_current_schema()
        return store

    def serve_events(self) -> None:
        """The store announces committed events on the bus and, when a plugin subscribes
        to events, writes them to the outbox in the same transaction."""
        self.store.attach_events(self.bus, outbox=bool(self.extensions.subscribers))

    def keep_events(self) -> None:
        """For a process that serves nothing (the operator's commands): when a plugin
        subscribes to events, the store writes them to the outbox in the same transaction,
        for a server's delivery to hand over; nothing is announced."""
        self.store.attach_events(None, outbox=bool(self.extensions.subscribers))

    @cached_property
    def license_service(self):
        settings = Settings(self.settings, database=self.store.db, resolver=self.config.resolver)
        return registries.build(self.plugins, "license_services", settings)

    @cached_property
    def runtime(self):
        """``SLIPWAY_RUNTIME`` on ``SLIPWAY_RUNTIME_URL`` (publish address, host ports, limits)."""
        return self._select("runtimes")

    @cached_property
    def engine_gate(self):
        """Refuses work for an engine that is not configured or does not answer its ping
        (``app.engine_gate``), before anything is stored."""
        from app.engine_gate import EngineGate

        return EngineGate(self.runtime, self.config.runtime_url)

    @cached_property
    def rates(self):
        """``SLIPWAY_RATE_STORE``: every rate-limit bucket of both APIs (``memory``, or the
        factory of its URL's scheme)."""
        return self._select("rate_stores")

    @cached_property
    def route_provider(self):
        """``SLIPWAY_ROUTES``, configured; None when its settings leave it off."""
        return self._select("route_providers")

    # --- thread pools ------------------------------------------------------------------

    @cached_property
    def engine_calls(self) -> EngineCalls:
        """Background engine work: backups, log pumps, health checks."""
        return EngineCalls()

    @cached_property
    def deploy_calls(self) -> EngineCalls:
        """One thread per deploy job that may run at once, so log pumps and backups never
        hold a deploy up, nor a deploy them."""
        return EngineCalls(threads=self.config.deploy_concurrency, name="slipway-deploy")

    @cached_property
    def backup_calls(self) -> EngineCalls:
        """One thread per backup, restore or verification that may run at once
        (``SLIPWAY_BACKUP_WORKERS``), so a customer's stuck dump holds up neither the
        deploys nor the health checks and log pumps."""
        return EngineCalls(threads=self.config.backup_workers, name="slipway-backup")

    @cached_property
    def task_calls(self) -> EngineCalls:
        """One thread per scheduled task's run that may run at once: a customer's command
        running to its time limit holds up no deploy, backup, health check or log pump."""
        from app.workers.tasks import TaskWorker

        return EngineCalls(threads=TaskWorker.concurrency, name="slipway-tasks")

    @cached_property
    def request_calls(self) -> EngineCalls:
        """Engine calls of requests; one customer's slow calls hold at most a quarter."""
        return EngineCalls(threads=self.config.engine_threads, deadline=self.config.engine_timeout,
                           name="slipway-engine-req")

    @cached_property
    def webhook_lookups(self) -> EngineCalls:
        """The webhook URL check's DNS lookups, per partner."""
        return EngineCalls(threads=4, name="slipway-webhook-dns")

    @cached_property
    def extension_calls(self) -> EngineCalls:
        """The plugins' code (routes, jobs, subscribers, auth sources); one caller's slow
        calls hold at most a quarter."""
        return EngineCalls(threads=8, name="slipway-ext")

    @cached_property
    def auth_source_calls(self) -> EngineCalls:
        """The plugins' auth sources, asked in the requests they may admit: a pool of their
        own, each source at most a quarter of it, each call answered within
        ``AUTH_SOURCE_TIMEOUT_S`` (503 past it), so a source that hangs holds up neither
        the other sources nor the plugins' other code."""
        return EngineCalls(threads=8, deadline=AUTH_SOURCE_TIMEOUT_S, name="slipway-auth",
                           late="the auth source did not answer within {deadline:g} s")

    def thread_pools(self) -> tuple:
        """The pools built so far (closed at shutdown)."""
        names = ("engine_calls", "request_calls", "deploy_calls", "backup_calls", "webhook_lookups",
                 "extension_calls", "auth_source_calls", "preview_calls", "task_calls")
        return tuple(self.__dict__[name] for name in names if name in self.__dict__)

    # --- the panel's rules ---------------------------------------------------------------

    @cached_property
    def quota(self) -> Quota:
        """Customer limits: checked by the API (create, redeploy, PATCH) and by deploy jobs
        whose source step reveals the compose (git, ai)."""
        c = self.config
        return Quota(services=c.customer_max_services, memory_mb=c.customer_max_memory_mb, cpus=c.customer_max_cpus,
                     containers=c.customer_max_containers, container_memory_mb=c.default_memory_mb,
                     container_cpus=c.default_cpus, read_compose=self.read_compose)

    @cached_property
    def read_compose(self):
        return compose_parser(self.config.host_ports)  # core's parser, whatever the method

    @cached_property
    def auth_sources(self) -> AuthSources:
        return AuthSources(self.extensions.auth_sources, self.extension_context, self.store, self.auth_source_calls,
                           default_rpm=self.config.rate_auth_rpm)

    # --- background parts --------------------------------------------------------------

    def _workers_on(self) -> bool:
        return bool(self.config.deploy_worker)

    @cached_property
    def lease(self):
        """Whose running jobs are whose, across processes."""
        from app.workers.loop import WorkerLease

        return WorkerLease(self.store, self.config.clock)

    @cached_property
    def route_sync(self):
        """Periodic, and at once when a deploy switches routes; None without a provider."""
        from app.workers.proxy_routes import ProxyRouteSync

        provider = self.route_provider
        return ProxyRouteSync(self.store, provider, self.config.routes_interval) if provider is not None else None

    @cached_property
    def hub(self):
        from app.panel.realtime import Hub

        c = self.config
        return Hub(self.store, self.bus, self.runtime, self.engine_calls, limit=c.ws_queue, clock=c.clock,
                   per_key=c.ws_per_key)

    @cached_property
    def deployer(self):
        from app.panel.realtime import DeployProgress
        from app.workers.deploys import DeployWorker

        c = self.config
        switch = {"routes_changed": self.route_sync.sync_now} if self.route_sync is not None else {}
        return DeployWorker(self.store, c.clock, self.runtime, self.deploy_calls, base_domain=c.base_domain,
                            health_interval=c.health_interval, methods=self.deploy_methods, work_dir=c.work_dir,
                            progress=DeployProgress(self.store, self.bus), lease=self.lease,
                            health_calls=self.engine_calls, concurrency=c.deploy_concurrency,
                            per_customer=c.deploys_per_customer, settle_seconds=c.deploy_settle,
                            health_timeout=c.deploy_health_timeout, drain_seconds=c.deploy_drain,
                            registry_allow_private=c.registry_allow_private, quota=self.quota,
                            host_ports=c.host_ports, resolver=c.resolver, **switch)

    @cached_property
    def preview_calls(self) -> EngineCalls:
        """The preview worker's threads (``PreviewWorker.concurrency``): a fork's host
        looked up, a closed preview's containers removed."""
        from app.workers.previews import PreviewWorker

        return EngineCalls(threads=PreviewWorker.concurrency, name="slipway-previews")

    @cached_property
    def on_pull_request(self):
        """``core.panel.previews.on_pull_request`` bound to the app's deploy methods,
        catalog, limits, base domain and engine: a preview is made like any service."""
        import functools

        from app.workers.proxy_routes import reserved_hosts
        from core.panel import previews

        c = self.config
        return functools.partial(previews.on_pull_request, methods=self.deploy_methods, catalog=self.templates,
                                 quota=self.quota, base_domain=c.base_domain, reserved_hosts=reserved_hosts(c),
                                 runtime=self.runtime)

    @cached_property
    def preview_worker(self):
        from app.workers.previews import PreviewWorker

        return PreviewWorker(self.store, self.config.clock, self.preview_calls, self.on_pull_request,
                             lease=self.lease, deployed=self.deployer.wake)

    @cached_property
    def billing_recompute(self):
        from app.workers.billing import BillingRecompute

        return BillingRecompute(self.store, self.config.clock, self.billing_models, self.config.billing_interval)

    @cached_property
    def backup_destinations(self) -> dict:
        """Every backup destination by name: ``local`` (``SLIPWAY_BACKUP_DIR``) and those
        of ``SLIPWAY_BACKUP_DESTINATIONS``, each made once by the factory of its ``kind``
        (``register_backup_destinations``). A kind no plugin provides, or a bad option, stops
        start-up naming the setting."""
        c = self.config
        wanted = {"local": {"kind": "local", "path": c.backup_dir}}
        for name, options in (c.backup_destinations or {}).items():
            if name == "local":
                raise ConfigError("SLIPWAY_BACKUP_DESTINATIONS: \"local\" is built in (the folder SLIPWAY_BACKUP_DIR); "
                                  "give another name")
            wanted[name] = options
        return registries.create_each(
            self.plugins, "backup_destinations", wanted,
            setting_of=lambda name: "SLIPWAY_BACKUP_DIR" if name == "local" else "SLIPWAY_BACKUP_DESTINATIONS")

    @cached_property
    def backup_archives(self):
        """Archives at the destinations; ``SLIPWAY_BACKUP_DEFAULT`` names the default."""
        from app.storage.backup_archives import BackupArchives

        destinations = self.backup_destinations
        default = self.config.backup_default or "local"
        if default not in destinations:
            raise ConfigError(f"SLIPWAY_BACKUP_DEFAULT: no backup destination {default!r} "
                              f"(configured: {', '.join(sorted(destinations))})")
        return BackupArchives(destinations, default)

    @cached_property
    def backup_worker(self):
        from app.workers.backups import BackupWorker

        from core.panel import backups

        c = self.config
        return BackupWorker(self.store, c.clock, self.runtime, self.backup_calls, self.backup_archives,
                            lease=self.lease,
                            verify=lambda backup: backups.queue_verification_of(self.store.uow(), c.clock, backup.id),
                            engine_check=backups.check_dumps(self.runtime),
                            concurrency=c.backup_workers, timeout=c.backup_timeout, max_mb=c.backup_max_mb)

    @cached_property
    def policy_destinations(self):
        """The destinations a backup policy may name (``backup_archives``'), and the default one."""
        from core.panel.backup_policies import Destinations

        return Destinations(frozenset(self.backup_archives.names()), default=self.backup_archives.default)

    @cached_property
    def backup_scheduler(self):
        from app.workers.backup_scheduler import BackupScheduler

        return BackupScheduler(self.store, self.config.clock, self.read_compose, queued=self.backup_worker.wake)

    @cached_property
    def task_worker(self):
        from app.workers.tasks import TaskWorker

        return TaskWorker(self.store, self.config.clock, self.runtime, self.task_calls, lease=self.lease)

    @cached_property
    def task_scheduler(self):
        from app.workers.tasks import TaskScheduler

        return TaskScheduler(self.store, self.config.clock, queued=self.task_worker.wake)

    @cached_property
    def idempotency(self):
        """``Idempotency-Key`` on every POST of both APIs."""
        from app.http.idempotency import Idempotency

        return Idempotency(self.store, self.config.clock, self.config.secret_key)

    @cached_property
    def idempotency_cleanup(self):
        from app.workers.idempotency import IdempotencyCleanup

        return IdempotencyCleanup(self.store, self.idempotency)

    @cached_property
    def history(self):
        from app.workers.history import HistoryCleanup

        return HistoryCleanup(self.store, self.config.clock, self.config.events_keep)

    @cached_property
    def webhook_worker(self):
        from app.workers.webhooks import WebhookWorker

        c = self.config
        return WebhookWorker(self.store, c.clock, retry_base=c.webhook_retry_base, lease=self.lease,
                             timeout=c.webhook_timeout, allow_private=c.webhook_allow_private,
                             resolver=c.resolver)

    @cached_property
    def extension_jobs(self):
        jobs = self.extensions.jobs
        return ExtensionJobs(jobs, self.extension_context, self.extension_calls) if jobs else None

    @cached_property
    def outbox_delivery(self):
        subscribers = self.extensions.subscribers
        if not subscribers:
            return None
        return OutboxDelivery(self.store, subscribers, self.extension_context, self.extension_calls, self.lease,
                              bus=self.bus)

    #: the jobs that run only in a process running the workers (SLIPWAY_DEPLOY_WORKER)
    WORKER_JOBS = frozenset({"deployer", "backup_worker", "preview_worker", "backup_scheduler", "task_worker",
                             "task_scheduler", "idempotency_cleanup", "history",
                             "webhook_worker", "extension_jobs", "outbox_delivery", "lease"})

    #: the jobs the HTTP app makes (``create_app``), handed to :meth:`jobs`
    HTTP_JOBS = frozenset({"mcp"})

    def jobs(self, http: dict | None = None) -> list:
        """The background jobs of this process, in ``JOBS`` order; ``http``: those the HTTP
        app made (``{"mcp": endpoint}``)."""
        out = []
        for name in JOBS:
            if name in self.WORKER_JOBS and not self._workers_on():
                continue
            if name == "billing_recompute" and not self.config.billing_interval:
                continue
            part = (http or {}).get(name) if name in self.HTTP_JOBS else getattr(self, name)
            if part is not None:
                out.append(part)
        return out

    def close(self) -> None:
        """Release what this composition opened: its store and thread pools. With a store
        handed in, nothing: the caller closes its store and may serve the same app again."""
        if not self.owns_store:
            return
        if "store" in self.__dict__:
            self.store.close()
        for pool in self.thread_pools():
            pool.close()
