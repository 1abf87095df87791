"""Configuration: defaults, read from the environment, checked before anything starts."""
from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ports.clock import Clock, SystemClock


class ConfigError(ValueError):
    """A setting is wrong; the message names the variable."""


def _positive_number(environ, name: str, default: float) -> float:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number greater than 0, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a number greater than 0, got {raw!r}")
    return value


def _interval(environ, name: str, default: float) -> float:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.strip() == "0":
        return 0.0
    return _positive_number(environ, name, default)


def _positive_int(environ, name: str, default: int) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ConfigError(f"{name} must be a whole number greater than 0, got {raw!r}")
    return int(raw)


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
    if not config.oidc_issuer:
        return
    _http_url("SLIPWAY_OIDC_ISSUER", config.oidc_issuer)
    if not config.oidc_client_id:
        raise ConfigError("SLIPWAY_OIDC_CLIENT_ID is required when SLIPWAY_OIDC_ISSUER is set")
    if not config.public_url:
        raise ConfigError("SLIPWAY_PUBLIC_URL is required when SLIPWAY_OIDC_ISSUER is set (the redirect URI is "
                          "{SLIPWAY_PUBLIC_URL}/api/auth/callback)")
    if isinstance(config.session_ttl, bool) or not isinstance(config.session_ttl, int) or config.session_ttl < 1:
        raise ConfigError(f"SLIPWAY_SESSION_TTL must be a whole number greater than 0, got {config.session_ttl!r}")


def _check_event_bus(config) -> None:
    if config.event_bus not in ("memory", "postgres"):
        raise ConfigError(f"SLIPWAY_EVENT_BUS must be memory or postgres, got {config.event_bus!r}")
    if config.event_bus == "postgres" and not config.database_url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("SLIPWAY_EVENT_BUS=postgres needs a PostgreSQL database (SLIPWAY_DATABASE_URL="
                          f"postgresql://...), not {config.database_url.split(':', 1)[0]}")


@dataclass
class Config:
    database_url: str = "sqlite:///slipway.db"
    rate_rps: float = 10.0
    rate_burst: float = 30.0
    authfail_rps: float = 1.0
    trusted_proxies: tuple = ()
    runtime: str = "podman"
    runtime_url: str | None = None
    db_threads: int = 4
    license_service: str = "embedded"
    #: seconds between billing recomputes in the server; 0 turns the job off
    billing_interval: float = 86400.0
    #: run deploy jobs and health checks in this process
    deploy_worker: bool = True
    health_interval: float = 15.0
    base_domain: str | None = None
    #: seconds an HTTP request waits for the container engine before answering 503
    engine_timeout: float = 30.0
    #: where backup archives are written (SLIPWAY_BACKUP_DIR), one directory per service
    backup_dir: str = "./backups"
    #: real-time events: "memory" (this process) or "postgres" (LISTEN/NOTIFY, PostgreSQL only)
    event_bus: str = "memory"
    #: messages a WebSocket client may have waiting before it is disconnected as too slow
    ws_queue: int = 1000
    #: where deploy jobs clone and build sources (a directory per job, removed after it)
    work_dir: str = "./work"
    #: a Traefik dynamic-configuration file kept equal to the route records (None: no file)
    routes_file: str | None = None
    routes_interval: float = 2.0
    #: browser login (OIDC): the provider's issuer URL (None: login off), this client, the
    #: panel's public URL (redirect URI {public_url}/api/auth/callback), session lifetime
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    public_url: str | None = None
    session_ttl: int = 28800
    #: plugin settings (the environment): each plugin reads its own SLIPWAY_* variables
    settings: dict = field(default_factory=dict)
    clock: Clock = field(default_factory=SystemClock)
    #: extra plugin objects registered besides the entry points (tests, embedding)
    plugins: tuple = ()
    load_entrypoints: bool = True

    def __post_init__(self):
        for name, value in (("PC_RATE_RPS", self.rate_rps), ("PC_RATE_BURST", self.rate_burst),
                            ("PC_AUTHFAIL_RPS", self.authfail_rps)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a number greater than 0, got {value!r}")
        _check_event_bus(self)
        _check_login(self)

    @classmethod
    def from_env(cls, environ=None, **overrides) -> "Config":
        env = os.environ if environ is None else environ
        values = dict(
            database_url=env.get("SLIPWAY_DATABASE_URL") or "sqlite:///slipway.db",
            rate_rps=_positive_number(env, "PC_RATE_RPS", 10.0),
            rate_burst=_positive_number(env, "PC_RATE_BURST", 30.0),
            authfail_rps=_positive_number(env, "PC_AUTHFAIL_RPS", 1.0),
            trusted_proxies=parse_networks(env.get("SLIPWAY_TRUSTED_PROXIES", "")),
            runtime=env.get("SLIPWAY_RUNTIME") or "podman",
            runtime_url=env.get("SLIPWAY_RUNTIME_URL") or None,
            db_threads=_positive_int(env, "SLIPWAY_DB_THREADS", 4),
            license_service=env.get("SLIPWAY_LICENSE_SERVICE") or "embedded",
            billing_interval=_interval(env, "SLIPWAY_BILLING_INTERVAL", 86400.0),
            deploy_worker=env.get("SLIPWAY_DEPLOY_WORKER", "1") != "0",
            health_interval=_positive_number(env, "SLIPWAY_HEALTH_INTERVAL", 15.0),
            base_domain=env.get("SLIPWAY_BASE_DOMAIN") or None,
            engine_timeout=_positive_number(env, "SLIPWAY_ENGINE_TIMEOUT", 30.0),
            backup_dir=env.get("SLIPWAY_BACKUP_DIR") or "./backups",
            event_bus=(env.get("SLIPWAY_EVENT_BUS") or "memory").strip().lower(),
            ws_queue=_positive_int(env, "SLIPWAY_WS_QUEUE", 1000),
            work_dir=env.get("SLIPWAY_WORK_DIR") or "./work",
            routes_file=env.get("SLIPWAY_ROUTES_FILE") or None,
            routes_interval=_positive_number(env, "SLIPWAY_ROUTES_INTERVAL", 2.0),
            oidc_issuer=(env.get("SLIPWAY_OIDC_ISSUER") or "").strip() or None,
            oidc_client_id=env.get("SLIPWAY_OIDC_CLIENT_ID") or None,
            oidc_client_secret=env.get("SLIPWAY_OIDC_CLIENT_SECRET") or None,
            public_url=(env.get("SLIPWAY_PUBLIC_URL") or "").rstrip("/") or None,
            session_ttl=_positive_int(env, "SLIPWAY_SESSION_TTL", 28800),
            settings=dict(env),
        )
        values.update(overrides)
        return cls(**values)
