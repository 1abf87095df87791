"""Operations: request ids, the access log, secret-free JSON logs and Prometheus metrics.

``Observer`` wraps the ASGI app (``SlipwayApp.__call__``): every HTTP response and every
WebSocket handshake answer carries ``X-Request-Id`` (the client's value when it is 1-128
visible ASCII characters, else a generated one), and every request ends with one access
line (``request_id``, method, API, operation id, status, duration in ms) on the
``slipway.access`` logger. Log lines written while a request runs carry its request id.

``JsonFormatter`` (``SLIPWAY_LOG_FORMAT=json``, the default) writes one JSON object per
line, ``TextFormatter`` one readable line; both pass every string through ``redact``, so
tokens, keys, cookies, passwords and credentials in URLs never reach a log.

Metrics (prometheus-client) are created once per process (``metrics()``). When
``PROMETHEUS_MULTIPROC_DIR`` is set (``slipway serve --workers N`` sets it to a fresh
directory) each worker writes its samples there and ``/metrics`` adds them up, so the
numbers are the server's whichever worker answers.
"""
from __future__ import annotations

import contextvars
import functools
import json
import logging
import os
import re
import threading
import time
from datetime import datetime, timezone

import orjson

from core.redaction import redact_userinfo

REQUEST_ID_HEADER = b"x-request-id"
UNKNOWN_OPERATION = "unknown"  # routes and methods no contract has: one fixed label, never the raw path
MAX_REQUEST_ID = 128
#: the client's method and path are logged (and redacted) up to this long: a server may let
#: a request line of 16 KiB through (h11), and no method is longer than 17 characters
MAX_LOGGED_METHOD, MAX_LOGGED_PATH = 32, 512
_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("slipway_request_id", default=None)
ACCESS_LOGGER = "slipway.access"
access_log = logging.getLogger(ACCESS_LOGGER)

# --- secrets out of every log line ---------------------------------------------------------

# Every pattern below costs time linear in its input: no quantifier is nested around a
# keyword, and a name (``[a-z_\-]`` characters) is read once, from its first character,
# never again from each of its word starts (``/key-key-key-...`` cost the former patterns
# time cubic in its length: 50 ms for 500 characters, 4.5 s for 2,000).
_KEYWORDS = "password|passwd|secret|token|key|session|cookie|authorization|credential"
#: header and YAML lines: "key" alone is too common a word ("key: value" in any YAML)
_LINE_KEYWORDS = "password|passwd|secret|token|api[_\\-]?key|cookie|authorization|credential"

_SECRET_PATTERNS = [
    # Authorization headers and bearer values
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=\-]+"), r"\1 ***"),
    # Slipway's own secrets: panel keys, partner tokens, webhook secrets
    (re.compile(r"\bslw_[A-Za-z0-9_\-]+"), "slw_***"),
    (re.compile(r"\bpcp_[A-Za-z0-9_\-]+"), "pcp_***"),
    (re.compile(r"\bwhsec_[A-Za-z0-9_\-]+"), "whsec_***"),
]
#: "name": "value" and 'name': 'value' whose name says secret: a quote starts each try, and
#: the lookahead reads only the name that follows it (the names after two quotes never overlap)
_QUOTED_PATTERNS = [
    (re.compile(r"(?i)(\"(?=[a-z_\-]*?(?:" + _KEYWORDS + r"))[a-z_\-]+\"\s*:\s*)\"[^\"\\]*(?:\\.[^\"\\]*)*\""),
     r'\1"***"'),
    (re.compile(r"(?i)('(?=[a-z_\-]*?(?:" + _KEYWORDS + r"))[a-z_\-]+'\s*:\s*)'[^']*'"), r"\1'***'"),
]


