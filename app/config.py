"""Configuration: defaults, read from the environment, checked before anything starts."""
from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from app.engine_discovery import find_engine
from core.panel.compose import host_port_range
from ports.clock import Clock, SystemClock
from ports.settings import number


class ConfigError(ValueError):
    """A setting is wrong; the message names the variable."""


def _positive_number(environ, name: str, default: float) -> float:
    try:
        return number(environ, name, default, ok=lambda value: value > 0, must="a number greater than 0")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _interval(environ, name: str, default: float) -> float:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.strip() == "0":
        return 0.0
    return _positive_number(environ, name, default)


def _whole_number(environ, name: str, default: int, *, ok, must: str) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    if not raw.strip().isdigit() or not ok(int(raw)):
        raise ConfigError(f"{name} must be {must}, got {raw!r}")
    return int(raw)


def _flag(environ, name: str) -> bool:
    """``0`` (the default) or ``1``."""
    raw = (environ.get(name) or "").strip()
    if raw not in ("", "0", "1"):
        raise ConfigError(f"{name} must be 0 or 1, got {raw!r}")
    return raw == "1"


def _backup_destinations(environ) -> dict:
    """``SLIPWAY_BACKUP_DESTINATIONS``: a JSON object of destination name -> options (an
    object with a string ``kind``; option values strings). Which kinds exist is the
    plugins' business (checked when the destinations are made)."""
    raw = (environ.get("SLIPWAY_BACKUP_DESTINATIONS") or "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"SLIPWAY_BACKUP_DESTINATIONS is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError("SLIPWAY_BACKUP_DESTINATIONS must be a JSON object of destination name -> options")
    for name, options in value.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name):
            raise ConfigError(f"SLIPWAY_BACKUP_DESTINATIONS: {name!r} is not a destination name "
                              "(lower-case letters, digits, _ and -, at most 64)")
        if not isinstance(options, dict) or not isinstance(options.get("kind"), str):
            raise ConfigError(f"SLIPWAY_BACKUP_DESTINATIONS: {name!r} must be an object with a \"kind\"")
        if not all(isinstance(v, str) for v in options.values()):
            raise ConfigError(f"SLIPWAY_BACKUP_DESTINATIONS: the options of {name!r} must be strings")
    return value


def _positive_int(environ, name: str, default: int) -> int:
    return _whole_number(environ, name, default, ok=lambda value: value >= 1, must="a whole number greater than 0")


def _whole(environ, name: str, default: int, maximum: int) -> int:
    """A whole number from 0 to ``maximum``."""
    return _whole_number(environ, name, default, ok=lambda value: value <= maximum,
                         must=f"a whole number from 0 to {maximum}")


def _cpus(environ, name: str, default: float, minimum: float) -> float:
    """A number of CPUs (at most three decimals) from ``minimum`` to 65536."""
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not minimum <= value <= 65536 or abs(value * 1000 - round(value * 1000)) > 1e-6:
        raise ConfigError(f"{name} must be a number of CPUs from {minimum:g} to 65536 with at most three decimals, "
                          f"got {raw!r}")
    return value


def container_defaults(environ) -> tuple[int, float]:
    """(MB, CPUs) the runtime gives a container whose compose sets no ``mem_limit`` /
    ``cpus``: ``SLIPWAY_DEFAULT_MEMORY_MB`` and ``SLIPWAY_DEFAULT_CPUS``. Customer limits
    count them the same way."""
    memory = _positive_int(environ, "SLIPWAY_DEFAULT_MEMORY_MB", 512)
    return memory, _cpus(environ, "SLIPWAY_DEFAULT_CPUS", 1.0, 0.001)


def parse_networks(raw: str, name: str = "SLIPWAY_TRUSTED_PROXIES") -> tuple:
    networks = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ConfigError(f"{name}: {part!r} is not an IP address or CIDR range") from None
    return tuple(networks)


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
    explicit = (environ.get("SLIPWAY_DATA_DIR") or "").strip()
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = (environ.get("XDG_DATA_HOME") or "").strip() or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(os.path.abspath(base), "slipway")


def database_url(environ) -> str:
    """The one database rule: ``SLIPWAY_DATABASE_URL`` when set, else the file
    ``slipway.db`` in ``data_dir``."""
    return (environ.get("SLIPWAY_DATABASE_URL") or "").strip() or \
        "sqlite:///" + os.path.join(data_dir(environ), DATABASE_FILE)


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


