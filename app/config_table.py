"""Slipway's settings, declared once each (``ports.settings.Setting``: the variable, its
parser, its default and its line of documentation). ``app.config.Config`` is read from
them, ``slipway settings`` lists them with their values, and the settings tables of
docs/configuration.md are generated from them (``python -m app.config --markdown``);
plugins declare the settings only they read in their own ``SETTINGS``
(:func:`plugin_settings` collects them). Settings the app and a built-in plugin both read
are declared in ``ports.common_settings`` and named here."""
from __future__ import annotations

import ipaddress
import json
import re

from core.panel import access
from ports.common_settings import (CADDY_ADMIN, CADDY_LISTEN, CADDY_TLS, DEFAULT_CPUS, DEFAULT_MEMORY_MB, HOST_PORTS,
                                   REGISTRY_ALLOW_PRIVATE)
from ports.settings import Setting, cpus, flag, interval, lowered, positive, stripped, text, whole


# --- the parsers only the app's settings use ---------------------------------------------


def optional(name: str, raw: str) -> str | None:
    """The value as given (None when unset or blank)."""
    return raw or None


def optional_stripped(name: str, raw: str) -> str | None:
    return raw.strip() or None


def base_url(name: str, raw: str) -> str | None:
    """A URL without its trailing slashes."""
    return raw.rstrip("/") or None


def not_zero(name: str, raw: str) -> bool:
    """Anything but ``0`` is on."""
    return raw != "0"


def networks(name: str, raw: str) -> tuple:
    """Comma-separated IP addresses or CIDR ranges."""
    found = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        try:
            found.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"{name}: {part!r} is not an IP address or CIDR range") from None
    return tuple(found)


def backup_destinations(name: str, raw: str) -> dict:
    """A JSON object of destination name -> options (an object with a string ``kind``;
    option values strings). Which kinds exist is the plugins' business (checked when the
    destinations are made)."""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{name} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object of destination name -> options")
    for destination, options in value.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", destination):
            raise ValueError(f"{name}: {destination!r} is not a destination name "
                             "(lower-case letters, digits, _ and -, at most 64)")
        if not isinstance(options, dict) or not isinstance(options.get("kind"), str):
            raise ValueError(f"{name}: {destination!r} must be an object with a \"kind\"")
        if not all(isinstance(v, str) for v in options.values()):
            raise ValueError(f"{name}: the options of {destination!r} must be strings")
    return value


# --- the settings ------------------------------------------------------------------------

DATABASE_URL = Setting(
    "SLIPWAY_DATABASE_URL", stripped, None,
    '`sqlite:///path` (WAL, foreign keys, 10 s busy timeout) or `postgresql://user@host:port/db`; see '
    '[The database](#the-database)',
    shown='`slipway.db` in `SLIPWAY_DATA_DIR`')
DATA_DIR = Setting(
    "SLIPWAY_DATA_DIR", stripped, None,
    'the folder of the default SQLite database when `SLIPWAY_DATABASE_URL` is unset (`make run` uses the '
    'same default, so the CLI finds its database with no setting)',
    shown='`$XDG_DATA_HOME/slipway` (`~/.local/share/slipway`)')
RATE_RPS = Setting(
    "PC_RATE_RPS", positive, 10.0,
    'partner API: per-token refill rate, requests per second (> 0)')
RATE_BURST = Setting(
    "PC_RATE_BURST", positive, 30.0,
    'partner API: per-token bucket size (> 0)')
AUTHFAIL_RPS = Setting(
    "PC_AUTHFAIL_RPS", positive, 1.0,
    'partner API: failed-authentication brake per source address, per second (> 0); its burst is the same'
    ' rounded up, at least 1')
TRUSTED_PROXIES = Setting(
    "SLIPWAY_TRUSTED_PROXIES", networks, (),
    'comma-separated addresses or CIDR ranges whose `X-Forwarded-For` is believed (the right-most '
    'untrusted hop is the client); empty: no proxy header is believed, from loopback neither (see [Behind'
    ' a reverse proxy](operator/proxies.md#behind-a-reverse-proxy))',
    shown='empty')
DB_THREADS = Setting(
    "SLIPWAY_DB_THREADS", whole(), 4,
    'worker threads that run database work off the event loop')
