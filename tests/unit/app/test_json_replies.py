"""The JSON a reply is sent as (app.http.pipeline.json_bytes) and a log line is written as
(app.http.observability.logs.JsonFormatter): orjson, with ``json`` for what orjson refuses."""
import json
import logging

from app.http.observability.logs import JsonFormatter
from app.http.pipeline import json_bytes, json_text


def test_a_reply_is_compact_utf8_json():
    body = {"name": "Zoë \u2026", "n": 3, "ok": True, "none": None, "list": [1.5, "x"]}
    data = json_bytes(body)
    assert json.loads(data) == body
    assert b" " not in data.replace(b"Zo\xc3\xab \xe2\x80\xa6", b"")  # compact
    assert json_text(body) == data.decode("utf-8")


def test_what_orjson_refuses_is_encoded_by_json_not_a_failure():
    # an integer beyond 64 bits and a lone surrogate: both can come from a client's JSON
    for body in ({"n": 2 ** 70}, {"s": "a\ud800b"}, [{"deep": 2 ** 64}]):
        data = json_bytes(body)
        assert data.isascii()
        assert json.loads(data) == body


def test_a_log_line_is_one_line_whatever_the_message_holds():
    formatter = JsonFormatter()
    for message in ("line\nbreak\r\x00", "lone \ud800 surrogate", "Zoë", "sep\u2028par\u2029nel\x85del\x7f"):
        record = logging.LogRecord("t", logging.INFO, "", 0, "%s", (message,), None)
        line = formatter.format(record)
        assert line.isascii() and len(line.splitlines()) == 1  # what some log readers split on, too
        assert json.loads(line)["message"] == message
