"""The settings the app and built-in plugins both read, declared here once so both can
(``ports.settings.Setting``; the app cannot import a plugin): the runtimes' host port
range and the limits of a container whose compose sets none (customer limits count them
as the runtimes apply them), and the ``caddy`` route provider's admin API (whose host the
app never lets be a custom domain)."""
from __future__ import annotations

from core.panel.compose import DEFAULT_HOST_PORTS, host_port_range
from ports.settings import Setting, cpus, lowered, stripped, whole


def _host_ports(name: str, raw: str) -> tuple:
    return host_port_range({name: raw})  # core's one reading of it


HOST_PORTS = Setting(
    "SLIPWAY_HOST_PORTS", _host_ports, DEFAULT_HOST_PORTS,
    "`LOW-HIGH` (inclusive, 1-65535; read once at start-up, one range for every deploy method): the host "
    "ports a compose definition may name (`HOST:CONTAINER`, long-syntax `published`; another is a 422 on "
    "`compose` naming the port, and from a repository the deploy fails with that reason), and where a port "
    "without a host port gets a free one (picked by Slipway, never by the engine)",
    shown="`{}-{}`".format(*DEFAULT_HOST_PORTS))
DEFAULT_MEMORY_MB = Setting(
    "SLIPWAY_DEFAULT_MEMORY_MB", whole(6), 512,
    "memory limit of a container whose compose sets no `mem_limit` (applied by the runtime; customer limits "
    "count it the same way); whole number, at least 6")
DEFAULT_CPUS = Setting(
    "SLIPWAY_DEFAULT_CPUS", cpus(0.01), 1.0,
    "CPU limit of a container whose compose sets no `cpus` (applied by the runtime; counted the same way); "
    "at least 0.01, at most three decimals")
CADDY_ADMIN = Setting(
    "SLIPWAY_CADDY_ADMIN", stripped, "http://127.0.0.1:2019",
    "with `SLIPWAY_ROUTES=caddy`: Caddy's admin API; its host (and the names under it) is never a custom domain")
CADDY_TLS = Setting(
    "SLIPWAY_CADDY_TLS", lowered, "",
    "with `caddy`: empty, Caddy's automatic HTTPS gets certificates by ACME (public names, ports 80/443 "
    "reachable); `internal`: from Caddy's own CA (tests, private names)", shown="empty")
CADDY_LISTEN = Setting(
    "SLIPWAY_CADDY_LISTEN", stripped, ":443",
    "with `caddy`: the listen address of the Caddy server Slipway owns (`apps.http.servers.slipway`)")