LICENSE_SERVICE = Setting(
    "SLIPWAY_LICENSE_SERVICE", text, "embedded",
    "license-service plugin: `embedded` (keys signed in-process, data in Slipway's database) or `keygen`")
BILLING_INTERVAL = Setting(
    "SLIPWAY_BILLING_INTERVAL", interval, 86400.0,
    "seconds between the server's billing recomputes (it also runs once at start-up); `0` turns the job "
    'off')
RUNTIME = Setting(
    "SLIPWAY_RUNTIME", stripped, "podman",
    "container runtime plugin: `podman` (podman-py), `docker` (docker-py; Podman serves Docker's API too)"
    ' or `swarm` (Docker Swarm services through docker-py; see [Running on Docker '
    'Swarm](operator/engines.md#running-on-docker-swarm))',
    shown="`podman`, or `docker` for an engine found at Docker's socket or `DOCKER_HOST`")
RUNTIME_URL = Setting(
    "SLIPWAY_RUNTIME_URL", optional_stripped, None,
    'container engine socket, e.g. `unix:///run/slipway-podman/podman.sock`; with `swarm`, a manager '
    "node's engine; set but empty: no engine (creates, deploys, backups and restores are refused with 503"
    ' `engine_unavailable`, `/readyz` says `engine: off`)',
    blank_is_value=True, shown='found (see [The container engine](#the-container-engine))')
ENGINE_TIMEOUT = Setting(
    "SLIPWAY_ENGINE_TIMEOUT", positive, 30.0,
    'seconds an HTTP request waits for the container engine before answering 503 (lists and details then '
    'show zero resources instead); deploys, builds and backups are not limited by it')
ENGINE_THREADS = Setting(
    "SLIPWAY_ENGINE_THREADS", whole(), 32,
    'threads for the container-engine calls of HTTP requests; one customer (or one operator key or '
    'session) holds at most a quarter of them at once (see [Fair engine '
    'calls](operator/engines.md#fair-engine-calls))')
CUSTOMER_MAX_SERVICES = Setting(
    "SLIPWAY_CUSTOMER_MAX_SERVICES", whole(0, 100_000), 20,
    'services a panel customer may have when its `limits.services` is null (0 to 100000)')
CUSTOMER_MAX_MEMORY_MB = Setting(
    "SLIPWAY_CUSTOMER_MAX_MEMORY_MB", whole(0, 64 * 1024 * 1024), 4096,
    "MB of container memory limits a customer's services may sum to when its `limits.memory_mb` is null")
CUSTOMER_MAX_CPUS = Setting(
    "SLIPWAY_CUSTOMER_MAX_CPUS", cpus(0), 4.0,
    "CPUs of container CPU limits a customer's services may sum to when its `limits.cpus` is null (at "
    'most three decimals)')
CUSTOMER_MAX_CONTAINERS = Setting(
    "SLIPWAY_CUSTOMER_MAX_CONTAINERS", whole(0, 100_000), 50,
    "containers (one per compose service) a customer's services may have in all when its "
    '`limits.containers` is null (0 to 100000)')
DEPLOY_WORKER = Setting(
    "SLIPWAY_DEPLOY_WORKER", not_zero, True,
    "`0`: this process runs no deploy jobs, health checks, backups or backup policies' scheduler (another"
    ' one does)')
HEALTH_INTERVAL = Setting(
    "SLIPWAY_HEALTH_INTERVAL", positive, 15.0,
    'seconds between health checks of running services')
DEPLOY_CONCURRENCY = Setting(
    "SLIPWAY_DEPLOY_CONCURRENCY", whole(), 4,
    'deploy jobs this process runs at once (on threads of their own); the others wait in the queue')
DEPLOYS_PER_CUSTOMER = Setting(
    "SLIPWAY_DEPLOYS_PER_CUSTOMER", whole(), 2,
    'deploy jobs of one customer running at once, counted over every process sharing the database; that '
    "customer's other jobs wait while other customers' run")
DEPLOY_SETTLE = Setting(
    "SLIPWAY_DEPLOY_SETTLE", interval, 3.0,
    "seconds a deploy's containers must keep running (and healthy) before the deploy is a success; `0`: "
    'none (a container that exits at once may then be missed)')
