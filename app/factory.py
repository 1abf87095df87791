"""``create_app(config)``: compose storage, plugins, contracts and handlers into one
``falcon.asgi.App`` serving the partner API (``/v1``) and the panel API (``/api``)."""
from __future__ import annotations

import inspect
import logging

import falcon
import falcon.asgi

from falcon.routing import CompiledRouter

from app import extensions
from app.composition import Composition
from app.config import Config
from app.http.errors import DENY_KEY, HandshakeDenial, handle_any_error
from app.http.observability.observer import Observer
from app.http.observability.prometheus import worker_exiting
from app.http.openapi import ApiContract
from app.http.pipeline import add_contract_routes
from app.http.probes import add_probe_routes
from app.http.websocket_limits import limit_messages
from app.panel.accounts import AccountsHandlers
from app.panel.auth import AuthHandlers
from app.panel.backup_policies import BackupPoliciesHandlers
from app.panel.tasks import TasksHandlers
from app.panel.deploy_keys import DeployKeysHandlers
from app.panel.backups import BackupsHandlers
from app.panel.docs import docs_handlers
from app.panel.frontend import Frontend
from app.panel.gate import PanelGate
from app.panel.git_hooks import GitHooksHandlers
from app.panel.mcp import PATH as MCP_PATH, McpEndpoint
from app.panel.realtime import RealtimeHandlers
from app.panel.services import ServicesHandlers
from app.partner.billing import BillingHandlers
from app.partner.gate import PartnerGate
from app.partner.identity import IdentityHandlers
from app.partner.licensing import LicensingHandlers
from app.partner.webhooks import WebhookHandlers
from app.storage.store import Store
from app.workers.proxy_routes import reserved_hosts
from core.panel import backups, capabilities, services

log = logging.getLogger("slipway.engine")


