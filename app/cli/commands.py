"""What the operator's commands do; ``app.cli.main`` parses arguments and prints the result."""
from __future__ import annotations

import contextlib
import json
import os

from app.partner.identity import partner_json, token_json
from app.composition import Composition
from app.config import ConfigError, data_dir, read, sqlite_file
from app.config_table import DATA_DIR, FIELDS, SECRET_KEY, SETTINGS, DuplicateSetting, plugin_settings
from app import registries
from app.pluginmanager import describe_plugins, license_services
from app.http.collector import collector_paused
from app.storage.store import Store
from app.http.timefmt import rfc3339
from core.partner import contracts, editions, licenses, partners, statements, tokens
from core.partner.billing import Period
from core.partner.scope import Page
from core.errors import Invalid
from core.redaction import redact_url

#: how long ``serve`` keeps an idle keep-alive connection open (docs/operator/cli.md)
KEEP_ALIVE_SECONDS = 75

def _store(config) -> Store:
    """The database of ``config``, at the current schema (the operator's commands run one
    at a time: one thread), writing the events it commits to the plugins' event outbox
    as a server does (a ledger event of ``license set-state`` reaches the subscribers)."""
    parts = Composition(config, store=Store(config.database_url, threads=1))
    parts.keep_events()
    return parts.store


def init(config, args) -> dict:
    path = sqlite_file(config.database_url)
    if path is not None:  # the data directory of the default database may not exist yet
        os.makedirs(os.path.dirname(path), exist_ok=True)
    store = Store(config.database_url, threads=1)
    pm = Composition(config).plugins
    try:
        applied = store.migrate([factory.migrate for factory in license_services(pm).values()])
        return {"database": redact_url(config.database_url), "schemaVersion": store.version(), "applied": applied}
    finally:
        store.close()


def plugins(config, args) -> dict:
    parts = Composition(config)
    pm = parts.plugins
    parts.deploy_methods, parts.billing_models  # noqa: B018 (built as the server builds them: a bad setting stops here too)
    table = registries.describe(pm)
    out = {"plugins": describe_plugins(pm)}
    for entry in table:  # each registry's names under its kind (``deployMethods``, ``runtimes``, ...)
        if entry["selects"] != registries.BEHAVIOUR:
            out[_camel(entry["kind"])] = entry["names"]
    out["registries"] = table  # the table (app.registries): hook, port, setting, how it selects, names
    return out


def _camel(kind: str) -> str:
    head, *rest = kind.split("_")
    return head + "".join(word.title() for word in rest)


def _shown(setting, value):
    """A setting's value as ``slipway settings`` prints it: a secret's as ``***`` (when it
    has one), a URL's without its credentials, addresses and ranges as text."""
    if setting.secret and value not in (None, "", {}, ()):
        return "***"
    if isinstance(value, (tuple, list)):
        return [_shown(setting, item) for item in value]
    if isinstance(value, dict):
        return {key: _shown(setting, item) for key, item in value.items()}
    if isinstance(value, str):
        return redact_url(value) if "://" in value else value
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)  # an IP network, ...


def settings(config, args) -> dict:
    """Every declared setting (the app's, then the loaded plugins'): its value as the
    server would use it, and whether it came from the environment or is the default."""
    environ = config.settings or os.environ
    attributes = {setting: attribute for attribute, setting in FIELDS.items()}
    worked_out = {DATA_DIR: lambda: data_dir(environ), SECRET_KEY: lambda: config.secret_key}
    try:
        found = plugin_settings(Composition(config).plugins)
    except DuplicateSetting as exc:
        raise ConfigError(str(exc)) from None
    rows = []
    for setting, readers in [(s, ("slipway",)) for s in SETTINGS] + found:
        if setting in attributes:
            value = getattr(config, attributes[setting])
        elif setting in worked_out:
            value = worked_out[setting]()
        else:
            value = read(setting, environ)
        rows.append({"name": setting.env, "value": _shown(setting, value),
                     "source": "environment" if setting.given(environ) else "default", "readBy": list(readers)})
    return {"settings": rows}


def partner_create(config, args) -> dict:
    store = _store(config)
    try:
        partner = partners.create_partner(store.uow(), config.clock, name=args.name, type=args.type,
                                          parent_id=args.parent)
        return partner_json(partner)
    finally:
        store.close()


def partner_list(config, args) -> list:
    """Every partner, oldest first: the ids ``token create`` and ``contract create`` need."""
    with _opened(config) as store:
        return [partner_json(p) for p in partners.list_partners(store.uow(write=False))]


def contract_create(config, args) -> dict:
    known = set(Composition(config).billing_models)
    store = _store(config)
    try:
        contract = contracts.create_contract(store.uow(), config.clock, partner_id=args.partner, model=args.model,
                                             currency=args.currency, unit_price_cents=args.unit_price_cents,
                                             known_models=known)
        from app.partner.billing import contract_json

        return contract_json(contract)
    finally:
        store.close()