DEPLOY_HEALTH_TIMEOUT = Setting(
    "SLIPWAY_DEPLOY_HEALTH_TIMEOUT", positive, 120.0,
    "seconds a deploy's (or a health-gated redeploy's) new containers get to run and be healthy; past it "
    'the deploy fails (a gated one leaves the old release serving)')
DEPLOY_DRAIN = Setting(
    "SLIPWAY_DEPLOY_DRAIN", interval, 2.0,
    'seconds after a health-gated redeploy switched its routes (and the reverse proxy serves them) before'
    ' the old containers are stopped, so requests in flight finish; `0`: none')
BASE_DOMAIN = Setting(
    "SLIPWAY_BASE_DOMAIN", optional, None,
    "with it a service's `url` is `https://<name>.<domain>`, and one that publishes a port gets a route "
    'record `<name>.<domain>` → `http://127.0.0.1:<host port>`; without it the `url` is '
    '`http://127.0.0.1:<port>` of its first published port')
ROUTES = Setting(
    "SLIPWAY_ROUTES", lowered, "file",
    "the route-provider plugin that feeds a reverse proxy from the route records: `file` (Traefik's file "
    "provider, at `SLIPWAY_ROUTES_FILE`) or `caddy` (Caddy's admin API); another name stops start-up "
    'naming the loaded ones (see [Reverse proxies (route '
    'providers)](operator/proxies.md#reverse-proxies-route-providers))')
ROUTES_FILE = Setting(
    "SLIPWAY_ROUTES_FILE", optional, None,
    "with `SLIPWAY_ROUTES=file`: a file the server keeps equal to the route records, in Traefik's "
    "file-provider format (point Traefik's `providers.file.filename` at it); written atomically; unset: "
    'no file (no provider)')
ROUTES_INTERVAL = Setting(
    "SLIPWAY_ROUTES_INTERVAL", positive, 2.0,
    'seconds between reads of the route records for the route provider')
OIDC_ISSUER = Setting(
    "SLIPWAY_OIDC_ISSUER", optional_stripped, None,
    "the identity provider's issuer URL (discovery at `{issuer}/.well-known/openid-configuration`); "
    "unset: OIDC login is off (`/api/auth/login` and `/callback` answer 404, login sessions' cookies are "
    'ignored; API keys and key sessions from `POST /api/auth/key` work)')
OIDC_CLIENT_ID = Setting(
    "SLIPWAY_OIDC_CLIENT_ID", optional, None,
    "this panel's client id at the identity provider (required with an issuer)")
OIDC_CLIENT_SECRET = Setting(
    "SLIPWAY_OIDC_CLIENT_SECRET", optional, None,
    "this panel's client secret at the provider; without it the client is public, PKCE only",
    secret=True)
PUBLIC_URL = Setting(
    "SLIPWAY_PUBLIC_URL", base_url, None,
    "the panel's public base URL (required with an issuer): redirect URI "
    "`{public_url}/api/auth/callback`, the origin the CSRF rule accepts (unset: the request's own, from "
    'its `Host` header; set it behind a proxy that changes the host or scheme); `https` makes cookies '
    '`Secure`; its host (and the names under it) is never a custom domain')
SESSION_TTL = Setting(
    "SLIPWAY_SESSION_TTL", whole(), 28800,
    'seconds a browser session lasts (a key session: at most until its key expires)')
WEB_DIR = Setting(
    "SLIPWAY_WEB_DIR", optional, None,
    "the web frontend's directory (`index.html` and `assets/`), read when the server starts; one without "
    '`index.html` stops start-up',
    shown="the package's `app/web`")
WORK_DIR = Setting(
    "SLIPWAY_WORK_DIR", text, "./work",
    'where deploy jobs clone and build sources: one directory per job, removed when the job ends '
    '(relative: to the folder the server starts in); also where `slipway init` keeps the key file '
    '`secret.key` when `SLIPWAY_SECRET_KEY` is unset')
