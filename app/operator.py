"""What the operator's commands do; ``app.cli`` parses arguments and prints the result."""
from __future__ import annotations

import contextlib
import json

from app.partner_api import partner_json, token_json
from app.pluginmanager import (analyzers, billing_models, deploy_methods, describe_plugins, license_services,
                               make_plugin_manager, runtimes)
from app.storage.store import Store
from app.timefmt import rfc3339
from core import contracts, editions, licenses, partners, statements, tokens
from core.billing import Period
from core.errors import Invalid


def _store(config) -> Store:
    store = Store(config.database_url, threads=1)
    store.require_current_schema()
    return store


def init(config, args) -> dict:
    store = Store(config.database_url, threads=1)
    pm = make_plugin_manager(config.plugins, config.load_entrypoints)
    try:
        applied = store.migrate([factory.migrate for factory in license_services(pm).values()])
        return {"database": _redact(config.database_url), "schemaVersion": store.version(), "applied": applied}
    finally:
        store.close()


def plugins(config, args) -> dict:
    pm = make_plugin_manager(config.plugins, config.load_entrypoints)
    return {
        "plugins": describe_plugins(pm),
        "deployMethods": sorted(deploy_methods(pm)),
        "billingModels": sorted(billing_models(pm)),
        "licenseServices": sorted(license_services(pm)),
        "runtimes": sorted(runtimes(pm)),
        "analyzers": sorted(analyzers(pm)),
    }


def partner_create(config, args) -> dict:
    store = _store(config)
    try:
        partner = partners.create_partner(store.uow(), config.clock, name=args.name, type=args.type,
                                          parent_id=args.parent)
        return partner_json(partner)
    finally:
        store.close()


def contract_create(config, args) -> dict:
    known = set(billing_models(make_plugin_manager(config.plugins, config.load_entrypoints)))
    store = _store(config)
    try:
        contract = contracts.create_contract(store.uow(), config.clock, partner_id=args.partner, model=args.model,
                                             currency=args.currency, unit_price_cents=args.unit_price_cents,
                                             known_models=known)
        return {"id": contract.id, "partnerId": contract.partner_id, "model": contract.model,
                "currency": contract.currency, "unitPriceCents": contract.unit_price_cents,
                "createdAt": rfc3339(contract.created_at)}
    finally:
        store.close()


def token_create(config, args) -> dict:
    store = _store(config)
    try:
        partners.get_partner(store.uow(), args.partner)
        token, secret = tokens.create_token(store.uow(), config.clock, partner_id=args.partner, label=args.label,
                                            scope=args.scope, created_by=None)
        return token_json(token, secret)
    finally:
        store.close()


def serve(config, host: str, port: int):
    import uvicorn

    from app.factory import create_app

    app = create_app(config)
    print(json.dumps({"serving": f"http://{host}:{port}", "database": _redact(config.database_url)}), flush=True)
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
    return 0, None


def _redact(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url




def edition_list(config, args) -> dict:
    with _opened(config) as store:
        return {"editions": editions.list_editions(store.uow())}


def edition_set(config, args) -> dict:
    with _opened(config) as store:
        return {"editions": editions.set_edition(store.uow(), config.clock, args.name, args.policy)}


def license_set_state(config, args) -> dict:
    from app.partner_licensing_api import license_json

    with _opened(config) as store:
        if not partners.is_uuid(args.license):
            from core.errors import Invalid

            raise Invalid("license must be a license id (UUID)", fields={"license": "not a UUID"})
        return license_json(licenses.set_state(store.uow(), config.clock, args.license, args.state))


def transfer_sync_failures(config, args) -> dict:
    from app.partner_licensing_api import transfer_json

    with _opened(config) as store, store.uow(write=False) as uow:
        return {"transfers": [dict(transfer_json(t), syncError=t.sync_error) for t in uow.transfers.sync_failures()]}


@contextlib.contextmanager
def _opened(config):
    store = _store(config)
    try:
        yield store
    finally:
        store.close()


def _period(text: str | None) -> Period | None:
    if text is None:
        return None
    try:
        return Period.parse(text)
    except ValueError:
        raise Invalid(f"period must be YYYY-MM, got {text!r}", fields={"period": "must be YYYY-MM"}) from None


def _models(config) -> dict:
    return billing_models(make_plugin_manager(config.plugins, config.load_entrypoints))


def billing_recompute(config, args) -> dict:
    with _opened(config) as store:
        done = statements.recompute(store.uow(), config.clock, _models(config), partner_id=args.partner,
                                    period=_period(args.period))
    return {**done, "computedAt": rfc3339(done.get("computedAt"))}


def statement_finalize(config, args) -> dict:
    from app.partner_billing_api import statement_json

    period = _period(args.period)
    with _opened(config) as store:
        return statement_json(statements.finalize(store.uow(), config.clock, args.partner, period, args.by))


def statement_correct(config, args) -> dict:
    from app.partner_billing_api import statement_json

    with _opened(config) as store:
        return statement_json(statements.correct(store.uow(), config.clock, _models(config), args.statement,
                                                 args.by))


def apikey_create(config, args) -> dict:
    from app.panel_api import api_key_json, create_key

    body = {"name": args.name, "role": args.role, "rateLimitRpm": args.rate_limit_rpm,
            "expiresAt": args.expires_at, "deniedPermissions": args.deny, "customerId": args.customer}
    with _opened(config) as store:
        key, full = create_key(store, config.clock, body)
    return api_key_json(key, full)


def _route_json(route) -> dict:
    from app.timefmt import rfc3339

    return {"hostname": route.hostname, "service_id": route.service_id, "target": route.target,
            "updated_at": rfc3339(route.updated_at)}


def route_list(config, args) -> dict:
    from core.routes import list_routes

    with _opened(config) as store:
        return {"routes": [_route_json(r) for r in list_routes(store.uow())]}


def route_write(config, args) -> dict:
    from app.route_file import RouteFile
    from core.errors import Invalid

    if not config.routes_file:
        raise Invalid("SLIPWAY_ROUTES_FILE is not set")
    with _opened(config) as store:
        route_file = RouteFile(store, config.routes_file)
        route_file.sync()
        return {"file": str(route_file.path), "routes": [_route_json(r) for r in list_routes(store.uow())]}


def _user_json(user) -> dict:
    return {"email": user.email, "role": user.role, "customerId": user.customer_id,
            "createdAt": rfc3339(user.created_at), "updatedAt": rfc3339(user.updated_at)}


def user_set(config, args) -> dict:
    from core import panel_sessions

    with _opened(config) as store:
        return _user_json(panel_sessions.set_user(store.uow(), config.clock, email=args.email, role=args.role,
                                                  customer_id=args.customer_id))


def user_list(config, args) -> dict:
    from core import panel_sessions

    with _opened(config) as store:
        return {"users": [_user_json(u) for u in panel_sessions.list_users(store.uow(write=False))]}
