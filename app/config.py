"""Configuration: defaults, read from the environment, checked before anything starts."""
from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass, field

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
    #: a Traefik dynamic-configuration file kept equal to the route records (None: no file)
    routes_file: str | None = None
    routes_interval: float = 2.0
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
            routes_file=env.get("SLIPWAY_ROUTES_FILE") or None,
            routes_interval=_positive_number(env, "SLIPWAY_ROUTES_INTERVAL", 2.0),
            settings=dict(env),
        )
        values.update(overrides)
        return cls(**values)