SECRET_KEY = Setting(
    "SLIPWAY_SECRET_KEY", text, None,
    "the key that encrypts secret template variables (the database templates' passwords) at rest with "
    'AES-256-GCM: 32 random bytes in base64 (44 characters; `openssl rand -base64 32`). Unset, `slipway '
    'init` writes a new key to `<SLIPWAY_WORK_DIR>/secret.key` (mode 0600, never replaced) and the server'
    ' reads it from there. The server does not start without a key (a configuration error saying how to '
    'get one), nor with one that is not 32 bytes of base64; a key other than the one the secrets were '
    "stored with makes reading them fail, so keep it with the database's backups "
    '([security](security.md#secrets-at-rest))',
    secret=True, shown='unset: the file `secret.key` in `SLIPWAY_WORK_DIR`')
EVENTS_KEEP = Setting(
    "SLIPWAY_EVENTS_KEEP", whole(), 1000,
    'timeline events each service keeps (whole number, at least 1); older ones, and deploy jobs past a '
    "service's newest 200 (never a queued or running one), are deleted at start-up and then hourly")
RATE_STORE = Setting(
    "SLIPWAY_RATE_STORE", stripped, "memory",
    "where every rate-limit bucket lives (partner tokens, the failed-authentication brake, the panel's "
    'per-address, per-key/session and deploy tiers): `memory` (each process its own) or '
    '`redis://[user:password@]host[:port][/db]` (`rediss://` for TLS): one bucket per key shared by every'
    " process, updated atomically in Redis on Redis's clock (Redis 5 or newer; keys `slipway:rate:*`: "
    'give each deployment a Redis database of its own). Each take has 0.5 s in all; a Redis that does not'
    ' answer in time degrades to buckets of the process (a warning at most once a minute; start-up logs '
    'an error when Redis does not answer a `PING`), and after a second one request at a time tries it '
    'again: never a refused or failed request')
EVENT_BUS = Setting(
    "SLIPWAY_EVENT_BUS", lowered, "memory",
    'real-time events: `memory` (this process only) or `postgres` (`LISTEN/NOTIFY` on channel '
    '`slipway_events`; needs a PostgreSQL database). Use `postgres` with several processes behind one '
    'load balancer')
WS_QUEUE = Setting(
    "SLIPWAY_WS_QUEUE", whole(), 1000,
    'messages a WebSocket client may have waiting; a client that falls further behind is closed with code'
    ' 1008')
WS_PER_KEY = Setting(
    "SLIPWAY_WS_PER_KEY", whole(), 20,
    'open WebSockets (`/api/ws` and log follows together) one API key or browser session may hold **per '
    'server process**; another upgrade is 429 `rate_limited` (behind a load balancer each process counts '
    'its own)')
BACKUP_DIR = Setting(
    "SLIPWAY_BACKUP_DIR", text, "./backups",
    'the folder of the backup destination `local`: archives '
    '`<dir>/<customer_id>/<service_id>/<backup_id>.tar` (relative: to the folder the server starts in)')
BACKUP_DESTINATIONS = Setting(
    "SLIPWAY_BACKUP_DESTINATIONS", backup_destinations, {},
    'more backup destinations, a JSON object `{"<name>": {"kind": "s3", "endpoint": "https://...", '
    '"bucket": "...", "prefix": "...", "region": "...", "access_key_id": "...", "secret_access_key": '
    '"..."}, ...}` (names: lower-case letters, digits, `_`, `-`; option values are strings). Kinds: `s3` '
    '(any S3-compatible service through boto3; `bucket` required; without `endpoint`, AWS; without keys, '
    'boto3\'s own lookup) and `local` (`"path"`: a folder); plugins add others '
    '(`register_backup_destinations`). `local` is always there (`SLIPWAY_BACKUP_DIR`) and cannot be '
    'redefined. Not JSON, an unknown kind or a bad option stops start-up naming this variable. See '
    '[Backups](operator/backups.md)',
    secret=True, shown='none')
BACKUP_DEFAULT = Setting(
    "SLIPWAY_BACKUP_DEFAULT", stripped, "local",
    'the destination of a backup whose request names none; a name that is not a destination stops '
    'start-up')
BACKUP_TIMEOUT = Setting(
    "SLIPWAY_BACKUP_TIMEOUT", positive, 3600.0,
    "seconds one backup, restore or verification may take (a customer's dump command included); past it "
    'the job is `failed` with an `error` naming this setting, nothing partial stays at the destination, '
    'and its engine stream is closed')
