"""The settings the app and built-in plugins both read, declared here once so both can
(``ports.settings.Setting``; the app cannot import a plugin): the runtimes' host port
range and the limits of a container whose compose sets none (customer limits count them
as the runtimes apply them), and the ``caddy`` route provider's admin API (whose host the
app never lets be a custom domain), and whether images may come from registries that
are not public (the app's deploy jobs and the compose, git and ai methods check it)."""
from __future__ import annotations

from core.panel import containerfiles
from core.panel.compose import DEFAULT_HOST_PORTS, host_port_range
from ports.settings import Setting, cpus, lowered, stripped, whole


def _host_ports(name: str, raw: str) -> tuple:
    return host_port_range({name: raw})  # core's one reading of it


def _registry_flag(name: str, raw: str) -> bool:
    return containerfiles.allow_private({name: raw})  # core's one reading of it


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
REGISTRY_ALLOW_PRIVATE = Setting(
    "SLIPWAY_REGISTRY_ALLOW_PRIVATE", _registry_flag, False,
    "`1`: image references (compose `image`, a Containerfile's `FROM` and `--from`) may name registries "
    'whose host is or resolves to a loopback, private, link-local or other address that is not public (an'
    " operator's own registry; tests). `0`: such a compose is 422 on `compose` at create and PATCH, and "
    'from a repository or an analyzer the job fails naming the reference; nothing is pulled from it. A '
    'name that does not resolve (every host of a compose looked up at once, within 5 s) is accepted at '
    'create and PATCH and fails the job ("does not resolve") when the engine would pull it (an image it '
    "lacks, or a redeploy's refresh, which then deploys the copy at hand instead). `localhost/...` "
    "without a port is never pulled either way (the engine's own images)")
