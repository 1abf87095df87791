"""``create_app(config)``: compose storage, plugins, contracts and handlers into one
``falcon.asgi.App`` serving the partner API (``/v1``) and the panel API (``/api``)."""
from __future__ import annotations

import inspect

import falcon
import falcon.asgi

from app.config import Config, ConfigError
from app.http.openapi import Contract
from app.http.errors import DENY_KEY, HandshakeDenial, handle_any_error
from app.panel.event_bus import make_bus
from app.panel.realtime import DeployProgress, Hub, realtime_handlers
from app.http.pipeline import add_contract_routes
from app.http.idempotency import Idempotency
from app.workers.idempotency import IdempotencyCleanup
from app.workers.billing import BillingRecompute
from app.workers.routes import RouteSync, reserved_hosts, route_provider
from app.partner.identity import identity_handlers
from app.partner.gate import PartnerGate
from app.partner.billing import billing_handlers
from app.partner.licensing import licensing_handlers
from app.partner.webhooks import webhook_handlers
from app.workers.webhooks import WebhookWorker
from app.panel.accounts import panel_handlers
from app.storage.backup_archives import BackupArchives
from app.workers.backups import BackupWorker
from app.workers.deploys import DeployWorker
from app.panel.backups import backups_handlers
from app.workers.history import HistoryCleanup
from app.workers.loop import WorkerLease
from app.http.websocket_limits import limit_messages
from app.http.collector import freeze_startup_objects
from app.http.observability import Observer, worker_exiting
from app.http.probes import add_probe_routes
from app.http.ratestore import make_rate_store
from app.engine_calls import EngineCalls
from app.panel.docs import docs_handlers
from app.panel.frontend import Frontend
from app.panel.auth import auth_handlers
from app.panel.gate import PanelGate
from app.panel.mcp import PATH as MCP_PATH, McpEndpoint
from app.panel.services import services_handlers
from app.pluginmanager import analyzers, billing_models, deploy_methods, license_services, make_plugin_manager, runtimes, templates
from app.storage.store import Store
from core.panel import backups
from core.panel.customers import Quota
from core.panel.compose import compose_parser


class SlipwayApp(falcon.asgi.App):
    """A Falcon ASGI app that also carries its composed parts (``app.slipway``) for the
    CLI, background jobs and tests."""

    slipway: dict
    #: request ids, access lines and request metrics (app.http.observability); set by create_app
    observer = None
    #: the MCP endpoint (app.panel.mcp), handed requests to exactly its path as raw ASGI
    mcp = None

    async def __call__(self, scope, receive, send):
        if self.observer is not None:
            return await self.observer(scope, receive, send, self._serve)
        return await self._serve(scope, receive, send)

    async def _serve(self, scope, receive, send):
        if self.mcp is not None and scope.get("type") == "http" and scope.get("path") == MCP_PATH:
            return await self.mcp(scope, receive, send)
        # A refused WebSocket upgrade is an HTTP answer to the handshake (docs/decisions.md):
        # where the server offers the ASGI denial-response extension, handlers get it.
        if scope.get("type") == "websocket" and "websocket.http.response" in (scope.get("extensions") or {}):
            denial = HandshakeDenial(send)
            scope = {**scope, DENY_KEY: denial.deny}
            send = denial.send
        if scope.get("type") == "websocket":  # a client message over 64 KiB closes the socket with 1009
            receive, send = limit_messages(receive, send)
        return await super().__call__(scope, receive, send)


class Lifespan:
    """ASGI lifespan: start background jobs; on shutdown stop them, then release the
    database connections and worker threads."""

    def __init__(self, store: Store, jobs=(), owns_store: bool = True, engines=()):
        self.store = store
        self.jobs = list(jobs)
        self.owns_store = owns_store
        self.engines = engines
        self.checks = []  # the /readyz checks' threads

    async def process_startup(self, scope, event):
        for job in self.jobs:
            started = job.start()
            if inspect.isawaitable(started):  # e.g. the PostgreSQL bus waits for its listener
                await started
        freeze_startup_objects()

    async def process_shutdown(self, scope, event):
        for job in self.jobs:
            await job.stop()
        for check in self.checks:
            check.close()
        worker_exiting()  # with several workers, this one's live gauges leave the sum
        if self.owns_store:  # a store handed in by the caller is the caller's to close
            self.store.close()
            for engine in self.engines:
                engine.close()