class _NamedValues:
    r"""``name=value`` (query strings, cookies, bodies) or ``name: value`` (header and YAML
    lines) whose name says secret: the value becomes ``***``. What the patterns
    ``\b([a-z_\-]*KEYWORD[a-z_\-]*)=VALUE`` did, found another way: ``names`` finds each
    whole run of name characters followed by the separator, from its first character; the
    name is the run from its first word boundary (``\b``, as before), and it says secret
    when it holds a keyword."""

    _boundary = re.compile(r"\b")

    def __init__(self, separator: str, keywords: str, value: str, replacement: str):
        self.names = re.compile(r"(?i)(?<![a-z_\-])([a-z_\-]+)" + separator)
        self.keyword = re.compile(r"(?i)" + keywords)
        self.value = re.compile(value)
        self.replacement = replacement

    def sub(self, text: str) -> str:
        out, done, pos = [], 0, 0
        while True:
            found = self.names.search(text, pos)
            if found is None:
                break
            pos = found.end()
            start, end = found.span(1)
            boundary = self._boundary.search(text, start, end)
            if boundary is None or boundary.start() >= end or self.keyword.search(text, boundary.start(), end) is None:
                continue
            value = self.value.match(text, pos)
            if value is None:
                continue
            out.append(text[done:end])
            out.append(self.replacement)
            done = pos = value.end()
        if not out:
            return text
        out.append(text[done:])
        return "".join(out)


_NAMED_VALUES = [
    _NamedValues("=", _KEYWORDS, r"[^&\s;,\"']+", "=***"),
    # "X-Api-Key: abc", "password: hunter2" (a quoted value is the quoted patterns')
    _NamedValues(r":[ \t]*", _LINE_KEYWORDS, r"(?![\"'])[^\s,;]+", ": ***"),
]
# credentials in URLs: scheme://user:password@host (git remotes, database URLs), as
# core.redaction finds them, with the log's own letters (any case) and user-info
_URL_SCHEMES = re.compile(r"(?i)(?<![a-z0-9+.\-])[a-z0-9+.\-]+://")
_URL_SCHEME_START = re.compile(r"(?i)\b[a-z]")
_URL_USERINFO = re.compile(r"[^/@\s\"']*@")


#: every pattern above needs one of these (case-insensitive; ``@`` for credentials in URLs):
#: text without any has nothing to redact, and most log fields (paths, methods) have none
_MAYBE_SECRET = re.compile(r"(?i)@|bearer|basic|token|slw_|pcp_|whsec_|passw|secret|key|session|cookie|"
                           r"authorization|credential")


def redact(text: str) -> str:
    """``text`` with anything that looks like a credential replaced by ``***``, in time
    linear in its length."""
    if len(text) <= _REMEMBERED_TEXT:
        return _redact_short(text)
    return _redact(text)


#: texts up to this long have their answer remembered (methods, operation ids, paths and
#: access messages repeat on every request)
_REMEMBERED_TEXT = 256


@functools.lru_cache(maxsize=4096)
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    if _MAYBE_SECRET.search(text) is None:
        return text
    text = redact_userinfo(text, _URL_SCHEMES, _URL_SCHEME_START, _URL_USERINFO)
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    for named in _NAMED_VALUES:
        text = named.sub(text)
    for pattern, replacement in _QUOTED_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def current_request_id() -> str | None:
    return _request_id.get()


def log_timestamp(created: float) -> str:
    """``created`` (seconds since the epoch) as RFC 3339 UTC with milliseconds, the ``ts``
    of every line; the date and time are built once per second (every request logs a line)."""
    global _ts_cache
    second = int(created)
    cached_second, prefix = _ts_cache  # one read: threads replace the pair, never half of it
    if second != cached_second:
        prefix = datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        _ts_cache = (second, prefix)
    return f"{prefix}.{min(int((created - second) * 1000), 999):03d}+00:00"


_ts_cache: tuple = (None, "")
#: one encoder for every line (``json.dumps`` with options builds a new one per call)
_LINE_ENCODER = json.JSONEncoder(ensure_ascii=True, default=str)


#: a record's attribute saying its message and fields were redacted where it was made
#: (the access line, on every request): the formatter does not redact them again
REDACTED = "_slipway_redacted"