def contract_list(config, args) -> list:
    """A partner's own contracts, newest first: the ``contractId`` a license needs."""
    from app.partner.billing import contract_json

    with _opened(config) as store:
        partners.get_partner(store.uow(write=False), args.partner)
        with store.uow(write=False) as uow:
            return [contract_json(c) for c in uow.contracts.page(args.partner, Page(limit=1_000_000))]


def token_create(config, args) -> dict:
    store = _store(config)
    try:
        partners.get_partner(store.uow(), args.partner)
        token, secret = tokens.create_token(store.uow(), config.clock, partner_id=args.partner, label=args.label,
                                            scope=args.scope, created_by=None)
        return token_json(token, secret)
    finally:
        store.close()


def engine_of(config) -> dict:
    """The container engine deploys run on (``app.engine_discovery``), as ``slipway serve``
    and ``make run`` print it; its URL's credentials redacted."""
    from app.engine_discovery import Engine

    described = Engine(config.runtime, config.runtime_url, config.runtime_source).describe()
    if described["url"]:
        described["url"] = redact_url(described["url"])
    return described


def warn_when_engine_silent(runtime, config, timeout: float) -> bool:
    """Ping the configured engine once at start (a thread of its own, ``timeout`` seconds:
    ``SLIPWAY_READY_TIMEOUT``, as /readyz gives it);
    when it does not answer, say so on stderr before serving: deploys,
    backups and restores are refused (503 ``engine_unavailable``) until it does. True when
    it answered."""
    import sys

    from app.engine_gate import ping_once

    if ping_once(runtime, config.runtime_url, timeout):
        return True
    message = (f"warning: the container engine {config.runtime} at {redact_url(config.runtime_url)} "
               f"(from {config.runtime_source}) does not answer its ping: deploys, backups and restores "
               f"are refused (503 engine_unavailable) until it does; start it or correct SLIPWAY_RUNTIME_URL")
    print(message, file=sys.stderr, flush=True)
    return False


def serve(config, host: str, port: int, workers: int = 1):
    """uvicorn with Slipway's logging (app.http.observability) and, with several workers, a
    fresh prometheus-client multiprocess directory for this server start, removed on exit."""
    import os
    import shutil
    import tempfile

    import uvicorn

    from app.factory import create_app
    from app.http.observability.logs import log_config
    from app.http.websocket_limits import MAX_MESSAGE

    multiproc = None
    if workers > 1:
        # before anything imports prometheus_client: the workers inherit the environment
        multiproc = tempfile.mkdtemp(prefix="slipway-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiproc
    else:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)  # one process: its own registry
    try:
        app = create_app(config)  # refuses a bad configuration before any worker starts
        engine = engine_of(config)
        if config.runtime_url:
            warn_when_engine_silent(app.parts.runtime, config, timeout=config.ready_timeout)
        print(json.dumps({"serving": f"http://{host}:{port}", "database": redact_url(config.database_url),
                          "workers": workers, "engine": engine}), flush=True)
        # uvicorn would otherwise rewrite the client address from X-Forwarded-For sent from
        # 127.0.0.1 (its default): the address is the app's to decide, from SLIPWAY_TRUSTED_PROXIES.
        # Its access log is off: ours (app.http.observability) has the request id and operation.
        # A WebSocket client message over 64 KiB is refused before it is read whole (1009).
        # An idle keep-alive connection is kept 75 s (uvicorn's default is 5 s): a client that
        # reuses one just as the server closes it gets "connection reset" (httpx and other
        # clients keep idle connections 5 s, proxies a minute or more); CI saw it.
        options = dict(host=host, port=port, log_level="info", access_log=False, proxy_headers=False,
                       forwarded_allow_ips="", log_config=log_config(config.log_format), ws_max_size=MAX_MESSAGE,
                       timeout_keep_alive=KEEP_ALIVE_SECONDS)
        if workers > 1:
            app.parts.store.close()  # each worker composes its own app from the environment
            uvicorn.run("app.asgi:app", workers=workers, **options)
        else:
            uvicorn.run(app, **options)
    finally:
        if multiproc is not None:
            shutil.rmtree(multiproc, ignore_errors=True)
    return 0, None


def edition_list(config, args) -> dict:
    with _opened(config) as store:
        return {"editions": editions.list_editions(store.uow())}


def edition_set(config, args) -> dict:
    with _opened(config) as store:
        return {"editions": editions.set_edition(store.uow(), config.clock, args.name, args.policy)}


