"""Pure translations between engine output (Docker-shaped inspect, logs, stats, build
streams) and the port's dataclasses; no client calls here."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

from ports.runtime import ContainerState, Healthcheck, LogLine, Usage

NANOSECONDS = 1_000_000_000
MESSAGE_LIMIT = 400
BUILD_TAIL_LINES = 12

_TIMESTAMP = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:?\d{2})?$")
_STATUSES = {"stopped": "exited", "configured": "created", "initialized": "created"}


# --- small helpers ------------------------------------------------------------------------


def nanoseconds(seconds: float) -> int:
    return int(round(float(seconds) * NANOSECONDS))


def number(value, default: float = 0.0) -> float:
    """``value`` as a float, ``default`` for anything missing or not numeric."""
    if isinstance(value, bool):
        return default
    if isinstance(value, (int, float)):
        return float(value) if value == value else default  # NaN
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return default
    return default


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_text(exc: BaseException) -> str:
    """The engine's own words for a client exception (both clients keep them in ``explanation``)."""
    explanation = getattr(exc, "explanation", None)
    if isinstance(explanation, bytes):
        explanation = explanation.decode("utf-8", "replace")
    return shorten(explanation or str(exc) or type(exc).__name__)


def status_code(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    if isinstance(code, int):
        return code
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


#: what an engine says, with a status other than 404, when what a call needs has been
#: removed: Podman answers a start whose container's network a delete removed meanwhile
#: with a 500 "unable to find network with name or ID ...: network not found"
_GONE_WORDS = re.compile(r"network not found|no such network|no such container", re.IGNORECASE)


def is_gone(exc: BaseException) -> bool:
    """Whether a client exception says that what the call named (or needs: its network)
    is no longer in the engine: a 404, or an engine's words for it under another status."""
    return status_code(exc) == 404 or bool(_GONE_WORDS.search(error_text(exc)))


def parse_timestamp(text: str) -> datetime | None:
    """An RFC 3339 time (nanoseconds trimmed to microseconds) as an aware datetime."""
    match = _TIMESTAMP.match((text or "").strip())
    if not match:
        return None
    day, clock, fraction, zone = match.groups()
    micro = (fraction or "0")[:6].ljust(6, "0")
    if zone in (None, "Z", "z"):
        offset = "+0000"
    else:
        offset = zone.replace(":", "")
    try:
        return datetime.strptime(f"{day}T{clock}.{micro}{offset}", "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        return None


def parse_ulimits(text: str) -> tuple:
    """``"nofile=1024:2048 nproc=512"`` -> ``(("nofile", 1024, 2048), ("nproc", 512, 512))``."""
    limits = []
    for item in re.split(r"[,\s]+", (text or "").strip()):
        if not item:
            continue
        name, sep, values = item.partition("=")
        soft, _, hard = values.partition(":")
        try:
            soft_value = int(soft)
            hard_value = int(hard) if hard else soft_value
        except ValueError:
            raise ValueError(f"bad ulimit {item!r}: expected name=soft[:hard]") from None
        if not sep or not name:
            raise ValueError(f"bad ulimit {item!r}: expected name=soft[:hard]")
        limits.append((name.strip().lower(), soft_value, hard_value))
    return tuple(limits)


# --- inspect ------------------------------------------------------------------------------


def has_healthcheck(attrs: dict) -> bool:
    config = (attrs.get("Config") or {}).get("Healthcheck") or {}
    test = config.get("Test") or []
    return bool(test) and test[0] != "NONE"


def published_ports(attrs: dict) -> dict:
    """{container port: host port} from NetworkSettings.Ports (running) or the bindings."""
    found = {}
    for source in ((attrs.get("NetworkSettings") or {}).get("Ports"),
                   (attrs.get("HostConfig") or {}).get("PortBindings")):
        for key, bindings in sorted((source or {}).items(), key=lambda item: not item[0].endswith("/tcp")):
            port = str(key).split("/", 1)[0]
            if not port.isdigit() or int(port) in found:
                continue
            for binding in bindings or ():
                host_port = str((binding or {}).get("HostPort") or "")
                if host_port.isdigit() and int(host_port) > 0:
                    found[int(port)] = int(host_port)
                    break
    return found


# the network option that makes netavark drop traffic between a bridge network and any
# other isolated one (Podman 4; Docker isolates its bridge networks without being asked)
ISOLATE = {"isolate": "true"}


def network_isolation(attrs: dict) -> dict | None:
    """None when a libpod network inspect (``options``) says the network is isolated;
    else the options it has (what an error names)."""
    options = (attrs or {}).get("options") or {}
    return None if str(options.get("isolate", "")).lower() in ("true", "strict") else dict(options)


def listed_host_ports(entry: dict) -> set:
    """Host ports of one container list entry: libpod's ``Ports`` (``host_port`` and
    ``range``) or the Docker API's (``PublicPort``)."""
    found = set()
    for binding in (entry or {}).get("Ports") or ():
        if not isinstance(binding, dict):
            continue
        first = int(number(binding.get("host_port", binding.get("PublicPort"))))
        count = max(int(number(binding.get("range"), 1)), 1)
        if first > 0:
            found.update(range(first, first + count))
    return found


def state_from_attrs(attrs: dict) -> ContainerState:
    state = attrs.get("State") or {}
    if isinstance(state, str):  # a list entry rather than an inspect
        state = {"Status": state}
    status = str(state.get("Status") or "unknown").lower()
    status = _STATUSES.get(status, status)
    health = None
    if has_healthcheck(attrs):
        health = ((state.get("Health") or state.get("Healthcheck") or {}).get("Status") or "starting").lower()
    return ContainerState(
        id=attrs.get("Id") or attrs.get("ID") or "",
        name=str(attrs.get("Name") or "").lstrip("/"),
        status=status,
        running=bool(state.get("Running")) and not state.get("Paused"),
        health=health,
        ports=published_ports(attrs),
        labels=dict((attrs.get("Config") or {}).get("Labels") or {}),
        cpu_limit=cpu_limit_percent(attrs.get("HostConfig") or {}),
        exit_code=None if state.get("Running") or state.get("ExitCode") is None else int(number(state["ExitCode"])),
    )


def cpu_limit_percent(host_config: dict) -> float:
    """The container's CPU limit in percent of one core, from ``NanoCpus`` or from
    ``CpuQuota``/``CpuPeriod`` (what Podman reports for ``--cpus``); 0 without a limit."""
    nano = number(host_config.get("NanoCpus"))
    if nano > 0:
        return round(nano / 1e7, 3)
    quota, period = number(host_config.get("CpuQuota")), number(host_config.get("CpuPeriod"))
    if quota > 0 and period > 0:
        return round(quota / period * 100, 3)
    return 0.0


def healthcheck_due(attrs: dict, now: datetime, slack_s: float = 1.0) -> bool:
    """Whether a running container's healthcheck is overdue: its last check (or its
    start) is more than one interval (plus ``slack_s``) ago. Engines that schedule checks
    themselves are never that late; Podman without systemd never runs them at all."""
    state = attrs.get("State") or {}
    if not isinstance(state, dict) or not state.get("Running") or state.get("Paused"):
        return False
    if not has_healthcheck(attrs):
        return False
    config = (attrs.get("Config") or {}).get("Healthcheck") or {}
    interval = number(config.get("Interval")) / NANOSECONDS or 30.0
    health = state.get("Health") or state.get("Healthcheck") or {}
    times = [parse_timestamp(entry.get("End") or entry.get("Start") or "")
             for entry in (health.get("Log") or ()) if isinstance(entry, dict)]
    times = [t for t in times if t is not None]
    last = max(times) if times else parse_timestamp(state.get("StartedAt") or "")
    if last is None or last.year < 2000:
        return True
    return now - last >= timedelta(seconds=interval + slack_s)


def healthcheck_call_timeout(attrs: dict, slack_s: float = 30.0) -> float:
    """Seconds to allow a call that runs the healthcheck: its own timeout plus slack."""
    config = (attrs.get("Config") or {}).get("Healthcheck") or {}
    return number(config.get("Timeout")) / NANOSECONDS + slack_s


# --- logs ---------------------------------------------------------------------------------


def parse_log(data, stream: str) -> list[LogLine]:
    """Lines ``<RFC 3339 time> <message>`` (the engines' ``timestamps=True`` form)."""
    if isinstance(data, (bytes, bytearray)):
        text = bytes(data).decode("utf-8", "replace")
    else:
        text = "".join(chunk.decode("utf-8", "replace") if isinstance(chunk, (bytes, bytearray)) else str(chunk)
                       for chunk in (data or ()))
    lines = []
    for raw in text.split("\n"):
        if not raw:
            continue
        stamp, _, message = raw.partition(" ")
        when = parse_timestamp(stamp)
        if when is None:  # not a timestamped line: keep it, glued to the previous time
            when = lines[-1].timestamp if lines else datetime.fromtimestamp(0, timezone.utc)
            message = raw
        lines.append(LogLine(timestamp=when, stream=stream, message=message.rstrip("\r")))
    return lines


def merge_logs(stdout: list, stderr: list, tail: int | None, since: datetime | None) -> list[LogLine]:
    """Both streams in time order (stable: equal times keep each stream's order, stdout
    first), the last ``tail`` of them. Each stream was asked for its last ``tail`` lines:
    Docker applies ``tail`` per stream and Podman to both streams before filtering, and
    either way the last ``tail`` of the union are the right ones."""
    lines = sorted(list(stdout) + list(stderr), key=lambda line: line.timestamp)
    if since is not None:
        floor = as_utc(since).replace(microsecond=0)  # engines compare in whole seconds
        lines = [line for line in lines if line.timestamp >= floor]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    return lines


def as_utc(when: datetime) -> datetime:
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


# --- stats --------------------------------------------------------------------------------


def usage_from_stats(stats) -> Usage:
    """CPU % and memory MB from either stats shape (libpod's ``{"Stats": [...]}`` or
    Docker's ``cpu_stats``/``memory_stats``); zeros for whatever is missing."""
    if isinstance(stats, list):
        stats = stats[0] if stats else {}
    if not isinstance(stats, dict):
        return Usage(0.0, 0.0, 0.0)
    if isinstance(stats.get("Stats"), list):
        entries = [entry for entry in stats["Stats"] if isinstance(entry, dict)]
        stats = entries[0] if entries else {}
    if "MemUsage" in stats or "CPU" in stats:  # libpod
        cpu = number(stats.get("CPU"))
        memory = number(stats.get("MemUsage"))
        limit = number(stats.get("MemLimit"))
    else:
        cpu = _docker_cpu_percent(stats)
        memory_stats = stats.get("memory_stats") or {}
        details = memory_stats.get("stats") or {}
        memory = number(memory_stats.get("usage"))
        cache = number(details.get("inactive_file", details.get("total_inactive_file", details.get("cache"))))
        if 0 < cache <= memory:
            memory -= cache
        limit = number(memory_stats.get("limit"))
    mb = 1024.0 * 1024.0
    return Usage(cpu_percent=round(max(cpu, 0.0), 3), memory_mb=round(max(memory, 0.0) / mb, 3),
                 memory_limit_mb=round(max(limit, 0.0) / mb, 3))


def _docker_cpu_percent(stats: dict) -> float:
    cpu, pre = stats.get("cpu_stats") or {}, stats.get("precpu_stats") or {}
    total = number((cpu.get("cpu_usage") or {}).get("total_usage"))
    pre_total = number((pre.get("cpu_usage") or {}).get("total_usage"))
    system = number(cpu.get("system_cpu_usage"))
    pre_system = number(pre.get("system_cpu_usage"))
    cpus = number(cpu.get("online_cpus")) or len((cpu.get("cpu_usage") or {}).get("percpu_usage") or ()) or 1
    cpu_delta, system_delta = total - pre_total, system - pre_system
    if cpu_delta <= 0 or system_delta <= 0:
        return 0.0
    return cpu_delta / system_delta * cpus * 100.0


# --- create arguments ---------------------------------------------------------------------


def healthcheck_nanoseconds(check: Healthcheck) -> dict:
    """The healthcheck in the engines' unit (nanoseconds), snake-case keys."""
    test = [check.test] if isinstance(check.test, str) else [str(part) for part in check.test]
    if test and test[0] not in ("CMD", "CMD-SHELL", "NONE"):
        test = ["CMD", *test]
    return {"test": test, "interval": nanoseconds(check.interval_s), "timeout": nanoseconds(check.timeout_s),
            "retries": int(check.retries), "start_period": nanoseconds(check.start_period_s)}


def port_bindings(ports, address: str) -> dict:
    """{"8080/tcp": (address, host port)} as both clients take ``ports=``: bound to
    ``address`` only. Every port has its host port by now (``ClientRuntime.run`` picks the
    missing ones; the engine never chooses)."""
    bindings = {}
    for port in ports:
        if port.host_port is None:
            raise ValueError(f"port {port.container_port} has no host port")
        bindings[f"{port.container_port}/{port.protocol or 'tcp'}"] = (address, int(port.host_port))
    return bindings


def volume_binds(volumes) -> dict:
    return {name: {"bind": path, "mode": "rw"} for name, path in volumes}


# --- builds and pulls ---------------------------------------------------------------------


def stream_events(chunks):
    """Decoded JSON events from a build or pull stream (dicts, bytes or str, possibly
    several JSON documents per chunk)."""
    for chunk in chunks or ():
        if isinstance(chunk, dict):
            yield chunk
            continue
        if isinstance(chunk, (bytes, bytearray)):
            chunk = bytes(chunk).decode("utf-8", "replace")
        for piece in str(chunk).splitlines():
            piece = piece.strip()
            if not piece:
                continue
            try:
                event = json.loads(piece)
            except ValueError:
                event = {"stream": piece}
            if isinstance(event, dict):
                yield event


def event_error(event: dict) -> str | None:
    error = event.get("error") or (event.get("errorDetail") or {}).get("message")
    return str(error).strip() if error else None


def output_lines(chunks) -> list[str]:
    """The human-readable lines of a build or pull stream."""
    lines = []
    for event in stream_events(chunks):
        text = event.get("stream")
        if text is None:
            text = event_error(event) or event.get("status")
            if text and event.get("progress"):
                text = f"{text} {event['progress']}"
        for line in str(text or "").splitlines():
            if line.strip():
                lines.append(line.rstrip())
    return lines


def build_failure(tag: str, reason, lines: list[str]) -> str:
    reason = shorten(str(reason or "build failed").strip(), 300)
    tail = [line for line in lines if line.strip() != reason][-BUILD_TAIL_LINES:]
    return "\n".join([f"building {tag} failed: {reason}", *tail])
