"""Secret-free logs: ``JsonFormatter`` (``SLIPWAY_LOG_FORMAT=json``, the default) writes
one JSON object per line, ``TextFormatter`` one readable line; both pass every string
through ``core.redaction.redact``, so tokens, keys, cookies, passwords and credentials in
URLs never reach a log. Log lines written while a request runs carry its request id
(``request_id``, set by ``app.http.observability.observer.Observer``). ``log_config`` is
the logging configuration of ``slipway serve``."""
from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from datetime import datetime, timezone

import orjson

from core.redaction import redact

ACCESS_LOGGER = "slipway.access"
access_log = logging.getLogger(ACCESS_LOGGER)
#: the id of the request being answered (``Observer`` sets it around the app)
request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("slipway_request_id", default=None)


def current_request_id() -> str | None:
    return request_id_var.get()


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
        request_id = getattr(record, "request_id", None) or request_id_var.get()
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
        request_id = request_id_var.get()
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
    formatter = "app.http.observability.logs.JsonFormatter" if fmt == "json" else "app.http.observability.logs.TextFormatter"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"slipway": {"()": formatter}},
        "handlers": {"stderr": {"class": "app.http.observability.logs.StderrHandler", "formatter": "slipway",
                                "stream": "ext://sys.stderr"},
                     "access": {"class": "app.http.observability.logs.StderrHandler", "formatter": "slipway",
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