class _Base(logging.Formatter):
    def fields(self, record: logging.LogRecord) -> dict:
        clean = getattr(record, REDACTED, False)
        message = record.getMessage()
        out = {"ts": log_timestamp(record.created), "level": record.levelname.lower(), "logger": record.name,
               "message": message if clean else redact(message)}
        request_id = getattr(record, "request_id", None) or _request_id.get()
        if request_id:
            out["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if fields:
            if clean:
                out.update(fields)
            else:
                for name, value in fields.items():
                    out[name] = redact(value) if isinstance(value, str) else value
        if record.exc_info:
            out["exception"] = redact(self.formatException(record.exc_info))
        return out

    def format(self, record: logging.LogRecord) -> str:
        return self.render(self.fields(record))

    def access_line(self, created: float, message: str, fields: dict) -> str:
        """The line of an access entry written without a LogRecord (``StderrHandler.access``):
        what ``format`` makes of the record ``Observer`` would otherwise log, whose message
        and fields are redacted already."""
        out = {"ts": log_timestamp(created), "level": "info", "logger": ACCESS_LOGGER, "message": message}
        request_id = _request_id.get()
        if request_id:
            out["request_id"] = request_id
        out.update(fields)
        return self.render(out)

    def render(self, out: dict) -> str:
        raise NotImplementedError


class JsonFormatter(_Base):
    """One JSON object per line, in ASCII: orjson (fast; control characters escaped, so a
    line stays one line), or ``json`` with ``ensure_ascii`` for a line with anything
    beyond ASCII or that orjson refuses (a lone surrogate)."""

    def render(self, out: dict) -> str:
        try:
            line = orjson.dumps(out, default=str).decode("utf-8")
        except TypeError:  # orjson.JSONEncodeError
            return _LINE_ENCODER.encode(out)
        # ASCII only, as json's ensure_ascii: orjson leaves U+2028/9, NEL and C1 controls
        # as they are, which some log readers take for line ends
        return line if line.isascii() else _LINE_ENCODER.encode(out)


class TextFormatter(_Base):
    """One line for a terminal: time, level, logger, message, then the fields."""

    def render(self, out: dict) -> str:
        f = out
        head = f"{f.pop('ts')} {f.pop('level').upper():7} {f.pop('logger')}: {f.pop('message')}"
        exception = f.pop("exception", None)
        tail = " ".join(f"{k}={json.dumps(v, ensure_ascii=True, default=str)}" for k, v in f.items())
        return head + (" " + tail if tail else "") + ("\n" + exception if exception else "")


class StderrHandler(logging.StreamHandler):
    """``log_config``'s handlers: a ``StreamHandler`` whose instances share one lock (the
    root's and the access log's write to one stream), plus ``access``, the access line of
    every request written without a LogRecord: making the record and passing it through
    the loggers cost more than formatting and writing the line. ``Observer`` uses it only
    while the access logger is as ``log_config`` left it (``access_handler``), so the line
    is the same either way, and written before the response's last byte as before."""

    _shared_lock = threading.RLock()

    def createLock(self):
        super().createLock()  # registers the handler, whose lock a forked child re-initialises
        self.lock = self._shared_lock

    def access(self, message: str, fields: dict) -> None:
        try:
            line = self.formatter.access_line(time.time(), message, fields)
            with self.lock:
                self.stream.write(line + self.terminator)
                self.stream.flush()
        except Exception:  # noqa: BLE001 (as Handler.emit: a failing log must not fail the request)
            self.handleError(access_log.makeRecord(ACCESS_LOGGER, logging.INFO, "", 0, message, None, None))


def access_handler() -> StderrHandler | None:
    """The handler ``Observer`` may hand access lines to directly: ``log_config``'s own,
    when nothing has changed the access logger since (one handler of that class, no
    filters, not propagating, enabled for INFO); else None, and lines go through logging."""
    handlers = access_log.handlers
    if len(handlers) != 1 or access_log.propagate or access_log.filters or not access_log.isEnabledFor(logging.INFO):
        return None
    handler = handlers[0]
    if type(handler) is not StderrHandler or handler.filters or handler.level > logging.INFO \
            or type(handler.formatter) not in (JsonFormatter, TextFormatter):
        return None
    return handler


def log_config(fmt: str = "json", level: str = "INFO") -> dict:
    """``logging.config.dictConfig`` for ``slipway serve`` (uvicorn applies it in every
    worker): everything to stderr through one formatter; uvicorn's access log off, ours
    replaces it."""
    formatter = "app.http.observability.JsonFormatter" if fmt == "json" else "app.http.observability.TextFormatter"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"slipway": {"()": formatter}},
        "handlers": {"stderr": {"class": "app.http.observability.StderrHandler", "formatter": "slipway",
                                "stream": "ext://sys.stderr"},
                     "access": {"class": "app.http.observability.StderrHandler", "formatter": "slipway",
                                "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            # the same stream (and lock) as the root's; its own handler so that Observer
            # can write the line of every request straight to it (StderrHandler.access)
            ACCESS_LOGGER: {"handlers": ["access"], "level": level, "propagate": False},
            "uvicorn": {"handlers": [], "level": level, "propagate": True},
            "uvicorn.error": {"handlers": [], "level": level, "propagate": True},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            # a line per outbound request naming its whole URL (a webhook's query may hold
            # the partner's own secret); failures are logged by the callers
            "httpx": {"handlers": [], "level": "WARNING", "propagate": True},
        },
    }