BACKUP_MAX_MB = Setting(
    "SLIPWAY_BACKUP_MAX_MB", positive, 102400.0,
    'megabytes one backup, restore or verification may read (dump output, volume archives, the archive '
    'read back); past it the job is `failed` with an `error` naming this setting and nothing partial '
    'stays at the destination; a fraction is accepted')
BACKUP_WORKERS = Setting(
    "SLIPWAY_BACKUP_WORKERS", whole(), 2,
    'backups, restores and verifications run at once in a process, on threads of their own (not the '
    "deploys'); at most one per customer at a time, counted over every process sharing the database, so "
    "one customer's stuck job never holds up another's")
RATE_ANON_RPM = Setting(
    "SLIPWAY_RATE_ANON_RPM", whole(), 60,
    "panel API: requests per minute per source address (an IPv6 address's /64) of unauthenticated "
    'requests, the login flow and git webhook deliveries that do not verify (whole number > 0, else '
    'start-up is refused)')
RATE_AUTH_RPM = Setting(
    "SLIPWAY_RATE_AUTH_RPM", whole(), access.DEFAULT_RPM,
    'panel API: requests per minute per browser session, and the `rateLimitRpm` of a key created without '
    "one (API: at most the creating key's own; CLI) (whole number > 0)")
RATE_DEPLOY_RPM = Setting(
    "SLIPWAY_RATE_DEPLOY_RPM", whole(), 10,
    'panel API: deploy operations per minute per key or session, on top of the above (whole number > 0)')
RATE_HOOK_RPM = Setting(
    "SLIPWAY_RATE_HOOK_RPM", whole(), 60,
    'panel API: git webhook deliveries per minute per service whose signature verifies (deliveries that '
    'do not verify, or name no service, draw on `SLIPWAY_RATE_ANON_RPM` per address instead; whole number'
    ' > 0)')
WEBHOOK_RETRY_BASE = Setting(
    "SLIPWAY_WEBHOOK_RETRY_BASE", positive, 30.0,
    'partner webhooks: seconds before the first retry of a failed delivery, doubling after each further '
    'failure (`base × 2^(attempts-1)`); 8 attempts, then `failed` (> 0)')
WEBHOOK_ALLOW_PRIVATE = Setting(
    "SLIPWAY_WEBHOOK_ALLOW_PRIVATE", flag, False,
    '`1`: webhook `url`s may name hosts that are or resolve to loopback, private, link-local (the '
    'metadata address included), unique-local, site-local (`fec0::/10`), unspecified, multicast or '
    'reserved addresses, over `http` or `https` (a receiver on the private network; tests). `0`: those '
    'are 422 on `url`, and a delivery whose host resolves to one by then fails that attempt')
WEBHOOK_TIMEOUT = Setting(
    "SLIPWAY_WEBHOOK_TIMEOUT", positive, 10.0,
    'seconds a webhook delivery attempt may last, overall (connect, send and the answer)')
LOG_FORMAT = Setting(
    "SLIPWAY_LOG_FORMAT", lowered, "json",
    '`json`: one JSON object per line on stderr; `text`: one readable line, for a terminal (see [Health, '
    'metrics and logs](operator/observability.md)); set, it wins either way',
    shown='`text` when stderr is a terminal, else `json`')
METRICS_TOKEN = Setting(
    "SLIPWAY_METRICS_TOKEN", optional, None,
    'serves `GET /metrics` to requests carrying it as `Authorization: Bearer`; unset: `/metrics` is 404',
    secret=True)
READY_TIMEOUT = Setting(
    "SLIPWAY_READY_TIMEOUT", positive, 2.0,
    'seconds each `/readyz` check (database, engine) may take before it reports "timed out"')
STRICT_WAITS = Setting(
    "SLIPWAY_STRICT_WAITS", flag, False,
    '`1`: an engine call, git, a name lookup, a socket connect or a process started inside a database '
    "transaction or on one of the database's threads raises (`core.waits.WaitInTransaction`) instead of "
    'being logged as a warning (`slipway.waits`). The tests run with it on (`tests/conftest.py`), servers'
    ' and CLI commands they start inherit it; see docs/security.md "Nothing waits on the outside inside a'
    ' transaction"')