@dataclass
class Config:
    database_url: str = "sqlite:///slipway.db"
    rate_rps: float = 10.0
    rate_burst: float = 30.0
    authfail_rps: float = 1.0
    trusted_proxies: tuple = ()
    runtime: str = "podman"
    runtime_url: str | None = None
    #: where ``runtime_url`` came from (app.engine_discovery): "SLIPWAY_RUNTIME_URL", "DOCKER_HOST",
    #: "rootless Podman (...)", "none found", ...
    runtime_source: str = "SLIPWAY_RUNTIME_URL"
    db_threads: int = 4
    license_service: str = "embedded"
    #: seconds between billing recomputes in the server; 0 turns the job off
    billing_interval: float = 86400.0
    #: run deploy jobs and health checks in this process
    deploy_worker: bool = True
    health_interval: float = 15.0
    #: deploy jobs this process runs at once, and of those at most this many of one customer
    deploy_concurrency: int = 4
    deploys_per_customer: int = 2
    #: seconds a deploy's containers must keep running before it is a success
    deploy_settle: float = 3.0
    #: seconds a deploy's new containers get to run and be healthy (SLIPWAY_DEPLOY_HEALTH_TIMEOUT)
    deploy_health_timeout: float = 120.0
    #: seconds after a health-gated switch before the old containers stop (SLIPWAY_DEPLOY_DRAIN)
    deploy_drain: float = 2.0
    base_domain: str | None = None
    #: seconds an HTTP request waits for the container engine before answering 503
    engine_timeout: float = 30.0
    #: threads for the container-engine calls of HTTP requests; one customer (or operator
    #: key) holds at most a quarter of them at once (app.engine_calls)
    engine_threads: int = 32
    #: where backup archives are written (SLIPWAY_BACKUP_DIR), one directory per service
    backup_dir: str = "./backups"
    #: the operator's other backup destinations (SLIPWAY_BACKUP_DESTINATIONS, JSON): name -> options
    backup_destinations: dict = field(default_factory=dict, repr=False)  # holds secret keys
    #: the destination a backup goes to when its request names none (SLIPWAY_BACKUP_DEFAULT)
    backup_default: str = "local"
    #: seconds one backup, restore or verification may take (SLIPWAY_BACKUP_TIMEOUT)
    backup_timeout: float = 3600.0
    #: megabytes one backup, restore or verification may read (SLIPWAY_BACKUP_MAX_MB)
    backup_max_mb: float = 102400.0
    #: backups, restores and verifications run at once, at most one per customer (SLIPWAY_BACKUP_WORKERS)
    backup_workers: int = 2
    #: real-time events: "memory" (this process) or "postgres" (LISTEN/NOTIFY, PostgreSQL only)
    event_bus: str = "memory"
    #: where the rate-limit buckets live: ``memory`` (each process its own) or a URL a
    #: rate-store plugin serves (``redis://host:6379/0``: shared by every process)
    rate_store: str = "memory"
    #: messages a WebSocket client may have waiting before it is disconnected as too slow
    ws_queue: int = 1000
    #: open WebSockets one key or session may hold in this process (SLIPWAY_WS_PER_KEY)
    ws_per_key: int = 20
    #: where deploy jobs clone and build sources (a directory per job, removed after it)
    work_dir: str = "./work"
    #: a Traefik dynamic-configuration file kept equal to the route records (None: no file)
    routes_file: str | None = None
    routes_interval: float = 2.0
    #: the route provider plugin feeding a reverse proxy (SLIPWAY_ROUTES: file or caddy);
    #: Caddy's admin API, its TLS ("" automatic ACME, "internal" Caddy's own CA) and the
    #: listen address of the Caddy server Slipway owns
    routes: str = "file"
    caddy_admin: str = "http://127.0.0.1:2019"
    caddy_tls: str = ""
    caddy_listen: str = ":443"
    #: browser login (OIDC): the provider's issuer URL (None: login off), this client, the
    #: panel's public URL (redirect URI {public_url}/api/auth/callback), session lifetime
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    public_url: str | None = None
    session_ttl: int = 28800
    #: the web frontend's directory (index.html and assets/); None: the one in the package
    web_dir: str | None = None
    #: customer limits: the operator's defaults for a customer without its own
    #: (SLIPWAY_CUSTOMER_MAX_SERVICES, _MAX_MEMORY_MB, _MAX_CPUS, _MAX_CONTAINERS), and what a container
    #: whose compose sets no mem_limit / cpus counts (SLIPWAY_DEFAULT_MEMORY_MB, _CPUS)
    customer_max_services: int = 20
    customer_max_memory_mb: int = 4096
    customer_max_cpus: float = 4.0
    customer_max_containers: int = 50
    #: timeline events each service keeps (SLIPWAY_EVENTS_KEEP); older ones are deleted
    events_keep: int = 1000
    default_memory_mb: int = 512
    default_cpus: float = 1.0
    #: panel rate tiers, requests per minute: unauthenticated (per address), authenticated
    #: (per session; a key has its own rateLimitRpm), deploy operations (per key or session)
    rate_anon_rpm: int = 60
    rate_auth_rpm: int = 120
    rate_deploy_rpm: int = 10
    #: verified git webhook deliveries per minute per service
    rate_hook_rpm: int = 60
    #: SLIPWAY_STRICT_WAITS: an outside call (engine, git, name lookup, socket, process)
    #: inside a database transaction or on a database thread raises instead of being
    #: logged (core.waits; the tests run with it on)
    strict_waits: bool = False
    #: operations: log format (json or text; from_env: text when stderr is a terminal), the bearer token of /metrics (None: no
    #: /metrics), seconds each /readyz check may take
    log_format: str = "json"
    metrics_token: str | None = None
    ready_timeout: float = 2.0
    #: partner webhooks: seconds before the first retry (doubling after each failed
    #: attempt), private target hosts allowed, seconds per delivery attempt
    webhook_retry_base: float = 30.0
    webhook_allow_private: bool = False
    webhook_timeout: float = 10.0
    #: image references whose registry host is not public may be pulled (SLIPWAY_REGISTRY_ALLOW_PRIVATE)
    registry_allow_private: bool = False
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
            try:
                self.host_ports = host_port_range(self.settings)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        _check_event_bus(self)
        _check_login(self)
        if self.log_format not in ("json", "text"):
            raise ConfigError(f"SLIPWAY_LOG_FORMAT must be json or text, got {self.log_format!r}")

    @classmethod
    def from_env(cls, environ=None, **overrides) -> "Config":
        env = os.environ if environ is None else environ
        engine = find_engine(env)
        values = dict(
            database_url=database_url(env),
            rate_rps=_positive_number(env, "PC_RATE_RPS", 10.0),
            rate_burst=_positive_number(env, "PC_RATE_BURST", 30.0),
            authfail_rps=_positive_number(env, "PC_AUTHFAIL_RPS", 1.0),
            trusted_proxies=parse_networks(env.get("SLIPWAY_TRUSTED_PROXIES", "")),
            runtime=engine.runtime,
            runtime_url=engine.url,
            runtime_source=engine.source,
            db_threads=_positive_int(env, "SLIPWAY_DB_THREADS", 4),
            license_service=env.get("SLIPWAY_LICENSE_SERVICE") or "embedded",
            billing_interval=_interval(env, "SLIPWAY_BILLING_INTERVAL", 86400.0),
            deploy_worker=env.get("SLIPWAY_DEPLOY_WORKER", "1") != "0",
            health_interval=_positive_number(env, "SLIPWAY_HEALTH_INTERVAL", 15.0),
            deploy_concurrency=_positive_int(env, "SLIPWAY_DEPLOY_CONCURRENCY", 4),
            deploys_per_customer=_positive_int(env, "SLIPWAY_DEPLOYS_PER_CUSTOMER", 2),
            deploy_settle=_interval(env, "SLIPWAY_DEPLOY_SETTLE", 3.0),
            deploy_health_timeout=_positive_number(env, "SLIPWAY_DEPLOY_HEALTH_TIMEOUT", 120.0),
            deploy_drain=_interval(env, "SLIPWAY_DEPLOY_DRAIN", 2.0),
            base_domain=env.get("SLIPWAY_BASE_DOMAIN") or None,
            engine_timeout=_positive_number(env, "SLIPWAY_ENGINE_TIMEOUT", 30.0),
            engine_threads=_positive_int(env, "SLIPWAY_ENGINE_THREADS", 32),
            backup_dir=env.get("SLIPWAY_BACKUP_DIR") or "./backups",
            backup_destinations=_backup_destinations(env),
            backup_default=(env.get("SLIPWAY_BACKUP_DEFAULT") or "local").strip(),
            backup_timeout=_positive_number(env, "SLIPWAY_BACKUP_TIMEOUT", 3600.0),
            backup_max_mb=_positive_number(env, "SLIPWAY_BACKUP_MAX_MB", 102400.0),
            backup_workers=_positive_int(env, "SLIPWAY_BACKUP_WORKERS", 2),
            event_bus=(env.get("SLIPWAY_EVENT_BUS") or "memory").strip().lower(),
            rate_store=(env.get("SLIPWAY_RATE_STORE") or "memory").strip(),
            ws_queue=_positive_int(env, "SLIPWAY_WS_QUEUE", 1000),
            ws_per_key=_positive_int(env, "SLIPWAY_WS_PER_KEY", 20),
            work_dir=env.get("SLIPWAY_WORK_DIR") or "./work",
            routes_file=env.get("SLIPWAY_ROUTES_FILE") or None,
            routes_interval=_positive_number(env, "SLIPWAY_ROUTES_INTERVAL", 2.0),
            routes=(env.get("SLIPWAY_ROUTES") or "file").strip().lower(),
            caddy_admin=(env.get("SLIPWAY_CADDY_ADMIN") or "http://127.0.0.1:2019").strip(),
            caddy_tls=(env.get("SLIPWAY_CADDY_TLS") or "").strip().lower(),
            caddy_listen=(env.get("SLIPWAY_CADDY_LISTEN") or ":443").strip(),
            oidc_issuer=(env.get("SLIPWAY_OIDC_ISSUER") or "").strip() or None,
            oidc_client_id=env.get("SLIPWAY_OIDC_CLIENT_ID") or None,
            oidc_client_secret=env.get("SLIPWAY_OIDC_CLIENT_SECRET") or None,
            public_url=(env.get("SLIPWAY_PUBLIC_URL") or "").rstrip("/") or None,
            session_ttl=_positive_int(env, "SLIPWAY_SESSION_TTL", 28800),
            web_dir=env.get("SLIPWAY_WEB_DIR") or None,
            customer_max_services=_whole(env, "SLIPWAY_CUSTOMER_MAX_SERVICES", 20, 100_000),
            customer_max_memory_mb=_whole(env, "SLIPWAY_CUSTOMER_MAX_MEMORY_MB", 4096, 64 * 1024 * 1024),
            customer_max_cpus=_cpus(env, "SLIPWAY_CUSTOMER_MAX_CPUS", 4.0, 0),
            customer_max_containers=_whole(env, "SLIPWAY_CUSTOMER_MAX_CONTAINERS", 50, 100_000),
            events_keep=_positive_int(env, "SLIPWAY_EVENTS_KEEP", 1000),
            rate_anon_rpm=_positive_int(env, "SLIPWAY_RATE_ANON_RPM", 60),
            rate_auth_rpm=_positive_int(env, "SLIPWAY_RATE_AUTH_RPM", 120),
            rate_deploy_rpm=_positive_int(env, "SLIPWAY_RATE_DEPLOY_RPM", 10),
            rate_hook_rpm=_positive_int(env, "SLIPWAY_RATE_HOOK_RPM", 60),
            strict_waits=_flag(env, "SLIPWAY_STRICT_WAITS"),
            log_format=(env.get("SLIPWAY_LOG_FORMAT") or default_log_format()).strip().lower(),
            metrics_token=env.get("SLIPWAY_METRICS_TOKEN") or None,
            ready_timeout=_positive_number(env, "SLIPWAY_READY_TIMEOUT", 2.0),
            webhook_retry_base=_positive_number(env, "SLIPWAY_WEBHOOK_RETRY_BASE", 30.0),
            webhook_allow_private=_flag(env, "SLIPWAY_WEBHOOK_ALLOW_PRIVATE"),
            webhook_timeout=_positive_number(env, "SLIPWAY_WEBHOOK_TIMEOUT", 10.0),
            registry_allow_private=_flag(env, "SLIPWAY_REGISTRY_ALLOW_PRIVATE"),
            settings=dict(env),
        )
        values["default_memory_mb"], values["default_cpus"] = container_defaults(env)
        values.update(overrides)
        if "secret_key" not in overrides:
            values["secret_key"], values["secret_key_missing"] = secret_key(env, values["work_dir"])
        return cls(**values)

    def require_secret_key(self) -> None:
        """A ``ConfigError`` when ``from_env`` found no key: the server does not start
        without one (it would store secret variables it could not read again)."""
        if self.secret_key_missing:
            raise ConfigError(self.secret_key_missing)