class SlipwayApp(falcon.asgi.App):
    """A Falcon ASGI app that also carries its composition (``app.parts``:
    ``app.composition.Composition``) for background jobs and tests, its lifespan, its
    contracts (``{"partner": ..., "panel": ...}``), the MCP endpoint (app.panel.mcp, handed
    requests to exactly its path as raw ASGI) and the observer (request ids, access lines
    and request metrics: app.http.observability), all given to the constructor."""

    def __init__(self, *args, parts=None, lifespan=None, contracts=None, mcp=None, observer=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.parts, self.lifespan, self.contracts, self.mcp, self.observer = parts, lifespan, contracts, mcp, observer
        #: the same routes again, for ``route_template`` (falcon's own router is private)
        self._templates = CompiledRouter()

    def add_route(self, uri_template, resource, **kwargs):
        super().add_route(uri_template, resource, **kwargs)
        self._templates.add_route(uri_template, _Routed())

    def route_template(self, path: str) -> str | None:
        """The route template (``/api/services/{id}``) ``path`` matches, or None."""
        found = self._templates.find(path)
        return found[3] if found is not None else None

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


def log_engine(config: Config) -> None:
    """Say at start which container engine deploys run on (``app.engine_discovery``), or
    that there is none and how to start one, before anyone deploys."""
    from app.engine_discovery import START_HINT
    from core.redaction import redact_url

    if config.runtime_url:
        log.info("container engine: %s at %s (from %s)", config.runtime, redact_url(config.runtime_url),
                 config.runtime_source, extra={"fields": {"engine": config.runtime_source}})
    else:
        log.warning("no container engine (%s): %s", config.runtime_source, START_HINT,
                    extra={"fields": {"engine": "off"}})


class Lifespan:
    """ASGI lifespan: start the composition's background jobs (``app.composition.JOBS``
    order); on shutdown stop them in the same order, then release the database
    connections and worker threads."""

    def __init__(self, parts: Composition, mcp=None):
        self.parts, self.mcp = parts, mcp
        self.checks = []  # the /readyz checks' threads (add_probe_routes adds them)

    @property
    def jobs(self) -> list:
        return self.parts.jobs({"mcp": self.mcp})

    async def process_startup(self, scope, event):
        log_engine(self.parts.config)
        for job in self.jobs:
            started = job.start()
            if inspect.isawaitable(started):  # e.g. the PostgreSQL bus waits for its listener
                await started

    async def process_shutdown(self, scope, event):
        for job in self.jobs:
            await job.stop()
        for check in self.checks:
            check.close()
        worker_exiting()  # with several workers, this one's live gauges leave the sum
        self.parts.close()  # a store handed in by the caller is the caller's to close


def create_app(config: Config | None = None, *, store: Store | None = None,
               composition: Composition | None = None) -> SlipwayApp:
    """The HTTP app of one composition (``app.composition``): both contracts' routes, the
    plugins' routes, the MCP endpoint, the web frontend and the probes. ``store``: a
    store the caller owns (and closes)."""
    parts = composition or Composition(config, store=store)
    config = parts.config
    config.require_secret_key()  # no server without the key of the secret variables
    parts.deploy_methods, parts.billing_models, parts.extensions  # noqa: B018 - a bad plugin or setting stops start-up now
    store = parts.store
    parts.serve_events()
    license_service, runtime, deployer = parts.license_service, parts.runtime, parts.deployer
    partner = ApiContract.load("partner")
    handlers = IdentityHandlers(store, config.clock, partner).handlers()
    handlers.update(LicensingHandlers(store, config.clock, license_service).handlers())
    handlers.update(BillingHandlers(store, config.clock).handlers())
    handlers.update(docs_handlers("partner"))
    handlers.update(WebhookHandlers(store, config.clock, allow_private=config.webhook_allow_private,
                                    lookups=parts.webhook_lookups, resolver=config.resolver).handlers())
    partner_gate = PartnerGate(store, config, parts.rates)

    routes = parts.extensions.routes  # the plugins' routes (register_routes), in the contract and behind its gate
    panel = ApiContract.load("panel", deploy_methods=parts.deploy_methods,
                          amend=lambda document: extensions.add_to_document(document, routes))
    catalog = parts.templates
    archives = parts.backup_archives
    panel_ops = AccountsHandlers(store, config.clock, panel, catalog, key_rpm=config.rate_auth_rpm).handlers()
    panel_ops.update(docs_handlers())
    panel_ops.update(ServicesHandlers(store, config.clock, runtime, parts.deploy_methods, catalog,
                                      parts.request_calls, wake=deployer.wake, quota=parts.quota,
                                      deleted=lambda service: backups.forget_service(archives, service),
                                      deleting=lambda ids: (deployer.cancel_services(ids),
                                                            parts.backup_worker.cancel_services(ids)),
                                      base_domain=config.base_domain, parse=parts.read_compose,
                                      reserved_hosts=reserved_hosts(config),
                                      public_url=config.public_url, engine_gate=parts.engine_gate).handlers())
    panel_gate = PanelGate(store, config, parts.rates, sources=parts.auth_sources)  # keys, sessions, sources
    # deliveries draw on the gate's buckets once verified or refused
    panel_ops.update(GitHooksHandlers(store, config.clock, parts.git_providers, methods=parts.deploy_methods,
                                      quota=parts.quota,
                                      wake=deployer.wake, previews_queued=parts.preview_worker.wake,
                                      gate=panel_gate).handlers())

    def create_service(uow, principal, request, also):  # a restore into a new service
        # its compose as given: by the method that runs one (core.panel.backups)
        request = {"deploy_method": capabilities.runs_compose(parts.deploy_methods), **request}
        created = services.create_service(uow, config.clock, principal, request, parts.deploy_methods, catalog,
                                          parts.quota, base_domain=config.base_domain,
                                          reserved_hosts=reserved_hosts(config), also=also)
        deployer.wake()
        return created

    panel_ops.update(BackupsHandlers(store, config.clock, archives, parts.read_compose,
                                     wake=parts.backup_worker.wake, create_service=create_service,
                                     calls=parts.request_calls, engine_gate=parts.engine_gate).handlers())
    panel_ops.update(BackupPoliciesHandlers(store, config.clock, parts.policy_destinations,
                                            wake=parts.backup_scheduler.wake).handlers())
    panel_ops.update(TasksHandlers(store, config.clock, wake=parts.task_worker.wake).handlers())
    panel_ops.update(DeployKeysHandlers(store, config.clock).handlers())
    panel_ops.update(RealtimeHandlers(parts.hub, store, runtime, parts.engine_calls, config.ws_queue,
                                      logs_http=panel_ops["getServiceLogs"]).handlers())
    panel_ops.update(AuthHandlers(store, config, panel_gate).handlers())
    panel_ops.update(extensions.route_handlers(routes, parts.extension_context, parts.extension_calls))
    # /api/mcp: tools over these handlers (and the plugins' routes that ask for it)
    mcp = McpEndpoint(panel, panel_gate, panel_ops, extra_tools=extensions.mcp_tools(routes))

    operations = {(op.route, op.method): op.operation_id for c in (partner, panel) for op in c.operations}
    operations.update({("/healthz", "GET"): "healthz", ("/readyz", "GET"): "readyz", ("/metrics", "GET"): "metrics"})
    operations.update({(MCP_PATH, method): "mcp" for method in ("POST", "GET", "DELETE")})
    # the observer asks the app (made next) for the route template of each request's path
    observer = Observer(lambda path: MCP_PATH if path == MCP_PATH else app.route_template(path), operations)
    lifespan = Lifespan(parts, mcp=mcp)
    app = SlipwayApp(middleware=[lifespan], parts=parts, lifespan=lifespan,
                     contracts={"partner": partner, "panel": panel}, mcp=mcp, observer=observer)
    app.req_options.auto_parse_qs_csv = False
    app.add_error_handler(Exception, handle_any_error)
    app.add_error_handler(falcon.HTTPError, handle_any_error)
    add_contract_routes(app, partner, partner_gate, handlers, parts.idempotency)
    add_contract_routes(app, panel, panel_gate, panel_ops, parts.idempotency)

    # the web frontend: GET / and client-side routes answer the page, /assets/... its files
    Frontend(config.web_dir, oidc=bool(config.oidc_issuer)).add_to(app)

    lifespan.checks.extend(add_probe_routes(app, store=store, runtime=runtime,
                                            engine_configured=bool(config.runtime_url),
                                            timeout=config.ready_timeout, metrics_token=config.metrics_token))
    return app


class _Routed:
    """What ``SlipwayApp._templates`` routes to: only the template matters."""

    def on_get(self, req, resp):  # a route needs a responder; this router never serves one
        raise NotImplementedError