#: the settings ``Config`` holds, by attribute, in the order of docs/configuration.md
FIELDS: dict[str, Setting] = {
    "database_url": DATABASE_URL,
    "rate_rps": RATE_RPS,
    "rate_burst": RATE_BURST,
    "authfail_rps": AUTHFAIL_RPS,
    "trusted_proxies": TRUSTED_PROXIES,
    "db_threads": DB_THREADS,
    "license_service": LICENSE_SERVICE,
    "billing_interval": BILLING_INTERVAL,
    "runtime": RUNTIME,
    "runtime_url": RUNTIME_URL,
    "engine_timeout": ENGINE_TIMEOUT,
    "engine_threads": ENGINE_THREADS,
    "customer_max_services": CUSTOMER_MAX_SERVICES,
    "customer_max_memory_mb": CUSTOMER_MAX_MEMORY_MB,
    "customer_max_cpus": CUSTOMER_MAX_CPUS,
    "customer_max_containers": CUSTOMER_MAX_CONTAINERS,
    "default_memory_mb": DEFAULT_MEMORY_MB,
    "default_cpus": DEFAULT_CPUS,
    "deploy_worker": DEPLOY_WORKER,
    "health_interval": HEALTH_INTERVAL,
    "deploy_concurrency": DEPLOY_CONCURRENCY,
    "deploys_per_customer": DEPLOYS_PER_CUSTOMER,
    "deploy_settle": DEPLOY_SETTLE,
    "deploy_health_timeout": DEPLOY_HEALTH_TIMEOUT,
    "deploy_drain": DEPLOY_DRAIN,
    "base_domain": BASE_DOMAIN,
    "routes": ROUTES,
    "routes_file": ROUTES_FILE,
    "routes_interval": ROUTES_INTERVAL,
    "caddy_admin": CADDY_ADMIN,
    "caddy_tls": CADDY_TLS,
    "caddy_listen": CADDY_LISTEN,
    "oidc_issuer": OIDC_ISSUER,
    "oidc_client_id": OIDC_CLIENT_ID,
    "oidc_client_secret": OIDC_CLIENT_SECRET,
    "public_url": PUBLIC_URL,
    "session_ttl": SESSION_TTL,
    "web_dir": WEB_DIR,
    "work_dir": WORK_DIR,
    "events_keep": EVENTS_KEEP,
    "registry_allow_private": REGISTRY_ALLOW_PRIVATE,
    "rate_store": RATE_STORE,
    "event_bus": EVENT_BUS,
    "ws_queue": WS_QUEUE,
    "ws_per_key": WS_PER_KEY,
    "backup_dir": BACKUP_DIR,
    "backup_destinations": BACKUP_DESTINATIONS,
    "backup_default": BACKUP_DEFAULT,
    "backup_timeout": BACKUP_TIMEOUT,
    "backup_max_mb": BACKUP_MAX_MB,
    "backup_workers": BACKUP_WORKERS,
    "host_ports": HOST_PORTS,
    "rate_anon_rpm": RATE_ANON_RPM,
    "rate_auth_rpm": RATE_AUTH_RPM,
    "rate_deploy_rpm": RATE_DEPLOY_RPM,
    "rate_hook_rpm": RATE_HOOK_RPM,
    "webhook_retry_base": WEBHOOK_RETRY_BASE,
    "webhook_allow_private": WEBHOOK_ALLOW_PRIVATE,
    "webhook_timeout": WEBHOOK_TIMEOUT,
    "log_format": LOG_FORMAT,
    "metrics_token": METRICS_TOKEN,
    "ready_timeout": READY_TIMEOUT,
    "strict_waits": STRICT_WAITS,
}
#: what the app reads besides: the default database's folder, the secret variables' key
OTHERS = (DATA_DIR, SECRET_KEY)


def _in_order() -> tuple[Setting, ...]:
    found = []
    for setting in FIELDS.values():
        found.append(setting)
        found.extend({DATABASE_URL: (DATA_DIR,), WORK_DIR: (SECRET_KEY,)}.get(setting, ()))
    return tuple(found)


#: every setting of the app, in the order of its table
SETTINGS: tuple[Setting, ...] = _in_order()

