"""What the runtime plugins enforce on every container, read from the environment
(``SLIPWAY_*`` variables, declared here once each: :data:`SETTINGS`; a bad value is a
``ValueError`` naming the variable, which stops start-up): the host address published
ports bind to, the host port range, processes per container, the limits of a container
whose compose sets none (the app's customer limits count them the same way: it reads
these declarations), the pull time limit, ulimits and the volume helper's image.
"""
from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ports.common_settings import DEFAULT_CPUS, DEFAULT_MEMORY_MB, HOST_PORTS
from ports.settings import Setting, positive_seconds, stripped, text, whole


def _address(name: str, raw: str) -> str:
    raw = raw.strip()
    try:
        address = ipaddress.ip_address(raw.strip("[]"))
    except ValueError:
        raise ValueError(f"{name} must be an IP address of this host, got {raw!r}") from None
    if address.is_unspecified:
        raise ValueError(f"{name} must be an address of this host, not {raw!r} (every address): "
                         f"published ports are served to the public by the reverse proxy")
    return str(address)


PUBLISH_ADDRESS = Setting(
    "SLIPWAY_PUBLISH_ADDRESS", _address, "127.0.0.1",
    "host address every published port binds to (an address of this host; `0.0.0.0` and `::` are refused: "
    "the reverse proxy serves the public)")
PIDS_LIMIT = Setting(
    "SLIPWAY_PIDS_LIMIT", whole(1, must="a whole number of at least 1"), 1024,
    "processes per container (whole number, at least 1)")
PULL_TIMEOUT = Setting(
    "SLIPWAY_PULL_TIMEOUT", positive_seconds, 600.0,
    "seconds one image pull may take; past it the pull (and its deploy) fails with \"timed out\"")
ULIMITS = Setting(
    "SLIPWAY_RUNTIME_ULIMITS", text, "",
    "ulimits for every container, e.g. `nofile=20000:20000,nproc=32768:32768`; needed where the OCI runtime "
    "cannot raise rlimits on exec (then healthchecks fail); `.ci/run` probes the engine's own limits")
HELPER_IMAGE = Setting(
    "SLIPWAY_RUNTIME_HELPER_IMAGE", stripped, "docker.io/library/busybox:stable",
    "image of the throw-away containers that export and import volume content (needs `sh` and `rm`); pulled "
    "when missing (a failed pull names this setting); offline hosts and tests: `localhost/busybox:latest` "
    "(`make run`'s demo picks it when the default cannot be pulled)")

#: what the runtime plugins read (each runtime plugin module declares them as its own)
SETTINGS = (PUBLISH_ADDRESS, HOST_PORTS, PIDS_LIMIT, DEFAULT_MEMORY_MB, DEFAULT_CPUS, PULL_TIMEOUT, ULIMITS,
            HELPER_IMAGE)


@dataclass(frozen=True)
class RuntimeSettings:
    publish_address: str = PUBLISH_ADDRESS.default
    host_ports: tuple = HOST_PORTS.default  # (low, high), both inclusive
    pids_limit: int = PIDS_LIMIT.default
    default_memory_mb: int = DEFAULT_MEMORY_MB.default
    default_cpus: float = DEFAULT_CPUS.default
    pull_timeout: float = PULL_TIMEOUT.default

    @classmethod
    def read(cls, settings: Mapping[str, str] | None = None) -> "RuntimeSettings":
        """From ``settings`` (default: the environment); unset or empty means the default."""
        env = os.environ if settings is None else settings
        return cls(
            publish_address=PUBLISH_ADDRESS.read(env),
            host_ports=HOST_PORTS.read(env),  # core's one reading of it (app.config: Config.host_ports)
            pids_limit=PIDS_LIMIT.read(env),
            default_memory_mb=DEFAULT_MEMORY_MB.read(env),
            default_cpus=DEFAULT_CPUS.read(env),
            pull_timeout=PULL_TIMEOUT.read(env),
        )
