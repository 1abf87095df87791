"""The compose language of deploy plans: every deploy method's plan is compose text
parsed here into components (the ``compose`` method, ``plugins.deploy_compose``, runs
it as written).

Supported per service: ``image``, ``command``, ``environment``, ``ports``, ``volumes``
(named volumes only), ``depends_on`` (start order), ``healthcheck``, ``cpus`` and
``mem_limit``; top level: ``services``, ``volumes`` and the obsolete ``version``. Keys
starting with ``x-`` (compose extension fields) are ignored at the top level and in a
service; any other key is a 422 naming it, never silently dropped.

The text is read as ``docker compose`` reads it (see :mod:`core.panel.compose.loader`,
the one reader of every compose text: YAML 1.2, at most 128 KiB and 10,000 nodes after
expanding aliases, checked before anything is built) and its string values are
interpolated as the compose specification says (``$VAR``, ``${VAR}``, ``$$``,
``${VAR:-default}``, ``${VAR-default}``, ``${VAR:+alt}``, ``${VAR+alt}``,
``${VAR:?message}``, ``${VAR?message}``, nested defaults) from the service's
``variables``; a ``?`` form whose variable is missing is a 422 on ``variables.NAME``.

Ports are ``CONTAINER`` or ``HOST:CONTAINER`` (``/tcp`` or ``/udp``), or the long form
``{target, published, protocol}``. A host port must lie in ``SLIPWAY_HOST_PORTS``
(``LOW-HIGH``, default ``20000-29999``); a host address (``IP:HOST:CONTAINER``,
``host_ip``) is refused: ports are published on the operator's address. Port ranges are
not supported.
"""
from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Mapping

from core.errors import Invalid
from core.panel.compose.loader import MAX_BYTES, MAX_NODES, dump_compose, interpolate, load_compose
from core.panel.compose.plan import Component, DeployPlan
from core.panel.containers import Healthcheck, PortSpec

SERVICE_KEYS = {"image", "command", "environment", "ports", "volumes", "depends_on", "healthcheck", "cpus",
                "mem_limit", "labels"}
TOP_KEYS = {"services", "volumes", "version"}
DEFAULT_HOST_PORTS = (20000, 29999)
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)")
MAX_SERVICES = 100  # services (containers) in one compose definition
MAX_PORTS = 32  # published ports in one compose definition: the host-port range is shared by every customer
MAX_DURATION_S = 86400.0  # healthcheck interval and start_period
MAX_HEALTHCHECK_TIMEOUT_S = 60.0  # a healthcheck runs in the engine on the panel's behalf: keep it short
_PORT_RANGE = re.compile(r"^\s*(\d{1,5})\s*-\s*(\d{1,5})\s*$")


def _bad(message: str, field: str = "compose"):
    return Invalid("invalid compose definition", fields={field: message})


def host_port_range(settings: Mapping[str, str]) -> tuple[int, int]:
    """``SLIPWAY_HOST_PORTS`` (``LOW-HIGH``, inclusive; default ``20000-29999``): the host
    ports a compose definition may name. A ``ValueError`` names the variable."""
    raw = (settings.get("SLIPWAY_HOST_PORTS") or "").strip()
    if not raw:
        return DEFAULT_HOST_PORTS
    match = _PORT_RANGE.match(raw)
    low, high = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"SLIPWAY_HOST_PORTS: expected LOW-HIGH with 1 <= LOW <= HIGH <= 65535, e.g. "
                         f"20000-29999 (got {raw!r})")
    return low, high


def _duration(value, where: str, most: float = MAX_DURATION_S) -> float:
    """A compose duration (``1m30s``, or a number of seconds) of at most ``most`` seconds."""
    if isinstance(value, bool):
        raise _bad(f"{where}: not a duration: {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip()
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise _bad(f"{where}: not a duration: {value!r}")
        scale = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 0.000001}
        seconds = sum(float(n) * scale[u] for n, u in parts)
    if not 0 <= seconds <= most:  # also NaN and inf
        raise _bad(f"{where}: a duration from 0 to {most:g} s")
    return seconds


