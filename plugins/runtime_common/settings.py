"""What both runtime plugins enforce on every container, read from the environment
(``SLIPWAY_*`` variables; a bad value is a ``ValueError`` naming the variable, which stops
start-up):

- ``SLIPWAY_PUBLISH_ADDRESS`` (``127.0.0.1``): the host address published ports bind to;
  an address of this host, never the unspecified ``0.0.0.0`` / ``::`` (the reverse
  proxy serves the public).
- ``SLIPWAY_HOST_PORTS`` (``20000-29999``, inclusive): where a port without a host port
  gets one (the runtime picks it, never the engine).
- ``SLIPWAY_PIDS_LIMIT`` (``1024``): processes per container.
- ``SLIPWAY_DEFAULT_MEMORY_MB`` (``512``), ``SLIPWAY_DEFAULT_CPUS`` (``1``): the limits of a
  container whose compose sets no ``mem_limit`` / ``cpus``.
- ``SLIPWAY_PULL_TIMEOUT`` (``600``): seconds one image pull may take.
"""
from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass

from core.panel.compose import host_port_range
from ports.settings import number, seconds

PUBLISH_ADDRESS = "SLIPWAY_PUBLISH_ADDRESS"
PIDS_LIMIT = "SLIPWAY_PIDS_LIMIT"
DEFAULT_MEMORY_MB = "SLIPWAY_DEFAULT_MEMORY_MB"
DEFAULT_CPUS = "SLIPWAY_DEFAULT_CPUS"
PULL_TIMEOUT = "SLIPWAY_PULL_TIMEOUT"



@dataclass(frozen=True)
class RuntimeSettings:
    publish_address: str = "127.0.0.1"
    host_ports: tuple = (20000, 29999)  # (low, high), both inclusive
    pids_limit: int = 1024
    default_memory_mb: int = 512
    default_cpus: float = 1.0
    pull_timeout: float = 600.0

    @classmethod
    def read(cls, settings: Mapping[str, str] | None = None) -> "RuntimeSettings":
        """From ``settings`` (default: the environment); unset or empty means the default."""
        env = os.environ if settings is None else settings
        defaults = cls()
        return cls(
            publish_address=_address(env, PUBLISH_ADDRESS, defaults.publish_address),
            host_ports=host_port_range(env),  # core's one reading of it (app.config: Config.host_ports)
            pids_limit=_whole(env, PIDS_LIMIT, defaults.pids_limit),
            default_memory_mb=_whole(env, DEFAULT_MEMORY_MB, defaults.default_memory_mb, minimum=6),
            default_cpus=_cpus(env, DEFAULT_CPUS, defaults.default_cpus),
            pull_timeout=seconds(env, PULL_TIMEOUT, defaults.pull_timeout),
        )


def _address(env: Mapping, name: str, default: str) -> str:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        address = ipaddress.ip_address(raw.strip("[]"))
    except ValueError:
        raise ValueError(f"{name} must be an IP address of this host, got {raw!r}") from None
    if address.is_unspecified:
        raise ValueError(f"{name} must be an address of this host, not {raw!r} (every address): "
                         f"published ports are served to the public by the reverse proxy")
    return str(address)


def _whole(env: Mapping, name: str, default: int, minimum: int = 1) -> int:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < minimum:
        raise ValueError(f"{name} must be a whole number of at least {minimum}, got {raw!r}")
    return int(raw)


def _cpus(env: Mapping, name: str, default: float) -> float:
    return number(env, name, default, ok=lambda value: value >= 0.01, must="a number of CPUs of at least 0.01")
