"""Configuration: the settings declared in ``app.config_table``, read from the environment and
checked before anything starts (``Config``); ``python -m app.config --markdown`` prints the
settings tables of docs/configuration.md."""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from app.config_table import DATA_DIR, DATABASE_URL, FIELDS
from app.engine_discovery import find_engine
from ports.clock import Clock, SystemClock
from ports.resolver import Resolver, SystemResolver
from ports.settings import Setting

from app.config_error import ConfigError

__all__ = ["ConfigError"]  # (re-exported: the callers' name for it)


def read(setting: Setting, environ):
    """``setting``'s value in ``environ``; a bad one is a ``ConfigError`` naming it."""
    try:
        return setting.read(environ)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def container_defaults(environ) -> tuple[int, float]:
    """(MB, CPUs) the runtime gives a container whose compose sets no ``mem_limit`` /
    ``cpus``: ``SLIPWAY_DEFAULT_MEMORY_MB`` and ``SLIPWAY_DEFAULT_CPUS``. Customer limits
    count them the same way."""
    return read(FIELDS["default_memory_mb"], environ), read(FIELDS["default_cpus"], environ)


def _http_url(name: str, value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(f"{name} must be an http(s) URL without query or fragment, got {value!r}")


def _check_login(config) -> None:
    """Browser login is on with SLIPWAY_OIDC_ISSUER; it then needs a client id and the public URL."""
    if config.public_url:
        _http_url("SLIPWAY_PUBLIC_URL", config.public_url)
    # key sessions (POST /api/auth/key) use the session lifetime, OIDC or not
    if isinstance(config.session_ttl, bool) or not isinstance(config.session_ttl, int) or config.session_ttl < 1:
        raise ConfigError(f"SLIPWAY_SESSION_TTL must be a whole number greater than 0, got {config.session_ttl!r}")
    if config.web_dir is not None and not os.path.isfile(os.path.join(config.web_dir, "index.html")):
        raise ConfigError(f"SLIPWAY_WEB_DIR must be a directory holding index.html, got {config.web_dir!r}")
    if not config.oidc_issuer:
        return
    _http_url("SLIPWAY_OIDC_ISSUER", config.oidc_issuer)
    if not config.oidc_client_id:
        raise ConfigError("SLIPWAY_OIDC_CLIENT_ID is required when SLIPWAY_OIDC_ISSUER is set")
    if not config.public_url:
        raise ConfigError("SLIPWAY_PUBLIC_URL is required when SLIPWAY_OIDC_ISSUER is set (the redirect URI is "
                          "{SLIPWAY_PUBLIC_URL}/api/auth/callback)")


def _check_event_bus(config) -> None:
    """The built-in ``postgres`` bus needs PostgreSQL; a name no loaded plugin provides is
    refused when the app is composed (``app.registries.select``)."""
    if config.event_bus == "postgres" and not config.database_url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("SLIPWAY_EVENT_BUS=postgres needs a PostgreSQL database (SLIPWAY_DATABASE_URL="
                          f"postgresql://...), not {config.database_url.split(':', 1)[0]}")


def default_log_format(stream=None) -> str:
    """``text`` when the logs go to a terminal (a person reads them), ``json`` otherwise (a
    collector does); ``SLIPWAY_LOG_FORMAT`` overrides."""
    stream = sys.stderr if stream is None else stream
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):  # no stream, or a closed one
        return "json"


#: the database file when SLIPWAY_DATABASE_URL is unset, in the data directory
DATABASE_FILE = "slipway.db"


def secret_key(environ, work_dir: str) -> tuple[bytes | None, str | None]:
    """The secret variables' key: ``SLIPWAY_SECRET_KEY``, else the key file ``slipway
    init`` writes in the work folder (``SLIPWAY_WORK_DIR``). An invalid one is a
    ``ConfigError``; a missing one is ``(None, why)``: the server refuses to start
    (``Config.require_secret_key``), commands that need no key still run."""
    from app.storage.secrets import BadKey, MissingKey, load_key

    try:
        return load_key(environ, os.path.abspath(os.path.expanduser(work_dir))), None
    except MissingKey as exc:
        return None, str(exc)
    except BadKey as exc:
        raise ConfigError(str(exc)) from None


def data_dir(environ) -> str:
    """Where Slipway keeps its SQLite database when ``SLIPWAY_DATABASE_URL`` is unset:
    ``SLIPWAY_DATA_DIR``, else ``$XDG_DATA_HOME/slipway`` (``~/.local/share/slipway``);
    never the folder a command happens to run in."""
    explicit = DATA_DIR.read(environ)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = (environ.get("XDG_DATA_HOME") or "").strip() or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(os.path.abspath(base), "slipway")


