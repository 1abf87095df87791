"""Log redaction, the log formatters and request-id validation (app.http.observability)."""
from __future__ import annotations

import json
import logging
import sys

import pytest

from app.http.observability import JsonFormatter, TextFormatter, redact, valid_request_id


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
    from app.http.observability import redact

    assert secret not in redact(text)


def test_redact_keeps_ordinary_text():
    text = "GET listServices 200 in 3 ms for cust_abc (https://git.example.org/acme/app.git)"
    assert redact(text) == text


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
])
def test_request_ids_are_1_to_128_visible_ascii_characters(raw, expected):
    assert valid_request_id(raw) == expected


def test_log_lines_written_in_worker_threads_carry_the_request_id():
    """Database and engine calls run on threads of their own; what they log while a
    request runs still names that request."""
    import asyncio

    from app.engine_calls import EngineCalls
    from app.http import observability
    from app.storage.threads import WorkerThreads

    seen = []

    def log_it():
        seen.append(observability.current_request_id())

    async def main():
        threads, engine = WorkerThreads(1), EngineCalls(threads=2)
        token = observability._request_id.set("req-123")
        try:
            await threads.run(log_it)
            await engine.run(log_it)
            await engine.run_for("cust_a", log_it)
        finally:
            observability._request_id.reset(token)
            threads.shutdown()
            engine.close()

    asyncio.run(main())
    assert seen == ["req-123"] * 3
