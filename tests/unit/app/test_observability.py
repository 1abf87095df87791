"""Log redaction (core.redaction), the log formatters and request-id validation
(app.http.observability)."""
from __future__ import annotations

import json
import logging
import sys

import pytest

from app.http.observability.logs import JsonFormatter, TextFormatter
from app.http.observability.observer import valid_request_id
from core.redaction import redact


@pytest.mark.parametrize("text, secret", [
    ("cloning https://bob:hunter2@example.org/x.git failed", "hunter2"),
    ("Authorization: Bearer pcp_abcdefgh12345678", "pcp_abcdefgh12345678"),
    ("header Bearer sometoken.value", "sometoken.value"),
    ("key slw_0123456789abcdef_SeCrEt-Value used", "SeCrEt-Value"),
    ("GET /api/ws?api_key=abc123&x=1", "abc123"),
    ("Cookie: slipway_session=qwerty123; theme=dark", "qwerty123"),
    ('{"password": "pa\\"ss"}', 'pa\\"ss'),
    ("{'client_secret': 'xyz789'}", "xyz789"),
    ("postgresql://postgres:pgpass@db:5432/slipway", "pgpass"),
    ("webhook whsec_abcdef0123", "whsec_abcdef0123"),
    ("password: hunter2", "hunter2"),
    ("X-Api-Key: abc123def", "abc123def"),
    ("GET /maps?key=AIzaSyFAKE123&q=x", "AIzaSyFAKE123"),
])
def test_redact_removes_credentials(text, secret):
    assert secret not in redact(text)


def test_redact_keeps_ordinary_text():
    text = "GET listServices 200 in 3 ms for cust_abc (https://git.example.org/acme/app.git)"
    assert redact(text) == text


# The patterns of the redactor before it was rewritten to cost time linear in its input
# (they cost cubic time: ``/key-key-key-...`` of 500 characters took 50 ms, of 2,000 4.5 s):
# on short texts, the reference for what the rewritten redactor must still do.
_FORMER_PATTERNS = [
    (r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/@\s\"']*@", r"\1***@"),
    (r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=\-]+", r"\1 ***"),
    (r"\bslw_[A-Za-z0-9_\-]+", "slw_***"),
    (r"\bpcp_[A-Za-z0-9_\-]+", "pcp_***"),
    (r"\bwhsec_[A-Za-z0-9_\-]+", "whsec_***"),
    (r"(?i)\b((?:[a-z_\-]*(?:password|passwd|secret|token|key|session|cookie|"
     r"authorization|credential)[a-z_\-]*))=([^&\s;,\"']+)", r"\1=***"),
    (r"(?im)\b((?:[a-z_\-]*(?:password|passwd|secret|token|api[_\-]?key|cookie|"
     r"authorization|credential)[a-z_\-]*)):[ \t]*(?![ \t\"'])([^\s,;]+)", r"\1: ***"),
    (r"(?i)(\"(?:[a-z_\-]*(?:password|passwd|secret|token|api[_\-]?key|session|cookie|"
     r"authorization|credential|key)[a-z_\-]*)\"\s*:\s*)\"(?:[^\"\\]|\\.)*\"", r'\1"***"'),
    (r"(?i)('(?:[a-z_\-]*(?:password|passwd|secret|token|api[_\-]?key|session|cookie|"
     r"authorization|credential|key)[a-z_\-]*)'\s*:\s*)'[^']*'", r"\1'***'"),
]
_PIECES = ["key", "KEY", "token", "password", "api_key", "Api-Key", "session", "secret", "-", "_", "=", ":", " ",
           "\t", "\n", '"', "'", "\\", '\\"', "a", "Z", "1", "/", "@", "://", "x://", "a.b+c", "bearer ", "Basic ",
           "slw_", "pcp_x", "whsec_", ";", ",", "&", ".", "?", "\u00e9", "\u212a", "\u017f"]