def database_url(environ) -> str:
    """The one database rule: ``SLIPWAY_DATABASE_URL`` when set, else the file
    ``slipway.db`` in ``data_dir``."""
    return DATABASE_URL.read(environ) or "sqlite:///" + os.path.join(data_dir(environ), DATABASE_FILE)


def sqlite_file(url: str) -> str | None:
    """The file of a SQLite URL (None: another database, or one in memory)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    path = url[len(prefix):].partition("?")[0]
    if not path or path.startswith(":memory:") or path.startswith("file:"):
        return None
    return os.path.abspath(path)


#: the settings that name a file or folder (Config attribute: variable)
PATH_SETTINGS = {"work_dir": "SLIPWAY_WORK_DIR", "backup_dir": "SLIPWAY_BACKUP_DIR",
                 "routes_file": "SLIPWAY_ROUTES_FILE", "web_dir": "SLIPWAY_WEB_DIR"}


def _sqlite_absolute(url: str) -> str:
    """``sqlite:///relative.db`` as ``sqlite:////<start folder>/relative.db``; any other
    URL (PostgreSQL, an absolute file, ``:memory:``) as it is."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return url
    path, mark, query = url[len(prefix):].partition("?")
    if not path or path.startswith("/") or path.startswith(":memory:") or path.startswith("file:"):
        return url
    return prefix + os.path.abspath(path) + mark + query


def _absolute_paths(config) -> None:
    """Every path setting is resolved once, against the folder the server starts in, so
    nothing downstream (deploy jobs, builds, plugins reading ``settings``) sees a
    relative path that a later change of folder, or a comparison with an absolute one,
    would read differently."""
    for attribute, variable in PATH_SETTINGS.items():
        value = getattr(config, attribute)
        if value:
            value = os.path.abspath(os.path.expanduser(value))
            setattr(config, attribute, value)
            if config.settings.get(variable):
                config.settings = {**config.settings, variable: value}
    config.database_url = _sqlite_absolute(config.database_url)
    if config.settings.get("SLIPWAY_DATABASE_URL"):
        config.settings = {**config.settings, "SLIPWAY_DATABASE_URL": config.database_url}


#: the settings ``from_env`` works out beyond their declaration: the database (its default
#: is a file in the data directory) and the engine (found when none is named)
WORKED_OUT = ("database_url", "runtime", "runtime_url")


def _default(attribute: str):
    return FIELDS[attribute].default