# --- metrics -------------------------------------------------------------------------------

class Metrics:
    """The server's Prometheus metrics (one set per process, see ``metrics()``)."""

    def __init__(self):
        from prometheus_client import Counter, Gauge, Histogram

        self.requests = Counter("slipway_http_requests", "HTTP requests (and WebSocket handshakes) answered",
                                ["api", "operation", "status"])
        self.latency = Histogram("slipway_http_request_duration_seconds", "Time to answer a request",
                                 ["api", "operation"])
        self.rate_limited = Counter("slipway_rate_limited", "Requests refused by a rate limit (429)", ["api"])
        self.deploy_jobs = Counter("slipway_deploy_jobs", "Deploy jobs finished, by outcome", ["outcome"])
        self.deploy_duration = Histogram("slipway_deploy_job_duration_seconds", "Time a deploy job ran",
                                         ["outcome"], buckets=(1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800))
        self.billing_duration = Histogram("slipway_billing_recompute_duration_seconds",
                                          "Time a billing recompute took", buckets=(0.1, 0.5, 1, 5, 15, 60, 300))
        self.websockets = Gauge("slipway_open_websockets", "WebSockets open now", ["api"],
                                multiprocess_mode="livesum")


_metrics: Metrics | None = None


def metrics() -> Metrics:
    global _metrics
    if _metrics is None:
        _metrics = Metrics()
    return _metrics


def render_metrics() -> tuple[bytes, str]:
    """The exposition text and its content type: this process's metrics, or with
    ``PROMETHEUS_MULTIPROC_DIR`` every worker's, summed (dead workers' gauges dropped)."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    metrics()
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
    from prometheus_client import multiprocess

    mark_dead_workers(directory)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    return generate_latest(registry), CONTENT_TYPE_LATEST


_PID_FILE = re.compile(r"_(\d+)\.db$")


def mark_dead_workers(directory: str) -> list[int]:
    """Drop the live gauges of workers that are gone (killed and replaced by uvicorn);
    their counters and histograms stay, so totals never go back."""
    from prometheus_client import multiprocess

    dead = set()
    for name in os.listdir(directory):
        match = _PID_FILE.search(name)
        if match and name.startswith("gauge_live"):
            pid = int(match.group(1))
            if pid != os.getpid() and not _alive(pid):
                dead.add(pid)
    for pid in dead:
        multiprocess.mark_process_dead(pid, path=directory)
    return sorted(dead)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_exiting() -> None:
    """Called at a worker's shutdown: its live gauges leave the sum."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory and os.path.isdir(directory):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), path=directory)


# --- the ASGI wrapper ----------------------------------------------------------------------

def valid_request_id(value: bytes | None) -> str | None:
    """The client's ``X-Request-Id`` when it is 1-128 visible ASCII characters that the
    redactor leaves alone (it is written into every log line of the request), else None."""
    if not value or len(value) > MAX_REQUEST_ID or any(b < 0x21 or b > 0x7E for b in value):
        return None
    text = value.decode("ascii")
    return text if redact(text) == text else None


def api_label(path: str) -> str | None:
    """``partner`` for /v1, ``panel`` for /api, None for the rest (probes, metrics)."""
    if path == "/v1" or path.startswith("/v1/"):
        return "partner"
    if path == "/api" or path.startswith("/api/"):
        return "panel"
    return None


