"""``create_app(config)``: compose storage, plugins, contracts and handlers into one
``falcon.asgi.App`` serving the partner API (``/v1``) and the panel API (``/api``)."""
from __future__ import annotations

import falcon
import falcon.asgi

from app.config import Config
from app.contract import Contract
from app.errors import handle_any_error
from app.http import OpenGate, Reply, add_contract_routes
from app.partner_api import identity_handlers
from app.partner_gate import PartnerGate
from app.pluginmanager import billing_models, deploy_methods, make_plugin_manager
from app.storage.store import Store


class SlipwayApp(falcon.asgi.App):
    """A Falcon ASGI app that also carries its composed parts (``app.slipway``) for the
    CLI, background jobs and tests."""

    slipway: dict


class Lifespan:
    """ASGI lifespan: release database connections and worker threads on shutdown."""

    def __init__(self, store: Store):
        self.store = store

    async def process_shutdown(self, scope, event):
        self.store.close()


def create_app(config: Config | None = None, *, store: Store | None = None) -> SlipwayApp:
    config = config or Config.from_env()
    pm = make_plugin_manager(config.plugins, config.load_entrypoints)
    methods = deploy_methods(pm)
    billing_models(pm)  # refuse start-up when two plugins claim one model
    store = store or Store(config.database_url, threads=config.db_threads)
    store.require_current_schema()

    app = SlipwayApp(middleware=[Lifespan(store)])
    app.req_options.auto_parse_qs_csv = False
    app.add_error_handler(Exception, handle_any_error)
    app.add_error_handler(falcon.HTTPError, handle_any_error)

    partner = Contract.load("partner")
    add_contract_routes(app, partner, PartnerGate(store, config), identity_handlers(store, config.clock, partner))

    panel = Contract.load("panel", deploy_methods=methods)

    async def get_panel_contract(call):
        return Reply(200, panel.text, content_type="application/yaml")

    add_contract_routes(app, panel, OpenGate(), {"getPanelContract": get_panel_contract})

    app.slipway = {"store": store, "plugins": pm, "contracts": {"partner": partner, "panel": panel}}
    return app