def _port_number(text, what: str, item, where: str) -> int:
    text = str(text).strip()
    if "-" in text:
        raise _bad(f"{where}: port ranges are not supported ({item!r})")
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise _bad(f"{where}: unsupported port {item!r} ({what} must be a number from 1 to 65535)")
    return int(text)


def _port(item, where: str, host_ports: tuple[int, int]) -> PortSpec:
    if isinstance(item, dict):  # the long syntax
        if "host_ip" in item:
            raise _bad(f"{where}: {item!r} sets host_ip; ports are published on the address the operator "
                       "chose, leave host_ip out")
        unknown = set(item) - {"target", "published", "protocol"}
        if unknown:
            raise _bad(f"unsupported key {where}.{sorted(unknown)[0]}")
        if item.get("target") is None or isinstance(item["target"], bool):
            raise _bad(f"{where}: the long syntax needs target (the container port)")
        container = _port_number(item["target"], "target", item, where)
        published = item.get("published")
        host = None if published in (None, "") else _port_number(published, "published", item, where)
        proto = item.get("protocol") or "tcp"
    elif isinstance(item, (str, int)) and not isinstance(item, bool):
        text, proto = str(item).strip(), "tcp"
        if "/" in text:
            text, proto = text.rsplit("/", 1)
        parts = text.split(":")
        if text.startswith("[") or len(parts) > 2:
            raise _bad(f"{where}: {item!r} names a host address; ports are published on the address the operator "
                       "chose, write HOST:CONTAINER or CONTAINER")
        container = _port_number(parts[-1], "the container port", item, where)
        host = _port_number(parts[0], "the host port", item, where) if len(parts) == 2 and parts[0] else None
    else:
        raise _bad(f"{where}: unsupported port {item!r} (use CONTAINER or HOST:CONTAINER)")
    if proto not in ("tcp", "udp"):
        raise _bad(f"{where}: unsupported protocol {proto!r} in {item!r} (tcp or udp)")
    low, high = host_ports
    if host is not None and not low <= host <= high:
        raise _bad(f"{where}: host port {host} is outside the ports this panel allows ({low}-{high}); "
                   "leave the host port out to get a free one")
    return PortSpec(container, host, proto)


def _ports(raw, where: str, host_ports: tuple[int, int] = DEFAULT_HOST_PORTS) -> tuple:
    if raw is not None and not isinstance(raw, list):
        raise _bad(f"{where}: a list of ports, e.g. [\"8080\"]")
    return tuple(_port(item, where, host_ports) for item in raw or [])


def _volumes(raw, declared: set, where: str) -> tuple:
    if raw is not None and not isinstance(raw, list):
        raise _bad(f"{where}: a list of NAME:/path entries")
    out = []
    for item in raw or []:
        parts = str(item).split(":")
        if len(parts) not in (2, 3) or not _NAME.match(parts[0]) or not parts[1].startswith("/"):
            raise _bad(f"{where}: only named volumes are supported (NAME:/path), got {item!r}")
        if parts[0] not in declared:
            raise _bad(f"{where}: volume {parts[0]!r} is not declared under top-level volumes")
        out.append((parts[0], parts[1]))
    return tuple(out)


