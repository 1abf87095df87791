"""Deploy method ``compose``: run a compose definition as one service.

Supported per service: ``image``, ``command``, ``environment``, ``ports``, ``volumes``
(named volumes only), ``depends_on`` (start order) and ``healthcheck``; top level:
``services``, ``volumes`` and the obsolete ``version``. Any other key is a 422 naming it,
never silently dropped. Text is interpolated as the compose specification says (``$VAR``,
``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``$$``) from the service's
``variables``.
"""
from __future__ import annotations

import re
import shlex

import yaml

from core.errors import Invalid
from ports import hookimpl
from ports.deploy import Component, DeployMethod, DeployPlan
from ports.runtime import Healthcheck, PortSpec

SERVICE_KEYS = {"image", "command", "environment", "ports", "volumes", "depends_on", "healthcheck", "cpus",
                "mem_limit"}
TOP_KEYS = {"services", "volumes", "version"}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_VAR = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)")


def _bad(message: str, field: str = "compose"):
    return Invalid("invalid compose definition", fields={field: message})


def interpolate(text: str, variables: dict) -> str:
    def replace(match):
        dollar, braced, op, default, bare = match.groups()
        if dollar:
            return "$"
        name = braced or bare
        value = variables.get(name)
        if op == ":-" and not value:
            return default
        if op == "-" and value is None:
            return default
        return value or ""

    return _VAR.sub(replace, text)


def _duration(value, where: str) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise _bad(f"{where}: not a duration: {value!r}")
    scale = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 0.000001}
    return sum(float(n) * scale[u] for n, u in parts)


def _ports(raw, where: str) -> tuple:
    if raw is not None and not isinstance(raw, list):
        raise _bad(f"{where}: a list of ports, e.g. [\"8080\"]")
    out = []
    for item in raw or []:
        text = str(item)
        proto = "tcp"
        if "/" in text:
            text, proto = text.split("/", 1)
        parts = text.split(":")
        try:
            if len(parts) == 1:
                out.append(PortSpec(int(parts[0]), None, proto))
            elif len(parts) == 2:
                out.append(PortSpec(int(parts[1]), int(parts[0]) if parts[0] else None, proto))
            else:
                raise ValueError
        except ValueError:
            raise _bad(f"{where}: unsupported port {item!r} (use CONTAINER or HOST:CONTAINER)") from None
    return tuple(out)


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


def _environment(raw, where: str) -> dict:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return {str(k): "" if v is None else str(v) for k, v in raw.items()}
    if isinstance(raw, list):
        env = {}
        for item in raw:
            key, _, value = str(item).partition("=")
            env[key] = value
        return env
    raise _bad(f"{where}: environment must be a map or a list")


def _healthcheck(raw, where: str):
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad(f"{where}: healthcheck must be a map")
    unknown = set(raw) - {"test", "interval", "timeout", "retries", "start_period", "disable"}
    if unknown:
        raise _bad(f"unsupported key {where}.{sorted(unknown)[0]}")
    if raw.get("disable"):
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
                       timeout_s=_duration(raw.get("timeout", "30s"), f"{where}.timeout"),
                       retries=_retries(raw.get("retries", 3), f"{where}.retries"),
                       start_period_s=_duration(raw.get("start_period", "0s"), f"{where}.start_period"))


def _retries(value, where: str) -> int:
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
    order, state = [], {}

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
    except (TypeError, ValueError):
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


def parse_compose(text: str, variables: dict | None = None) -> DeployPlan:
    """Parse compose text into a plan, or raise ``Invalid`` with ``fields["compose"]``."""
    try:
        return _parse(text, variables or {})
    except Invalid:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a shape no rule above foresaw
        raise _bad(f"malformed compose definition: {exc}") from None


def _parse(text: str, variables: dict) -> DeployPlan:
    try:
        document = yaml.safe_load(interpolate(text, variables))
    except yaml.YAMLError as exc:
        raise _bad(f"not valid YAML: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("services"), dict) or not document["services"]:
        raise _bad("needs a non-empty services map")
    unknown = set(document) - TOP_KEYS
    if unknown:
        raise _bad(f"unsupported key {sorted(unknown)[0]}")
    if not isinstance(document.get("volumes") or {}, dict):
        raise _bad("volumes: a map of volume names, e.g. {data: {}}")
    declared = {str(name) for name in (document.get("volumes") or {})}
    components = {}
    for name, raw in document["services"].items():
        where = f"services.{name}"
        if not _NAME.match(str(name)):
            raise _bad(f"{where}: service names are lower-case letters, digits, '.', '_' and '-'")
        if not isinstance(raw, dict):
            raise _bad(f"{where}: must be a map")
        unknown = set(raw) - SERVICE_KEYS
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
            ports=_ports(raw.get("ports"), f"{where}.ports"),
            volumes=_volumes(raw.get("volumes"), declared, f"{where}.volumes"),
            depends_on=tuple(str(d) for d in depends), healthcheck=_healthcheck(raw.get("healthcheck"),
                                                                                f"{where}.healthcheck"),
            cpus=_cpus(raw.get("cpus"), f"{where}.cpus"), memory_mb=_memory_mb(raw.get("mem_limit"),
                                                                             f"{where}.mem_limit"))
    for component in components.values():
        for dep in component.depends_on:
            if dep not in components:
                raise _bad(f"services.{component.name}.depends_on: no service {dep!r}")
    return DeployPlan(compose=text, components=tuple(_start_order(components)), volumes=tuple(sorted(declared)),
                      variables=dict(variables))


class ComposeDeploy(DeployMethod):
    name = "compose"
    request_schema = {
        "required": ["compose"],
        "properties": {"compose": {"type": "string", "minLength": 1},
                       "variables": {"type": "object", "additionalProperties": {"type": "string"}}},
    }

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        return parse_compose(request["compose"], request.get("variables") or {})


@hookimpl
def register_deploy_methods():
    return [ComposeDeploy()]
