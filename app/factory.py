"""``create_app(config)``: compose storage, plugins, contracts and handlers into one
``falcon.asgi.App`` serving the partner API (``/v1``) and the panel API (``/api``)."""
from __future__ import annotations

import falcon
import falcon.asgi

from app.config import Config, ConfigError
from app.contract import Contract
from app.errors import handle_any_error
from app.http import add_contract_routes
from app.jobs import BillingRecompute
from app.route_file import RouteFile
from app.partner_api import identity_handlers
from app.partner_gate import PartnerGate
from app.partner_billing_api import billing_handlers
from app.partner_licensing_api import licensing_handlers
from app.panel_api import panel_handlers
from app.deployer import DeployWorker
from app.engine_calls import EngineCalls
from app.panel_docs import docs_handlers
from app.panel_gate import PanelGate
from app.panel_services_api import services_handlers
from app.pluginmanager import billing_models, deploy_methods, license_services, make_plugin_manager, runtimes, templates
from app.storage.store import Store


class SlipwayApp(falcon.asgi.App):
    """A Falcon ASGI app that also carries its composed parts (``app.slipway``) for the
    CLI, background jobs and tests."""

    slipway: dict


class Lifespan:
    """ASGI lifespan: start background jobs; on shutdown stop them, then release the
    database connections and worker threads."""

    def __init__(self, store: Store, jobs=(), owns_store: bool = True, engine=None):
        self.store = store
        self.jobs = list(jobs)
        self.owns_store = owns_store
        self.engine = engine

    async def process_startup(self, scope, event):
        for job in self.jobs:
            job.start()

    async def process_shutdown(self, scope, event):
        for job in self.jobs:
            await job.stop()
        if self.owns_store:  # a store handed in by the caller is the caller's to close
            self.store.close()
            if self.engine is not None:
                self.engine.close()


def create_app(config: Config | None = None, *, store: Store | None = None) -> SlipwayApp:
    config = config or Config.from_env()
    pm = make_plugin_manager(config.plugins, config.load_entrypoints)
    methods = deploy_methods(pm)
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
    runtime = engines[config.runtime].create(config.runtime_url)
    engine = EngineCalls()
    deployer = DeployWorker(store, config.clock, runtime, engine, base_domain=config.base_domain,
                            health_interval=config.health_interval)
    recompute = BillingRecompute(store, config.clock, models, config.billing_interval)
    jobs = ([recompute] if config.billing_interval else []) + ([deployer] if config.deploy_worker else [])
    route_file = RouteFile(store, config.routes_file, config.routes_interval) if config.routes_file else None
    if route_file is not None:
        jobs.append(route_file)
    app = SlipwayApp(middleware=[Lifespan(store, jobs=jobs, owns_store=owns_store, engine=engine)])
    app.req_options.auto_parse_qs_csv = False
    app.add_error_handler(Exception, handle_any_error)
    app.add_error_handler(falcon.HTTPError, handle_any_error)

    partner = Contract.load("partner")
    handlers = identity_handlers(store, config.clock, partner)
    handlers.update(licensing_handlers(store, config.clock, license_service))
    handlers.update(billing_handlers(store, config.clock))
    add_contract_routes(app, partner, PartnerGate(store, config), handlers)

    panel = Contract.load("panel", deploy_methods=methods)  # names and per-method required fields
    catalog = templates(pm)
    panel_ops = panel_handlers(store, config.clock, panel, catalog)
    panel_ops.update(docs_handlers())
    panel_ops.update(services_handlers(store, config.clock, runtime, methods, catalog, engine, wake=deployer.wake))
    add_contract_routes(app, panel, PanelGate(store, config), panel_ops)

    app.slipway = {"store": store, "plugins": pm, "contracts": {"partner": partner, "panel": panel},
                   "license_service": license_service, "billing_recompute": recompute, "runtime": runtime,
                   "deployer": deployer, "route_file": route_file}
    return app
