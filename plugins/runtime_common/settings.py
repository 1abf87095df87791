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
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ports.settings import number, seconds

PUBLISH_ADDRESS = "SLIPWAY_PUBLISH_ADDRESS"
HOST_PORTS = "SLIPWAY_HOST_PORTS"
PIDS_LIMIT = "SLIPWAY_PIDS_LIMIT"
DEFAULT_MEMORY_MB = "SLIPWAY_DEFAULT_MEMORY_MB"
DEFAULT_CPUS = "SLIPWAY_DEFAULT_CPUS"
PULL_TIMEOUT = "SLIPWAY_PULL_TIMEOUT"

_RANGE = re.compile(r"^\s*(\d{1,5})\s*-\s*(\d{1,5})\s*$")


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
            host_ports=port_range(env.get(HOST_PORTS), HOST_PORTS, defaults.host_ports),
            pids_limit=_whole(env, PIDS_LIMIT, defaults.pids_limit),
            default_memory_mb=_whole(env, DEFAULT_MEMORY_MB, defaults.default_memory_mb, minimum=6),
            default_cpus=_cpus(env, DEFAULT_CPUS, defaults.default_cpus),
            pull_timeout=seconds(env, PULL_TIMEOUT, defaults.pull_timeout),
        )


def port_range(raw: str | None, name: str = HOST_PORTS, default: tuple = (20000, 29999)) -> tuple:
    """``"LOW-HIGH"`` (inclusive, 1 <= LOW <= HIGH <= 65535) as ``(low, high)``."""
    text = (raw or "").strip()
    if not text:
        return default
    match = _RANGE.match(text)
    if match:
        low, high = int(match.group(1)), int(match.group(2))
        if 1 <= low <= high <= 65535:
            return (low, high)
    raise ValueError(f"{name} must be a port range LOW-HIGH with 1 <= LOW <= HIGH <= 65535, got {raw!r}")


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