def license_set_state(config, args) -> dict:
    from app.partner.licensing import license_json

    with _opened(config) as store:
        if not partners.is_uuid(args.license):
            from core.errors import Invalid

            raise Invalid("license must be a license id (UUID)", fields={"license": "not a UUID"})
        return license_json(licenses.set_state(store.uow(), config.clock, args.license, args.state))


def transfer_sync_failures(config, args) -> dict:
    from app.partner.licensing import transfer_json

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
    return Composition(config).billing_models


def billing_recompute(config, args) -> dict:
    with _opened(config) as store:
        done = collector_paused()(statements.recompute)(store.uow(), config.clock, _models(config), partner_id=args.partner,
                                    period=_period(args.period))
    return {**done, "computedAt": rfc3339(done.get("computedAt"))}


def statement_finalize(config, args) -> dict:
    from app.partner.billing import statement_json

    period = _period(args.period)
    with _opened(config) as store:
        return statement_json(statements.finalize(store.uow(), config.clock, args.partner, period, args.by))


def statement_correct(config, args) -> dict:
    from app.partner.billing import statement_json

    with _opened(config) as store:
        return statement_json(collector_paused()(statements.correct)(store.uow(), config.clock, _models(config), args.statement,
                                                 args.by))


def apikey_create(config, args) -> dict:
    from app.panel.accounts import api_key_json, create_key

    body = {"name": args.name, "role": args.role, "rateLimitRpm": args.rate_limit_rpm,
            "expiresAt": args.expires_at, "deniedPermissions": args.deny, "customerId": args.customer}
    with _opened(config) as store:
        key, full = create_key(store, config.clock, body, default_rpm=config.rate_auth_rpm)
    return api_key_json(key, full)


def _route_json(route) -> dict:
    from app.http.timefmt import rfc3339

    return {"hostname": route.hostname, "service_id": route.service_id, "target": route.target,
            "updated_at": rfc3339(route.updated_at)}


def route_list(config, args) -> dict:
    from core.panel.routes import list_routes

    with _opened(config) as store:
        return {"routes": [_route_json(r) for r in list_routes(store.uow())]}


def route_write(config, args) -> dict:
    """Bring the reverse proxy (the route provider SLIPWAY_ROUTES names) up to date now."""
    from app.composition import Composition
    from app.workers.proxy_routes import ProxyRouteSync
    from core.panel.routes import list_routes

    provider = Composition(config).route_provider
    if provider is None:
        raise Invalid("SLIPWAY_ROUTES_FILE is not set" if config.routes == "file"
                      else f"the route provider {config.routes} is off")
    with _opened(config) as store:
        changed = ProxyRouteSync(store, provider).sync()
        out = {"provider": provider.name, "changed": changed,
               "routes": [_route_json(r) for r in list_routes(store.uow())]}
        if getattr(provider, "path", None) is not None:
            out["file"] = str(provider.path)
        return out


def _user_json(user) -> dict:
    return {"email": user.email, "role": user.role, "customerId": user.customer_id,
            "createdAt": rfc3339(user.created_at), "updatedAt": rfc3339(user.updated_at)}


def user_set(config, args) -> dict:
    from core.panel import sessions

    with _opened(config) as store:
        return _user_json(sessions.set_user(store.uow(), config.clock, email=args.email, role=args.role,
                                                  customer_id=args.customer_id))


def user_list(config, args) -> dict:
    from core.panel import sessions

    with _opened(config) as store:
        return {"users": [_user_json(u) for u in sessions.list_users(store.uow(write=False))]}


# --- listing and revoking (secrets are never printed: they are not stored) ------------------

def token_list(config, args) -> dict:
    with _opened(config) as store:
        return {"tokens": [token_json(t) for t in tokens.list_partner_tokens(store.uow(write=False), args.partner)]}


def token_revoke(config, args) -> dict:
    with _opened(config) as store:
        return token_json(tokens.revoke_any_token(store.uow(), config.clock, args.token))


def apikey_list(config, args) -> dict:
    """The active keys, as ``GET /api/v1/api-keys`` lists them."""
    from app.panel.accounts import api_key_json
    from core.panel import access as panel_access

    with _opened(config) as store:
        return {"apiKeys": [dict(api_key_json(k), revokedAt=rfc3339(k.revoked_at))
                            for k in panel_access.list_api_keys(store.uow(write=False))]}


def apikey_revoke(config, args) -> dict:
    from app.panel.accounts import api_key_json
    from core.panel import access as panel_access

    with _opened(config) as store:
        panel_access.revoke_api_key(store.uow(), config.clock, args.id)
        with store.uow(write=False) as uow:
            key = uow.api_keys.get(args.id)
        return dict(api_key_json(key), revokedAt=rfc3339(key.revoked_at))


def user_remove(config, args) -> dict:
    from core.panel import sessions as panel_sessions

    with _opened(config) as store:
        return dict(_user_json(panel_sessions.remove_user(store.uow(), args.email)), removed=True)