def create_app(config: Config | None = None, *, store: Store | None = None) -> SlipwayApp:
    config = config or Config.from_env()
    pm = make_plugin_manager(config.plugins, config.load_entrypoints)
    methods = deploy_methods(pm)
    try:  # each method reads its own settings; a bad one stops start-up naming the variable
        registries = {"analyzers": analyzers(pm)}
        for method in methods.values():
            method.configure(config.settings, registries)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    models = billing_models(pm)  # refuses start-up when two plugins claim one model
    owns_store = store is None
    store = store or Store(config.database_url, threads=config.db_threads)
    store.require_current_schema()

    factories = license_services(pm)
    if config.license_service not in factories:
        raise ConfigError(f"SLIPWAY_LICENSE_SERVICE: no loaded plugin provides {config.license_service!r} "
                          f"(loaded: {', '.join(sorted(factories)) or 'none'})")
    try:
        license_service = factories[config.license_service].create(database=store.db, settings=config.settings)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc

    engines = runtimes(pm)
    if config.runtime not in engines:
        raise ConfigError(f"SLIPWAY_RUNTIME: no loaded plugin provides {config.runtime!r} "
                          f"(loaded: {', '.join(sorted(engines)) or 'none'})")
    try:  # the runtime reads its SLIPWAY_* settings (publish address, host ports, limits)
        runtime = engines[config.runtime].create(config.runtime_url, settings=config.settings or None)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    engine = EngineCalls()  # background work: backups, log pumps, health checks
    # deploy jobs get threads of their own, one per job that may run at once, so log pumps
    # and backups never hold a deploy up, nor a deploy them
    deploy_engine = EngineCalls(threads=config.deploy_concurrency, name="slipway-deploy")
    # one customer's slow engine calls hold at most a quarter of these threads (run_for)
    requests_engine = EngineCalls(threads=config.engine_threads, deadline=config.engine_timeout,
                                  name="slipway-engine-req")
    rates = make_rate_store(pm, config)  # SLIPWAY_RATE_STORE: every rate-limit bucket of both APIs
    bus = make_bus(config)  # SLIPWAY_EVENT_BUS; use cases publish through their units of work
    store.bus = bus
    hub = Hub(store, bus, runtime, engine, limit=config.ws_queue, clock=config.clock, per_key=config.ws_per_key)
    lease = WorkerLease(store, config.clock)  # whose running jobs are whose, across processes
    # the reverse proxy's feed (SLIPWAY_ROUTES): periodic, and at once when a deploy switches routes
    provider = route_provider(pm, config)
    route_sync = RouteSync(store, provider, config.routes_interval) if provider is not None else None
    switch = {"routes_changed": route_sync.sync_now} if route_sync is not None else {}
    # customer limits: checked by the API (create, redeploy, PATCH) and by deploy jobs whose source step
    # reveals the compose (git, ai)
    quota = Quota(services=config.customer_max_services, memory_mb=config.customer_max_memory_mb,
                  cpus=config.customer_max_cpus, containers=config.customer_max_containers,
                  container_memory_mb=config.default_memory_mb,
                  container_cpus=config.default_cpus, read_compose=compose_parser(methods))
    deployer = DeployWorker(store, config.clock, runtime, deploy_engine, base_domain=config.base_domain,
                            health_interval=config.health_interval, methods=methods, work_dir=config.work_dir,
                            progress=DeployProgress(store, bus), lease=lease, health_engine=engine,
                            concurrency=config.deploy_concurrency, per_customer=config.deploys_per_customer,
                            settle_seconds=config.deploy_settle, health_timeout=config.deploy_health_timeout,
                            drain_seconds=config.deploy_drain, registry_allow_private=config.registry_allow_private,
                            quota=quota, **switch)
    recompute = BillingRecompute(store, config.clock, models, config.billing_interval)
    jobs = ([recompute] if config.billing_interval else []) + ([deployer] if config.deploy_worker else [])
    archives = BackupArchives(config.backup_dir)
    backup_worker = BackupWorker(store, config.clock, runtime, engine, archives, lease=lease)
    jobs += [backup_worker] if config.deploy_worker else []
    idempotency = Idempotency(store, config.clock)  # Idempotency-Key on every POST of both APIs
    cleanup = IdempotencyCleanup(store, idempotency)
    jobs += [cleanup] if config.deploy_worker else []
    history = HistoryCleanup(store, config.clock, config.events_keep)  # each service's newest events and jobs
    jobs += [history] if config.deploy_worker else []
    webhook_worker = WebhookWorker(store, config.clock, retry_base=config.webhook_retry_base, lease=lease,
                                   timeout=config.webhook_timeout, allow_private=config.webhook_allow_private)
    jobs += [webhook_worker] if config.deploy_worker else []  # partner webhook deliveries
    if route_sync is not None:
        jobs.append(route_sync)
    jobs += [lease] if config.deploy_worker else []  # dropped after the workers stopped
    jobs += [hub, bus]  # stopped last: the jobs before them still publish while stopping
    webhook_lookups = EngineCalls(threads=4, name="slipway-webhook-dns")  # the URL check's DNS, per partner
    lifespan = Lifespan(store, jobs=jobs, owns_store=owns_store,
                        engines=(engine, requests_engine, deploy_engine, webhook_lookups))
    app = SlipwayApp(middleware=[lifespan])
    app.req_options.auto_parse_qs_csv = False
    app.add_error_handler(Exception, handle_any_error)
    app.add_error_handler(falcon.HTTPError, handle_any_error)

    partner = Contract.load("partner")
    handlers = identity_handlers(store, config.clock, partner)
    handlers.update(licensing_handlers(store, config.clock, license_service))
    handlers.update(billing_handlers(store, config.clock))
    handlers.update(webhook_handlers(store, config.clock, allow_private=config.webhook_allow_private,
                                     lookups=webhook_lookups))
    add_contract_routes(app, partner, PartnerGate(store, config, rates), handlers, idempotency)

    panel = Contract.load("panel", deploy_methods=methods)  # names and per-method required fields
    catalog = templates(pm)
    panel_ops = panel_handlers(store, config.clock, panel, catalog, key_rpm=config.rate_auth_rpm)
    panel_ops.update(docs_handlers())
    panel_ops.update(services_handlers(store, config.clock, runtime, methods, catalog, requests_engine,
                                       wake=deployer.wake, quota=quota,
                                       deleted=lambda service_id: backups.forget_service(archives, service_id),
                                       base_domain=config.base_domain, parse=compose_parser(methods),
                                       reserved_hosts=reserved_hosts(config)))
    panel_ops.update(backups_handlers(store, config.clock, archives, compose_parser(methods),
                                      wake=backup_worker.wake))
    panel_ops.update(realtime_handlers(hub, store, runtime, engine, config.ws_queue,
                                       logs_http=panel_ops["getServiceLogs"]))
    panel_gate = PanelGate(store, config, rates)  # API keys and browser sessions; app.slipway["panel_gate"]
    panel_ops.update(auth_handlers(store, config, panel_gate))
    add_contract_routes(app, panel, panel_gate, panel_ops, idempotency)
    app.mcp = McpEndpoint(panel, panel_gate, panel_ops)  # /api/mcp: tools over these handlers
    lifespan.jobs.insert(-2, app.mcp)  # before the hub and bus, like the workers
    lifespan.jobs.append(rates)  # its connections closed after every request has been answered

    # the web frontend: GET / and client-side routes answer the page, /assets/... its files
    Frontend(config.web_dir, oidc=bool(config.oidc_issuer)).add_to(app)

    lifespan.checks = add_probe_routes(app, store=store, runtime=runtime, engine_configured=bool(config.runtime_url),
                                       timeout=config.ready_timeout, metrics_token=config.metrics_token)
    operations = {(op.route, op.method): op.operation_id for c in (partner, panel) for op in c.operations}
    operations.update({("/healthz", "GET"): "healthz", ("/readyz", "GET"): "readyz", ("/metrics", "GET"): "metrics"})
    operations.update({(MCP_PATH, method): "mcp" for method in ("POST", "GET", "DELETE")})
    app.observer = Observer(lambda path: MCP_PATH if path == MCP_PATH else (app._router.find(path) or (None,) * 4)[3],
                            operations)

    app.slipway = {"store": store, "plugins": pm, "contracts": {"partner": partner, "panel": panel},
                   "license_service": license_service, "billing_recompute": recompute, "runtime": runtime,
                   "deployer": deployer, "panel_gate": panel_gate, "route_sync": route_sync, "bus": bus,
                   "hub": hub, "backup_worker": backup_worker, "backup_archives": archives,
                   "idempotency": idempotency, "idempotency_cleanup": cleanup,
                   "webhook_worker": webhook_worker, "lifespan": lifespan}
    return app
