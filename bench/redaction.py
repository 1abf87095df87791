"""``python -m bench redaction``: what the access log's redaction costs a request whose path
is built against it, next to a plain path of the same length, on one server in one run.

One uvicorn worker serving Slipway (``app.asgi:app``, its JSON access log written to a
file); on one keep-alive connection, ``GET`` requests back to back, without a key, in
alternating rounds of crafted paths (``/key-key-key-...``, 500 characters: the former
redactor took 50 ms of the event loop for each) and plain ones (``/abc-abc-abc-...``,
500 characters). Every path is new (a counter spelt in letters at its end), so the
redactor's memory of recent texts never answers. Prints the median and p99 milliseconds
per request of each, their ratio (aim: within 1.5x), then what one ``redact`` call costs
in this process for each kind of path, and one JSON line."""
from __future__ import annotations

import http.client
import json
import os
import statistics
import string
import tempfile
import time
from urllib.parse import urlsplit

from bench.servers import prepare_database, uvicorn

LENGTH = 500
AIM = 1.5
KINDS = (("crafted", "crafted /key-key-key-...", "key-"), ("plain", "plain /abc-abc-abc-...", "abc-"))


def _letters(number: int) -> str:
    out = ""
    for _ in range(5):
        number, digit = divmod(number, 26)
        out = string.ascii_lowercase[digit] + out
    return out


def path(unit: str, number: int) -> str:
    """A new path of ``LENGTH`` characters: ``/`` and ``unit`` repeated, a counter in letters at its end."""
    return ("/" + unit * LENGTH)[:LENGTH - 5] + _letters(number)


def _serial(base: str, paths) -> list[float]:
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    times = []
    try:
        for p in paths:
            started = time.perf_counter()
            conn.request("GET", p)
            response = conn.getresponse()
            response.read()
            times.append((time.perf_counter() - started) * 1000)
            if response.status >= 500:
                raise RuntimeError(f"GET {p[:40]}... answered {response.status}")
    finally:
        conn.close()
    return times


def _figures(times: list[float]) -> dict:
    ordered = sorted(times)
    return {"requests": len(times), "p50_ms": round(statistics.median(ordered), 3),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3)}


def _redact_calls(unit: str, calls: int, first: int) -> float:
    """Median milliseconds of one ``redact`` call on a new path."""
    from core.redaction import redact

    times = []
    for number in range(first, first + calls):
        text = path(unit, number)
        started = time.perf_counter()
        redact(text)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 4)


def run_redaction(requests: int, rounds: int) -> dict:
    times: dict = {kind: [] for kind, _, _ in KINDS}
    counter = 0
    with tempfile.TemporaryDirectory(prefix="slipway-bench-") as tmp:
        env = dict(os.environ, SLIPWAY_DATABASE_URL=f"sqlite:///{tmp}/bench.db", SLIPWAY_DEPLOY_WORKER="0",
                   SLIPWAY_BILLING_INTERVAL="0")
        prepare_database(env)
        with uvicorn("app.asgi:app", env) as base:
            _serial(base, [path(unit, n) for n in range(20) for _, _, unit in KINDS])  # warm-up
            counter = 20
            for _ in range(rounds):
                for kind, _, unit in KINDS:
                    times[kind] += _serial(base, [path(unit, n) for n in range(counter, counter + requests)])
                    counter += requests
    report = {"length": LENGTH, "rounds": rounds, "requests_per_round": requests, "workers": 1}
    for kind, _, _ in KINDS:
        report[kind] = _figures(times[kind])
    report["ratio"] = round(report["crafted"]["p50_ms"] / report["plain"]["p50_ms"], 3)
    calls = {kind: _redact_calls(unit, 2000, counter) for kind, _, unit in KINDS}
    report["redact_call_ms"] = {**calls, "ratio": round(calls["crafted"] / calls["plain"], 3) if calls["plain"] else None}
    return report


def print_redaction(report: dict) -> None:
    print(f"GET of a new {report['length']}-character path, no key, one connection, back to back, one uvicorn "
          f"worker; {report['rounds']} alternating rounds of {report['requests_per_round']} requests of each kind")
    print(f"{'path':<30}{'requests':>9}{'p50 ms':>10}{'p99 ms':>10}")
    for kind, label, _ in KINDS:
        row = report[kind]
        print(f"{label:<30}{row['requests']:>9}{row['p50_ms']:>10.3f}{row['p99_ms']:>10.3f}")
    print(f"ratio crafted/plain (median ms per request): {report['ratio']:.2f} (aim: <= {AIM:.1f})")
    calls = report["redact_call_ms"]
    print(f"one redact() call in this process (median): crafted {calls['crafted']:.4f} ms, "
          f"plain {calls['plain']:.4f} ms")
    print(json.dumps(report))