@dataclass
class Config:
    database_url: str = "sqlite:///slipway.db"
    rate_rps: float = _default("rate_rps")
    rate_burst: float = _default("rate_burst")
    authfail_rps: float = _default("authfail_rps")
    trusted_proxies: tuple = _default("trusted_proxies")
    runtime: str = _default("runtime")
    runtime_url: str | None = _default("runtime_url")
    #: where ``runtime_url`` came from (app.engine_discovery): "SLIPWAY_RUNTIME_URL", "DOCKER_HOST",
    #: "rootless Podman (...)", "none found", ...
    runtime_source: str = "SLIPWAY_RUNTIME_URL"
    db_threads: int = _default("db_threads")
    license_service: str = _default("license_service")
    #: seconds between billing recomputes in the server; 0 turns the job off
    billing_interval: float = _default("billing_interval")
    #: run deploy jobs and health checks in this process
    deploy_worker: bool = _default("deploy_worker")
    health_interval: float = _default("health_interval")
    #: deploy jobs this process runs at once, and of those at most this many of one customer
    deploy_concurrency: int = _default("deploy_concurrency")
    deploys_per_customer: int = _default("deploys_per_customer")
    #: seconds a deploy's containers must keep running before it is a success
    deploy_settle: float = _default("deploy_settle")
    #: seconds a deploy's new containers get to run and be healthy (SLIPWAY_DEPLOY_HEALTH_TIMEOUT)
    deploy_health_timeout: float = _default("deploy_health_timeout")
    #: seconds after a health-gated switch before the old containers stop (SLIPWAY_DEPLOY_DRAIN)
    deploy_drain: float = _default("deploy_drain")
    base_domain: str | None = _default("base_domain")
    #: seconds an HTTP request waits for the container engine before answering 503
    engine_timeout: float = _default("engine_timeout")
    #: threads for the container-engine calls of HTTP requests; one customer (or operator
    #: key) holds at most a quarter of them at once (app.engine_calls)
    engine_threads: int = _default("engine_threads")
    #: where backup archives are written (SLIPWAY_BACKUP_DIR), one directory per service
    backup_dir: str = _default("backup_dir")
    #: the operator's other backup destinations (SLIPWAY_BACKUP_DESTINATIONS, JSON): name -> options
    backup_destinations: dict = field(default_factory=dict, repr=False)  # holds secret keys
    #: the destination a backup goes to when its request names none (SLIPWAY_BACKUP_DEFAULT)
    backup_default: str = _default("backup_default")
    #: seconds one backup, restore or verification may take (SLIPWAY_BACKUP_TIMEOUT)
    backup_timeout: float = _default("backup_timeout")
    #: megabytes one backup, restore or verification may read (SLIPWAY_BACKUP_MAX_MB)
    backup_max_mb: float = _default("backup_max_mb")
    #: backups, restores and verifications run at once, at most one per customer (SLIPWAY_BACKUP_WORKERS)
    backup_workers: int = _default("backup_workers")
    #: real-time events: "memory" (this process) or "postgres" (LISTEN/NOTIFY, PostgreSQL only)
    event_bus: str = _default("event_bus")
    #: where the rate-limit buckets live: ``memory`` (each process its own) or a URL a
    #: rate-store plugin serves (``redis://host:6379/0``: shared by every process)
    rate_store: str = _default("rate_store")
    #: messages a WebSocket client may have waiting before it is disconnected as too slow
    ws_queue: int = _default("ws_queue")
    #: open WebSockets one key or session may hold in this process (SLIPWAY_WS_PER_KEY)
    ws_per_key: int = _default("ws_per_key")
    #: where deploy jobs clone and build sources (a directory per job, removed after it)
    work_dir: str = _default("work_dir")
    #: a Traefik dynamic-configuration file kept equal to the route records (None: no file)
    routes_file: str | None = _default("routes_file")
    routes_interval: float = _default("routes_interval")
    #: the route provider plugin feeding a reverse proxy (SLIPWAY_ROUTES: file or caddy);
    #: Caddy's admin API, its TLS ("" automatic ACME, "internal" Caddy's own CA) and the
    #: listen address of the Caddy server Slipway owns
    routes: str = _default("routes")
    caddy_admin: str = _default("caddy_admin")
    caddy_tls: str = _default("caddy_tls")
    caddy_listen: str = _default("caddy_listen")
    #: browser login (OIDC): the provider's issuer URL (None: login off), this client, the
    #: panel's public URL (redirect URI {public_url}/api/auth/callback), session lifetime
    oidc_issuer: str | None = _default("oidc_issuer")
    oidc_client_id: str | None = _default("oidc_client_id")
    oidc_client_secret: str | None = _default("oidc_client_secret")
    public_url: str | None = _default("public_url")
    session_ttl: int = _default("session_ttl")
    #: the web frontend's directory (index.html and assets/); None: the one in the package
    web_dir: str | None = _default("web_dir")
    #: customer limits: the operator's defaults for a customer without its own
    #: (SLIPWAY_CUSTOMER_MAX_SERVICES, _MAX_MEMORY_MB, _MAX_CPUS, _MAX_CONTAINERS), and what a container
    #: whose compose sets no mem_limit / cpus counts (SLIPWAY_DEFAULT_MEMORY_MB, _CPUS)
    customer_max_services: int = _default("customer_max_services")
    customer_max_memory_mb: int = _default("customer_max_memory_mb")
    customer_max_cpus: float = _default("customer_max_cpus")
    customer_max_containers: int = _default("customer_max_containers")
    #: timeline events each service keeps (SLIPWAY_EVENTS_KEEP); older ones are deleted
    events_keep: int = _default("events_keep")
    default_memory_mb: int = _default("default_memory_mb")
    default_cpus: float = _default("default_cpus")
    #: panel rate tiers, requests per minute: unauthenticated (per address), authenticated
    #: (per session; a key has its own rateLimitRpm), deploy operations (per key or session)
    rate_anon_rpm: int = _default("rate_anon_rpm")
    rate_auth_rpm: int = _default("rate_auth_rpm")
    rate_deploy_rpm: int = _default("rate_deploy_rpm")
    #: verified git webhook deliveries per minute per service
    rate_hook_rpm: int = _default("rate_hook_rpm")
    #: SLIPWAY_STRICT_WAITS: an outside call (engine, git, name lookup, socket, process)
    #: inside a database transaction or on a database thread raises instead of being
    #: logged (core.waits; the tests run with it on)
    strict_waits: bool = _default("strict_waits")
    #: operations: log format (json or text; from_env: text when stderr is a terminal), the bearer token of /metrics (None: no
    #: /metrics), seconds each /readyz check may take
    log_format: str = _default("log_format")
    metrics_token: str | None = _default("metrics_token")
    ready_timeout: float = _default("ready_timeout")
    #: partner webhooks: seconds before the first retry (doubling after each failed
    #: attempt), private target hosts allowed, seconds per delivery attempt
    webhook_retry_base: float = _default("webhook_retry_base")
    webhook_allow_private: bool = _default("webhook_allow_private")
    webhook_timeout: float = _default("webhook_timeout")
    #: image references whose registry host is not public may be pulled (SLIPWAY_REGISTRY_ALLOW_PRIVATE)
    registry_allow_private: bool = _default("registry_allow_private")
    #: (low, high), inclusive: the host ports a compose definition may name, whatever its
    #: deploy method (SLIPWAY_HOST_PORTS, default 20000-29999); None: read from ``settings``
    host_ports: tuple | None = None
    #: the key of the secret variables (AES-GCM, 32 bytes): SLIPWAY_SECRET_KEY, else the key
    #: file ``slipway init`` writes in ``work_dir`` (app.storage.secrets); None (a Config
    #: made in code, as tests do): the store's own random key
    secret_key: bytes | None = None
    #: why ``from_env`` found no key (None: it found one, or the Config was made in code)
    secret_key_missing: str | None = None
    #: plugin settings (the environment): each plugin reads its own SLIPWAY_* variables
    settings: dict = field(default_factory=dict)
    clock: Clock = field(default_factory=SystemClock)
    #: the name lookups core's address rules ask (registries, webhook targets)
    resolver: Resolver = field(default_factory=SystemResolver)
    #: extra plugin objects registered besides the entry points (tests, embedding)
    plugins: tuple = ()
    load_entrypoints: bool = True

    def __post_init__(self):
        _absolute_paths(self)
        for name, value in (("PC_RATE_RPS", self.rate_rps), ("PC_RATE_BURST", self.rate_burst),
                            ("PC_AUTHFAIL_RPS", self.authfail_rps)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a number greater than 0, got {value!r}")
        if self.host_ports is None:
            self.host_ports = read(FIELDS["host_ports"], self.settings)
        _check_event_bus(self)
        _check_login(self)
        if self.log_format not in ("json", "text"):
            raise ConfigError(f"SLIPWAY_LOG_FORMAT must be json or text, got {self.log_format!r}")

    @classmethod
    def from_env(cls, environ=None, **overrides) -> "Config":
        """Every setting of :data:`app.config_table.FIELDS` read from ``environ`` (default
        the process's environment): a bad one is a ``ConfigError`` naming it."""
        env = os.environ if environ is None else environ
        engine = find_engine(env)
        values = {attribute: read(setting, env) for attribute, setting in FIELDS.items()
                  if attribute not in WORKED_OUT}
        values.update(database_url=database_url(env), runtime=engine.runtime, runtime_url=engine.url,
                      runtime_source=engine.source, settings=dict(env))
        if not FIELDS["log_format"].given(env):
            values["log_format"] = default_log_format()
        values.update(overrides)
        if "secret_key" not in overrides:
            values["secret_key"], values["secret_key_missing"] = secret_key(env, values["work_dir"])
        return cls(**values)

    def require_secret_key(self) -> None:
        """A ``ConfigError`` when ``from_env`` found no key: the server does not start
        without one (it would store secret variables it could not read again)."""
        if self.secret_key_missing:
            raise ConfigError(self.secret_key_missing)


def main(argv=None) -> int:
    """``python -m app.config --markdown [--write PAGE]``: print the settings tables of
    docs/configuration.md generated from the declarations, or write them into ``PAGE``."""
    import argparse

    from app.config_table import markdown, replace_tables
    from app.pluginmanager import make_plugin_manager

    parser = argparse.ArgumentParser(prog="python -m app.config", description=main.__doc__)
    parser.add_argument("--markdown", action="store_true", required=True, help="the settings tables")
    parser.add_argument("--write", metavar="PAGE", help="replace the generated tables of PAGE")
    args = parser.parse_args(argv)
    tables = markdown(make_plugin_manager())
    if args.write:
        with open(args.write, encoding="utf-8") as page:
            text = page.read()
        with open(args.write, "w", encoding="utf-8") as page:
            page.write(replace_tables(text, tables))
    else:
        print(tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