#: variables the docs name beside the settings: Slipway sets them, nobody configures them
SET_BY_SLIPWAY = (
    ("SLIPWAY_PREVIEW", "(not a setting)",
     ("not read by Slipway: the variable `1` a preview service's containers get beside their parent's variables "
      "([Preview environments](api/git-and-ai.md#preview-environments)), so an app can tell a preview from "
      "production")),
    ("PROMETHEUS_MULTIPROC_DIR", "managed",
     ("set by `slipway serve --workers N` (N > 1) to a fresh directory per start, removed on exit; do not set "
      "it yourself")),
)


# --- the plugins' settings ---------------------------------------------------------------


class DuplicateSetting(ValueError):
    """Two declarations of one variable (a plugin's and the app's, or two plugins')."""


def _plugin_name(name: str, plugin) -> str:
    module = getattr(plugin, "__name__", "") or ""
    return module.split(".", 1)[1] if module.startswith("plugins.") else name


def builtin(plugin) -> bool:
    """A plugin of this package (``plugins.*``, ``app.*``), not one installed beside it."""
    return (getattr(plugin, "__name__", "") or "").startswith(("plugins.", "app."))


def plugin_settings(pm, *, builtin_only: bool = False) -> list[tuple[Setting, tuple[str, ...]]]:
    """What the loaded plugins declare in their ``SETTINGS`` and the app does not, each
    once with the plugins declaring it, in the order found (plugins by name). The same
    variable declared twice by different declarations is a :class:`DuplicateSetting`."""
    own = {setting.env: setting for setting in SETTINGS}
    found: dict[str, tuple[Setting, list[str]]] = {}
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: item[0] or ""):
        if plugin is None or (builtin_only and not builtin(plugin)):
            continue
        for setting in getattr(plugin, "SETTINGS", ()) or ():
            known = own.get(setting.env) or found.get(setting.env, (None,))[0]
            if known is not None and known is not setting:
                raise DuplicateSetting(f"{setting.env} is declared twice (plugin {name!r} declares its own)")
            if setting.env in own:
                continue
            found.setdefault(setting.env, (setting, []))[1].append(_plugin_name(name, plugin))
    return [(setting, tuple(readers)) for setting, readers in found.values()]


def declared(pm) -> dict[str, Setting]:
    """Every declared setting by variable: the app's and the loaded plugins'."""
    return {setting.env: setting for setting in SETTINGS} | \
        {setting.env: setting for setting, _ in plugin_settings(pm)}


# --- docs/configuration.md -----------------------------------------------------------------

BEGIN = ("<!-- the settings tables: generated from the declarations (app/config_table.py, the plugins' "
         "SETTINGS) by `python -m app.config --markdown --write docs/configuration.md`; do not edit -->")
END = "<!-- end of the generated settings tables -->"


def markdown(pm) -> str:
    """The settings tables of docs/configuration.md, from the declarations: the app's,
    the built-in plugins', and the variables Slipway sets itself (between :data:`BEGIN`
    and :data:`END`)."""
    lines = [BEGIN, "", "| variable | default | meaning |", "|---|---|---|"]
    lines += [f"| `{s.env}` | {s.shown_default()} | {s.doc} |" for s in SETTINGS]
    lines += ["", ("The built-in plugins' settings, each read by the plugins named (an installed plugin's own "
                   "are listed by `slipway settings`):"), "",
              "| variable | default | meaning | read by |", "|---|---|---|---|"]
    lines += [f"| `{s.env}` | {s.shown_default()} | {s.doc} | {', '.join(f'`{r}`' for r in readers)} |"
              for s, readers in plugin_settings(pm, builtin_only=True)]
    lines += ["", "Set by Slipway, not settings:", "", "| variable | default | meaning |", "|---|---|---|"]
    lines += [f"| `{env}` | {shown} | {doc} |" for env, shown, doc in SET_BY_SLIPWAY]
    return "\n".join(lines + ["", END])


def replace_tables(page: str, tables: str) -> str:
    """``page`` with the generated tables (between the markers) replaced by ``tables``."""
    before, begin, rest = page.partition(BEGIN)
    _, end, after = rest.partition(END)
    if not begin or not end:
        raise ValueError("the page has no generated settings tables (the markers are missing)")
    return before + tables + after