def test_the_rewritten_redactors_do_what_the_former_patterns_did():
    """Random texts of names, keywords, separators, quotes and URL parts: the redactor
    answers exactly what the former patterns answered."""
    import random
    import re

    from core.redaction import _redact

    former = [(re.compile(pattern), replacement) for pattern, replacement in _FORMER_PATTERNS]
    rng = random.Random(23)
    for _ in range(20_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 24)))
        expected = text
        for pattern, replacement in former:
            expected = pattern.sub(replacement, expected)
        assert _redact(text) == expected, text


_LONG = 200_000  # characters: the former patterns would take hours on each of these (cubic)


def _run(unit: str, length: int = _LONG) -> str:
    return (unit * (length // len(unit) + 1))[:length]


@pytest.mark.parametrize("text, expected", [
    # long runs of name characters holding keywords, with no separator after them
    ("/" + _run("key-"), None), ("1" + _run("key-"), None), ('"' + _run("key-"), None), ("'" + _run("Token_"), None),
    (_run("token-") + ":", None), (_run("-key"), None), ("/" + _run("KEY"), None),
    # ... and with one: the value still goes
    (_run("key-") + "=v&x=1", _run("key-") + "=***&x=1"),
    (_run("token-") + ": v", _run("token-") + ": ***"),
    ('"' + _run("key-") + '": "v"', '"' + _run("key-") + '": "***"'),
    ("'" + _run("key-") + "': 'v'", "'" + _run("key-") + "': '***'"),
    # scheme characters before ://, with and without user-info
    (_run("a.") + "x://" + _run("y") + "@h", _run("a.") + "x://***@h"),
    (_run("a.") + "x://" + _run("y") + " @", None),
    ("x://" + _run("a:b:") + "@h", "x://***@h"),
    # values that never end and quotes that never close
    ('"password": "' + _run("\\\\x"), None), ("'secret': '" + _run("v"), None),
    ("Bearer" + _run(" ") + "!", None),
    (_run("key="), "key=***"),  # one value: the rest
])
def test_crafted_texts_are_redacted_in_time_linear_in_their_length(text, expected):
    """Each text is built against the former patterns (a quadratic or cubic redactor would
    not finish it within the suite's timeout); the answer is still exact."""
    from core.redaction import _redact

    expected = text if expected is None else expected
    assert _redact(text) == expected


def _record(message, *args, exc_info=None, **fields):
    record = logging.LogRecord("slipway.test", logging.WARNING, __file__, 1, message, args, exc_info)
    record.fields = fields
    return record


def test_formatters_redact_messages_fields_and_tracebacks():
    try:
        raise RuntimeError("could not clone https://u:tracepw@example.org/x.git")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = _record("provider %s failed", "http://id:argpw@idp.example", exc_info=exc_info,
                     path="/api/ws?api_key=fieldpw")
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["level"] == "warning" and parsed["logger"] == "slipway.test" and "exception" in parsed
    text = TextFormatter().format(record)
    for secret in ("tracepw", "argpw", "fieldpw"):
        assert secret not in line and secret not in text


@pytest.mark.parametrize("raw, expected", [
    (b"abc-123", "abc-123"), (b"x" * 128, "x" * 128), (b"!~", "!~"),
    (b"", None), (None, None), (b"x" * 129, None), (b"a b", None), (b"tab\t", None), (b"\xc3\xa9", None),
    # written into every line of the request: nothing the redactor would hide
    (b"slw_0123456789abcdef_SeCrEt-Value", None), (b"pcp_" + b"a" * 43, None), (b"password=x", None),
])
def test_request_ids_are_1_to_128_visible_ascii_characters(raw, expected):
    assert valid_request_id(raw) == expected


def test_log_lines_written_in_worker_threads_carry_the_request_id():
    """Database and engine calls run on threads of their own; what they log while a
    request runs still names that request."""
    import asyncio

    from app.engine_calls import EngineCalls
    from app.http.observability import logs as observability
    from app.storage.threads import WorkerThreads

    seen = []

    def log_it():
        seen.append(observability.current_request_id())

    async def main():
        threads, engine = WorkerThreads(1), EngineCalls(threads=2)
        token = observability.request_id_var.set("req-123")
        try:
            await threads.run(log_it)
            await engine.run(log_it)
            await engine.run_for("cust_a", log_it)
        finally:
            observability.request_id_var.reset(token)
            threads.shutdown()
            engine.close()

    asyncio.run(main())
    assert seen == ["req-123"] * 3


# --- the access line of every request -------------------------------------------------


@pytest.fixture
def configured(monkeypatch):
    """``log_config`` applied in this process, writing to a buffer; logging as it was afterwards."""
    import io
    import logging.config

    from app.http.observability import logs as observability

    root, access = logging.getLogger(), observability.access_log
    saved = (root.handlers[:], root.level, access.handlers[:], access.level, access.propagate, access.filters[:])

    def apply(fmt="json"):
        # here, in the test's own phase: pytest sets sys.stderr again between phases
        stream = io.StringIO()
        monkeypatch.setattr(sys, "stderr", stream)
        logging.config.dictConfig(observability.log_config(fmt))
        return stream

    yield apply
    root.handlers[:], root.level = saved[0], saved[1]
    access.handlers[:], access.level, access.propagate, access.filters[:] = saved[2:]


def _serve_one(path: str, method: str = "GET", request_id: bytes = b"req-1") -> None:
    """One request through an Observer around an app answering 200."""
    import asyncio

    from app.http.observability.observer import Observer

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        pass

    scope = {"type": "http", "method": method, "path": path, "headers": [(b"x-request-id", request_id)]}
    asyncio.run(Observer(lambda p: None, {})(scope, receive, send, app))


def _access_lines(stream) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if '"slipway.access"' in line]


def test_the_access_line_is_the_same_written_directly_or_through_logging(configured):
    """Under log_config the line is written by its handler without a LogRecord; once
    anything changes the access logger (here a filter), it goes through logging: same line."""
    from app.http.observability import logs as observability

    stream = configured()
    assert observability.access_handler() is not None
    _serve_one("/v1/me?api_key=sekrit1", request_id=b"direct")  # a path holding a credential
    seen = []
    observability.access_log.addFilter(lambda record: seen.append(record) or True)
    assert observability.access_handler() is None
    _serve_one("/v1/me?api_key=sekrit1", request_id=b"logged")
    direct, logged = _access_lines(stream)
    assert len(seen) == 1  # the second line, and only it, was a record
    assert "sekrit1" not in stream.getvalue()
    assert (direct["request_id"], logged["request_id"]) == ("direct", "logged")
    for line in (direct, logged):
        del line["ts"], line["duration_ms"], line["request_id"]
    assert direct == logged == {"level": "info", "logger": "slipway.access", "message": "GET unknown 200",
                                "kind": "access", "method": "GET", "api": "partner", "operation": "unknown",
                                "path": "/v1/me?api_key=***", "status": 200}


def test_a_silenced_or_rehandled_access_log_is_respected(configured):
    from app.http.observability import logs as observability

    stream = configured()
    observability.access_log.setLevel(logging.WARNING)  # an operator silencing access lines
    _serve_one("/v1/me")
    assert _access_lines(stream) == []
    observability.access_log.setLevel(logging.INFO)
    observability.access_log.propagate = True  # e.g. caught by a test's handler on the root
    assert observability.access_handler() is None


def test_text_format_access_lines_and_one_lock_for_both_handlers(configured):
    from app.http.observability import logs as observability

    stream = configured("text")
    _serve_one("/api/services", method="post")
    (line,) = [x for x in stream.getvalue().splitlines() if "slipway.access" in x]
    assert "INFO    slipway.access: POST unknown 200" in line and 'path="/api/services"' in line
    root_handler = logging.getLogger().handlers[0]
    assert root_handler.lock is observability.access_log.handlers[0].lock  # lines never interleave