def _env_value(value, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise _bad(f"{where}: a string, a number or a boolean")
    return str(value)


def _environment(raw, where: str) -> dict:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return {str(k): _env_value(v, f"{where}.{k}") for k, v in raw.items()}
    if isinstance(raw, list):
        env = {}
        for item in raw:
            key, _, value = str(item).partition("=")
            env[key] = value
        return env
    raise _bad(f"{where}: environment must be a map or a list")


def _labels(raw, where: str) -> dict:
    """A component's ``labels`` (a map, or a list of ``key=value``): read by Slipway (e.g.
    ``slipway.backup``), never put on its container, whose ``slipway.*`` labels are Slipway's."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        if any(isinstance(v, (dict, list)) for v in raw.values()):
            raise _bad(f"{where}: label values are strings")
        return {str(k): "" if v is None else str(v) for k, v in raw.items()}
    if isinstance(raw, list):
        return dict(str(item).partition("=")[::2] for item in raw)
    raise _bad(f"{where}: labels must be a map or a list")


def _healthcheck(raw, where: str):
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad(f"{where}: healthcheck must be a map")
    unknown = set(raw) - {"test", "interval", "timeout", "retries", "start_period", "disable"}
    if unknown:
        raise _bad(f"unsupported key {where}.{sorted(unknown)[0]}")
    if _boolean(raw.get("disable", False), f"{where}.disable"):
        return None
    test = raw.get("test")
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if not isinstance(test, list) or not test or test[0] not in ("CMD", "CMD-SHELL", "NONE"):
        raise _bad(f"{where}.test: a list starting with CMD or CMD-SHELL, or a string")
    if test[0] == "NONE":
        return None
    return Healthcheck(test=tuple(str(t) for t in test),
                       interval_s=_duration(raw.get("interval", "30s"), f"{where}.interval"),
                       timeout_s=_duration(raw.get("timeout", "30s"), f"{where}.timeout", MAX_HEALTHCHECK_TIMEOUT_S),
                       retries=_retries(raw.get("retries", 3), f"{where}.retries"),
                       start_period_s=_duration(raw.get("start_period", "0s"), f"{where}.start_period"))


def _boolean(value, where: str) -> bool:
    text = str(value).strip().lower() if isinstance(value, str) else None
    if isinstance(value, bool) or text in ("true", "false"):
        return value if isinstance(value, bool) else text == "true"
    raise _bad(f"{where}: true or false")


def _retries(value, where: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():  # an interpolated number
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
        raise _bad(f"{where}: a whole number from 0 to 1000")
    return value


def _command(value, where: str):
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise _bad(f"{where}: {exc}") from None
    if isinstance(value, list) and all(isinstance(part, (str, int, float)) and not isinstance(part, bool)
                                       for part in value):
        return tuple(str(part) for part in value)
    raise _bad(f"{where}: a string or a list of strings")


def _start_order(components: dict) -> list:
    order: list = []
    state: dict[str, str] = {}

    def visit(name, chain):
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise _bad("depends_on has a cycle: " + " -> ".join(chain + [name]))
        state[name] = "visiting"
        for dep in components[name].depends_on:
            visit(dep, chain + [name])
        state[name] = "done"
        order.append(components[name])

    for name in sorted(components):
        visit(name, [])
    return order


def _cpus(value, where: str) -> float | None:
    if value is None:
        return None
    try:
        cpus = float(value)
    except (TypeError, ValueError, OverflowError):
        cpus = -1.0
    if isinstance(value, bool) or not 0.01 <= cpus <= 1024:
        raise _bad(f"{where}: a number of CPUs from 0.01 to 1024, e.g. 0.5")
    return cpus


_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*([bkmg]?)b?$", re.IGNORECASE)
_MEMORY_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


def _memory_mb(value, where: str) -> int | None:
    """Compose byte values: an integer (bytes) or a number with b, k, m or g."""
    if value is None:
        return None
    match = _MEMORY.match(str(value).strip()) if not isinstance(value, bool) else None
    size = float(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()] if match else 0
    if size < 6 * 1024 ** 2:
        raise _bad(f"{where}: a size of at least 6m, e.g. 256m or 1g")
    return int(size // 1024 ** 2)


def parse_compose(text: str, variables: dict | None = None, *,
                  host_ports: tuple[int, int] = DEFAULT_HOST_PORTS) -> DeployPlan:
    """Parse compose text into a plan, or raise ``Invalid`` with ``fields["compose"]``
    (``fields["variables.NAME"]`` for a missing ``${NAME:?message}``). ``host_ports``:
    the inclusive range host ports must lie in (``SLIPWAY_HOST_PORTS``)."""
    try:
        return _parse(text, variables or {}, host_ports)
    except Invalid:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:  # a shape no rule foresaw
        raise _bad(f"malformed compose definition: {exc}") from None


def _extension(key) -> bool:
    return isinstance(key, str) and key.startswith("x-")


def _parse(text: str, variables: dict, host_ports: tuple[int, int]) -> DeployPlan:
    document = load_compose(text, variables)
    if not isinstance(document, dict) or not isinstance(document.get("services"), dict) or not document["services"]:
        raise _bad("needs a non-empty services map")
    unknown = {k for k in document if not _extension(k)} - TOP_KEYS
    if unknown:
        raise _bad(f"unsupported key {sorted(unknown)[0]}")
    if not isinstance(document.get("volumes") or {}, dict):
        raise _bad("volumes: a map of volume names, e.g. {data: {}}")
    declared = {str(name) for name in (document.get("volumes") or {})}
    if len(document["services"]) > MAX_SERVICES:
        raise _bad(f"services: at most {MAX_SERVICES} services in one compose definition")
    components = {}
    for name, raw in document["services"].items():
        where = f"services.{name}"
        if not _NAME.match(str(name)):
            raise _bad(f"{where}: service names are lower-case letters, digits, '.', '_' and '-'")
        if not isinstance(raw, dict):
            raise _bad(f"{where}: must be a map")
        unknown = {k for k in raw if not _extension(k)} - SERVICE_KEYS
        if unknown:
            raise _bad(f"unsupported key {where}.{sorted(unknown)[0]}")
        if not raw.get("image"):
            raise _bad(f"{where}: image is required")
        command = _command(raw.get("command"), f"{where}.command")
        if not isinstance(raw["image"], str):
            raise _bad(f"{where}.image: a string")
        depends = raw.get("depends_on") or []
        depends = list(depends) if isinstance(depends, (list, dict)) else None
        if depends is None:
            raise _bad(f"{where}.depends_on: a list or a map")
        components[name] = Component(
            name=name, image=str(raw["image"]), command=tuple(str(c) for c in command) if command else None,
            environment=_environment(raw.get("environment"), f"{where}.environment"),
            labels=_labels(raw.get("labels"), f"{where}.labels"),
            ports=_ports(raw.get("ports"), f"{where}.ports", host_ports),
            volumes=_volumes(raw.get("volumes"), declared, f"{where}.volumes"),
            depends_on=tuple(str(d) for d in depends), healthcheck=_healthcheck(raw.get("healthcheck"),
                                                                                f"{where}.healthcheck"),
            cpus=_cpus(raw.get("cpus"), f"{where}.cpus"), memory_mb=_memory_mb(raw.get("mem_limit"),
                                                                             f"{where}.mem_limit"))
    for component in components.values():
        for dep in component.depends_on:
            if dep not in components:
                raise _bad(f"services.{component.name}.depends_on: no service {dep!r}")
    published = sum(1 for component in components.values() for port in component.ports)
    if published > MAX_PORTS:
        raise _bad(f"ports: at most {MAX_PORTS} published ports in one compose definition (found {published}); "
                   "host ports are shared by every customer")
    return DeployPlan(compose=text, components=tuple(_start_order(components)), volumes=tuple(sorted(declared)),
                      variables=dict(variables))


def compose_parser(host_ports: tuple[int, int] = DEFAULT_HOST_PORTS):
    """``parse(text, variables)``: :func:`parse_compose` with the operator's host-port range
    (``SLIPWAY_HOST_PORTS``, read once into the app's configuration), the one reading of
    compose for the deploy jobs, the API and backups whatever the deploy method."""
    low, high = host_ports
    return functools.partial(parse_compose, host_ports=(low, high))


__all__ = ["Component", "DeployPlan", "compose_parser", "DEFAULT_HOST_PORTS", "MAX_BYTES", "MAX_NODES", "SERVICE_KEYS",
           "dump_compose", "host_port_range", "interpolate", "load_compose", "parse_compose"]