class Observer:
    """Request ids, access lines and request metrics around an ASGI app.

    ``find(path)`` answers the route template of ``path`` (or None) and ``operations``
    maps ``(template, METHOD)`` to the contract's operation id, so a label is always an
    operation id or ``unknown``."""

    def __init__(self, find, operations: dict):
        self.find = find
        self.operations = operations
        self._children: dict = {}  # (api, operation, status) -> the metrics' labelled series

    def _series(self, api: str, operation: str, status) -> tuple:
        """The request counter's and the latency histogram's series of these labels,
        looked up once (their number is bounded: operation ids times statuses)."""
        key = (api, operation, status)
        found = self._children.get(key)
        if found is None:
            m = metrics()
            found = self._children[key] = (m.requests.labels(api, operation, str(status)),
                                           m.latency.labels(api, operation))
        return found

    def operation(self, path: str, method: str) -> str:
        try:
            found = self.find(path)
        except Exception:  # noqa: BLE001 (a label must never fail a request)
            found = None
        if not found:
            return UNKNOWN_OPERATION
        return self.operations.get((found, method), UNKNOWN_OPERATION)

    async def __call__(self, scope, receive, send, app):
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            return await app(scope, receive, send)
        # any iterable of 2-item iterables (falcon.testing passes iterators): read once, pass a
        # list on (a server's list, as uvicorn's, as it is)
        headers = scope.get("headers")
        if type(headers) is not list:
            headers = [tuple(pair) for pair in headers or ()]
            scope = {**scope, "headers": headers}
        incoming = next((v for k, v in headers if k.lower() == REQUEST_ID_HEADER), None)
        request_id = valid_request_id(incoming) or os.urandom(16).hex()
        header = (REQUEST_ID_HEADER, request_id.encode("ascii"))
        path = scope.get("path") or "/"
        method = "GET" if kind == "websocket" else (scope.get("method") or "GET").upper()
        api = api_label(path)
        state = {"status": None, "accepted": False, "done": False}
        started = time.perf_counter()
        operation = self.operation(path, method)

        def finish() -> None:
            """Count and log the request once: before its last message goes out (so a
            client that has the whole answer also finds it in /metrics and the log), or
            when an accepted WebSocket ends."""
            if state["done"]:
                return
            state["done"] = True
            elapsed = time.perf_counter() - started
            status = state["status"] or (1000 if kind == "websocket" else 500)
            if api:
                counted, timed = self._series(api, operation, status)
                counted.inc()
                timed.observe(elapsed)
                if status == 429:
                    metrics().rate_limited.labels(api).inc()
            handler = access_handler()
            if handler is not None or access_log.isEnabledFor(logging.INFO):
                # the client's two strings (method, path) redacted here (the rest is Slipway's
                # own vocabulary): this runs on every request
                clean_method, clean_path = redact(method[:MAX_LOGGED_METHOD]), redact(path[:MAX_LOGGED_PATH])
                message = f"{clean_method} {operation} {status}"
                fields = {"kind": "access", "method": clean_method, "api": api or "none", "operation": operation,
                          "path": clean_path, "status": status, "duration_ms": round(elapsed * 1000, 3)}
                if handler is not None:  # log_config's own handler: the line without a LogRecord
                    handler.access(message, fields)
                else:  # Logger.info without its caller lookup (no formatter here shows the caller)
                    access_log.handle(access_log.makeRecord(access_log.name, logging.INFO, "", 0, message,
                                                            None, None, extra={REDACTED: True, "fields": fields}))

        async def observed_send(message):
            kind_ = message.get("type")
            if kind_ in ("http.response.start", "websocket.http.response.start"):
                state["status"] = message.get("status")
                headers = [(k, v) for k, v in message.get("headers") or () if k.lower() != REQUEST_ID_HEADER]
                message = {**message, "headers": headers + [header]}
            elif kind_ in ("http.response.body", "websocket.http.response.body") and not message.get("more_body"):
                finish()
            elif kind_ == "websocket.accept":
                state["status"], state["accepted"] = 101, True
                headers = [(k, v) for k, v in message.get("headers") or () if k.lower() != REQUEST_ID_HEADER]
                message = {**message, "headers": headers + [header]}
                if api:
                    metrics().websockets.labels(api).inc()
            elif kind_ == "websocket.close" and not state["accepted"]:
                if state["status"] is None:
                    state["status"] = 403  # closed before accepting: the server refuses the handshake with 403
                finish()
            await send(message)

        token = _request_id.set(request_id)
        try:
            await app(scope, receive, observed_send)
        finally:
            if state["accepted"] and api:
                metrics().websockets.labels(api).dec()
            finish()
            _request_id.reset(token)
